"""What should happen to one application now: a pure function from the application's pods (as the
cluster shows them) and the clock to a plan of API writes. It never calls the API, so every rule here
is unit-tested with plain dicts and a fake clock.

The application's progress lives in the cluster: its pods, its placeholders, and three annotations on
the originator (state, reservation start, first allocation). A restarted or newly elected controller
therefore computes the same plan the last one would have, and continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects import Dialect, dialect_of, gang_annotations
from yuniplace.gang.placeholders import placeholder_name, placeholder_pod
from yuniplace.gang.resources import format_quantity, pod_requests, quantities, shortfalls
from yuniplace.gang.state import HOLDS_PLACEHOLDERS, TERMINAL, AppState, allowed
from yuniplace.gang.taskgroups import GangSpec, InvalidGang, Limits, Mode, Style, check_member, parse_gang, style_of

Pod = p.Pod
FIRST_ALLOCATED = "yuniplace.io/first-allocated"
RESYNC_S = 60.0
IN_FLIGHT_RECHECK_S = 2.0
MAX_STRICT_BACKOFF_S = 300.0
# kube-scheduler's verdict on a pod it could place nowhere.
UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True)
class Settings:
    limits: Limits = Limits()
    placeholder_image: str = "registry.k8s.io/pause:3.10"
    member_events: bool = True  # a PlaceholderSwapped event on every member (one write each)
    schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS  # pods of other schedulers are not ours
    always_nominate: bool = False  # nominate every swapped member, contended or not (one write more each)
    strict_backoff_s: float = 10.0  # Strict mode: first wait before reserving again, doubled each attempt


@dataclass(frozen=True)
class Granted:
    """Admission lets the application reserve; `warning` says why that may not end well."""

    warning: str | None = None


@dataclass(frozen=True)
class Waiting:
    """Admission holds the application back; `announce` when the reason is news worth an event."""

    message: str
    announce: bool = True


@dataclass(frozen=True)
class Event:
    pod: Pod
    reason: str
    note: str
    warning: bool = False


@dataclass(frozen=True)
class Swap:
    """Real pod `member` takes the room of `placeholder` on `node` (placeholder None: already gone)."""

    member: Pod
    placeholder: Pod | None
    node: str
    group: str


@dataclass(frozen=True)
class Failure:
    pod: Pod
    reason: str
    message: str


@dataclass
class Plan:
    key: p.AppKey
    state: AppState
    originator: Pod | None = None
    annotate: dict[str, str] = field(default_factory=dict)
    create: list[Pod] = field(default_factory=list)
    delete: list[Pod] = field(default_factory=list)
    swaps: list[Swap] = field(default_factory=list)
    ungate: list[Pod] = field(default_factory=list)
    fail: list[Failure] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after_s: float | None = None
    forget: bool = False  # nothing of the application is left to watch over
    spec: GangSpec | None = None
    pod_group_status: dict[str, Any] | None = None  # a PodGroup's status, when it must change

    def writes(self) -> int:
        return (
            bool(self.annotate)
            + len(self.create)
            + len(self.delete)
            + 3 * len(self.swaps)
            + len(self.ungate)
            + len(self.fail)
        )


@dataclass(frozen=True)
class AppView:
    """One application's pods, split by role."""

    key: p.AppKey
    members: list[Pod]  # real pods (everything that is not a placeholder), oldest first
    placeholders: list[Pod]
    pod_group: Mapping[str, Any] | None = None  # the scheduler-plugins PodGroup named by the members

    @classmethod
    def of(cls, key: p.AppKey, pods: Sequence[Pod], pod_group: Mapping[str, Any] | None = None) -> AppView:
        live = sorted(pods, key=lambda pod: (p.created_at(pod), p.name(pod)))
        return cls(
            key,
            [pod for pod in live if not p.is_placeholder(pod)],
            [pod for pod in live if p.is_placeholder(pod)],
            pod_group,
        )

    @property
    def originator(self) -> Pod | None:
        """The pod whose task groups define the gang: the one already carrying the application's
        state, else the oldest live pod with task groups (normally the Spark driver). Pods of a Job
        share a creation second, so "oldest" alone could change its mind as the others appear."""
        candidates = [pod for pod in self.members if p.carries_task_groups(pod) and not p.is_deleting(pod)]
        chosen = next((pod for pod in candidates if keys.STATE in p.annotations(pod)), None)
        chosen = chosen or (candidates[0] if candidates else None)
        if chosen is not None and self.pod_group is None and dialect_of(chosen) == Dialect.POD_GROUP:
            return None  # the gang is described by a PodGroup not seen (yet)
        return chosen


