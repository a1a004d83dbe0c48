"""A plan: the API writes that carry one application a step further, what it becomes, and why.
The lifecycle (lifecycle/) makes it; the executor (apply.py) carries it out; metrics read its outcomes."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yuniplace.admission.tickets import Ticket
from yuniplace.controller.restarts import Restarts
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.losses import NodeHealth, every_node_well
from yuniplace.gang.placeholders import DEFAULT_IMAGE
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, Limits
from yuniplace.gang.topology import Domains, Pin
from yuniplace.queues.pools import Pool
from yuniplace.runtime.events import NORMAL, Reason

Pod = p.Pod


@dataclass(frozen=True)
class Settings:
    limits: Limits = Limits()
    placeholder_image: str = DEFAULT_IMAGE
    member_events: bool = False  # an event on every member as it lands (one write each), besides one per group
    schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS  # pods of other schedulers are not ours
    always_nominate: bool = False  # nominate every swapped member, contended or not (one write more each)
    strict_backoff_s: float = 10.0  # a released reservation's first wait before reserving again, doubled each attempt
    restart_backoff_s: float = 10.0  # a restarted gang's least time before its next restart, doubled each restart


@dataclass(frozen=True)
class Event:
    pod: Pod
    reason: Reason
    note: str
    kind: str = ""  # the reason's usual type unless given

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", self.kind or self.reason.kinds[0])
        assert self.kind in self.reason.kinds, f"{self.reason} is never {self.kind}"

    @property
    def warning(self) -> bool:
        return self.kind != NORMAL


@dataclass(frozen=True)
class Swap:
    """Real pod `member` takes the room of `placeholder` on `node` (placeholder None: already gone), or,
    `direct`, the seat admission chose for it on `node` with no placeholder at all."""

    member: Pod
    placeholder: Pod | None
    node: str
    group: str
    direct: bool = False
    claims: tuple[str, ...] = ()  # the DRA claims the placeholder holds for the member, handed over first

    @property
    def marker(self) -> tuple[str, str] | None:
        """The annotation that records the hand-off on the member, for a restarted controller and for the
        room it takes meanwhile: the placeholder it replaces, or its seat; None for a swap resumed after
        its placeholder went (the member carries it already)."""
        if self.placeholder is not None:
            return keys.SWAP_PLACEHOLDER, p.name(self.placeholder)
        return (keys.SEAT, self.node) if self.direct else None


@dataclass(frozen=True)
class Failure:
    pod: Pod
    reason: Reason
    message: str


class Outcome(enum.Enum):
    """What became of the reservation in this plan, for metrics."""

    RESERVING = "reserving"  # its placeholders are created
    RESERVED = "reserved"  # every placeholder is placed
    STARTED_DIRECTLY = "started directly"  # its members are released onto admission's seats, no placeholders
    TIMED_OUT = "timed out"  # it ran out of time (its timeout rule says what follows)
    DEGRADED = "degraded"  # a started gang fell below its minimum
    RESTARTED = "restarted"  # a degraded gang was evicted whole for its owner to make it again
    RELEASED = "released"  # a degraded gang that did not mend in time was evicted whole
    RESTARTS_EXHAUSTED = "restarts exhausted"  # a degraded gang past its restart limit failed


@dataclass
class Plan:
    key: p.AppKey
    state: AppState
    originator: Pod | None = None
    annotate: dict[str, str | None] = field(default_factory=dict)  # None removes the annotation
    create: list[Pod] = field(default_factory=list)
    delete: list[Pod] = field(default_factory=list)
    swaps: list[Swap] = field(default_factory=list)
    ungate: list[Pod] = field(default_factory=list)
    fail: list[Failure] = field(default_factory=list)
    # Members of a gang that timed out under Koordinator's rule, to be marked so (they stay gated).
    mark_timed_out: list[Pod] = field(default_factory=list)  # pods to carry `timed_out_mark`, as "true"
    timed_out_mark: str | None = None
    events: list[Event] = field(default_factory=list)
    requeue_after_s: float | None = None
    # Nodes another application's member is on its way to, where this one waits to swap a member in.
    waits_for_nodes: set[str] = field(default_factory=set)
    forget: bool = False  # nothing of the application is left to watch over
    evict: list[Pod] = field(
        default_factory=list
    )  # its pods, evicted whole (PodDisruptionBudgets permitting) or not at all
    spec: GangSpec | None = None
    # The gang's restarts once the eviction in `evict` is done (controller/restarts.py), to be kept.
    restarts: Restarts | None = None
    # The topology domains each member it swaps in or releases is kept in (by uid; members of a gang
    # that requires none are not listed).
    pins: dict[str, tuple[Pin, ...]] = field(default_factory=dict)
    placed_in: Domains | None = None  # the topology domains its reservation begins in, for metrics
    pod_group_status: dict[str, Any] | None = None  # a PodGroup's status, when it must change
    current: AppState = AppState.PENDING  # the state it was in
    outcomes: list[Outcome] = field(default_factory=list)
    record_ends: bool = False  # its last move clears the originator's record (lifecycle/table.py)
    seats_given: SeatsToRelease | None = None  # the seats an earlier reconcile left its direct swaps

    @property
    def transition(self) -> tuple[AppState, AppState] | None:
        return (self.current, self.state) if self.state != self.current else None

    def writes(self) -> int:
        return (
            bool(self.annotate)
            + len(self.create)
            + len(self.delete)
            + 3 * len(self.swaps)
            + len(self.ungate)
            + len(self.fail)
            + len(self.mark_timed_out)
            + len(self.evict)
        )


@dataclass(frozen=True)
class SeatsToRelease:
    """A gang started directly whose record is written while its members, still gated, wait for the pod
    watch to bring that record back (controller/seatcheck.py): a later reconcile, which the watch wakes
    once it has the record, releases them on these seats, so no worker waits for the watch. Kept in
    memory only: a controller restarted in between finds the gang recorded and its members gated with no
    seat, and releases them to kube-scheduler unsteered (admission has counted their room), as it would
    had it stopped between the record and the releases in one reconcile."""

    seats: Mapping[str, str]  # member uid -> the node admission seated it on
    recorded_at: int  # the resourceVersion of the record: the watch must have brought it first
    deadline: float  # (time.monotonic) past it without the record back, the members are nominated


@dataclass(frozen=True)
class Surroundings:
    """What the plan needs from beyond the application."""

    nodes_in_flight: frozenset[str] = frozenset()  # nodes a member of any application is on its way to
    ticket: Ticket | None = None  # admission's decision, for an application about to reserve (None: no admission)
    # Its gang group: "namespace/app-id" -> state, None for one not seen.
    peers: Mapping[str, AppState | None] = field(default_factory=dict)
    refusal: str | None = None  # why the API just refused to create its placeholders (a quota, say)
    pool: Pool = field(default_factory=Pool)  # where its queue lets its placeholders go
    queue: str | None = None  # the queue admission placed it in
    reclaimed: str | None = None  # why its room is taken back for the queue that lent it, while it is
    node_health: NodeHealth = every_node_well  # how the nodes its members are on stand
    restarts: Restarts | None = None  # how often it was restarted for a lost member, for its current owner
    seats_to_release: SeatsToRelease | None = None  # given by an earlier reconcile of its direct start
