"""What must hold of every gang however the cluster is disturbed, checked over what a campaign observed:
each invariant is a pure function from the observed pods, events and gangs to the violations it finds,
so each is unit-tested with plain data and shown able to fail.

Times are seconds since the epoch on the observer's clock (when it saw a change), except the times
the controller writes into its record, which it takes from the same host's clock. Every bound allows
`grace_s` for what a fault delays (a controller failing over, an API server coming back).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from yuniplace.controller.lifecycle.context import LOSS_GRACE_S
from yuniplace.controller.lifecycle.policies.onloss import MAX_RESTART_BACKOFF_S
from yuniplace.controller.plan import Settings
from yuniplace.gang.onloss import LossPolicy
from yuniplace.runtime.events import EVICTION_REFUSED, FAILURE_REASONS, Reason

# The invariants, by the name a report gives them.
PARTIAL_GANG = "gang below minMember"
PLACEHOLDER_OUTLIVED = "placeholder outlived"
GATED_PAST_DEADLINE = "gated past deadline"
NOT_TERMINAL = "application not terminal"
DUPLICATE_PLACEHOLDER = "duplicate placeholder"
PARTIAL_EVICTION = "partial eviction"
LOST_MEMBER = "lost member"
SHORT_TOO_LONG = "restarting gang short too long"
UNREPORTED_LOSS = "loss not reported"
RESTARTED_PAST_LIMIT = "restarted past its limit"
INVARIANTS = (
    PARTIAL_GANG,
    PLACEHOLDER_OUTLIVED,
    GATED_PAST_DEADLINE,
    NOT_TERMINAL,
    DUPLICATE_PLACEHOLDER,
    PARTIAL_EVICTION,
    LOST_MEMBER,
    SHORT_TOO_LONG,
    UNREPORTED_LOSS,
    RESTARTED_PAST_LIMIT,
)

RESTART_BACKOFF_S = Settings().restart_backoff_s
ENDED_STATES = frozenset({"Completed", "Failed", "Resuming"})  # nothing is reserved any more
TERMINAL_STATES = frozenset({"Completed", "Failed"})
FELL_BACK = "Resuming"
# Kubernetes' own reasons for deleting a pod (its DisruptionTarget condition), other than an eviction.
NODE_DISRUPTIONS = frozenset({"DeletionByPodGC", "DeletionByTaintManager"})
EVICTED = "EvictionByEvictionAPI"
GANG_PREEMPTED = Reason.GANG_PREEMPTED.value
# The events that say why a gang was evicted whole: a reclaim, or what its policy does on a lost member.
GANG_EVICTED = frozenset(
    r.value for r in (Reason.GANG_PREEMPTED, Reason.GANG_RESTARTING, Reason.GANG_RELEASED, Reason.APPLICATION_FAILED)
)
GANG_DEGRADED = Reason.GANG_DEGRADED.value
# What a loss rule's eviction of a whole gang says, each counted against its restart limit (an eviction
# the API refused says so under the same reason, and is no restart).
RESTART_ANSWERS = frozenset({Reason.GANG_RESTARTING.value, Reason.GANG_RELEASED.value})


@dataclass
class PodTrace:
    """One pod (one UID) as the observer saw it change."""

    uid: str
    namespace: str
    name: str
    app: str  # "namespace/app-id"
    placeholder: bool
    group: str | None = None
    first_seen: float = 0.0
    gated_since: float | None = None  # first seen carrying the gang gate
    ungated_at: float | None = None  # first seen without it, having carried it
    bound_at: float | None = None
    node: str | None = None
    running_at: float | None = None  # first seen Running
    ready_at: float | None = None  # first seen Ready
    terminal_at: float | None = None
    phase: str = "Pending"
    reason: str | None = None  # status.reason of a pod that failed
    deleting_at: float | None = None
    gone_at: float | None = None
    disruption: str | None = None  # the reason of its DisruptionTarget condition
    claims: str | None = None  # the placeholder whose place a member takes
    states: list[tuple[float, str]] = field(default_factory=list)  # its yuniplace.io/state as it changed
    # Every value seen of its record's reservation start, in order: a gang given back (reclaimed) and
    # reserved again by the same originator begins a new reservation, with a clock of its own.
    reservation_starts: list[float] = field(default_factory=list)
    queued_since: float | None = None  # the last value seen of its record's queue clock

    @property
    def reservation_started(self) -> float | None:
        """When its first reservation began, by its record."""
        return self.reservation_starts[0] if self.reservation_starts else None

    @property
    def ended_at(self) -> float | None:
        """When it stopped holding anything: terminal, being deleted or gone."""
        return min((t for t in (self.terminal_at, self.deleting_at, self.gone_at) if t is not None), default=None)

    @property
    def unheld_at(self) -> float | None:
        """When it stopped waiting at the gate: released, or ended."""
        return min((t for t in (self.ungated_at, self.ended_at) if t is not None), default=None)


@dataclass(frozen=True)
class Gang:
    """What the campaign asked for."""

    app: str
    style: str  # Soft or Hard
    timeout_s: float
    groups: Mapping[str, int]  # minMember by task group
    originator: str | None = None  # the pod that carries the task groups, where only one does
    restarts_on_loss: bool = False  # it asks to be restarted whole when it loses a member
    on_loss: str | None = None  # what it asks on a lost member (restart, release, none), where it asks
    recovery_timeout_s: float = 60.0  # how long a `release` gang may stay below its minimum
    # How long a bound member may go without being Ready before it counts as lost, where the campaign
    # judges readiness (None: kwok's pods are Ready as soon as they run).
    ready_timeout_s: float | None = None
    restart_limit: int = LossPolicy().restart_limit  # restarts (or releases) for lost members, at most


@dataclass(frozen=True)
class EventSeen:
    reason: str
    namespace: str
    name: str  # of the object it regards
    uid: str
    at: float | None = None  # when it first happened, by its reporter's clock
    note: str = ""


@dataclass(frozen=True)
class Observed:
    pods: Mapping[str, PodTrace]  # by UID
    events: Sequence[EventSeen]
    gangs: Mapping[str, Gang]  # by application
    disturbed: Mapping[str, float]  # applications the campaign deleted (part of) on purpose, and when
    deleted_by_campaign: frozenset[str]  # UIDs of pods the campaign deleted
    now: float
    grace_s: float = 60.0
    default_timeout_s: float = 900.0  # the controller's, for members whose originator went away
    # When each node was in trouble (tainted NotReady or unreachable, or gone), by name: [since, until)
    # (until None: still). Without a view of the nodes, every node is taken to be well.
    node_troubles: Mapping[str, Sequence[tuple[float, float | None]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    invariant: str
    app: str
    objects: tuple[str, ...]  # the pods concerned, by name
    detail: str
    due: float  # when it should have held


# -- an application's history --------------------------------------------------------------------------


@dataclass(frozen=True)
class Incarnation:
    """One reservation story of an application, told by one originator's record: a Job whose pods were
    all evicted comes back with new pods, a new originator and a new story. A story begun while pods
    the last one let through live on is no new story but the last one told again (a timeout reset): it
    keeps the last one's clock and end."""

    originator: PodTrace | None
    started: float | None  # its reservation began (the first value its record showed)
    anchor: float | None  # its timeout counts from here: the first placement, else the start
    ended: float | None  # it fell back, failed, completed, or its originator went away