def gang_spec(view: AppView, limits: Limits) -> GangSpec:
    """The gang the application's originator describes, in whichever dialect it is written."""
    assert view.originator is not None
    return parse_gang(gang_annotations(view.originator, view.pod_group), limits)


def _gated_members(view: AppView) -> list[Pod]:
    return [m for m in view.members if p.is_gated(m) and not p.is_terminal(m) and not p.is_deleting(m)]


def _live_placeholders(view: AppView) -> list[Pod]:
    return [ph for ph in view.placeholders if not p.is_deleting(ph)]


def _release_everything(plan: Plan, view: AppView, *, failure: tuple[str, str] | None = None) -> None:
    """Remove every placeholder; ungate every gated member, or fail it with (reason, message).
    A member the plan has already decided about (no group, unknown group) keeps that decision."""
    plan.delete += [ph for ph in _live_placeholders(view) if ph not in plan.delete]
    decided = {p.uid(m) for m in plan.ungate} | {p.uid(f.pod) for f in plan.fail}
    for member in _gated_members(view):
        if p.uid(member) in decided:
            continue
        if failure is None:
            plan.ungate.append(member)
        else:
            plan.fail.append(Failure(member, *failure))


def _deadline(originator: Pod, view: AppView, timeout_s: int) -> float | None:
    """placeholderTimeoutInSeconds counts from the first placeholder's allocation (YuniKorn's rule),
    or from the reservation's start while none is placed, so an unplaceable gang also times out."""
    notes = p.annotations(originator)
    first = p.parse_time(notes.get(FIRST_ALLOCATED))
    if first is None:
        placed = [t for ph in view.placeholders if (t := p.scheduled_at(ph)) is not None]
        first = min(placed) if placed else p.parse_time(notes.get(keys.RESERVATION_STARTED))
    return None if first is None else first + timeout_s


def plan_application(view: AppView, now: float, settings: Settings = Settings(),
                     nodes_in_flight: frozenset[str] = frozenset(), ticket: Granted | Waiting | None = None,
                     peers: Mapping[str, AppState | None] | None = None) -> Plan:
    """`nodes_in_flight`: nodes where a member of any application, released by a nominated swap,
    waits to be bound (see _plan_swaps). `ticket`: admission's decision, for an application about to
    reserve (None: admission is off). `peers`: the state of every other application of its gang
    group ("namespace/app-id" -> state, None for one not seen)."""
    originator = view.originator
    if originator is None:
        return _plan_without_originator(view, now, settings)
    current = AppState.parse(p.annotations(originator).get(keys.STATE))
    plan = Plan(view.key, current, originator)
    try:
        spec = gang_spec(view, settings.limits)
    except InvalidGang as error:
        _plan_invalid(plan, view, current, style_of(p.annotations(originator), settings.limits), str(error))
        return _finish(plan, current, view)
    plan.spec = spec

    if p.is_terminal(originator) or current in TERMINAL:
        # The application is over: nothing to reserve any more; late members run or fail as it did.
        plan.state = current if current in TERMINAL else AppState.COMPLETED
        failure = None
        if plan.state == AppState.FAILED:
            failure = ("ApplicationFailed", f"application {view.key.app_id} has failed; see the events of pod {p.name(originator)}")
        _release_everything(plan, view, failure=failure)
        return _finish(plan, current, view)

    members = _check_members(plan, view, spec)
    if current in (AppState.PENDING, AppState.RESERVING):
        _plan_reservation(plan, view, spec, members, current, now, settings, nodes_in_flight, ticket, peers or {})
    elif current in (AppState.RESERVED, AppState.RUNNING):
        if current == AppState.RUNNING or not _held_by_group(plan, view, spec, now, peers or {}):
            _plan_swaps(plan, view, spec, members, now, settings, nodes_in_flight)
    else:  # RESUMING: normal scheduling for everyone
        _release_everything(plan, view)
    return _finish(plan, current, view)


