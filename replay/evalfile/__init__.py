"""AgentV eval files: the YAML parser, its typed field readers, the resolved specs, snapshots."""
