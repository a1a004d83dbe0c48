"""yuniplace: all-or-nothing starts for batch and AI jobs on the stock kube-scheduler."""

__version__ = "0.1.0"
