"""A local Kubernetes control plane built from Go modules, for tests, demos and benchmarks."""

from yuniplace.localcluster.build import BuildError, ensure_built
from yuniplace.localcluster.cluster import ClusterError, LocalCluster, wait_until
from yuniplace.localcluster.nodes import NodePool, Taint

__all__ = ["BuildError", "ClusterError", "LocalCluster", "NodePool", "Taint", "ensure_built", "wait_until"]
