"""Fixtures that give every e2e test a real control plane: one cluster per session, one namespace per test.

The cluster runs the Kubernetes minor version YUNIPLACE_KUBERNETES names (`scripts/test --kubernetes`),
the newest supported one by default. With CI=true the e2e tests must run: anything that stops the
cluster from starting fails them. Outside CI, a machine without Go skips them with one message saying
how to enable them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.support import (
    POOL_LABEL,
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
)
from yuniplace.gang import keys
from yuniplace.gang.dialects import podgroup
from yuniplace.kube import NotFound
from yuniplace.localcluster import LocalCluster, NodePool, Taint, wait_until
from yuniplace.localcluster.build import DEFAULT_KUBERNETES, GO_NEEDED, SUPPORTED_KUBERNETES

IN_CI = os.environ.get("CI", "").lower() == "true"
SKIP_WITHOUT_GO = (
    f"e2e tests need the Go toolchain ({GO_NEEDED} or newer) to build the local control plane from Go modules: "
    "install Go (https://go.dev/doc/install) and run scripts/test again; with CI=true they fail instead of skipping"
)

CLUSTER_WIDE = pytest.StashKey[list[ControllerProcess]]()
# Logs of other processes a test started (an operator, say), by what they are: shown when it fails.
SIDE_LOGS = pytest.StashKey[list[tuple[str, Path]]]()
# Enough room for every e2e test of this suite at once: 4 nodes of 8 CPU / 32 GiB.
SESSION_POOL = NodePool(count=4, cpu="8", memory="32Gi", pods=110)


def kubernetes_version() -> str:
    """The Kubernetes minor version this session's clusters run."""
    version = os.environ.get("YUNIPLACE_KUBERNETES") or DEFAULT_KUBERNETES
    if version not in SUPPORTED_KUBERNETES:
        raise pytest.UsageError(f"YUNIPLACE_KUBERNETES={version}: choose one of {', '.join(SUPPORTED_KUBERNETES)}")
    return version


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in item.nodeid:
            item.add_marker(pytest.mark.e2e)


def skip_without_go() -> None:
    if shutil.which("go") is None and not IN_CI:
        pytest.skip(SKIP_WITHOUT_GO)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    skip_without_go()
    local = LocalCluster(f"pytest-{os.getpid()}")
    try:
        local.up([SESSION_POOL], kubernetes=kubernetes_version())
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


