"""Running Squall: the local cluster runner (``squall local``), which starts
ZooKeeper and the worker processes on this machine, and the deployment
scripts for a real cluster.
"""
