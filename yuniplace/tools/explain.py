"""`yuniplace explain POD`: for one pod, in plain words, the gang it belongs to, where the gang stands,
what it waits for and what happens next: the first thing a user asks when a pod is Pending.

It reads the cluster, not the controller's memory (as `yuniplace status` does, whose reading of an
application it reuses): the pod, the pods of its application, the object describing its gang, and the
recent events of the pod and of the gang's originator, where yuniplace tells the gang's story.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from yuniplace.cliargs import add_cluster_arguments
from yuniplace.devices.claims import DRA_API, UnsupportedClaim, is_allocated, pod_claims, requests_of, uses_devices
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import ON_TIMEOUT_DOES
from yuniplace.kube import KubeClient, NotFound, context_namespace
from yuniplace.runtime.events import Reason
from yuniplace.tools import status

RECENT_EVENTS = 8
# Where a gang stands, in words a user reads, and what comes next.
STANDS = {
    AppState.PENDING: "waiting for admission: nothing is reserved for it yet",
    AppState.RESERVING: "reserving: placeholders hold room for it while kube-scheduler places them",
    AppState.RESERVED: "reserved: every placeholder is placed, and its members are taking their places",
    AppState.RUNNING: "started: its members were given their room",
    AppState.RESUMING: "fell back (Soft): its placeholders are gone and its pods are scheduled normally, one by one",
    AppState.FAILED: "failed: its pods were not started",
    AppState.COMPLETED: "completed: nothing of yuniplace's is left",
}
NEXT = {
    AppState.PENDING: "admission reserves it (or starts it directly) as soon as the whole gang fits, in its "
    "queue's order; until then no pod of it starts",
    AppState.RESERVING: "once every placeholder is placed, the members are swapped in, all together",
    AppState.RESERVED: "each member is released onto the node held for it; kube-scheduler binds it there",
    AppState.RUNNING: "members that come later take the room still held for them; placeholders left unused "
    "are released at the timeout, and at once when the gang ends",
    AppState.RESUMING: "nothing more from yuniplace: kube-scheduler places the pods as room allows",
    AppState.FAILED: "nothing: delete the pods (or the workload) and create them again to try anew",
    AppState.COMPLETED: "nothing",
}
DEGRADED_NEXT = "what its policy for lost members asks (yuniplace.io/on-member-lost): see the GangDegraded event"


def _ago(seconds: float) -> str:
    return status._age(seconds) + " ago"


def event_time(event: Mapping[str, Any]) -> float:
    """When an event (as the core API lists it) last happened."""
    series = event.get("series") or {}
    for text in (series.get("lastObservedTime"), event.get("lastTimestamp"), event.get("eventTime")):
        if (when := p.parse_time(text)) is not None:
            return when
    return p.parse_time(event.get("firstTimestamp")) or p.parse_time(event["metadata"].get("creationTimestamp")) or 0.0


def _message(event: Mapping[str, Any]) -> str:
    return str(event.get("message") or event.get("note") or "")


def _latest(events: Sequence[Mapping[str, Any]], *reasons: Reason) -> Mapping[str, Any] | None:
    wanted = {reason.value for reason in reasons}
    found = [e for e in events if e.get("reason") in wanted]
    return max(found, key=event_time, default=None)


def _unschedulable(pod: Mapping[str, Any]) -> str | None:
    """kube-scheduler's reason a pod waits, from its PodScheduled condition."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled")
    return None


def pod_line(pod: Mapping[str, Any]) -> str:
    """The pod itself: its phase and why it is where it is."""
    where = f"Pod {p.namespace(pod)}/{p.name(pod)}: {p.phase(pod)}"
    if p.is_deleting(pod):
        return f"{where}, being deleted"
    if p.node_name(pod):
        return f"{where}, bound to node {p.node_name(pod)}"
    gates = [g.get("name") for g in pod["spec"].get("schedulingGates") or []]
    if keys.GATE in gates:
        return f"{where}, held back by yuniplace's scheduling gate {keys.GATE} until its gang may start"
    if gates:
        return f"{where}, held back by the scheduling gate(s) {', '.join(map(str, gates))}"
    reason = _unschedulable(pod)
    if reason:
        return f"{where}, not scheduled: {reason}"
    return f"{where}, waiting for kube-scheduler"