def _first_state(
    trace: PodTrace, states: frozenset[str], after: float | None = None, before: float | None = None
) -> float | None:
    """When the trace first entered one of `states` (within [after, before), when given)."""
    return next(
        (
            t
            for t, state in trace.states
            if state in states and (after is None or t >= after - 1.0) and (before is None or t < before - 1.0)
        ),
        None,
    )


def incarnations(pods: Iterable[PodTrace]) -> list[Incarnation]:
    """An application's reservation stories, oldest first: one for each reservation an originator
    began (a gang reserved again after a reclaim is a new story of the same originator); one without an
    originator's record yet is an incarnation without a start."""
    traces = list(pods)
    unrecorded: list[float | None] = [None]  # a state, but no record of a start yet
    beginnings = sorted(
        (
            (start, originator)
            for originator in traces
            if not originator.placeholder
            for start in (originator.reservation_starts or (unrecorded if originator.states else []))
        ),
        key=lambda begun: (begun[0] if begun[0] is not None else begun[1].first_seen, begun[1].first_seen),
    )
    placeholders = [t for t in traces if t.placeholder]
    stories: list[Incarnation] = []
    for index, (started, originator) in enumerate(beginnings):
        following = beginnings[index + 1][0] if index + 1 < len(beginnings) else None
        own = [
            ph
            for ph in placeholders
            if started is not None
            and ph.first_seen >= started - 1.0
            and (following is None or ph.first_seen < following - 1.0)
        ]
        placed = min((ph.bound_at for ph in own if ph.bound_at is not None), default=None)
        ended_state = _first_state(originator, ENDED_STATES, started, following)
        ended = [t for t in (ended_state, originator.ended_at) if t is not None]
        story = Incarnation(originator, started, placed or started, min(ended, default=None))
        if stories and started is not None and _let_through_before(traces, started):
            last = stories[-1]
            story = Incarnation(originator, started, last.anchor, last.ended or story.ended)
        stories.append(story)
    return stories or [Incarnation(None, None, None, None)]


