"""One application as every reader sees it: its pods by role, its originator, the gang it describes
(or why it cannot be read), its record and its deadlines, read from the pods once.

The planner, admission, `yuniplace status` and the webhook's checks all read an Application; nothing
else parses gang annotations or the originator's record, so they can never read the same pods two
ways.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yuniplace.gang import keys, topology
from yuniplace.gang import pods as p
from yuniplace.gang.dialects.registry import dialect_of, pod_group_api, started_by_kube_scheduler
from yuniplace.gang.record import Record, read_record, state_of
from yuniplace.gang.resources import Resources, format_quantity, pod_requests, quantities, said_short, shortfalls
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import (
    GangSpec,
    InvalidGang,
    Limits,
    Problem,
    Style,
    TaskGroup,
    loss_policy_of,
    parse_gang,
    style_of,
)
from yuniplace.gang.topology import BadTopology

Pod = p.Pod


def read_gang(
    pod: Mapping[str, Any],
    pod_group: Mapping[str, Any] | None = None,
    limits: Limits = Limits(),
    members: Sequence[Mapping[str, Any]] = (),
) -> GangSpec:
    """The gang `pod` describes, in whichever dialect it is written (`pod_group`: the PodGroup a pod of
    that dialect names; `members`: the application's pods, whose tasks size a Volcano gang's task
    groups); InvalidGang names every problem in the dialect's own terms. The gang's topology domains
    are asked alike in every dialect (yuniplace's annotation, or Kueue's), on the same pod, as is what it
    does when it loses a member once started."""
    dialect = dialect_of(pod)
    notes = p.annotations_of(pod)
    wrong: list[Problem] = []
    try:
        asked = topology.asked(notes)
    except BadTopology as bad:
        asked = topology.Asked()
        wrong.append(Problem(bad.field, bad.value, bad.expected))
    on_loss = loss_policy_of(notes, limits.on_loss, wrong)
    try:
        spec = parse_gang(notes, limits) if dialect is None else dialect.spec(pod, pod_group, members, limits)
    except InvalidGang as error:
        raise InvalidGang([*error.problems, *wrong]) from None
    if wrong:
        raise InvalidGang(wrong)
    if on_loss != spec.on_loss:
        spec = dataclasses.replace(spec, on_loss=on_loss)
    if asked.topology is None:
        return spec
    return dataclasses.replace(spec, topology=asked.topology, warnings=spec.warnings + asked.warnings)


def _originator(candidates: Sequence[Pod], pod_group: Mapping[str, Any] | None, members: Sequence[Pod]) -> Pod | None:
    """The pod whose task groups define the gang, of the live members that describe it (oldest first):
    the one already carrying the application's state, else the oldest (normally the Spark driver) still
    running or to run.
    Pods of a Job share a creation second, so "oldest" alone could change its mind as the others
    appear."""
    chosen = next((pod for pod in candidates if keys.STATE in p.annotations_of(pod)), None)
    # Else the oldest that has not ended: a member of an earlier attempt that failed (a Job keeps it) is
    # no originator for the attempt its Job made after the gang was restarted whole.
    chosen = chosen or next((pod for pod in candidates if not p.is_terminal(pod)), None)
    chosen = chosen or (candidates[0] if candidates else None)
    dialect = dialect_of(chosen) if chosen is not None else None
    if dialect is not None and not dialect.readable(pod_group, members):
        return None  # e.g. a PodGroup not seen (yet), or a Volcano task with no pod (yet) to size its group by
    return chosen


def holding_its_members(
    spec: GangSpec,
    members: Sequence[Pod],
    group_of: Callable[[Pod], str | None],
    requests_of: Callable[[Pod], Resources],
) -> GangSpec:
    """The gang with each task group as large as the largest of its live members in every resource: a
    member larger than what its group reserves would find no room of its size (its init containers and
    pod overhead count, which an operator writing task groups may leave out), and released alone into
    normal scheduling it could start the gang in part. Each group made larger is warned of."""
    by_group: dict[str, list[Pod]] = {}
    for member in members:
        named = group_of(member)
        if named is not None and not p.is_deleting(member) and not p.is_terminal(member):
            by_group.setdefault(named, []).append(member)
    groups: list[TaskGroup] = []
    warnings: list[str] = []
    for group in spec.groups:
        reserved = quantities(group.min_resource)
        grown = dict(reserved)
        larger: Pod | None = None
        for member in by_group.get(group.name, ()):
            needs = requests_of(member)
            if shortfalls(needs, grown):
                larger = larger or member
                grown.update({name: max(grown.get(name, amount), amount) for name, amount in needs.items()})
        if larger is None:
            groups.append(group)
            continue
        detail = said_short(shortfalls(grown, reserved))
        warnings.append(
            f"task group {group.name}: its members request more than its minResource ({detail}, init containers and "
            f"overhead included; pod {p.name(larger)} among them): each of its members is reserved that much"
        )
        grown_resource = {name: format_quantity(amount) for name, amount in grown.items()}
        groups.append(dataclasses.replace(group, min_resource=grown_resource))
    if not warnings:
        return spec
    return dataclasses.replace(spec, groups=tuple(groups), warnings=spec.warnings + tuple(warnings))


def describes_gang(pod: Pod, identity: p.Identity) -> bool:
    """Whether the member may be the application's originator: it describes the gang, and is not going."""
    return identity.describes_gang and not p.is_deleting(pod)