def device_lines(
    pod: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]], templates: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """What the pod's DRA claims ask for and where each stands: made or not, allocated where, and to whom
    (a placeholder holds a member's claims until the swap hands them over)."""
    lines = []
    for entry in pod_claims(pod):
        claim = claims.get(entry.claim) if entry.claim else None
        template = templates.get(entry.template) if entry.template else None
        spec = (claim or {}).get("spec") if claim is not None else ((template or {}).get("spec") or {}).get("spec")
        named = f"ResourceClaim {entry.claim}" if entry.template is None else f"ResourceClaimTemplate {entry.template}"
        if spec is None:
            lines.append(f"  claim {entry.name}: {named} does not exist; the pod cannot be scheduled until it does")
            continue
        try:
            asks = ", ".join(f"{request.count} × {request.kind.said}" for request in requests_of(spec)) or "nothing"
        except UnsupportedClaim as unsupported:
            asks = f"what yuniplace cannot count ({unsupported})"
        if claim is None:
            where = "its claim is not made yet (kube-controller-manager makes it from the template)"
        elif is_allocated(claim):
            names = sorted(str(c.get("name")) for c in (claim.get("status") or {}).get("reservedFor") or [])
            node = _allocated_on(claim)
            where = f"allocated{f' on node {node}' if node else ''}, reserved for {', '.join(names) or 'nobody yet'}"
        else:
            where = "not allocated: no device is held for it yet"
        lines.append(f"  claim {entry.name} ({entry.claim or 'not made yet'}): asks {asks}; {where}")
    return ["Devices (DRA):", *lines] if lines else []