def _held_by_group(plan: Plan, view: AppView, spec: GangSpec, now: float, peers: Mapping[str, AppState | None]) -> bool:
    """A gang group swaps all-or-nothing: an application whose placeholders are all placed waits for
    every other application of the group to be reserved too, and follows any of them that fails or
    falls back. True while this application must not swap."""
    if not peers:
        return False
    gave_up = sorted(ref for ref, state in peers.items() if state in (AppState.FAILED, AppState.RESUMING))
    if gave_up:
        _plan_timeout(plan, view, spec, f"gang group application(s) {', '.join(gave_up)} could not be reserved")
        return True
    waiting = sorted(ref for ref, state in peers.items() if state not in (AppState.RESERVED, AppState.RUNNING, AppState.COMPLETED))
    if not waiting:
        return False
    originator = plan.originator
    assert originator is not None
    deadline = _deadline(originator, view, spec.policy.timeout_s)
    if deadline is not None and now >= deadline:
        _plan_timeout(plan, view, spec, f"gang group application(s) {', '.join(waiting)} still not reserved after {spec.policy.timeout_s}s")
        return True
    if plan.state != AppState.RESERVED or AppState.parse(p.annotations(originator).get(keys.STATE)) != AppState.RESERVED:
        plan.events.append(Event(originator, "GangGroupWaiting", f"reserved; waiting for the rest of its gang group: {', '.join(waiting)}"))
    if deadline is not None:
        plan.requeue_after_s = max(0.0, deadline - now)
    return True


def _finish(plan: Plan, current: AppState, view: AppView | None = None) -> Plan:
    if view is not None and view.pod_group is not None:
        plan.pod_group_status = _pod_group_status(view, plan)
    if not allowed(current, plan.state):
        raise AssertionError(f"{plan.key}: transition {current.value} -> {plan.state.value} is not in the table")
    if plan.state != current and plan.originator is not None:
        plan.annotate[keys.STATE] = plan.state.value
    if plan.requeue_after_s is None and plan.state not in TERMINAL:
        plan.requeue_after_s = RESYNC_S
    return plan


def _plan_without_originator(view: AppView, now: float, settings: Settings) -> Plan:
    """Members whose task groups have not appeared (yet): wait for an originator as long as the
    default timeout, then let them run normally rather than hold them forever."""
    plan = Plan(view.key, AppState.PENDING)
    gated = _gated_members(view)
    # Placeholders without a live originator are garbage collected with it; deleting them here as
    # well covers an originator removed without cascading deletion.
    plan.delete += _live_placeholders(view)
    if not gated:
        plan.forget = not view.placeholders
        plan.state = AppState.COMPLETED if plan.forget else AppState.PENDING
        return plan
    oldest = min(p.created_at(m) for m in gated)
    expires = oldest + settings.limits.default_timeout_s
    if now < expires:
        plan.requeue_after_s = expires - now
        return plan
    for member in gated:
        plan.ungate.append(member)
        plan.events.append(
            Event(
                member,
                "GangSchedulingFailed",
                f"no pod of application {view.key.app_id} defines {keys.TASK_GROUPS} after "
                f"{settings.limits.default_timeout_s}s; scheduling this pod normally",
                warning=True,
            )
        )
    return plan


def _plan_invalid(plan: Plan, view: AppView, current: AppState, style: Style, problem: str) -> None:
    failure = ("TaskGroupsError", f"invalid gang annotations: {problem}")
    if current in TERMINAL or current == AppState.RESUMING:
        _release_everything(plan, view, failure=failure if current == AppState.FAILED else None)
        return
    assert plan.originator is not None
    outcome = "failing the application (Hard style)" if style == Style.HARD else "scheduling its pods normally (Soft style)"
    plan.events.append(Event(plan.originator, "TaskGroupsError", f"invalid gang annotations: {problem}; {outcome}", warning=True))
    if style == Style.HARD:
        plan.state = AppState.FAILED
        _release_everything(plan, view, failure=failure)
    else:
        plan.state = AppState.RESUMING
        _release_everything(plan, view)


def _check_members(plan: Plan, view: AppView, spec: GangSpec) -> dict[str, list[Pod]]:
    """Gated members by group. A member naming no group is not part of the gang and runs normally;
    one naming an unknown group gets a TaskGroupsError and follows the application's style."""
    by_group: dict[str, list[Pod]] = {g.name: [] for g in spec.groups}
    for member in _gated_members(view):
        group = p.task_group_name(member)
        if group is None:
            plan.ungate.append(member)
            continue
        try:
            check_member(spec, group)
        except InvalidGang as error:
            hard = spec.policy.style == Style.HARD
            plan.events.append(Event(member, "TaskGroupsError", f"{error}; " + ("failing this pod" if hard else "scheduling it normally"), warning=True))
            if hard:
                plan.fail.append(Failure(member, "TaskGroupsError", str(error)))
            else:
                plan.ungate.append(member)
            continue
        by_group[group].append(member)
    return by_group


