"""How waiting applications stand in line for admission: by their queue's order (priority unless the
queue disables it, then fair share for a fair queue, then arrival), a gang group's members together.
"""

from __future__ import annotations

from collections.abc import Callable

from yuniplace.admission.snapshot import App, Snapshot
from yuniplace.gang import pods as p
from yuniplace.gang.groups import GroupConsent
from yuniplace.gang.state import AppState
from yuniplace.queues.model import Amounts, Ordering, QueueSpec

Place = tuple[int, float, tuple[float, int, str]]


def in_line(app: App, queue: QueueSpec | None, capacity: Amounts) -> Place:
    """The application's place in its queue's line, as YuniKorn sorts a queue's applications: by
    priority first (unless the queue disables it), then, for a fair queue, the one using least first
    (its largest share of any resource of the cluster), then by arrival."""
    priority = -app.priority if queue is None or queue.by_priority else 0
    share = 0.0
    if queue is not None and queue.ordering is Ordering.FAIR:
        share = max((amount / capacity[name] for name, amount in app.held.items() if capacity.get(name)), default=0.0)
    return priority, share, app.arrival


def line(snapshot: Snapshot) -> Callable[[App], Place]:
    """How applications stand in line: without a queue configuration, by arrival; with one, as each
    one's queue orders them (in_line)."""
    config = snapshot.config
    if config.empty:
        return lambda app: (0, 0.0, app.arrival)
    return lambda app: in_line(app, config.queues.get(app.queue), snapshot.capacity)


def units(snapshot: Snapshot, consent: GroupConsent) -> list[list[App]]:
    """Pending applications in line; a gang group's pending members that agree to it form one unit,
    which comes with its first member."""
    apps = snapshot.apps
    seen: set[p.AppKey] = set()
    found: list[list[App]] = []
    pending = sorted(
        (a for a in apps.values() if a.state == AppState.PENDING and not a.backing_off), key=line(snapshot)
    )
    for app in pending:
        if app.key in seen:
            continue
        members = [app]
        for ref in app.spec.gang_group:
            peer = apps.get(p.AppKey.parse(ref))
            if (
                peer is not None
                and peer.key != app.key
                and peer.key not in seen
                and peer.state == AppState.PENDING
                and not peer.backing_off
                and consent.joins(app.key, peer.key, peer.spec.gang_group)
            ):
                members.append(peer)
        seen.update(a.key for a in members)
        found.append(members)
    return found
