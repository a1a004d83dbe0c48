"""`yuniplace status`: the gang applications in a cluster, read from the cluster itself (pods, their
placeholders and the originator's annotations), not from the controller's memory."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from yuniplace.cliargs import add_cluster_arguments, configmap_argument
from yuniplace.controller.observe import bound_members, observed_state
from yuniplace.controller.podgroups import served_native_version
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects.registry import pod_group_api, pod_group_apis, started_by_kube_scheduler
from yuniplace.gang.state import AppState
from yuniplace.kube import KubeClient, NotFound, context_namespace, workloadapi
from yuniplace.runtime.events import FAILURE_REASONS
from yuniplace.tools import apistatus, queuestatus


def _age(seconds: float | None) -> str:
    """kubectl's style: 42s, 3m7s, 2h5m, 4d1h."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600}h"


NATIVE_NOTE = "native gang (Workload API): kube-scheduler binds it all or nothing; yuniplace only counts it"


def describe_native(app: Application, originator: p.Pod) -> dict[str, Any]:
    """A gang kube-scheduler binds by itself: where it stands, as its pods show it."""
    row: dict[str, Any] = {
        "namespace": app.key.namespace,
        "application": app.key.app_id,
        "originator": p.name(originator),
        "state": observed_state(app).value,
        "groups": [],
        "age_s": None,
        "time_left_s": None,
        "domain": None,
        "note": NATIVE_NOTE,
    }
    if app.spec is None:
        row["error"] = str(app.problem)
    else:
        minimum = app.spec.min_members
        row["groups"].append({"name": "members", "reserved": min(minimum, bound_members(app)), "required": minimum})
    return row


def describe(app: Application, now: float) -> dict[str, Any] | None:
    originator = app.originator
    if originator is None:
        return None
    if app.left_to_kube_scheduler:
        return describe_native(app, originator)
    record = app.record
    row: dict[str, Any] = {
        "namespace": app.key.namespace,
        "application": app.key.app_id,
        "originator": p.name(originator),
        "state": app.state.value,
        "groups": [],
        "age_s": None,
        "time_left_s": None,
        "domain": str(record.domains) or None,  # the topology domains its reservation holds
        "note": NOTES.get(app.state, ""),
    }
    if app.state == AppState.RUNNING and record.degraded_reported:
        row["state"] = DEGRADED
        row["note"] = "below its minimum: members lost (see the GangDegraded event)"
    if app.state == AppState.FAILED and p.status_reason(originator) in FAILURE_REASONS:
        row["note"] = f"failed: {p.status_message(originator) or p.status_reason(originator)}"  # yuniplace's why
    if app.spec is None:
        row["error"] = str(app.problem)
        return row
    if record.reservation_started is not None:
        row["age_s"] = round(now - record.reservation_started)
    for group in app.spec.groups:
        placed = sum(1 for ph in app.placeholders if app.group_of(ph) == group.name and p.node_name(ph))
        # Members with their room: swapped in or seated, or scheduled normally (one larger than its placeholders).
        members = sum(1 for m in app.members if app.group_of(m) == group.name and p.is_seated(m))
        row["groups"].append(
            {"name": group.name, "reserved": min(group.min_member, placed + members), "required": group.min_member}
        )
    deadline = None
    if app.state == AppState.RESERVING:
        deadline = app.reservation_deadline()
    elif app.state == AppState.PENDING:
        deadline = app.pending_deadline()
        if record.retry_after is not None and record.retry_after > now:
            retry_in = _age(record.retry_after - now)
            row["note"] = f"reservation given back; trying again in {retry_in} (attempt {record.attempts + 1})"
    if deadline is not None:
        row["time_left_s"] = round(deadline - now)
    return row


# A started gang below its minimum (gang/losses.py): Running as far as its reservation goes.
DEGRADED = "Degraded"
# What a state means for the pods, where the state's name alone does not say it.
NOTES = {
    AppState.PENDING: "waiting for admission",
    AppState.RESUMING: "fell back: placeholders gone, pods scheduled normally (Soft)",
    AppState.FAILED: "failed: pods not started (Hard)",
}


def describe_unserved(pod: p.Pod) -> dict[str, Any]:
    """A gang pod no scheduler picks up (its schedulerName names none that runs): shown, so that it
    does not wait unseen."""
    return {
        "namespace": p.namespace(pod),
        "application": p.app_id(pod) or p.name(pod),
        "originator": p.name(pod),
        "state": "Unscheduled",
        "groups": [],
        "age_s": None,
        "time_left_s": None,
        "domain": None,
        "note": f"schedulerName {p.scheduler_name(pod)!r}: no scheduler has picked the pod up; "
        "yuniplace works with default-scheduler (see the SchedulerNotRunning event)",
    }


def _pod_groups(client: KubeClient, namespace: str | None, api: str) -> dict[p.AppKey, dict[str, Any]]:
    """One API's PodGroups by the application they describe; none when the API is not installed."""
    path = f"{api}/namespaces/{namespace}/podgroups" if namespace else f"{api}/podgroups"
    try:
        items = client.get(path)["items"]
    except NotFound:
        return {}
    return {p.AppKey(g["metadata"]["namespace"], g["metadata"]["name"]): g for g in items}