def _let_through_before(traces: Iterable[PodTrace], moment: float) -> bool:
    """Whether a member released (or started) before `moment` still lived at it."""
    return any(
        not t.placeholder
        and t.first_seen < moment - 1.0
        and any(at is not None and at < moment for at in (t.ungated_at, t.bound_at))
        and (t.ended_at is None or t.ended_at > moment)
        for t in traces
    )


def incarnation_of(stories: Sequence[Incarnation], first_seen: float) -> Incarnation:
    """The story a pod seen first at `first_seen` belongs to: the last one begun by then."""
    begun = [s for s in stories if s.started is not None and s.started - 1.0 <= first_seen]
    return begun[-1] if begun else stories[-1]


def by_app(observed: Observed) -> dict[str, list[PodTrace]]:
    apps: dict[str, list[PodTrace]] = defaultdict(list)
    for trace in observed.pods.values():
        apps[trace.app].append(trace)
    return apps


def _members(traces: Iterable[PodTrace]) -> list[PodTrace]:
    return [t for t in traces if not t.placeholder]


def _fell_back(traces: Iterable[PodTrace]) -> bool:
    return any(state == FELL_BACK for t in traces for _, state in t.states)


def _originator_gone(traces: Sequence[PodTrace], gang: Gang) -> float | None:
    """When the one pod carrying the gang's task groups went away (gangs with such a pod only)."""
    if gang.originator is None:
        return None
    named = [t for t in traces if t.name == gang.originator and not t.placeholder]
    ends = [t.deleting_at or t.gone_at for t in named]
    return None if not named or any(e is None for e in ends) else min(e for e in ends if e is not None)


# -- 1. no gang runs below its minimum ---------------------------------------------------------------


def partial_gangs(observed: Observed) -> list[Violation]:
    """A gang whose first member started must have minMember members of every group started by its
    timeout plus the grace, unless every member that started had ended by then (evicted whole, say):
    else it ran partly. A gang that fell back under Soft may; one the campaign took apart is not
    judged."""
    found = []
    for app, traces in by_app(observed).items():
        gang = observed.gangs.get(app)
        if gang is None or app in observed.disturbed or _fell_back(traces):
            continue
        members = _members(traces)
        started = [m.bound_at for m in members if m.bound_at is not None]
        if not started:
            continue
        due = min(started) + gang.timeout_s + observed.grace_s
        if observed.now < due:
            continue
        if all((m.ended_at or observed.now) < due for m in members if m.bound_at is not None):
            continue
        short = {
            group: sum(1 for m in members if m.group == group and m.bound_at is not None and m.bound_at <= due)
            for group, minimum in gang.groups.items()
        }
        missing = {g: n for g, n in short.items() if n < gang.groups[g]}
        if missing:
            running = tuple(sorted(m.name for m in members if m.bound_at is not None and m.bound_at <= due))
            detail = ", ".join(f"{g}: {n} of {gang.groups[g]} started" for g, n in sorted(missing.items()))
            found.append(Violation(PARTIAL_GANG, app, running, detail, due))
    return found