def _allocated_on(claim: Mapping[str, Any]) -> str | None:
    terms = ((((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")) or {}).get("nodeSelectorTerms")
    for term in terms or []:
        for match in term.get("matchFields") or []:
            if match.get("key") == "metadata.name" and len(match.get("values") or []) == 1:
                return str(match["values"][0])
    return None


def _sizes(app: Application) -> str:
    assert app.spec is not None
    return ", ".join(
        f"{g.name} {g.min_member} × ("
        + ", ".join(f"{name} {value}" for name, value in sorted(g.min_resource.items()))
        + ")"
        for g in app.spec.groups
    )


def render(
    pod: p.Pod,
    app: Application | None,
    events: Sequence[Mapping[str, Any]],
    now: float,
    devices: Sequence[str] = (),
) -> str:
    """What `explain` prints: a line per fact, in plain words (`devices`: the pod's DRA claims, said)."""
    lines = [pod_line(pod), *devices]
    if app is None or app.originator is None:
        if p.app_key(pod) is None or not p.is_concerned(pod):
            lines.append(
                "Gang: none. yuniplace does not manage this pod: it carries no gang annotations or labels "
                "yuniplace reads (see the reference of annotations and labels), or is for another scheduler."
            )
        else:
            lines.append(
                f"Gang: application {p.app_id(pod)} in namespace {p.namespace(pod)}, whose pod describing the "
                "gang (its originator, with the task groups) does not exist yet: its members wait for it."
            )
        lines += _events_lines(events, now)
        return "\n".join(lines)
    row = status.describe(app, now) or {}
    originator = p.name(app.originator)
    if p.is_placeholder(pod):
        lines.append(f"This pod is a placeholder: it holds room for task group {app.group_of(pod)} of the gang below.")
    if app.spec is None:
        lines.append(
            f"Gang: application {app.key.app_id} in namespace {app.key.namespace} (originator {originator}), "
            f"which cannot be read: {app.problem}"
        )
    else:
        group = app.group_of(pod)
        mine = f"; this pod is of task group {group}" if group and not p.is_placeholder(pod) else ""
        lines.append(
            f"Gang: application {app.key.app_id} in namespace {app.key.namespace}, described by {originator}: "
            f"{app.spec.min_members} pods all or nothing: {_sizes(app)}{mine}."
        )
    state = app.state
    degraded = row.get("state") == status.DEGRADED
    stands = "started, but below its minimum: members were lost" if degraded else STANDS[state]
    lines.append(f"State: {row.get('state', state.value)}, {stands}.")
    if not app.left_to_kube_scheduler and app.originator is not None:
        lines.append(f"Queue: {app.queue}.")
    lines += _waits_for(app, row, events)
    lines += _timeout_lines(app, row)
    lines.append(f"Next: {DEGRADED_NEXT if degraded else NEXT[state]}.")
    lines += _events_lines(events, now)
    return "\n".join(lines)


def _waits_for(app: Application, row: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    state = app.state
    if state == AppState.PENDING:
        waiting = _latest(
            events,
            Reason.GANG_WAITING,
            Reason.GANG_GROUP_WAITING,
            Reason.GANG_RESERVATION_RELEASED,
            Reason.GANG_DEVICES,
            Reason.GANG_EXCEEDS_CAPACITY,
        )
        if waiting is not None:
            lines.append(f"Waiting for: {_message(waiting)} ({waiting.get('reason')}).")
        elif row.get("note"):
            lines.append(f"Waiting for: {row['note']}.")
    if state in (AppState.RESERVING, AppState.RESERVED) and row.get("groups"):
        held = ", ".join(f"{g['name']} {g['reserved']}/{g['required']}" for g in row["groups"])
        placed = sum(1 for ph in app.live_placeholders() if p.node_name(ph))
        lines.append(f"Placeholders placed: {placed} of {len(app.live_placeholders())}; room held by group: {held}.")
        stuck = next((r for ph in app.live_placeholders() if not p.node_name(ph) and (r := _unschedulable(ph))), None)
        if stuck:
            lines.append(f"Not yet placed, as kube-scheduler says: {stuck}")
    if row.get("domain"):
        lines.append(f"Topology domains: {row['domain']}.")
    return lines


def _timeout_lines(app: Application, row: Mapping[str, Any]) -> list[str]:
    if app.spec is None or app.state not in (AppState.PENDING, AppState.RESERVING, AppState.RESERVED):
        return []
    policy = app.spec.policy
    does = ON_TIMEOUT_DOES[policy.on_timeout]
    left = row.get("time_left_s")
    if left is None:
        if app.state == AppState.PENDING:
            return [
                f"Timeout: {policy.timeout_s}s, not running while others are ahead of it in its queue; then {does}."
            ]
        return [f"Timeout: {policy.timeout_s}s; then {does}."]
    if left <= 0:
        return [f"Timeout: expired; {does}."]
    return [f"Timeout: {status._age(left)} left of {policy.timeout_s}s; then {does}."]


def _events_lines(events: Sequence[Mapping[str, Any]], now: float) -> list[str]:
    recent = sorted(events, key=event_time)[-RECENT_EVENTS:]
    if not recent:
        return ["Events: none yet."]
    lines = ["Recent events:"]
    for event in recent:
        on = (event.get("involvedObject") or event.get("regarding") or {}).get("name", "?")
        lines.append(
            f"  {_ago(now - event_time(event)):>9}  {event.get('type', '')} {event.get('reason', '')} "
            f"on {on}: {_message(event)}"
        )
    return lines


def _events(client: KubeClient, namespace: str, names: Sequence[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name in dict.fromkeys(names):
        path = f"/api/v1/namespaces/{namespace}/events"
        found += client.get(path, fieldSelector=f"involvedObject.name={name}")["items"]
    return found


def explain(client: KubeClient, namespace: str, name: str, now: float) -> str:
    """Read the pod, its application and their events from the cluster, and say where it stands."""
    pod = client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    key = p.app_key(pod)
    app = None
    if key is not None and p.is_concerned(pod):
        pods = [
            other
            for other in client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
            if p.app_key(other) == key and p.is_concerned(other)
        ]
        app = Application.of(key, pods, status.pod_group_of(client, key, pods))
    names = [name] + ([p.name(app.originator)] if app is not None and app.originator is not None else [])
    return render(pod, app, _events(client, namespace, names), now, _devices(client, pod))


def _devices(client: KubeClient, pod: Mapping[str, Any]) -> list[str]:
    """The pod's DRA claims, said, read from the cluster (none where it uses none)."""
    if not uses_devices(pod):
        return []
    namespace = p.namespace(pod)
    named: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in ("resourceclaims", "resourceclaimtemplates"):
        try:
            items = client.get(f"{DRA_API}/namespaces/{namespace}/{kind}")["items"]
        except NotFound:  # the cluster serves no DRA
            items = []
        named[kind] = {item["metadata"]["name"]: item for item in items}
    return device_lines(pod, named["resourceclaims"], named["resourceclaimtemplates"])


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "explain",
        help="say, for one pod, which gang it belongs to, where the gang stands and what comes next",
        description="For one pod, in plain words: the gang it belongs to (application, originator, task "
        "groups), where the gang stands, what it waits for (its queue and place, placeholders placed, "
        "kube-scheduler's reason), the time left before its timeout and what the timeout will do, what "
        "happens next, and the recent events of the pod and of its gang. Reads the cluster.",
    )
    parser.add_argument("pod", metavar="POD", help="the pod's name")
    add_cluster_arguments(
        parser, namespace_help="the pod's namespace (default: the context's, as kubectl's)", all_namespaces=False
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
    client = KubeClient.from_kubeconfig(args.kubeconfig, context=args.context)
    try:
        print(explain(client, namespace, args.pod, time.time()))
    except NotFound:
        print(f"No pod {args.pod!r} in namespace {namespace}.", file=sys.stderr)
        return 1
    return 0
