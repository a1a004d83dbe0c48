"""The lifecycle's test kit: a Spark-like gang (a driver and executors), its placeholders, pods in the
states the apiserver shows them in (scheduled, unschedulable, not Ready, failed, being deleted), gangs
of other dialects, the surroundings a plan is made in, and a tiny cluster to carry plans out one after
another. Every pod is built by tests/builders.py; the planner's tests build none by hand.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from tests import builders
from yuniplace.controller.lifecycle import make_plan
from yuniplace.controller.plan import Plan, Settings, Surroundings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import coscheduling as coscheduling_dialect
from yuniplace.gang.dialects import koordinator as koordinator_dialect
from yuniplace.gang.placeholders import placeholder_name, placeholder_pod
from yuniplace.gang.podshape import member_group
from yuniplace.gang.state import TERMINAL, AppState
from yuniplace.gang.taskgroups import Limits, TaskGroup
from yuniplace.kube.errors import NotFound

Pod = dict[str, Any]
NOW = 1_700_000_000.0
APP = "spark-1"
NS = "default"
KEY = p.AppKey(NS, APP)
ONE = {"cpu": "1", "memory": "1Gi"}
GROUPS = [
    {"name": "driver", "minMember": 1, "minResource": ONE},
    {"name": "exec", "minMember": 2, "minResource": ONE},
]
HARD = "gangSchedulingStyle=Hard"
# A started gang's owner: a Job, which makes its pods again.
JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True}


def ph_name(group: str, index: int) -> str:
    return placeholder_name(APP, group, index)


# -- pods in the states the apiserver shows them in -------------------------------------------------------


def scheduled(pod: Pod, at: float, node: str | None = None) -> Pod:
    """kube-scheduler placed the pod at `at` (on `node`, where given: bound and Running)."""
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": p.format_time(at)}]
    return pod


def bind(pod: Pod, node: str, at: float) -> None:
    scheduled(pod, at, node)


def unschedulable(pod: Pod, message: str = "0/3 nodes are available: 3 Insufficient cpu.") -> Pod:
    """kube-scheduler found no node for the pod, and says why."""
    pod.setdefault("status", {})["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    return pod


def unready(pod: Pod, since: float) -> Pod:
    """Bound a second before `since`, and not Ready since."""
    pod.setdefault("status", {})["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": p.format_time(since - 1)},
        {"type": "Ready", "status": "False", "lastTransitionTime": p.format_time(since)},
    ]
    return pod


def ended(pod: Pod, phase: str = "Failed", reason: str | None = None) -> Pod:
    """The pod Succeeded or Failed (with the status `reason` given: Evicted, or yuniplace's)."""
    pod["status"]["phase"] = phase
    if reason is not None:
        pod["status"]["reason"] = reason
    return pod


def deleting(pod: Pod, at: float = NOW) -> Pod:
    """The pod is being deleted (its deletionTimestamp set)."""
    pod["metadata"]["deletionTimestamp"] = p.format_time(at)
    return pod


def ungated(pod: Pod) -> Pod:
    """yuniplace's gate taken off (the pod goes to kube-scheduler)."""
    pod["spec"]["schedulingGates"] = []
    return pod


def owned_by(pod: Pod, owner: dict[str, Any]) -> Pod:
    """The pod's controlling owner (a Job, an operator's object): it makes the pod again."""
    pod["metadata"]["ownerReferences"] = [dict(owner)]
    return pod


def nominated(pod: Pod, node: str) -> Pod:
    pod.setdefault("status", {})["nominatedNodeName"] = node
    return pod


# -- a Spark-like gang --------------------------------------------------------------------------------


def make_pod(
    name: str,
    *,
    app: str | None = APP,
    uid: str | None = None,
    rv: str = "1",
    created: float = NOW - 60,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    task_groups: Any = None,
    group: str | None = None,
    policy: str | None = None,
    state: AppState | None = None,
    started: float | None = None,
    first_allocated: float | None = None,
    gated: bool = True,
    phase: str = "Pending",
    node: str | None = None,
    scheduled_at: float | None = None,
    nominated_to: str | None = None,
    swap_placeholder: str | None = None,
    requests: dict[str, str] | None = None,
    deleted: bool = False,
) -> Pod:
    """A member of application `app` as the store holds it, with its record (`state`, `started`,
    `first_allocated`) when it is the originator."""
    notes = {**builders.gang_annotations(group=group, task_groups=task_groups, policy=policy), **(annotations or {})}
    if state is not None:
        notes[keys.STATE] = state.value
    if started is not None:
        notes[keys.RESERVATION_STARTED] = p.format_time(started)
    if first_allocated is not None:
        notes[keys.FIRST_ALLOCATED] = p.format_time(first_allocated)
    if swap_placeholder is not None:
        notes[keys.SWAP_PLACEHOLDER] = swap_placeholder
    made = builders.pod(
        name,
        namespace=NS,
        uid=uid or f"uid-{name}",
        rv=rv,
        created=p.format_time(created),
        labels={**(labels or {}), **({keys.APP_ID: app} if app is not None else {})},
        annotations=notes,
        container="main",
        requests=requests if requests is not None else ONE,
        gates=[keys.GATE] if gated else [],
        node=node,
        phase=phase,
    )
    if deleted:
        deleting(made)
    if scheduled_at is not None:
        scheduled(made, scheduled_at)
    if nominated_to is not None:
        nominated(made, nominated_to)
    return made


def driver(**overrides: Any) -> Pod:
    """The originator: it carries the task groups, and is the driver group's member."""
    fields: dict[str, Any] = {"task_groups": GROUPS, "group": "driver", "created": NOW - 120}
    fields.update(overrides)
    return make_pod("driver", **fields)


def executor(index: int, **overrides: Any) -> Pod:
    fields: dict[str, Any] = {"group": "exec", "created": NOW - 100 + index}
    fields.update(overrides)
    return make_pod(f"exec-{index}", **fields)


def placeholder(
    group: str,
    index: int,
    *,
    node: str | None = None,
    scheduled_at: float | None = None,
    min_member: int = 2,
    deleted: bool = False,
    phase: str | None = None,
    created: float = NOW - 50,
    owner: Pod | None = None,
) -> Pod:
    """A placeholder as the cluster shows it after our create, optionally bound to `node`."""
    source = owner or driver()
    manifest = placeholder_pod(app_id=APP, group=TaskGroup(group, min_member, ONE), index=index, originator=source)
    return materialize(manifest, created=created, node=node, scheduled_at=scheduled_at, deleted=deleted, phase=phase)


def materialize(
    manifest: Pod,
    *,
    created: float,
    node: str | None = None,
    scheduled_at: float | None = None,
    deleted: bool = False,
    phase: str | None = None,
) -> Pod:
    """A manifest as the apiserver shows it once created (a uid, a creation time), bound to `node`."""
    pod = copy.deepcopy(manifest)
    meta = pod["metadata"]
    meta["uid"] = f"uid-{meta['name']}"
    meta["resourceVersion"] = "1"
    meta["creationTimestamp"] = p.format_time(created)
    if deleted:
        deleting(pod)
    pod["status"] = {"phase": phase or ("Running" if node else "Pending")}
    if node is not None:
        bind(pod, node, scheduled_at if scheduled_at is not None else created + 1)
    return pod


def all_placeholders(*, bound: bool, scheduled_at: float = NOW - 30) -> list[Pod]:
    """driver-0 on n0, exec-0 on n1, exec-1 on n2 (when bound)."""
    nodes = iter(["n0", "n1", "n2"])
    return [
        placeholder(
            group,
            index,
            node=next(nodes) if bound else None,
            scheduled_at=scheduled_at if bound else None,
            min_member=1 if group == "driver" else 2,
        )
        for group, index in (("driver", 0), ("exec", 0), ("exec", 1))
    ]


def running_gang(**exec_1: Any) -> list[Pod]:
    """A started gang of 3 (driver and two executors), each bound; executor 1 as `exec_1` says."""
    return [
        driver(state=AppState.RUNNING, started=NOW - 100, first_allocated=NOW - 90, gated=False, node="n0"),
        executor(0, gated=False, node="n1", phase="Running"),
        executor(1, **{"gated": False, "node": "n2", "phase": "Running", **exec_1}),
    ]


def with_record(pods: list[Pod], annotate: dict[str, str | None]) -> list[Pod]:
    """The pods as the next reconcile sees them once the plan's annotations are on the driver."""
    notes = pods[0]["metadata"]["annotations"]
    for key, value in annotate.items():
        if value is None:
            notes.pop(key, None)
        else:
            notes[key] = value
    return pods


# -- gangs of other dialects --------------------------------------------------------------------------


def dialect_member(
    name: str,
    dialect: dict[str, dict[str, str]],
    *,
    created: float,
    record: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> Pod:
    """A gated member of a gang written for another scheduler (`dialect`: its labels and annotations);
    `record`: the yuniplace annotations of an originator."""
    return builders.pod(
        name,
        namespace=NS,
        uid=f"uid-{name}",
        rv="1",
        created=p.format_time(created),
        labels=dict(dialect.get("labels", {})),
        annotations={**dialect.get("annotations", {}), **(record or {}), **(extra or {})},
        container="main",
        requests=ONE,
        gates=[keys.GATE],
        phase="Pending",
    )


def koordinator(waiting_time: str = "5s", **more: str) -> dict[str, dict[str, str]]:
    """Koordinator's gang of 4 named train."""
    return {
        "annotations": {
            koordinator_dialect.NAME: "train",
            koordinator_dialect.MIN_AVAILABLE: "4",
            koordinator_dialect.WAITING_TIME: waiting_time,
            koordinator_dialect.MODE: "NonStrict",
            **more,
        }
    }


def coscheduling(**annotations: str) -> dict[str, dict[str, str]]:
    """A Coscheduling pod group of 4 named mpi."""
    return {
        "labels": {coscheduling_dialect.NAME: "mpi", coscheduling_dialect.MIN_AVAILABLE: "4"},
        "annotations": dict(annotations),
    }


def record(state: AppState, started: float | None = None, **more: str) -> dict[str, str]:
    """An originator's record: its state, when its reservation began, and `more` of its keys."""
    notes = {keys.STATE: state.value, **more}
    if started is not None:
        notes[keys.RESERVATION_STARTED] = p.format_time(started)
    return notes


def seats(app_id: str, originator: Pod, placed: int, total: int = 4) -> list[Pod]:
    """A dialect gang's placeholders, the first `placed` of them bound."""
    group = TaskGroup(member_group(originator), total, ONE)
    return [
        materialize(
            placeholder_pod(app_id=app_id, group=group, index=i, originator=originator),
            created=NOW - 50,
            node=f"n{i}" if i < placed else None,
            scheduled_at=NOW - 40 if i < placed else None,
        )
        for i in range(total)
    ]


def dialect_gang(
    dialect: dict[str, dict[str, str]], app_id: str, originator_record: dict[str, str], placed: int = 3
) -> list[Pod]:
    """Four members (the first the originator) reserving, `placed` of their 4 placeholders bound."""
    pods = [
        dialect_member(f"{app_id}-{i}", dialect, created=NOW - 60 + i, record=originator_record if i == 0 else None)
        for i in range(4)
    ]
    return pods + seats(app_id, pods[0], placed)


# -- plans --------------------------------------------------------------------------------------------


def around(**fields: Any) -> Surroundings:
    """What lies beyond the application: admission's `ticket`, its gang group's `peers`, a `reclaimed`
    room, the `node_health`, its `restarts`... (plan.Surroundings)."""
    return Surroundings(**fields)


def plan_of(
    pods: list[Pod], now: float = NOW, settings: Settings = Settings(), key: p.AppKey = KEY, **surroundings: Any
) -> Plan:
    """The plan for the application of `pods` at `now`, checked for consistency."""
    app = Application.of(key, pods, limits=settings.limits)
    plan = make_plan(app, now, settings, around(**surroundings))
    assert_consistent(plan)
    return plan


def planned(app_id: str, pods: list[Pod], now: float = NOW) -> Plan:
    """The plan for application `app_id` of the default namespace."""
    return plan_of(pods, now, Settings(limits=Limits()), key=p.AppKey(NS, app_id))


def names(pods: list[Pod]) -> list[str]:
    return [p.name(pod) for pod in pods]


def reasons(plan: Plan) -> list[str]:
    return [event.reason for event in plan.events]


def assert_consistent(plan: Plan) -> None:
    """Whatever the case: every pod gets at most one fate, and every proposed state is allowed."""
    fates = Counter(
        [p.uid(m) for m in plan.ungate] + [p.uid(f.pod) for f in plan.fail] + [p.uid(s.member) for s in plan.swaps]
    )
    assert all(count == 1 for count in fates.values()), fates
    deleted = [p.uid(ph) for ph in plan.delete] + [
        p.uid(s.placeholder) for s in plan.swaps if s.placeholder is not None
    ]
    assert len(deleted) == len(set(deleted)), deleted
    assert len(names(plan.create)) == len(set(names(plan.create)))
    if plan.state in TERMINAL:
        assert plan.create == [] and plan.swaps == []


# -- a tiny cluster, to run plans one after another -----------------------------------------------------


def apply(pods: list[Pod], plan: Plan, now: float) -> list[Pod]:
    """The cluster after `plan` is carried out (what Executor.apply does, without the API)."""
    result = {p.uid(pod): copy.deepcopy(pod) for pod in pods}
    if plan.annotate and plan.originator is not None:
        notes = result[p.uid(plan.originator)]["metadata"]["annotations"]
        for key, value in plan.annotate.items():  # a merge patch: None removes
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
    for pod in plan.mark_timed_out:
        assert plan.timed_out_mark is not None
        result[p.uid(pod)]["metadata"]["annotations"][plan.timed_out_mark] = "true"
    for manifest in plan.create:
        created = materialize(manifest, created=now)
        result[p.uid(created)] = created
    gone = [p.uid(ph) for ph in plan.delete] + [p.uid(s.placeholder) for s in plan.swaps if s.placeholder is not None]
    for uid in gone:
        result.pop(uid, None)
    for swap in plan.swaps:
        member = nominated(result[p.uid(swap.member)], swap.node)
        if swap.marker is not None:  # the placeholder it replaces, or its seat
            key, value = swap.marker
            member["metadata"]["annotations"][key] = value
        member["spec"]["schedulingGates"] = []
    for pod in plan.ungate:
        result[p.uid(pod)]["spec"]["schedulingGates"] = []
    for failure in plan.fail:
        ended(result[p.uid(failure.pod)], reason=failure.reason)
    return list(result.values())


def schedule(pods: list[Pod], now: float, *, placeholders: bool = True) -> list[Pod]:
    """kube-scheduler: binds every ungated pending pod (members to their nominated node)."""
    result = copy.deepcopy(pods)
    for index, pod in enumerate(result):
        if p.is_gated(pod) or p.node_name(pod) or p.is_terminal(pod):
            continue
        if p.is_placeholder(pod) and not placeholders:
            continue
        bind(pod, p.nominated_node(pod) or f"node-{index}", now)
    return result


def run(pods: list[Pod], steps: list[str], start: float = NOW) -> list[AppState]:
    """Plan, apply, and let the scheduler act, one step per entry: 'plan' only plans and applies;
    'schedule' also binds what can be bound ('schedule-members': members only); 'wait:N' advances the
    clock; 'finish' ends the driver. The states the plans went to, in order."""
    now = start
    states: list[AppState] = []
    for step in steps:
        if step.startswith("wait:"):
            now += float(step.split(":")[1])
        elif step == "schedule":
            pods = schedule(pods, now)
        elif step == "schedule-members":
            pods = schedule(pods, now, placeholders=False)
        elif step == "finish":
            for pod in pods:
                if p.name(pod) == "driver":
                    ended(pod, "Succeeded")
        else:
            plan = plan_of(pods, now)
            states.append(plan.state)
            pods = apply(pods, plan, now)
    return states


# -- the API a ledger keeps its counts in --------------------------------------------------------------


class ConfigMaps:
    """Stands in for the API's ConfigMaps of one namespace: merge patches of `data`, and create."""

    def __init__(self) -> None:
        self.data: dict[str, str] | None = None
        self.writes = 0

    def get(self, path: str) -> dict[str, Any]:
        if self.data is None:
            raise NotFound(404, "NotFound", "configmaps not found")
        return {"data": dict(self.data)}

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.data is None:
            raise NotFound(404, "NotFound", "configmaps not found")
        self.writes += 1
        for key, value in body["data"].items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value
        return {}

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        self.data = dict(body["data"])
        return body