# -- 2. no placeholder outlives its application or its timeout ---------------------------------------------


def _told(observed: Observed) -> Iterator[tuple[str, list[PodTrace], Gang, list[Incarnation], float | None]]:
    """Each streamed application with its pods, its gang, its reservation stories and when its only
    originator went (None while one lives)."""
    for app, traces in by_app(observed).items():
        gang = observed.gangs.get(app)
        if gang is not None:
            yield app, traces, gang, incarnations(traces), _originator_gone(traces, gang)


def outlived_placeholders(observed: Observed) -> list[Violation]:
    """Every placeholder is gone by the grace after its application ended (fell back, failed, completed,
    its originator went away) and after its timeout (from the first placement of its reservation)."""
    found = []
    for app, traces, gang, stories, gone in _told(observed):
        for ph in (t for t in traces if t.placeholder):
            story = incarnation_of(stories, ph.first_seen)
            bounds = [t for t in (story.ended, gone) if t is not None]
            anchor = story.anchor if story.anchor is not None else ph.first_seen
            bounds.append(anchor + gang.timeout_s)
            due = max(min(bounds), ph.first_seen) + observed.grace_s
            lived_until = ph.deleting_at or ph.gone_at or observed.now
            if lived_until > due:
                alive = "still there" if ph.deleting_at is None and ph.gone_at is None else "deleted"
                found.append(
                    Violation(
                        PLACEHOLDER_OUTLIVED,
                        app,
                        (ph.name,),
                        f"{alive} {lived_until - due + observed.grace_s:.0f}s after it was due to go "
                        f"(timeout {gang.timeout_s:.0f}s from {'its first placement' if story.anchor else 'creation'})",
                        due,
                    )
                )
    return found


# -- 3. no pod stays gated past its deadline --------------------------------------------------------------


def gated_past_deadline(observed: Observed) -> list[Violation]:
    """A member waits at the gate no longer than its application's deadline allows (plus the grace): its
    reservation's timeout, its timeout in the queue while first there, its application's end, or the
    controller's default timeout once the gang's only originator is gone. A member of an application
    waiting behind others in its queue has no deadline."""
    found = []
    for app, traces, gang, stories, gone in _told(observed):
        for member in _members(traces):
            if member.gated_since is None:
                continue
            story = incarnation_of(stories, member.first_seen)
            # Made after its story ended (its Job's pod for one evicted whole by a reclaim or a restart),
            # it is of the next story, not begun yet: it waits in its queue like a new gang.
            later = story.ended is not None and member.first_seen > story.ended
            bounds = [t for t in (story.ended,) if t is not None and not later]
            if gone is not None:
                bounds.append(gone + observed.default_timeout_s)
            if story.anchor is not None and not later:
                bounds.append(story.anchor + gang.timeout_s)
            else:
                queued = [
                    t.queued_since
                    for t in traces
                    if t.queued_since is not None
                    and not t.placeholder
                    and (not later or (story.ended is not None and t.first_seen > story.ended))
                ]
                if queued:
                    bounds.append(max(queued) + gang.timeout_s)
            if not bounds:
                continue
            due = max(min(bounds), member.gated_since) + observed.grace_s
            held_until = member.unheld_at or observed.now
            if held_until > due:
                found.append(
                    Violation(
                        GATED_PAST_DEADLINE,
                        app,
                        (member.name,),
                        f"gated {held_until - member.gated_since:.0f}s, {held_until - due + observed.grace_s:.0f}s "
                        "past its deadline" + ("" if member.unheld_at else " and still gated"),
                        due,
                    )
                )
    return found