@dataclass(frozen=True)
class Application:
    key: p.AppKey
    members: tuple[Pod, ...]  # real pods (everything that is not a placeholder), oldest first
    placeholders: tuple[Pod, ...]
    pod_group: Mapping[str, Any] | None  # the PodGroup its members name (scheduler-plugins', Volcano's, native)
    originator: Pod | None
    record: Record
    spec: GangSpec | None  # None: no originator, or `problem`
    problem: InvalidGang | None  # why its annotations cannot be read
    style: Style  # what happens when it ends badly, even when its annotations cannot be read
    # What each pod is (by uid), as the store read it when the pod last changed: a pod's dialect, and so
    # its task group, is then never worked out again on every read of its application.
    identities: Mapping[str, p.Identity] = field(default_factory=dict)
    # Its members still held by yuniplace's gate, oldest first (None: worked out from `members`).
    gated: tuple[Pod, ...] | None = None
    # What each of its pods requests (by uid), as the store worked it out when the pod last changed.
    requests: Mapping[str, Resources] = field(default_factory=dict)

    @classmethod
    def of(
        cls, key: p.AppKey, pods: Sequence[Pod], pod_group: Mapping[str, Any] | None = None, limits: Limits = Limits()
    ) -> Application:
        """The application of pods given in any order (pods being admitted have no uid yet)."""
        identity = {id(pod): p.identify(pod) for pod in pods}
        live = sorted(pods, key=lambda pod: (p.created_at(pod), pod["metadata"].get("name") or ""))
        members = tuple(pod for pod in live if not identity[id(pod)].placeholder)
        placeholders = tuple(pod for pod in live if identity[id(pod)].placeholder)
        candidates = [pod for pod in members if describes_gang(pod, identity[id(pod)])]
        return cls.read(key, members, placeholders, candidates, pod_group, limits)

    @classmethod
    def read(
        cls,
        key: p.AppKey,
        members: tuple[Pod, ...],
        placeholders: tuple[Pod, ...],
        candidates: Sequence[Pod],
        pod_group: Mapping[str, Any] | None,
        limits: Limits,
        identities: Mapping[str, p.Identity] | None = None,
        gated: tuple[Pod, ...] | None = None,
        requests: Mapping[str, Resources] | None = None,
    ) -> Application:
        """The application of its members and placeholders, each oldest first, and the members that may
        be its originator (`describes_gang`), oldest first: as the store keeps them, with what it knows
        of each pod (what it is, what it requests) and which members are gated."""
        found = functools.partial(
            cls,
            key,
            members,
            placeholders,
            pod_group,
            identities=identities or {},
            gated=gated,
            requests=requests or {},
        )
        originator = _originator(candidates, pod_group, members)
        if originator is None:
            return found(None, Record(), None, None, limits.default_style)
        notes = p.annotations_of(originator)
        style = style_of(notes, limits)
        try:
            record = read_record(notes)
            spec = read_gang(originator, pod_group, limits, members)
        except InvalidGang as error:
            return found(originator, Record(state=state_of(notes)), None, error, style)
        app = found(originator, record, spec, None, spec.policy.style)
        return dataclasses.replace(app, spec=holding_its_members(spec, members, app.group_of, app.requests_of))

    def group_of(self, pod: Pod) -> str | None:
        """The task group the pod (a member or a placeholder of this application) belongs to."""
        uid = pod.get("metadata", {}).get("uid")
        identity = self.identities.get(uid) if uid else None
        return p.task_group_name(pod) if identity is None else identity.group

    def requests_of(self, pod: Pod) -> Resources:
        """What the pod (a member or a placeholder) requests of a node, as kube-scheduler counts it."""
        uid = pod.get("metadata", {}).get("uid")
        known = self.requests.get(uid) if uid else None
        return pod_requests(pod.get("spec", {})) if known is None else known

    @property
    def state(self) -> AppState:
        return self.record.state

    @property
    def queue(self) -> str:
        assert self.originator is not None
        return p.queue(self.originator)

    @property
    def priority(self) -> int:
        """The gang's own priority where its dialect states one (a native PodGroup's), else its pods'
        (the originator's, as the priority admission controller set it)."""
        assert self.originator is not None
        if self.spec is not None and self.spec.priority is not None:
            return self.spec.priority
        value = self.originator.get("spec", {}).get("priority")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def left_to_kube_scheduler(self) -> bool:
        """A native gang (the Workload API) yuniplace does not hold: none of its pods was gated (their
        namespace opts out, or they came before yuniplace held native gangs) and it carries no record, so
        kube-scheduler's gang plugin alone starts it and yuniplace only counts it. One yuniplace holds,
        or held, is admitted and followed like any gang."""
        first = self.originator or (self.members[0] if self.members else None)
        if first is None or not started_by_kube_scheduler([first]):
            return False
        return not self.gated_members() and not self.record.kept

    @property
    def arrival(self) -> tuple[float, str]:
        """Its place in a queue: the originator's creation, then its key (pods of a Job share a second)."""
        assert self.originator is not None
        return p.created_at(self.originator), str(self.key)

    def gated_members(self) -> list[Pod]:
        """Its live members yuniplace's gate still holds, oldest first."""
        if self.gated is not None:
            return list(self.gated)
        return [m for m in self.members if p.is_held(m)]

    def live_members(self) -> list[Pod]:
        """Its members still there: neither ended nor being deleted."""
        return [m for m in self.members if not p.is_terminal(m) and not p.is_deleting(m)]

    @property
    def owners(self) -> frozenset[str]:
        """The uids of what makes its members (a Job, an operator's object; several for a gang made by
        several Jobs), those of pods left of earlier attempts included."""
        return frozenset(str(owner.get("uid") or "") for m in self.members if (owner := p.controller_of(m)))

    def live_placeholders(self) -> list[Pod]:
        return [ph for ph in self.placeholders if not p.is_deleting(ph)]

    def started(self) -> bool:
        """Whether the gang got past its reservation: a member of it is seated (bound, or swapped in and
        on its way). Taking its room back then means evicting it whole: giving its placeholders back
        would leave the members it released running without it."""
        return any(p.is_seated(m) for m in self.members)

    def nodes_in_flight(self) -> set[str]:
        """Nodes one of its members, released by a nominated swap, is on its way to."""
        return {node for m in self.members if p.is_in_flight(m) and (node := p.nominated_node(m))}

    def first_placement(self) -> float | None:
        placed = [t for ph in self.placeholders if (t := p.scheduled_at(ph)) is not None]
        return min(placed, default=None)

    def reservation_deadline(self) -> float | None:
        """placeholderTimeoutInSeconds counts from the first placeholder's allocation (YuniKorn's rule),
        or from the reservation's start while none is placed, so an unplaceable gang also times out."""
        assert self.spec is not None
        first = self.record.first_allocated or self.first_placement() or self.record.reservation_started
        return None if first is None else first + self.spec.policy.timeout_s

    def pending_deadline(self) -> float | None:
        """When a pending application times out: a Strict retry counts from its first attempt, one
        waiting first in its admission queue from when it became first; whichever comes sooner."""
        assert self.spec is not None
        retrying = self.reservation_deadline() if self.record.retry_after is not None else None
        queued = self.record.queued_since + self.spec.policy.timeout_s if self.record.queued_since is not None else None
        return min((d for d in (retrying, queued) if d is not None), default=None)


def queue_of(app: Application) -> str | None:
    """The queue the gang's own dialect puts it in: a Volcano gang's PodGroup `spec.queue` (Volcano's
    `default` when it names none), to be matched with Volcano's Queue of that name. None for every
    other gang, which admission queues by `Application.queue` (YuniKorn's queue label or annotation,
    or the ai-scheduler Pool it names, else the namespace)."""
    if app.pod_group is None:
        return None
    api = pod_group_api(app.members)
    return None if api is None else api.queue(app.pod_group)
