"""Admission's decisions about an application that waits to reserve, as the planner receives them."""

from __future__ import annotations

from dataclasses import dataclass, field

from yuniplace.gang.topology import Domains
from yuniplace.queues.pools import Pool
from yuniplace.runtime.events import Reason


@dataclass(frozen=True)
class Granted:
    """Admission lets the application reserve; `warning` says why that may not end well. With `seats`,
    every member exists and the whole gang fits now: its members start at once on the nodes given
    (for each task group, a node per member it needs), with no placeholders. `domains`: the topology
    domains chosen for it, which its placeholders (and members, seated or not) are kept in. With `lender`,
    it does not fit on its queue's own pool: it borrows the idle nodes of that queue's. `grows`: the
    autoscaler's node pools whose nodes yet to come it counts on (its placeholders are what they make
    nodes for)."""

    warning: str | None = None
    seats: tuple[tuple[str, tuple[str, ...]], ...] = ()
    domains: Domains = field(default_factory=Domains)
    # The queue whose pool's idle nodes it borrows besides its own, and the pool it may then use.
    lender: str | None = None
    pool: Pool | None = None
    grows: tuple[str, ...] = ()

    def seats_of(self, group: str) -> tuple[str, ...]:
        return next((nodes for name, nodes in self.seats if name == group), ())


@dataclass(frozen=True)
class Waiting:
    """Admission holds the application back; `announce` when the reason is news worth an event.
    `times_out`: its timeout runs while it waits, as it does for one first in its queue or waiting on
    its own gang group or namespace; one waiting behind others waits for them, and its does not."""

    message: str
    announce: bool = True
    times_out: bool = False
    reason: Reason = Reason.GANG_WAITING  # the event's


@dataclass(frozen=True)
class Refused:
    """Admission will never let the application reserve (a per-namespace limit, or data it cannot
    read): it fails or falls back by its style at once. `reason` is the event's."""

    reason: Reason
    message: str


@dataclass(frozen=True)
class LeftToKubeScheduler:
    """A native gang (the Workload API) its queue does not hold: no queue configuration places it, or
    its queue leaves native gangs to kube-scheduler. Its gates come off and kube-scheduler's gang plugin
    alone starts it, as if yuniplace had never held it; `message` says why."""

    message: str


@dataclass(frozen=True)
class Faulted:
    """Admission failed on the application through a fault of yuniplace's own (an error in reading it for
    the cycle, `stage` "snapshot", or in deciding, "decide"), not of its input: it is neither refused nor
    admitted but held as it is, gated, and decided again from `retry_at` (a backoff that doubles with each
    fault in a row, `faults`). `error` names the exception; its trace is in the controller's log.
    `announce` when the fault is news worth an event (once for a run of faults)."""

    stage: str
    error: str
    faults: int = 1
    retry_at: float = 0.0
    announce: bool = True


SNAPSHOT, DECIDE = "snapshot", "decide"  # the stages of admission a fault is met in
FAULT_RETRY_S = 1.0  # the first wait after an admission fault, doubled with each fault in a row
MAX_FAULT_RETRY_S = 60.0


def faulted(stage: str, error: BaseException, before: object, now: float) -> Faulted:
    """The ticket of an application admission failed on at `now`; `before`, its last ticket (a fault
    in a row waits longer)."""
    faults = before.faults + 1 if isinstance(before, Faulted) else 1
    wait = min(MAX_FAULT_RETRY_S, FAULT_RETRY_S * 2.0 ** (faults - 1))
    return Faulted(stage, type(error).__name__, faults, now + wait)


@dataclass(frozen=True)
class Undecided:
    """Admission has not decided about the application yet (it is new, or changed after the last cycle
    read it): its next cycle will, and wakes it. Nothing about the application changes meanwhile, its
    queue clock included."""


Ticket = Granted | Waiting | Refused | LeftToKubeScheduler | Faulted | Undecided