# -- 4. no application stays in a non-terminal state once its pods are done ---------------------------------


def not_terminal(observed: Observed) -> list[Violation]:
    """Once every member of an application is terminal or gone, its originator (still there) reads
    Completed or Failed by the grace after."""
    found = []
    for app, traces in by_app(observed).items():
        if app not in observed.gangs:
            continue
        members = _members(traces)
        ends = [m.ended_at for m in members]
        if not members or any(e is None for e in ends):
            continue
        done = max(e for e in ends if e is not None)
        due = done + observed.grace_s
        for originator in (m for m in members if m.states and m.deleting_at is None and m.gone_at is None):
            state = originator.states[-1][1]
            if state not in TERMINAL_STATES and observed.now > due:
                found.append(
                    Violation(
                        NOT_TERMINAL,
                        app,
                        (originator.name,),
                        f"still {state} {observed.now - done:.0f}s after its last pod ended",
                        due,
                    )
                )
    return found


# -- 5. no seat is held twice ---------------------------------------------------------------------------------


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


def duplicate_placeholders(observed: Observed) -> list[Violation]:
    """One seat, one holder: never a placeholder alive beside a started member that took its place,
    nor more placeholders of a group alive at once than its minMember."""
    found = []
    for app, traces in by_app(observed).items():
        gang = observed.gangs.get(app)
        live = {
            ph.uid: (ph.first_seen, ph.deleting_at or ph.gone_at or observed.now) for ph in traces if ph.placeholder
        }
        placeholders = {ph.uid: ph for ph in traces if ph.placeholder}
        for member in _members(traces):
            if member.claims is None or member.bound_at is None:
                continue
            seated = (member.bound_at, member.ended_at or observed.now)
            for uid, interval in live.items():
                ph = placeholders[uid]
                if ph.name == member.claims and _overlap(seated, interval) > 0:
                    found.append(
                        Violation(
                            DUPLICATE_PLACEHOLDER,
                            app,
                            (ph.name, member.name),
                            f"placeholder alive beside the started member that took its place, "
                            f"{_overlap(seated, interval):.1f}s",
                            max(seated[0], interval[0]),
                        )
                    )
        if gang is None:
            continue
        for group, minimum in gang.groups.items():
            edges = sorted(
                [(live[ph.uid][0], 1, ph.name) for ph in placeholders.values() if ph.group == group]
                + [(live[ph.uid][1], -1, ph.name) for ph in placeholders.values() if ph.group == group],
                key=lambda edge: (edge[0], edge[1]),
            )
            alive: set[str] = set()
            for at, step, name in edges:
                if step > 0:
                    alive.add(name)
                    if len(alive) > minimum:
                        found.append(
                            Violation(
                                DUPLICATE_PLACEHOLDER,
                                app,
                                tuple(sorted(alive)),
                                f"{len(alive)} placeholders of group {group} alive at once, for {minimum} seats",
                                at,
                            )
                        )
                        break
                else:
                    alive.discard(name)
    return found


# -- 6. no gang is evicted partly --------------------------------------------------------------------------


def partial_evictions(observed: Observed) -> list[Violation]:
    """When a gang is evicted, every member running at the first eviction goes with it, by the grace."""
    found = []
    for app, traces in by_app(observed).items():
        members = _members(traces)
        evictions = [m.deleting_at or m.gone_at for m in members if m.disruption == EVICTED]
        first = min((t for t in evictions if t is not None), default=None)
        if first is None or observed.now < first + observed.grace_s:
            continue
        due = first + observed.grace_s
        running = [
            m for m in members if m.bound_at is not None and m.bound_at <= first and (m.ended_at or due + 1) > first
        ]
        kept = [m for m in running if (m.ended_at or observed.now) > due]
        if kept:
            found.append(
                Violation(
                    PARTIAL_EVICTION,
                    app,
                    tuple(sorted(m.name for m in kept)),
                    f"{len(kept)} of its {len(running)} running members stayed after the gang was evicted",
                    due,
                )
            )
    return found