def _is_unschedulable(pod: Pod) -> str | None:
    """kube-scheduler's message when it found no node for the pod, else None."""
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" and condition.get("reason") == UNSCHEDULABLE:
            return str(condition.get("message") or "no node fits it")
    return None


def _plan_start(plan: Plan, view: AppView, spec: GangSpec, now: float, ticket: Granted | Waiting | None) -> bool:
    """A pending application: wait out a Strict backoff or admission, else begin reserving.
    True when the reservation begins now."""
    originator = plan.originator
    assert originator is not None
    notes = p.annotations(originator)
    retry = p.parse_time(notes.get(keys.RETRY_AFTER))
    deadline = _deadline(originator, view, spec.policy.timeout_s) if retry is not None else None
    if deadline is not None and now >= deadline:
        _plan_timeout(plan, view, spec, f"no complete reservation after {notes.get(keys.ATTEMPTS, '0')} attempt(s) in {spec.policy.timeout_s}s")
        return False
    if retry is not None and now < retry:
        plan.requeue_after_s = retry - now
        return False
    if isinstance(ticket, Waiting):
        if ticket.announce:
            plan.events.append(Event(originator, "GangWaiting", ticket.message))
        if deadline is not None:
            plan.requeue_after_s = max(0.0, deadline - now)
        return False
    plan.state = AppState.RESERVING
    if isinstance(ticket, Granted) and ticket.warning:
        plan.events.append(Event(originator, "GangExceedsCapacity", ticket.warning, warning=True))
    if retry is not None:
        plan.events.append(Event(originator, "CreatingPlaceholders",
                                 f"attempt {int(notes.get(keys.ATTEMPTS, '1')) + 1}: creating {spec.min_members} placeholder pods again"))
        return True
    plan.annotate[keys.RESERVATION_STARTED] = p.format_time(now)
    groups = ", ".join(f"{g.name}×{g.min_member}" for g in spec.groups)
    plan.events.append(
        Event(
            originator,
            "TaskGroupMatch",
            f"application {view.key.app_id}: gang of {spec.min_members} ({groups}), "
            f"timeout {spec.policy.timeout_s}s, {spec.policy.style.value} style, {spec.mode.value} mode",
        )
    )
    plan.events.append(Event(originator, "CreatingPlaceholders", f"creating {spec.min_members} placeholder pods"))
    plan.events += [Event(originator, "TaskGroupWarning", w, warning=True) for w in spec.warnings]
    return True


def _plan_reservation(
    plan: Plan,
    view: AppView,
    spec: GangSpec,
    members: dict[str, list[Pod]],
    current: AppState,
    now: float,
    settings: Settings,
    nodes_in_flight: frozenset[str],
    ticket: Granted | Waiting | None = None,
    peers: Mapping[str, AppState | None] | None = None,
) -> None:
    originator = plan.originator
    assert originator is not None
    notes = p.annotations(originator)
    gave_up = sorted(ref for ref, state in (peers or {}).items() if state in (AppState.FAILED, AppState.RESUMING))
    if gave_up:
        _plan_timeout(plan, view, spec, f"gang group application(s) {', '.join(gave_up)} could not be reserved")
        return
    if current == AppState.PENDING or keys.RESERVATION_STARTED not in notes:
        if not _plan_start(plan, view, spec, now, ticket):
            return

    existing = {p.name(ph): ph for ph in view.placeholders}
    placed = 0
    unplaceable: list[tuple[Pod, str]] = []
    for group in spec.groups:
        for index in range(group.min_member):
            found = existing.get(placeholder_name(view.key.app_id, group.name, index))
            if found is None:
                plan.create.append(
                    placeholder_pod(
                        app_id=view.key.app_id,
                        group=group,
                        index=index,
                        originator=originator,
                        image=settings.placeholder_image,
                    )
                )
            elif p.is_terminal(found) and not p.is_deleting(found):
                plan.delete.append(found)  # evicted or failed: recreated once it is gone
            elif p.node_name(found) and not p.is_deleting(found):
                placed += 1
            elif not p.is_deleting(found) and (why := _is_unschedulable(found)) is not None:
                unplaceable.append((found, why))

    if placed == spec.min_members:
        first = min((t for ph in view.placeholders if (t := p.scheduled_at(ph)) is not None), default=now)
        plan.state = AppState.RESERVED
        plan.annotate[FIRST_ALLOCATED] = p.format_time(first)
        for group in spec.groups:
            nodes = {p.node_name(ph) for ph in view.placeholders if p.task_group_name(ph) == group.name}
            plan.events.append(
                Event(originator, "PlaceholderAllocated",
                      f"task group {group.name}: {group.min_member}/{group.min_member} placeholders placed on {len(nodes)} node(s)")
            )
        plan.events.append(Event(originator, "GangReservationComplete", f"all {placed} placeholders are placed; swapping the real pods in"))
        if not _held_by_group(plan, view, spec, now, peers or {}):
            _plan_swaps(plan, view, spec, members, now, settings, nodes_in_flight)
        return

    deadline = _deadline(originator, view, spec.policy.timeout_s)
    if deadline is not None and now >= deadline:
        _plan_timeout(plan, view, spec, f"{placed}/{spec.min_members} placeholders placed after {spec.policy.timeout_s}s")
        return
    if spec.mode == Mode.STRICT and unplaceable:
        _plan_strict_release(plan, view, spec, placed, unplaceable[0], now, settings)
        return
    if deadline is not None:
        plan.requeue_after_s = max(0.0, deadline - now)


