"""A started gang that lost members: which, and why.

A gang starts whole, but a distributed job whose member is gone (its node deleted or NotReady, the pod
evicted, failed or deleted, or never Ready) usually hangs: the others wait on a collective that never completes, holding
their room. yuniplace reports it: a gang whose members up (on a node that is there and Ready, not failed,
not being deleted) and done (Succeeded: a member that finished is no loss) are fewer than its minimum,
for a loss (members lost, or gone so that those still coming cannot make the minimum up), is degraded.

What counts as up depends on whether the member came with the gang's start. The start's own members are
up once seated: bound, or released onto room yuniplace holds for them (a placeholder's node, a seat) and
on their way there. Room still held for a member yet to come (a placeholder), and a member of the start
not bound yet (released with the others, a scheduler binding it now), are coming: no loss. A member made
after the gang started (a replacement its Job made for one lost, a late member beyond the room held)
holds no room of the gang's: it counts once it runs, and until then it only waits, so a replacement that
cannot be placed leaves the gang below its minimum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from yuniplace.gang import pods as p
from yuniplace.gang.dialects.base import Pod

# How a node stands, for the members on it: None where it is there and Ready, else why not ("is gone",
# "is NotReady"). Without a view of the nodes every node is taken to be well.
NodeHealth = Callable[[str], str | None]
MOST_NAMED = 5  # members named in a message; the rest are counted


def every_node_well(_node: str) -> str | None:
    return None


@dataclass(frozen=True)
class Lost:
    member: str
    why: str


@dataclass(frozen=True)
class Losses:
    minimum: int
    up: int  # seated (of the start) or running (made since), on a node that is well, neither failed nor deleting
    done: int  # Succeeded
    lost: tuple[Lost, ...]  # members still there, that no longer run
    coming: int  # room still held for a member to come, or a member of the start not bound yet
    waiting: int = 0  # members made since the gang started that do not run yet (a replacement): not up
    # When a member up but not Ready counts as lost, if it is still not Ready then (None: no such member).
    unready_due: float | None = None

    @property
    def degraded(self) -> bool:
        """Below its minimum for a loss: members lost, or gone so that those still coming cannot make it
        up. Members on their way (a gang still starting, late members swapping in) are no loss."""
        return not self.whole and (bool(self.lost) or self.up + self.done + self.coming < self.minimum)

    @property
    def whole(self) -> bool:
        """At its minimum with members that run (or finished): the only way back from degraded, since
        room held and members on their way count for a gang starting, not for one that mends."""
        return self.up + self.done >= self.minimum

    def describe(self) -> str:
        """What a GangDegraded event says: how far below its minimum, and each member lost and why."""
        short = self.minimum - self.up - self.done
        done = f" and {self.done} done" if self.done else ""
        named = "; ".join(f"{lost.member} {lost.why}" for lost in self.lost[:MOST_NAMED])
        more = len(self.lost) - MOST_NAMED
        parts = [f"{self.up} of its minimum {self.minimum} members up{done}, {short} short"]
        if named:
            parts.append(f"lost: {named}{f' and {more} more' if more > 0 else ''}")
        unseen = short - len(self.lost) - self.coming - self.waiting
        if unseen > 0:
            parts.append(f"{unseen} no longer exist (deleted)")
        if self.waiting:
            parts.append(f"{self.waiting} made since it started, not running yet")
        if self.coming:
            parts.append(f"{self.coming} waiting to be scheduled")
        return "; ".join(parts)


@dataclass(frozen=True)
class Readiness:
    """How long a bound member may go without being Ready before it counts as lost (its image never
    pulled, its program never came up): at `now`, after `timeout_s`."""

    now: float
    timeout_s: float


def _why_lost(member: Pod, node_health: NodeHealth, readiness: Readiness | None) -> str | None:
    """Why a bound member no longer runs, or None while it does."""
    if p.phase(member) == "Failed":
        reason = p.status_reason(member)
        return f"failed ({reason})" if reason else "failed"
    if p.is_deleting(member):
        return "is being deleted"
    node = p.node_name(member)
    health = node_health(node) if node else None
    if health:
        return f"(its node {node} {health})"
    since = p.unready_since(member) if readiness is not None else None
    if readiness is not None and since is not None and readiness.now - since >= readiness.timeout_s:
        waiting = p.waiting_reasons(member)
        return f"not Ready for {readiness.now - since:.0f}s" + (f" ({', '.join(waiting)})" if waiting else "")
    return None


def _made_since(member: Pod, started_at: float | None) -> bool:
    """Whether the member was made after the gang started, holding no room of the gang's (a
    replacement, a late member beyond what placeholders hold). Creation times are whole seconds, cut
    down: one made in the second the gang started counts as one of the start."""
    return started_at is not None and not p.is_handed_off(member) and p.created_at(member) >= started_at


def _is_up(member: Pod, started_at: float | None) -> bool:
    if not p.is_seated(member):
        return False
    return not _made_since(member, started_at) or p.phase(member) == "Running"


def losses_of(
    members: Sequence[Pod],
    minimum: int,
    node_health: NodeHealth = every_node_well,
    readiness: Readiness | None = None,
    held: int = 0,
    started_at: float | None = None,
) -> Losses:
    """`held`: room still held for members yet to come (placeholders): a gang restarted whole beside a
    pod still going (its node deleted) holds one for the member its Job makes once that pod is gone.
    `started_at`: when the gang (this attempt of it) started; members made since count once they run.
    Without it every member not bound yet is taken to be of the start."""
    up = done = waiting = 0
    coming = held
    lost: list[Lost] = []
    unready_due: float | None = None
    for member in members:
        if p.phase(member) == "Succeeded":
            done += 1
        elif (why := _why_lost(member, node_health, readiness)) is not None:
            lost.append(Lost(p.name(member), why))
        elif _is_up(member, started_at):
            up += 1
            since = p.unready_since(member) if readiness is not None else None
            if readiness is not None and since is not None:
                due = since + readiness.timeout_s
                unready_due = due if unready_due is None else min(unready_due, due)
        elif _made_since(member, started_at):
            waiting += 1
        else:
            coming += 1
    return Losses(minimum, up, done, tuple(lost), coming, waiting, unready_due)