# -- 7. no member is lost without a word -------------------------------------------------------------------


def lost_members(observed: Observed) -> list[Violation]:
    """A member the controller fails carries an event of the same reason; one it evicts, an event of its
    gang saying why (GangPreempted, GangRestarting, GangReleased, ApplicationFailed); and none is deleted
    by no one: every other deletion of a member still running is the campaign's, or Kubernetes' own for a
    node that went (its DisruptionTarget says so)."""
    on_pod: dict[tuple[str, str], set[str]] = defaultdict(set)
    preempted: set[tuple[str, str]] = set()
    for event in observed.events:
        on_pod[(event.namespace, event.name)].add(event.reason)
        if event.reason in GANG_EVICTED:
            preempted.add((event.namespace, event.name))
    found = []
    for app, traces in by_app(observed).items():
        members = _members(traces)
        names = {(m.namespace, m.name) for m in members}
        for member in members:
            key = (member.namespace, member.name)
            removed = member.deleting_at or member.gone_at
            if member.phase == "Failed" and member.reason in FAILURE_REASONS:
                if member.reason not in on_pod[key]:
                    found.append(
                        Violation(
                            LOST_MEMBER,
                            app,
                            (member.name,),
                            f"failed ({member.reason}) with no {member.reason} event on it",
                            member.terminal_at or observed.now,
                        )
                    )
                continue
            if removed is None or (member.terminal_at is not None and member.terminal_at <= removed):
                continue  # running still, or it had ended before it was removed
            if member.uid in observed.deleted_by_campaign or (
                app in observed.disturbed and observed.disturbed[app] <= removed + 1.0
            ):
                continue
            if member.disruption in NODE_DISRUPTIONS:
                continue
            if member.disruption == EVICTED:
                if not names & preempted:
                    found.append(
                        Violation(
                            LOST_MEMBER,
                            app,
                            (member.name,),
                            "evicted with no event on its gang saying why (GangPreempted, GangRestarting, ...)",
                            removed,
                        )
                    )
                continue
            found.append(
                Violation(
                    LOST_MEMBER,
                    app,
                    (member.name,),
                    f"deleted while {member.phase} by no one the campaign knows of"
                    + (f" (DisruptionTarget {member.disruption})" if member.disruption else ""),
                    removed,
                )
            )
    return found


# -- 8. a loss is answered by the gang's policy within its bound ----------------------------------------


def policy_of(gang: Gang) -> str | None:
    """What the gang asks on a lost member, where it asks."""
    return gang.on_loss or ("restart" if gang.restarts_on_loss else None)


def _restart_backoff_s(episode: int) -> float:
    """The least wait before a gang's `episode`th restart (the first follows its loss at once)."""
    return 0.0 if episode <= 1 else min(MAX_RESTART_BACKOFF_S, RESTART_BACKOFF_S * 2 ** (episode - 2))


def _minus(spans: list[tuple[float, float]], cut: tuple[float, float]) -> list[tuple[float, float]]:
    """`spans` without `cut`."""
    kept = []
    for start, end in spans:
        if cut[1] <= start or cut[0] >= end:
            kept.append((start, end))
            continue
        if start < cut[0]:
            kept.append((start, cut[0]))
        if cut[1] < end:
            kept.append((cut[1], end))
    return kept


