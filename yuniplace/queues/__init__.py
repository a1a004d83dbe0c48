"""Queues that share a cluster: their configuration (YuniKorn's queues.yaml, Volcano's Queues), and the
arithmetic of guarantees, limits, borrowing and reclaim that admission decides by."""
