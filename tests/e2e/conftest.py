"""Fixtures that give every e2e test a real control plane: one cluster per session, one namespace per test.

With CI=true the e2e tests must run: anything that stops the cluster from starting fails them. Outside
CI, a machine without Go skips them with one message saying how to enable them.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator

import pytest

from tests.e2e.support import Cluster
from yuniplace.localcluster import LocalCluster, NodePool

IN_CI = os.environ.get("CI", "").lower() == "true"
SKIP_WITHOUT_GO = (
    "e2e tests need the Go toolchain (1.24+) to build the local control plane from Go modules: "
    "install Go (https://go.dev/doc/install) and run scripts/test again; with CI=true they fail instead of skipping"
)

# Enough room for every e2e test of this suite at once: 4 nodes of 8 CPU / 32 GiB.
SESSION_POOL = NodePool(count=4, cpu="8", memory="32Gi", pods=110)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in item.nodeid:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if shutil.which("go") is None and not IN_CI:
        pytest.skip(SKIP_WITHOUT_GO)
    local = LocalCluster(f"pytest-{os.getpid()}")
    try:
        local.up([SESSION_POOL])
        yield Cluster(local)
    finally:
        local.down(quiet=True)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, ready for pods (its default ServiceAccount exists), deleted afterwards."""
    name = f"{request.node.name.replace('_', '-')[:40].rstrip('-').lower()}-{uuid.uuid4().hex[:6]}"
    name = "".join(c for c in name if c.isalnum() or c == "-")
    cluster.local.create_namespace(name)
    yield name
    cluster.client.delete(f"/api/v1/namespaces/{name}")
