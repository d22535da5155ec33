"""AgentV's ``.agentv/targets.yaml`` and the one rule that redacts literal secrets from what is stored."""