def up_spans(member: PodTrace, gang: Gang, observed: Observed) -> list[tuple[float, float]]:
    """When a bound member was up as yuniplace counts it (end: infinity while it is): from its binding
    to its end (never, once it succeeded: a member that finished is no loss), but not while its node
    was in trouble, nor (where readiness is judged) from its ready timeout on until it was first Ready."""
    if member.bound_at is None:
        return []
    succeeded = member.phase == "Succeeded"
    end = member.ended_at if member.ended_at is not None and not succeeded else float("inf")
    spans = [(member.bound_at, end)]
    # What happened once it had succeeded is no loss.
    done = member.terminal_at if succeeded and member.terminal_at is not None else float("inf")
    cuts = [
        (since, min(until if until is not None else float("inf"), done))
        for since, until in observed.node_troubles.get(member.node or "", ())
    ]
    never_ready_since = member.bound_at + (gang.ready_timeout_s or 0.0)
    if (
        gang.ready_timeout_s is not None
        and not succeeded
        and (member.ready_at is None or member.ready_at > never_ready_since)
    ):
        cuts.append((never_ready_since, member.ready_at if member.ready_at is not None else float("inf")))
    for cut in cuts:
        if cut[0] < cut[1]:
            spans = _minus(spans, cut)
    return spans


@dataclass(frozen=True)
class Episode:
    """A time a started gang was below its minimum: since when, the member that went, and until when
    (None: it still is) it was back at its minimum or evicted whole."""

    since: float
    lost: str
    until: float | None
    number: int  # its episodes so far, this one included


def short_episodes(traces: Iterable[PodTrace], gang: Gang, observed: Observed) -> list[Episode]:
    """The times a started gang had fewer members up than its minimum (a member lost; those that
    succeeded still count), each until it was back at it or evicted whole: none of its members that
    have not succeeded left up (a member that succeeds once evicted, its program ending as it is
    told to, is evicted all the same)."""
    minimum = sum(gang.groups.values())
    changes: list[tuple[float, int, int, str]] = []  # when, members up, members up and not succeeded, who
    for member in _members(traces):
        done = member.terminal_at if member.phase == "Succeeded" and member.terminal_at is not None else None
        for start, end in up_spans(member, gang, observed):
            changes.append((start, 1, 1, member.name))
            if end != float("inf"):
                changes.append((end, -1, -1, member.name))
            elif done is not None and done >= start:
                changes.append((done, 0, -1, member.name))
    episodes: list[Episode] = []
    up = live = 0
    started = False
    short: tuple[float, str] | None = None  # since when it has been short, and the member that went
    for at, step, live_step, name in sorted(changes):
        up += step
        live += live_step
        ended = up >= minimum or live == 0  # back at its minimum, or evicted whole (restarted, or failed)
        if short is not None and ended:
            episodes.append(Episode(short[0], short[1], at, len(episodes) + 1))
            short = None
        started = up >= minimum or (started and live > 0)  # evicted whole, its next attempt starts anew
        if started and up < minimum and live > 0 and short is None:
            short = (at, name)
    if short is not None:
        episodes.append(Episode(short[0], short[1], None, len(episodes) + 1))
    return episodes


def _short_bound_s(episode: int, grace_s: float, gang: Gang | None = None) -> float:
    if gang is not None and policy_of(gang) == "release":
        return LOSS_GRACE_S + gang.recovery_timeout_s + grace_s
    return LOSS_GRACE_S + _restart_backoff_s(episode) + grace_s


def short_restarting_gangs(observed: Observed) -> list[Violation]:
    """A started gang that asks to be restarted whole (or released), once fewer of its members are up
    than its minimum (a member lost, its node in trouble, or not Ready by its ready timeout; those that
    succeeded still count), is back at its minimum or evicted whole within the loss grace and its
    restart backoff (a release: its recovery timeout) and the grace."""
    found = []
    for app, traces in by_app(observed).items():
        gang = observed.gangs.get(app)
        if gang is None or policy_of(gang) not in ("restart", "release"):
            continue
        minimum = sum(gang.groups.values())
        for episode in short_episodes(traces, gang, observed):
            bound = _short_bound_s(episode.number, observed.grace_s, gang)
            lasted = (episode.until if episode.until is not None else observed.now) - episode.since
            if lasted > bound:
                found.append(_short_for(app, (episode.since, episode.lost), bound, minimum))
    return found


