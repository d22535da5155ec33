"""Child processes and the worker pool: timeouts, process-group kills, prompt Ctrl-C."""
