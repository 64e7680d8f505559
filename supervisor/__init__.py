"""The supervisor daemon: runs on each node, launches the worker processes
Nimbus assigned to it and reconciles them (restarts dead or stale workers,
stops unassigned ones). Coming in the control-plane issue.
"""