def _short_for(app: str, short: tuple[float, str], bound: float, minimum: int) -> Violation:
    since, lost = short
    return Violation(
        SHORT_TOO_LONG,
        app,
        (lost,),
        f"below its minimum of {minimum} running members for more than {bound:.0f}s after {lost} went, neither "
        "back at it nor evicted whole",
        since + bound,
    )


# -- 9. a loss is reported ------------------------------------------------------------------------------------


def unreported_losses(observed: Observed) -> list[Violation]:
    """A started gang that asks a policy on a lost member and stays below its minimum past the loss
    grace and the grace has a GangDegraded event on one of its pods (whatever its policy, `none`
    included) since it fell short. Where the campaign deleted a member meanwhile, it is not judged."""
    degraded: dict[tuple[str, str], list[float | None]] = defaultdict(list)
    for event in observed.events:
        if event.reason == GANG_DEGRADED:
            degraded[(event.namespace, event.name)].append(event.at)
    found = []
    for app, traces in by_app(observed).items():
        gang = observed.gangs.get(app)
        if gang is None or policy_of(gang) is None:
            continue
        members = _members(traces)
        for episode in short_episodes(traces, gang, observed):
            until = episode.until if episode.until is not None else observed.now
            due = episode.since + LOSS_GRACE_S + observed.grace_s
            if until <= due:
                continue
            if any(
                m.uid in observed.deleted_by_campaign and (m.deleting_at or m.gone_at or 0.0) >= episode.since - 1.0
                for m in members
            ):
                continue
            told = [
                at
                for m in members
                for at in degraded.get((m.namespace, m.name), ())
                if at is None or episode.since - 1.0 <= at <= until + 1.0
            ]
            if not told:
                found.append(
                    Violation(
                        UNREPORTED_LOSS,
                        app,
                        (episode.lost,),
                        f"below its minimum of {sum(gang.groups.values())} for {until - episode.since:.0f}s after "
                        f"{episode.lost} went, with no GangDegraded event",
                        due,
                    )
                )
    return found


def restarts_past_limit(observed: Observed) -> list[Violation]:
    """A gang evicted whole for lost members (restarted, or released) more times than its restart
    limit: each eviction is counted, and once the count is at the limit a further loss fails the gang.
    Counted by the events that announce them, on any of its pods, whichever of them carried its
    record at the time (a gang of two Jobs may be carried by either's pods in turn)."""
    app_of = {(t.namespace, t.name): t.app for t in observed.pods.values()}
    answers: dict[str, list[EventSeen]] = defaultdict(list)
    for event in observed.events:
        answer = event.reason in RESTART_ANSWERS and not event.note.startswith(EVICTION_REFUSED)
        if answer and (app := app_of.get((event.namespace, event.name))) is not None:
            answers[app].append(event)
    found = []
    for app, events in answers.items():
        gang = observed.gangs.get(app)
        if gang is None or len(events) <= gang.restart_limit:
            continue
        ordered = sorted(events, key=lambda e: e.at or 0.0)
        found.append(
            Violation(
                RESTARTED_PAST_LIMIT,
                app,
                tuple(e.name for e in ordered),
                f"evicted whole for lost members {len(events)} times, past its limit of {gang.restart_limit}",
                ordered[gang.restart_limit].at or observed.now,
            )
        )
    return found


def check(observed: Observed) -> list[Violation]:
    """Every invariant over what was observed, ordered by when each violation was due."""
    violations = (
        partial_gangs(observed)
        + outlived_placeholders(observed)
        + gated_past_deadline(observed)
        + not_terminal(observed)
        + duplicate_placeholders(observed)
        + partial_evictions(observed)
        + lost_members(observed)
        + short_restarting_gangs(observed)
        + unreported_losses(observed)
        + restarts_past_limit(observed)
    )
    return sorted(violations, key=lambda v: (v.due, v.invariant, v.app))
