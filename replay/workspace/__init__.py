"""The agent's workspace: setting it up for a run (template, repos, hooks), the diff of what the agent
changed (``file_changes``), and snapshots that let functional graders replay without the agent."""
