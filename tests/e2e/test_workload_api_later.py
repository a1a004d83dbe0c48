"""Kubernetes' own gangs (the Workload API) switched on while yuniplace runs: the API server (then the
scheduler and the controller manager) restarted with the API's feature gates, as a platform team turns
it on. The controller reads it without a restart of its own, and native gangs are held by their queue
from then on. A cluster of its own, whose API server the test restarts."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.builders import queues_yaml
from tests.e2e.conftest import SIDE_LOGS, kubernetes_version, skip_without_go
from tests.e2e.support import Cluster, ControllerProcess, NamespaceRecorder, chart_installed, put_queues
from tests.e2e.test_native_gangs import Whole, bound, held_throughout, native_group, native_pods
from tests.e2e.test_optional_apis import WAIT_S, event_time, reads, said
from tests.e2e.test_queues import configured, waiting
from yuniplace.gang import keys
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster.components import Features

pytestmark = pytest.mark.every_version


@pytest.fixture(scope="module")
def gateless() -> Iterator[Cluster]:
    """Two nodes of 8 CPU, the Workload API off (its feature gates are switched on by the test)."""
    skip_without_go()
    local = LocalCluster(f"pytest-gateless-{os.getpid()}")
    try:
        local.up([NodePool(count=2, cpu="8", memory="32Gi")], kubernetes=kubernetes_version())
        yield Cluster(local)
    finally:
        local.down(quiet=True)


def argument(controller: ControllerProcess, flag: str) -> str:
    return next(arg.split("=", 1)[1] for arg in controller.args if arg.startswith(f"{flag}="))


def test_the_workload_api_switched_on_under_the_controller_has_native_gangs_held_by_their_queue(
    gateless: Cluster, tmp_path: Path, request: pytest.FixtureRequest, record_property: Callable[[str, object], None]
) -> None:
    """yuniplace installed by its chart while the Workload API is off. The API server restarts with its
    feature gates: the controller reads the API, and native gangs are held by their queue from then on.
    Queue root.shared holds 4 CPUs: native gang A (4 x 1 CPU) starts whole; B waits for it, gated, and
    starts whole once A ends."""
    cluster, version = gateless, kubernetes_version()
    namespace = f"native-later-{uuid.uuid4().hex[:6]}"
    cluster.local.create_namespace(namespace)
    put_queues(cluster, namespace, queues_yaml("- name: shared\n  resources:\n    max: {vcore: 4}"))
    # The API server is down a while as it restarts: a renew deadline past that keeps the leader leading
    # through it (the default, 10 s, may not on a loaded machine, and a leader that lost its lease exits).
    values = {
        "queues.configMap": "queues",
        "queues.configMapNamespace": namespace,
        "extraArgs[0]": f"--queues-configmap={namespace}/queues",
        "extraArgs[1]": "--renew-deadline=90",
        "extraArgs[2]": "--lease-duration=120",
    }
    with chart_installed(cluster, namespace, tmp_path, values) as controller:
        request.node.stash[SIDE_LOGS] = [("controller", controller.log_path)]
        wait_until(lambda: "became leader" in controller.log_path.read_text(), WAIT_S)
        configured(cluster, namespace, "QueuesApplied")
        lease = (argument(controller, "--leader-election-namespace"), argument(controller, "--leader-election-id"))
        features = Features.workload_api(version)
        cluster.local.switch_on(features, ["kube-apiserver"])
        back_at = time.time()  # the API server answers again, with the API on
        cluster.local.switch_on(features, ["kube-controller-manager", "kube-scheduler"])
        api = features.apis[0]
        read = said(cluster, lease[0], "OptionalApiServed", api)
        took = event_time(read) - back_at
        with NamespaceRecorder(cluster.client, namespace) as recorder:
            whole = Whole(recorder, {"first": 4, "second": 4})
            first = native_pods(cluster, namespace, native_group(cluster, namespace, "first", 4), "first", 4)
            bound(cluster, namespace, first)
            second = native_pods(cluster, namespace, native_group(cluster, namespace, "second", 4), "second", 4)
            waiting(cluster, namespace, "second", "root.shared")
            held_throughout(cluster, namespace, second)
            for name in first:
                cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})
            bound(cluster, namespace, second)
            gates = {name: sorted(recorder.gates_seen[name]) for name in second}
        assert all(seen == [keys.GATE] for seen in gates.values()), gates
        assert not whole.partial, whole.partial
        assert controller.starts == 1 and controller.process is not None and controller.process.poll() is None
        record = reads(cluster, "/".join(lease), lambda record: "workload-api" in record)
        assert record["workload-api"]["api"] == api, record
    cluster.client.delete(f"/api/v1/namespaces/{namespace}")
    record_property(
        "figure",
        f"Kubernetes {version}: the API server healthy again with the Workload API's gates on -> read by the controller "
        f"{took:+.1f} s from then (the watch of CRDs, open again, asks discovery at once)",
    )