def _native_groups(client: KubeClient, namespace: str | None) -> dict[str, dict[str, workloadapi.NativeGroup]]:
    """Kubernetes' own pod groups by namespace and name, in the newest version served that yuniplace
    reads; none when the Workload API is not served."""
    served = served_native_version(client)
    if served is None:
        return {}
    scope = f"/namespaces/{namespace}" if namespace else ""
    groups: dict[str, dict[str, workloadapi.NativeGroup]] = defaultdict(dict)
    for obj in client.get(f"{served.api}{scope}/{served.resource}")["items"]:
        groups[obj["metadata"]["namespace"]].update({g.name: g for g in workloadapi.groups_described(obj)})
    return groups


def pod_group_of(client: KubeClient, key: p.AppKey, pods: list[p.Pod]) -> dict[str, Any] | None:
    """The object that describes one application's gang, when its dialect has one (a PodGroup, a native
    pod group), read from the cluster."""
    if started_by_kube_scheduler(pods):
        found = workloadapi.lookup(_native_groups(client, key.namespace).get(key.namespace, {}), key.app_id)
        return None if found is None else found.as_object()
    api = pod_group_api(pods)
    return None if api is None else _pod_groups(client, key.namespace, api.path).get(key)


def collect(client: KubeClient, namespace: str | None, app: str | None) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    pods = client.get(path)["items"]
    by_app: dict[p.AppKey, list[p.Pod]] = defaultdict(list)
    unserved: list[dict[str, Any]] = []
    for pod in pods:
        key = p.app_key(pod)
        if key is None or (app is not None and key.app_id != app):
            continue
        if p.is_concerned(pod):
            by_app[key].append(pod)
        elif p.is_unserved(pod):
            unserved.append(describe_unserved(pod))
    now = time.time()
    pod_groups = {api: _pod_groups(client, namespace, api.path) for api in pod_group_apis()}
    native_groups = _native_groups(client, namespace) if any(started_by_kube_scheduler([pod]) for pod in pods) else {}

    def pod_group(key: p.AppKey, pods: list[p.Pod]) -> dict[str, Any] | None:
        if started_by_kube_scheduler(pods):
            found = workloadapi.lookup(native_groups.get(key.namespace, {}), key.app_id)
            return None if found is None else found.as_object()
        api = pod_group_api(pods)
        return None if api is None else pod_groups[api].get(key)

    rows = [
        row
        for key, pods in sorted(by_app.items())
        if (row := describe(Application.of(key, pods, pod_group(key, pods)), now)) is not None
    ]
    return rows + unserved


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = ("NAMESPACE", "APPLICATION", "STATE", "GROUPS (reserved/required)", "DOMAIN", "AGE", "TIME LEFT", "NOTE")
    lines = [header]
    for row in rows:
        groups = ", ".join(f"{g['name']} {g['reserved']}/{g['required']}" for g in row["groups"]) or "-"
        left = row["time_left_s"]
        note = row.get("error") or row["note"]
        lines.append(
            (
                row["namespace"],
                row["application"],
                row["state"],
                groups,
                row.get("domain") or "-",
                _age(row["age_s"]),
                "-" if left is None else ("expired" if left <= 0 else _age(left)),
                note,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "status",
        help="show gang applications: state, groups reserved/required, time left",
        description="List gang applications as the cluster shows them: state, task groups reserved / required, "
        "the topology domain its reservation holds, age of the reservation and the time left before it times out.",
    )
    parser.add_argument("app", nargs="?", metavar="APP", help="one application id")
    add_cluster_arguments(
        parser,
        namespace_help="one namespace (default: all; as `kubectl yuniplace`: the context's namespace, as kubectl's)",
        all_namespaces=True,
    )
    parser.add_argument("--output", "-o", choices=["table", "json"], default="table")
    parser.add_argument(
        "--queues",
        action="store_true",
        help="show queues instead: guaranteed, max, used, borrowed, lent, waiting applications; and node pools",
    )
    parser.add_argument(
        "--apis",
        action="store_true",
        help="show the optional APIs instead (Karpenter's, the PodGroup dialects', Volcano's Queues, ai-scheduler's "
        "Pools, the Workload API, DRA): whether the cluster serves each, and since when each controller reads it",
    )
    parser.add_argument(
        "--queues-configmap",
        type=configmap_argument,
        metavar="NAMESPACE/NAME",
        help="with --queues: the ConfigMap holding queues.yaml, as given to the controller (Volcano Queues are "
        "read whenever their API is installed)",
    )
    parser.set_defaults(run=run)


def namespace_of(args: argparse.Namespace) -> str | None:
    """The namespace a command reads (None: every namespace): -n's, none with -A, else every namespace for
    `yuniplace status` and the context's namespace for `kubectl yuniplace status`, as kubectl reads one."""
    if getattr(args, "all_namespaces", False):
        return None
    if args.namespace:
        return str(args.namespace)
    if getattr(args, "kubectl", False):
        return context_namespace(args.kubeconfig, args.context)
    return None


def run(args: argparse.Namespace) -> int:
    client = KubeClient.from_kubeconfig(args.kubeconfig, context=args.context)
    if args.queues:
        return queuestatus.run(client, args.queues_configmap, args.output)
    if args.apis:
        return apistatus.run(client, args.output)
    rows = collect(client, namespace_of(args), args.app)
    if args.output == "json":
        json.dump(rows, sys.stdout, indent=2)
        print()
    elif rows:
        print(table(rows))
    else:
        print(
            "No gang applications found." if args.app is None else f"No gang application {args.app!r} found.",
            file=sys.stderr,
        )
        return 1 if args.app else 0
    return 0
