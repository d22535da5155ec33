"""evalstore's domain: eval files, content, preprocessing, graders, recording, importing, regrading,
comparing and auditing. Writes only through ``evalstore.store``'s append API; issues no SQL of its own.

The subpackages, by capability: ``evalfile`` (AgentV eval files), ``grading`` (graders, the judge,
preprocessing, scoring), ``targets`` (the agents a run calls), ``targetsfile`` (``targets.yaml`` and
redaction of secrets), ``agentv`` (AgentV results in and out), ``analysis`` (run lists, compare,
statistics, reports, audit), ``processes`` (child processes, the worker pool). At the top, the modules
that tie them together: ``record`` (``evalstore run``), ``regrade`` (``evalstore replay``), ``material``
(a stored run read back), ``recording`` (where grading writes), ``api`` (grading in memory).
"""