@pytest.fixture
def controller(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[ControllerProcess]:
    """A yuniplace controller process watching the test's namespace; its log is shown on failure."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path)
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"controller exited with {code} on SIGTERM:\n{process.log()}"


@pytest.fixture
def tenant(cluster: Cluster, namespace: str) -> Iterator[Callable[[str], str]]:
    """More namespaces for the test, as more tenants of a shared cluster: `tenant("b")` creates
    `<namespace>-b`; all are deleted afterwards."""
    created: list[str] = []

    def make(suffix: str) -> str:
        name = f"{namespace[:50]}-{suffix}"
        cluster.local.create_namespace(name)
        created.append(name)
        return name

    yield make
    for name in created:
        cluster.client.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def cluster_wide(
    cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ControllerProcess]]:
    """Start a controller managing every namespace (as the chart installs it by default), with extra
    arguments; stopped (and its exit checked) afterwards."""
    started: list[ControllerProcess] = []

    def start(*args: str) -> ControllerProcess:
        process = ControllerProcess(
            [f"--kubeconfig={cluster.kubeconfig}", *args], tmp_path, name=f"cluster-wide-{len(started)}"
        )
        process.start()
        started.append(process)
        return process

    request.node.stash[CLUSTER_WIDE] = started

    yield start
    for process in started:
        code = process.stop()
        assert code == 0, f"controller exited with {code} on SIGTERM:\n{process.log()}"


@pytest.fixture
def recorder(cluster: Cluster, namespace: str) -> Iterator[NamespaceRecorder]:
    with NamespaceRecorder(cluster.client, namespace) as watching:
        yield watching


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    process = item.funcargs.get("controller") if hasattr(item, "funcargs") else None
    if report.failed and isinstance(process, ControllerProcess):
        report.sections.append(("controller log", process.log()))
    if report.failed:
        for started in item.stash.get(CLUSTER_WIDE, []):
            report.sections.append((f"{started.name} log", started.log()))
        for name, path in item.stash.get(SIDE_LOGS, []):
            report.sections.append((f"{name} log", path.read_text(errors="replace")[-8000:]))
    return report


@pytest.fixture
def pool(cluster: Cluster, namespace: str) -> Iterator[Callable[..., Placement]]:
    """Add nodes reserved to this test (labelled and tainted with its namespace); removed afterwards."""
    created: list[NodePool] = []

    def make(
        count: int, cpu: str = "8", memory: str = "32Gi", pods: int = 110, labels: dict[str, str] | None = None
    ) -> Placement:
        """`labels`: more labels of these nodes (a node pool of a queue, say); the placement selects every
        node of the test either way."""
        node_pool = NodePool(
            count=count,
            cpu=cpu,
            memory=memory,
            pods=pods,
            labels={POOL_LABEL: namespace, **(labels or {})},
            taints=(Taint(POOL_LABEL, namespace, "NoSchedule"),),
            prefix=f"{namespace}-{len(created)}",
        )
        names = cluster.local.add_nodes(node_pool)
        created.append(node_pool)
        ControllerProcess.wait_all_see_nodes(cluster.client)
        return Placement(
            {POOL_LABEL: namespace},
            [{"key": POOL_LABEL, "operator": "Equal", "value": namespace, "effect": "NoSchedule"}],
            names,
        )

    yield make
    for node_pool in created:
        for name in node_pool.names():
            with contextlib.suppress(NotFound):  # a test may have deleted it
                cluster.client.delete(f"/api/v1/nodes/{name}")


CHART_CRDS = Path(__file__).resolve().parents[2] / "charts" / "yuniplace" / "crds"


def served(cluster: Cluster, api: str) -> bool:
    """Whether discovery lists the API's resources yet (it lags the CRD's Established condition)."""
    try:
        return bool(cluster.client.get(api).get("resources"))
    except NotFound:
        return False


@pytest.fixture(scope="module")
def pod_group_api(cluster: Cluster) -> Iterator[None]:
    """The chart's PodGroup CRDs (scheduler-plugins' and Volcano's), installed as `helm install`
    installs them, and served."""
    for crd in sorted(CHART_CRDS.glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "-f", str(crd))
    for name in ("podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh"):
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
    wait_until(lambda: served(cluster, podgroup.API) and served(cluster, keys.VOLCANO_API), 30)
    yield


POOL_CRD = CHART_CRDS / "pools.resource.aibee.cn.yaml"
POOL_CRD_NAME = "pools.resource.aibee.cn"


def pool_api_served(cluster: Cluster) -> bool:
    """Whether discovery lists the Pool API yet (it lags the CRD's Established condition a little)."""
    try:
        return any(r["name"] == "pools" for r in cluster.client.get(keys.AI_SCHEDULER_API)["resources"])
    except NotFound:
        return False


@pytest.fixture
def pool_api(cluster: Cluster) -> Iterator[None]:
    """The chart's Pool CRD (ai-scheduler's API), installed as `helm install` installs it, and served;
    removed afterwards, with every Pool."""
    cluster.kubectl("apply", "--server-side", "-f", str(POOL_CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{POOL_CRD_NAME}")
    wait_until(lambda: pool_api_served(cluster), 30)
    yield
    crd = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{POOL_CRD_NAME}"
    cluster.client.delete(crd)

    def gone() -> bool:
        try:
            cluster.client.get(crd)
        except NotFound:
            return True
        return False

    wait_until(gone, 60)


@pytest.fixture
def priority_classes(cluster: Cluster) -> Iterator[Callable[[int], str]]:
    """PriorityClasses for the test (cluster-scoped), deleted afterwards."""
    made: list[str] = []

    def make(value: int) -> str:
        name = f"e2e-{uuid.uuid4().hex[:8]}-{value}"
        cluster.client.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value},
        )
        made.append(name)
        return name

    yield make
    for name in made:
        cluster.client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