def _plan_strict_release(plan: Plan, view: AppView, spec: GangSpec, placed: int, unplaceable: tuple[Pod, str],
                         now: float, settings: Settings) -> None:
    """Strict mode: a placeholder kube-scheduler cannot place means the gang will not fit now, so
    the room the others hold is given back at once, and the gang tries again after a backoff."""
    originator = plan.originator
    assert originator is not None
    attempts = int(p.annotations(originator).get(keys.ATTEMPTS, "0") or 0) + 1
    backoff = min(MAX_STRICT_BACKOFF_S, settings.strict_backoff_s * 2 ** (attempts - 1))
    plan.state = AppState.PENDING
    plan.delete += [ph for ph in _live_placeholders(view) if ph not in plan.delete]
    plan.annotate[keys.ATTEMPTS] = str(attempts)
    plan.annotate[keys.RETRY_AFTER] = p.format_time(now + backoff)
    pod, why = unplaceable
    plan.events.append(
        Event(originator, "GangReservationReleased",
              f"placeholder {p.name(pod)} cannot be placed ({why}); Strict mode releases the partial reservation "
              f"({placed}/{spec.min_members} placed) and tries again in {backoff:.0f}s (attempt {attempts})", warning=True)
    )
    plan.requeue_after_s = backoff


def _plan_timeout(plan: Plan, view: AppView, spec: GangSpec, summary: str) -> None:
    originator = plan.originator
    assert originator is not None
    plan.events.append(Event(originator, "PlaceholderTimeOut", f"gang reservation timed out: {summary}", warning=True))
    if spec.policy.style == Style.HARD:
        message = f"gang reservation timed out ({summary}); Hard style fails the application"
        plan.state = AppState.FAILED
        plan.events.append(Event(originator, "ApplicationFailed", message, warning=True))
        _release_everything(plan, view, failure=("ResourceReservationTimeout", message))
    else:
        plan.state = AppState.RESUMING
        plan.events.append(
            Event(
                originator,
                "GangSchedulingFailed",
                f"gang reservation timed out ({summary}); Soft style: placeholders removed, pods scheduled normally",
                warning=True,
            )
        )
        _release_everything(plan, view)


POD_GROUP_COUNTS = ("scheduled", "running", "succeeded", "failed")


def _pod_group_status(view: AppView, plan: Plan) -> dict[str, Any] | None:
    """The PodGroup's status as scheduler-plugins reports it (phase and member counts), when it
    differs from what the PodGroup shows."""
    assert view.pod_group is not None
    members = [m for m in view.members if p.task_group_name(m) is not None]
    counts = {
        "scheduled": sum(1 for m in members if p.node_name(m)),
        "running": sum(1 for m in members if p.phase(m) == "Running"),
        "succeeded": sum(1 for m in members if p.phase(m) == "Succeeded"),
        "failed": sum(1 for m in members if p.phase(m) == "Failed"),
    }
    wanted = plan.spec.min_members if plan.spec is not None else 1
    if plan.state == AppState.FAILED:
        phase = "Failed"
    elif counts["succeeded"] >= wanted:
        phase = "Finished"
    elif counts["running"] >= wanted:
        phase = "Running"
    elif counts["scheduled"] >= wanted:
        phase = "Scheduled"
    elif plan.state in (AppState.RESERVED, AppState.RUNNING, AppState.RESUMING) or counts["scheduled"]:
        phase = "Scheduling"
    elif plan.state == AppState.RESERVING:
        phase = "PreScheduling"
    else:
        phase = "Pending"
    status: dict[str, Any] = {"phase": phase, **counts}
    started = plan.annotate.get(keys.RESERVATION_STARTED) or (p.annotations(plan.originator).get(keys.RESERVATION_STARTED) if plan.originator else None)
    if started:
        status["scheduleStartTime"] = started
    shown = view.pod_group.get("status") or {}
    return None if all(shown.get(k, 0 if k in POD_GROUP_COUNTS else None) == v for k, v in status.items()) else status


