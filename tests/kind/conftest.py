"""Fixtures of the kind tests: one kind cluster per session (1 control plane + 2 workers, real
kubelets and containerd), yuniplace installed into it from its image with the chart's defaults.

With CI=true they must run: a Docker engine that cannot be installed or started, or a cluster that
does not come up, fails them. Outside CI, a machine without a running Docker engine skips them with
one message saying how to enable them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.kind.support import RELEASE, RELEASE_NAMESPACE, Kind
from yuniplace.localcluster.kind import KindCluster
from yuniplace.localcluster.kinddocker import docker_ready
from yuniplace.localcluster.kindimage import KindImages, ensure_all

IN_CI = os.environ.get("CI", "").lower() == "true"
SKIP_WITHOUT_DOCKER = (
    "kind tests need a running Docker engine (as root: apt-get install docker.io, then dockerd); "
    "with CI=true it is installed and started, and the tests fail instead of skipping"
)


# Seconds each step took, shown at the end of the run: how long kind takes here is worth knowing.
TIMINGS: dict[str, float] = {}
# The first test may build the images (about 7 minutes cold) and start the cluster in its fixtures.
KIND_TEST_TIMEOUT_S = 1800


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/kind/" in item.nodeid:
            item.add_marker(pytest.mark.kind)
            item.add_marker(pytest.mark.timeout(KIND_TEST_TIMEOUT_S))


@pytest.fixture(scope="session")
def images() -> KindImages:
    if not IN_CI and not docker_ready():
        pytest.skip(SKIP_WITHOUT_DOCKER)
    started = time.monotonic()
    built = ensure_all()
    TIMINGS["images built or found"] = time.monotonic() - started
    return built


@pytest.fixture(scope="session")
def kind(images: KindImages) -> Iterator[Kind]:
    cluster = KindCluster(f"yp-pytest-{os.getpid()}", images)
    try:
        started = time.monotonic()
        TIMINGS["kind create cluster, 1 control plane + 2 workers, until all Ready"] = cluster.up(workers=2)
        TIMINGS["... and yuniplace:dev loaded"] = time.monotonic() - started
        yield Kind(cluster)
    finally:
        cluster.down()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("kind timings")
        for step, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{step}: {seconds:.0f}s")


@pytest.fixture(scope="module")
def installed(kind: Kind) -> Iterator[Kind]:
    """The chart installed with its defaults but the image (two replicas), Ready."""
    started = time.monotonic()
    kind.helm(
        "install",
        RELEASE,
        str(kind.chart),
        "-n",
        RELEASE_NAMESPACE,
        "--create-namespace",
        "--set",
        "image.repository=yuniplace",
        "--set",
        "image.tag=dev",
        "--set",
        "image.pullPolicy=Never",
        "--wait",
        "--timeout",
        "180s",
    )
    TIMINGS["helm install --wait (2 replicas Ready)"] = time.monotonic() - started
    yield kind
    kind.helm("uninstall", RELEASE, "-n", RELEASE_NAMESPACE, "--ignore-not-found", "--wait", "--timeout", "180s")


@pytest.fixture
def namespace(installed: Kind, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, named after it, deleted after it."""
    name = installed.namespace(request.node.name.replace("_", "-")[5:30].rstrip("-"))
    yield name
    installed.delete_namespace(name)
