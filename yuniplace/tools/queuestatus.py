"""`yuniplace status --queues`: what each queue is guaranteed, may use, uses, borrows and lends, who waits
in it, what each user holds in it, and each node pool. Read from the cluster once (nodes, pods, the
queue configuration) and counted by the controller's own admission code, so it shows what admission
decides on."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from yuniplace.admission.cycle import Admission
from yuniplace.controller.devicewatches import DRA, read_devices
from yuniplace.controller.optionalapis import ServedApi
from yuniplace.controller.podgroups import pod_group_optional_api
from yuniplace.controller.queuesource import AI_SCHEDULER_POOLS, VOLCANO_QUEUES, QueueSource
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects.registry import pod_group_api, pod_group_apis
from yuniplace.gang.taskgroups import Limits
from yuniplace.kube import KubeClient, NotFound
from yuniplace.kube.discovery import discover
from yuniplace.queues.report import QueuesReport, as_json, pools_total, quantities
from yuniplace.runtime.store import PodStore

NO_CONFIGURATION = (
    "No queue configuration: applications wait first in first out in a queue per name. Name a queues "
    "ConfigMap with --queues-configmap NAMESPACE/NAME (as the controller's flag does), or create Volcano Queues."
)


def _items(client: KubeClient, path: str) -> list[dict[str, Any]]:
    try:
        return list(client.get(path)["items"])
    except NotFound:
        return []


def read_queues(client: KubeClient, configmap: tuple[str, str] | None) -> tuple[QueuesReport | None, QueueSource]:
    """The report of one admission cycle over the cluster as it is now; None without a configuration."""
    source = QueueSource(configmap)
    if configmap is not None:
        namespace, name = configmap
        try:
            source.configmap_changed(client.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}"))
        except NotFound:
            source.configmap_changed(None)
        source.namespaces_changed(_items(client, "/api/v1/namespaces"))
    apis = [VOLCANO_QUEUES, AI_SCHEDULER_POOLS, DRA, *(pod_group_optional_api(api) for api in pod_group_apis())]
    found = discover(client, [path for api in apis for path in api.paths])
    if isinstance(VOLCANO_QUEUES.served_as(found), ServedApi):
        source.volcano_queues_changed(_items(client, f"{keys.VOLCANO_API}/queues"))
    nodes = _items(client, "/api/v1/nodes")
    if isinstance(AI_SCHEDULER_POOLS.served_as(found), ServedApi):
        source.nodes_changed(nodes)
        source.pools_changed(_items(client, f"{keys.AI_SCHEDULER_API}/pools"))
    if source.config().empty:
        return None, source
    pods = _items(client, "/api/v1/pods")
    store = PodStore()
    store.replace(pods)
    pod_groups = {
        api: {
            p.AppKey(g["metadata"]["namespace"], g["metadata"]["name"]): g
            for g in _items(client, f"{api.path}/podgroups")
        }
        for api in pod_group_apis()
        if isinstance(pod_group_optional_api(api).served_as(found), ServedApi)
    }

    def pod_group_of(key: p.AppKey) -> Mapping[str, object] | None:
        api = pod_group_api(store.app_pods(key))
        return None if api is None else pod_groups.get(api, {}).get(key)

    admission = Admission(store, Limits(), pod_group_of, source, lambda _key: None)
    if isinstance(DRA.served_as(found), ServedApi):
        source.count_devices(admission.devices)  # a Pool is guaranteed its nodes' devices too
        read_devices(client, admission.devices)
    admission.room.nodes_listed(nodes)
    admission.room.pods_listed(pods)
    admission.decide_now()
    return admission.report(), source


def _amounts(amounts: Mapping[str, int] | None, none: str = "-") -> str:
    shown = quantities(amounts)
    if shown is None:
        return none
    return ",".join(f"{name}={value}" for name, value in shown.items()) or "-"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines)


def queues_table(report: QueuesReport) -> str:
    text = _table(
        ("QUEUE", "GUARANTEED", "MAX", "USED", "BORROWED", "LENT", "WAITING"),
        [
            (
                row.path,
                _amounts(row.guaranteed),
                _amounts(row.max, "no limit"),
                _amounts(row.used),
                _amounts(row.borrowed),
                _amounts(row.lent),
                str(row.waiting) + (f" ({', '.join(row.waiting_applications)})" if row.waiting_applications else ""),
            )
            for row in report.queues
        ],
    )
    if report.users:
        text += "\n\n" + _table(
            ("QUEUE", "USER", "APPLICATIONS", "USED"),
            [(row.queue, row.user, str(row.applications), _amounts(row.used)) for row in report.users],
        )
    if report.pools:
        total = pools_total(report.pools)
        text += "\n\n" + _table(
            ("POOL", "QUEUE", "NODES", "CAPACITY", "ALLOCATABLE", "USED", "SHARED", "PENDING", "P/B/S"),
            [
                *(
                    (
                        "(the rest)" if pool.rest else ",".join(f"{k}={v}" for k, v in sorted(pool.selector.items())),
                        pool.queue,
                        str(pool.nodes),
                        _amounts(pool.capacity),
                        _amounts(pool.allocatable),
                        _amounts(pool.used),
                        _amounts(pool.shared),
                        str(pool.pending),
                        pool.switches,
                    )
                    for pool in report.pools
                ),
                (
                    "TOTAL",
                    "",
                    str(sum(pool.nodes for pool in report.pools)),
                    _amounts(total["capacity"]),
                    _amounts(total["allocatable"]),
                    _amounts(total["used"]),
                    _amounts(total["shared"]),
                    str(sum(pool.pending for pool in report.pools)),
                    "",
                ),
            ],
        )
    return text


def run(client: KubeClient, configmap: tuple[str, str] | None, output: str) -> int:
    report, source = read_queues(client, configmap)
    if source.refused is not None:
        print(f"queue configuration {source.refused}", file=sys.stderr)
    if report is None:
        if output == "json":
            json.dump({"queues": [], "pools": []}, sys.stdout, indent=2)
            print()
        print(NO_CONFIGURATION, file=sys.stderr)
        return 1 if source.refused else 0
    if output == "json":
        json.dump(as_json(report), sys.stdout, indent=2)
        print()
    else:
        print(queues_table(report))
    return 0