def _plan_swaps(
    plan: Plan,
    view: AppView,
    spec: GangSpec,
    members: dict[str, list[Pod]],
    now: float,
    settings: Settings,
    nodes_in_flight: frozenset[str] = frozenset(),
) -> None:
    """Match gated members to placed placeholders of their group, one each; members beyond the
    reserved count run normally. A member already nominated to a node (a swap interrupted by a
    restart) keeps that node and the placeholder there.

    kube-scheduler counts a nominated pod as taking room on its node for every other pod of equal
    priority, itself excepted. While a member swapped earlier is still waiting to be bound on node N,
    nominating another member to N (whose placeholder is still there) would make N look full to the
    first one, and it would move elsewhere. So a node with a member in flight takes no new swap until
    that member is bound: the member is kept for the next reconcile, which its binding triggers.
    Members of other applications count too (`nodes_in_flight`): two gangs swapping onto one node
    make each other's members move just the same."""
    originator = plan.originator
    assert originator is not None
    live = _live_placeholders(view)
    claimed: set[str] = set()
    in_flight = set(nodes_in_flight) | {
        node
        for m in view.members
        if (node := p.nominated_node(m)) and keys.SWAP_PLACEHOLDER in p.annotations(m)
        and not p.is_gated(m) and not p.node_name(m) and not p.is_terminal(m)
    }
    for group in spec.groups:
        placed = [ph for ph in live if p.task_group_name(ph) == group.name and p.node_name(ph)]
        room = quantities(group.min_resource)
        pending: list[Pod] = []
        for member in members[group.name]:
            # A gated member naming its placeholder is a swap interrupted by a restart: it resumes
            # with that placeholder (gone already if step 2 had run) and no other.
            taken = p.annotations(member).get(keys.SWAP_PLACEHOLDER)
            node = p.nominated_node(member)
            if taken is None or node is None:
                pending.append(member)
                continue
            resumed = next((ph for ph in placed if p.name(ph) == taken and p.uid(ph) not in claimed), None)
            if resumed is not None:
                claimed.add(p.uid(resumed))
            plan.swaps.append(Swap(member, resumed, node, group.name))
        free = [ph for ph in placed if p.uid(ph) not in claimed]
        for member in pending:
            needed = pod_requests(member.get("spec", {}))
            short = shortfalls(needed, room)
            if short:
                detail = ", ".join(f"{name} {format_quantity(need)} > {format_quantity(have)}" for name, need, have in short)
                plan.events.append(
                    Event(
                        member,
                        "TaskGroupResourceMismatch",
                        f"requests more than task group {group.name}'s minResource ({detail}); "
                        "releasing one of its placeholders and scheduling this pod normally",
                        warning=True,
                    )
                )
                if free:
                    released = free.pop()
                    claimed.add(p.uid(released))
                    plan.delete.append(released)
                plan.ungate.append(member)
            elif free:
                chosen = next((ph for ph in free if p.node_name(ph) not in in_flight), None)
                if chosen is None:
                    plan.requeue_after_s = IN_FLIGHT_RECHECK_S  # its binding requeues it sooner
                    continue
                free.remove(chosen)
                claimed.add(p.uid(chosen))
                plan.swaps.append(Swap(member, chosen, str(p.node_name(chosen)), group.name))
            else:
                plan.ungate.append(member)

    if p.node_name(originator) and plan.state == AppState.RESERVED:
        plan.state = AppState.RUNNING
    unused = [ph for ph in live if p.uid(ph) not in claimed]
    if unused and plan.requeue_after_s != IN_FLIGHT_RECHECK_S:
        deadline = _deadline(originator, view, spec.policy.timeout_s)
        if deadline is not None and now >= deadline:
            plan.delete += unused
            plan.events.append(
                Event(originator, "PlaceholderTimeOut", f"releasing {len(unused)} unused placeholders after {spec.policy.timeout_s}s")
            )
        elif deadline is not None:
            plan.requeue_after_s = max(0.0, deadline - now)

