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

from yuniplace.controller.plan import FIRST_ALLOCATED, AppView, gang_spec
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.taskgroups import InvalidGang, Limits
from yuniplace.kube import KubeClient, NotFound


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


def describe(view: AppView, now: float) -> dict[str, Any] | None:
    originator = view.originator
    if originator is None:
        return None
    notes = p.annotations(originator)
    row: dict[str, Any] = {
        "namespace": view.key.namespace,
        "application": view.key.app_id,
        "originator": p.name(originator),
        "state": notes.get(keys.STATE, "Pending"),
        "groups": [],
        "age_s": None,
        "time_left_s": None,
    }
    started = p.parse_time(notes.get(keys.RESERVATION_STARTED))
    if started is not None:
        row["age_s"] = round(now - started)
    try:
        spec = gang_spec(view, Limits())
    except InvalidGang as error:
        row["error"] = str(error)
        return row
    for group in spec.groups:
        placed = sum(1 for ph in view.placeholders if p.task_group_name(ph) == group.name and p.node_name(ph))
        swapped = sum(
            1 for m in view.members
            if p.task_group_name(m) == group.name and keys.SWAP_PLACEHOLDER in p.annotations(m) and not p.is_gated(m)
        )
        row["groups"].append({"name": group.name, "reserved": min(group.min_member, placed + swapped), "required": group.min_member})
    if row["state"] == "Reserving" and started is not None:
        first = p.parse_time(notes.get(FIRST_ALLOCATED)) or min(
            (t for ph in view.placeholders if (t := p.scheduled_at(ph)) is not None), default=started
        )
        row["time_left_s"] = round(first + spec.policy.timeout_s - now)
    return row


def _pod_groups(client: KubeClient, namespace: str | None) -> dict[p.AppKey, dict[str, Any]]:
    """PodGroups by the application they describe; none when their API is not installed."""
    path = f"{keys.POD_GROUP_API}/namespaces/{namespace}/podgroups" if namespace else f"{keys.POD_GROUP_API}/podgroups"
    try:
        items = client.get(path)["items"]
    except NotFound:
        return {}
    return {p.AppKey(g["metadata"]["namespace"], g["metadata"]["name"]): g for g in items}


def collect(client: KubeClient, namespace: str | None, app: str | None) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    pods = client.get(path)["items"]
    by_app: dict[p.AppKey, list[p.Pod]] = defaultdict(list)
    for pod in pods:
        key = p.app_key(pod)
        if key is not None and p.is_concerned(pod) and (app is None or key.app_id == app):
            by_app[key].append(pod)
    now = time.time()
    pod_groups = _pod_groups(client, namespace)
    rows = [row for key, group in sorted(by_app.items()) if (row := describe(AppView.of(key, group, pod_groups.get(key)), now)) is not None]
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = ("NAMESPACE", "APPLICATION", "STATE", "GROUPS (reserved/required)", "AGE", "TIME LEFT")
    lines = [header]
    for row in rows:
        groups = ", ".join(f"{g['name']} {g['reserved']}/{g['required']}" for g in row["groups"]) or row.get("error", "-")
        left = row["time_left_s"]
        lines.append((row["namespace"], row["application"], row["state"], groups, _age(row["age_s"]),
                      "-" if left is None else ("expired" if left <= 0 else _age(left))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines)


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "status",
        help="show gang applications: state, groups reserved/required, time left",
        description="List gang applications as the cluster shows them: state, task groups reserved / required, "
        "age of the reservation and the time left before it times out.",
    )
    parser.add_argument("app", nargs="?", metavar="APP", help="one application id")
    parser.add_argument("-n", "--namespace", help="one namespace (default: all)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    parser.add_argument("--output", "-o", choices=["table", "json"], default="table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    rows = collect(KubeClient.from_kubeconfig(args.kubeconfig), args.namespace, args.app)
    if args.output == "json":
        json.dump(rows, sys.stdout, indent=2)
        print()
    elif rows:
        print(table(rows))
    else:
        print("No gang applications found." if args.app is None else f"No gang application {args.app!r} found.", file=sys.stderr)
        return 1 if args.app else 0
    return 0
