"""pi-ai's wire formats: what AgentV 4.42.4's direct-API providers (``anthropic``, ``gemini``) put on the wire
through ``@earendil-works/pi-ai`` and how they read the reply. No module here calls anything: the targets
(``targets/pi_ai.py``) send an agent's request with them, the judge
(``grading/judge/``) an LLM grader's, so both send the same bytes; the replay path may import this package,
never ``targets/``."""
