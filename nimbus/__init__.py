"""The Nimbus daemon: the cluster master, a gRPC service that accepts topology
submissions and keeps assignments and heartbeats as state in ZooKeeper.
Coming in the control-plane issue.
"""
