"""One admission cycle's view of the cluster, read once as the cycle begins: every node's free room and
what each pod takes there, the applications that wait to reserve or hold room, and the queues they
are placed in. The decision reads nothing else, so a cycle decides on one consistent picture however
events arrive meanwhile, and a decision can be tested with plain data.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from yuniplace.admission.gangdevices import GangDevices, read_devices, room_with_devices
from yuniplace.admission.growth import Coming, Growth
from yuniplace.admission.room import ClusterRoom, RoomView, pool_room
from yuniplace.admission.tickets import SNAPSHOT, Faulted, LeftToKubeScheduler, Refused, faulted
from yuniplace.devices.claims import is_device_resource
from yuniplace.devices.inventory import DeviceInventory
from yuniplace.gang import pods as p
from yuniplace.gang import userinfo
from yuniplace.gang.application import Application
from yuniplace.gang.fit import PODS, Constraints, Need, Room, amounts
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, Limits
from yuniplace.gang.topology import Domains, pinned
from yuniplace.gang.userinfo import UserInfo
from yuniplace.queues.model import Amounts, Ordering, QueueConfig
from yuniplace.queues.pools import Pool, confine, pool_of, pool_owners
from yuniplace.queues.quota import NOBODY
from yuniplace.runtime.store import PodStore

log = logging.getLogger(__name__)

# States in which an application's gang may still be taking room it was admitted to.
IN_FLIGHT = frozenset({AppState.RESERVING, AppState.RESERVED, AppState.RUNNING})
MADE_TOGETHER = frozenset({"RayCluster"})  # owners that make all of a gang's pods in one pass


@dataclass(frozen=True)
class App:
    key: p.AppKey
    spec: GangSpec
    state: AppState
    arrival: tuple[float, int, str]  # created (in seconds), first seen by the controller, its key
    queue: str  # with a queue configuration, the queue it was placed in; else the name it asks for
    holding: Mapping[str, int]  # room taken on nodes, by group: placed placeholders and members
    needing: Mapping[str, int]  # live members taking no room yet, by group
    placeholders: int  # live placeholders
    backing_off: bool
    queued_since: float | None  # when it became first in its queue
    priority: int = 0  # its pods' priority, which orders it within a queue that orders by priority
    pool: Pool = field(default_factory=Pool)
    held: Amounts = field(default_factory=dict)  # what its pods take on nodes (placeholders and members)
    running: bool = False  # it started (a member is seated): taking its room back means evicting it
    reserving_since: float | None = None  # when its reservation began: the newest is taken back first
    # Kubernetes' own gang (the Workload API) yuniplace does not hold: counted where it holds room and
    # about to take it, never decided and never evicted, since kube-scheduler alone starts it.
    native: bool = False
    user: UserInfo = NOBODY  # who submitted it (the webhook's record), for the limits of users and groups
    # The topology domains its reservation was given (its record's, or the ticket's just granted): its
    # pods take room there and nowhere else.
    domains: Domains = field(default_factory=Domains)
    # When its first pod was seen, and its latest new pod, by the controller's clock.
    arrived: tuple[float, float] = (0.0, 0.0)
    # The queue whose pool's idle nodes it borrows besides its own (its record's, or the ticket's just
    # granted): `pool` lets it use them.
    lender: str | None = None
    attempt: str = ""  # its originator's uid: admission's ticket is for this attempt of the gang only
    # Its owner makes every pod of it in one pass (KubeRay a RayCluster's head and workers): a task group
    # with no pod yet is still coming, where Spark's executors come only once its driver runs.
    made_together: bool = False
    # Its DRA devices (gangdevices.py), where its pods ask for some.
    devices: GangDevices = field(default_factory=GangDevices)

    # What the decision reads of it, worked out once as it is read (decision.py never calls into it):
    complete: bool = field(init=False)  # nothing reserved yet, and every member it needs exists, gated
    arriving: bool = field(init=False)  # nothing reserved yet; every group has members, some not all
    needs: tuple[Need, ...] = field(init=False)  # the gang's room, placed as its queue's pool allows
    needs_left: tuple[Need, ...] = field(init=False)  # what no pod of it takes on a node yet
    amounts: Amounts = field(init=False)  # `needs` summed over its pods (`pods` counting 1000 a pod)
    amounts_left: Amounts = field(init=False)
    usage: Amounts = field(init=False)  # what it counts against its queue: what its pods take, and will
    placeholder_budget: int = field(init=False)  # placeholders it holds or is about to create

    def __post_init__(self) -> None:
        needs = tuple(self._needs(outstanding=False))
        left = tuple(self._needs(outstanding=True))
        amounts_left = _summed(left)
        usage = dict(self.held)
        for name, amount in amounts_left.items():
            usage[name] = usage.get(name, 0) + amount
        creating = self.state in (AppState.PENDING, AppState.RESERVING)
        fresh = self.state == AppState.PENDING and not self.placeholders and not any(self.holding.values())
        present = [self.needing.get(group.name, 0) for group in self.spec.groups]
        complete = fresh and all(
            count >= group.min_member for count, group in zip(present, self.spec.groups, strict=True)
        )
        # Its members are still being created: every task group has some, not all; where groups are its
        # members' own shapes (a group for those yet to come has none), some exist, not all.
        coming = any(present) if self.spec.groups_by_shape or self.made_together else all(present)
        for name, value in (
            ("complete", complete),
            ("arriving", fresh and not complete and coming),
            ("needs", needs),
            ("needs_left", left),
            ("amounts", _summed(needs)),
            ("amounts_left", amounts_left),
            ("usage", usage),
            ("placeholder_budget", self.spec.min_members if creating else self.placeholders),
        ):
            object.__setattr__(self, name, value)

    def _outstanding(self, group: str, min_member: int) -> int:
        missing = max(0, min_member - self.holding.get(group, 0))
        # Once reserved, only members still to be swapped in need room: the rest have had theirs. A
        # native gang admitted holds room for its members yet to come too: it has no placeholder.
        return (
            missing
            if self.state in (AppState.PENDING, AppState.RESERVING) or self.spec.native
            else min(missing, self.needing.get(group, 0))
        )

    @property
    def uses_devices(self) -> bool:
        """Whether its pods ask for DRA devices: a seat does not hold those (a nomination holds no
        device), a placeholder holding its member's claims does."""
        return any(self.devices.by_group.values()) or bool(self.devices.shared)

    def _needs(self, outstanding: bool) -> list[Need]:
        needs = []
        for group in self.spec.groups:
            confined = confine(group, self.pool)
            affinity = pinned(confined.affinity, self.domains.of(group.name))
            requests = amounts(confined.min_resource)
            for name, amount in self.devices.by_group.get(group.name, {}).items():
                requests[name] = max(requests.get(name, 0), amount)
            needs.append(
                Need(
                    count=self._outstanding(group.name, group.min_member) if outstanding else group.min_member,
                    requests=requests,
                    constraints=Constraints(confined.node_selector, tuple(confined.tolerations), affinity),
                    label=group.name,
                )
            )
        if self.devices.shared and needs:
            # Claims its members share are allocated once, wherever the first of them goes: on a node its
            # first group's pods may go to.
            needs.append(Need(1, self.devices.shared, needs[0].constraints, "claims its pods share", slot=False))
        return needs


def _held(on_nodes: Mapping[str, int], devices: GangDevices | None) -> dict[str, int]:
    """What a gang holds, counted against its queue: what its pods take on nodes, and the devices its
    members' claims hold."""
    total = dict(on_nodes)
    for name, amount in (devices.held if devices is not None else {}).items():
        total[name] = total.get(name, 0) + amount
    return total


def _summed(needs: Sequence[Need]) -> dict[str, int]:
    total: dict[str, int] = {}
    for need in needs:
        for name, amount in {**need.requests, PODS: 1000 if need.slot else 0}.items():
            total[name] = total.get(name, 0) + amount * need.count
    return total


@dataclass(frozen=True)
class Peer:
    """An application a gang group names that is no candidate itself (it runs already, say), as far as
    admission reads it: whether it has pods, and the gang group it names (None when unreadable: it
    agrees to nothing)."""

    exists: bool
    gang_group: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Snapshot:
    """What one admission cycle decides on."""

    now: float
    config: QueueConfig
    apps: Mapping[p.AppKey, App]  # the candidates: waiting to reserve, or holding room
    # Applications that no queue takes, native gangs no queue holds, and those admission could not read
    # through a fault of its own: their tickets are these.
    refused: Mapping[p.AppKey, Refused | LeftToKubeScheduler | Faulted]
    room: RoomView
    empty: Room  # every node's whole allocatable room, as if nothing ran
    pods: Mapping[p.AppKey, Sequence[str]] = field(default_factory=dict)  # each application's pods (uids)
    peers: Mapping[p.AppKey, Peer] = field(default_factory=dict)
    pool_usage: Mapping[str, Amounts] = field(default_factory=dict)  # ordinary pods' use of each pool, by queue
    capacity: Amounts = field(default_factory=dict)  # every node's allocatable, summed (for fair queues)
    # What an autoscaler can still add: its node pools, and the nodes yet to come, which `room` and
    # `empty` hold after the nodes there are.
    coming: Coming = field(default_factory=Coming)
    # The extended resources DeviceClasses let pods ask DRA devices by: devices, like the class names.
    device_aliases: frozenset[str] = frozenset()

    def is_device(self, resource: str) -> bool:
        """Whether the resource counts DRA devices (which no autoscaler adds), not what a node advertises."""
        return is_device_resource(resource) or resource in self.device_aliases

    def free_room(self, without: Iterable[p.AppKey] = ()) -> Room:
        """Every node's free room, as if the applications `without` and their pods were gone."""
        return self.room.room(released=[uid for key in without for uid in self.pods.get(key, ())])

    def nodes_of(self, key: p.AppKey) -> set[str]:
        """The nodes the application's pods take room on."""
        takes = self.room.takes
        return {take[0] for uid in self.pods.get(key, ()) if (take := takes.get(uid)) is not None}

    def holds_room(self, key: p.AppKey) -> bool:
        return any(uid in self.room.takes for uid in self.pods.get(key, ()))

    def peer(self, key: p.AppKey) -> Peer:
        """An application a gang group names, candidate or not."""
        app = self.apps.get(key)
        if app is not None:
            return Peer(True, app.spec.gang_group)
        return self.peers.get(key, Peer(False))


class Placing(Protocol):
    """One cycle's placements: the queue each application goes to (or why none takes it), and the
    configuration they are in (`config`: as it was when the cycle began, with the queues placement
    created since)."""

    @property
    def config(self) -> QueueConfig: ...

    def place(self, app: Application) -> str | Refused: ...

    def done(self) -> None: ...


@dataclass(frozen=True)
class Sources:
    """Where a snapshot is read from: the pods by application, the room of every node, and each
    application's PodGroup where its dialect has one."""

    store: PodStore
    room: ClusterRoom
    pod_group_of: Callable[[p.AppKey], Mapping[str, object] | None]
    limits: Limits
    growth: Growth | None = None  # an autoscaler's node pools, where it runs
    devices: DeviceInventory | None = None  # the cluster's DRA devices, where it serves the API

    def read(
        self,
        placing: Placing,
        now: float,
        watched: Iterable[p.AppKey] = (),
        faults: Mapping[p.AppKey, Faulted] = {},
    ) -> Snapshot:
        """The snapshot of this moment: the room first, then the applications, as the room sees their
        pods. `watched`: applications whose pods admission follows though they may be no candidates
        (those whose room is being taken back). `faults`: applications admission last failed on through
        a fault of its own; each is held as it is until its retry is due, then read again."""
        there = self.room.view()  # the nodes there are, which queues' pools and shares count
        view, empty = there, self.room.empty_room()
        coming = self.growth.coming(self.room.has_node) if self.growth is not None else Coming()
        if coming.nodes:
            view, empty = there.with_coming(coming.nodes), there.whole_room(coming.nodes)
        config = placing.config
        apps: dict[p.AppKey, App] = {}
        refused: dict[p.AppKey, Refused | LeftToKubeScheduler | Faulted] = {}
        pods_of: dict[p.AppKey, Sequence[str]] = {}
        applications = self.store.keys()
        for key in applications:
            pods = self.store.app_pods(key)
            # Most applications of a busy cluster just run: every live pod already has its room. They
            # need nothing more and, unless queues count what they hold, are passed over before the
            # costlier work below.
            if config.empty and not any(
                p.is_placeholder(pod) or (p.uid(pod) not in view.takes and not p.is_terminal(pod)) for pod in pods
            ):
                continue
            fault = faults.get(key)
            if fault is not None and now < fault.retry_at:
                refused[key] = fault
                continue
            try:
                app = self._app(key, pods, view, now, placing)
            except Exception as error:  # yuniplace's own fault: its input's are read into Application.problem
                log.exception("admission cannot read %s (a fault of yuniplace's own); it is held", key)
                refused[key] = faulted(SNAPSHOT, error, fault, now)
                continue
            if isinstance(app, (Refused, LeftToKubeScheduler)):
                refused[key] = app
            elif app is not None:
                apps[key] = app
                pods_of[key] = [p.uid(pod) for pod in pods]
        for key in watched:
            if key not in pods_of:
                pods_of[key] = [p.uid(pod) for pod in self.store.app_pods(key)]
        if self.devices is not None and any(app.devices.kinds for app in apps.values()):
            try:
                view, empty = self._with_devices(self.devices, view, apps)
            except Exception as error:  # yuniplace's own fault: the gangs waiting for devices are held
                log.exception("admission cannot count DRA devices (a fault of yuniplace's own); their gangs are held")
                for key in [k for k, app in apps.items() if app.devices.kinds and app.state == AppState.PENDING]:
                    del apps[key]
                    refused[key] = faulted(SNAPSHOT, error, faults.get(key), now)
        config = placing.config  # with the queues placement created
        return Snapshot(
            now=now,
            config=config,
            apps=apps,
            refused=refused,
            room=view,
            empty=empty,
            pods=pods_of,
            peers=self._peers(apps),
            pool_usage=self._pool_usage(config, there, pods_of),
            capacity=self._capacity(config, there),
            coming=coming,
            device_aliases=frozenset(self.devices.extended_resources()) if self.devices is not None else frozenset(),
        )

    def _app(
        self, key: p.AppKey, pods: Sequence[p.Pod], view: RoomView, now: float, placing: Placing
    ) -> App | Refused | LeftToKubeScheduler | None:
        """The application as admission sees it; None when it is no candidate (nothing to reserve, or
        nothing left to decide: its annotations cannot be read, which its own reconcile reports);
        Refused when no queue takes it; LeftToKubeScheduler for a native gang its queue does not hold."""
        app = self.store.application(key, self.pod_group_of(key), self.limits)
        originator, record, spec = app.originator, app.record, app.spec
        if originator is None or spec is None or p.is_terminal(originator):
            return None
        # kube-scheduler places a native gang yuniplace does not hold as soon as its pods exist: in flight
        # from the start.
        native = app.left_to_kube_scheduler
        state = AppState.RUNNING if native else record.state
        if state not in IN_FLIGHT and state != AppState.PENDING:
            return None
        queue = placing.place(app)
        if isinstance(queue, Refused):
            return queue
        config = placing.config
        if spec.native and not native and state == AppState.PENDING:
            placed_in = config.queues.get(queue)
            if placed_in is None:
                return LeftToKubeScheduler(
                    "no queue configuration holds it: yuniplace admits native gangs in configured queues"
                )
            if not placed_in.native_gangs:
                return LeftToKubeScheduler(
                    f"queue {queue} leaves native gangs to kube-scheduler (yuniplace.io/native-gangs: false)"
                )
        # A swap deletes a placeholder before it releases the member taking its room. Counted as
        # the room sees them (not as the store does, which learns of writes sooner), a member
        # between the two still needs room, so the room its placeholder left never looks free.
        holding: Counter[str] = Counter()
        needing: Counter[str] = Counter()
        holders = []
        for pod in app.placeholders + app.members:
            group = app.group_of(pod) or ""
            if p.uid(pod) in view.takes:
                holding[group] += 1
                holders.append(p.uid(pod))
            elif not p.is_placeholder(pod) and not p.is_terminal(pod) and not p.is_deleting(pod):
                needing[group] += 1
        backing_off = record.retry_after is not None and now < record.retry_after and record.state == AppState.PENDING
        devices = read_devices(self.devices, app) if self.devices is not None else None
        pool = Pool() if config.empty else pool_of(config, queue)
        lender = record.lender if state in IN_FLIGHT and record.lender in config.queues else None
        if lender is not None:
            pool = pool.lent(config.queues[lender].node_selector)
        return App(
            key,
            spec,
            state,
            (app.arrival[0], self.store.first_seen(key), app.arrival[1]),
            queue,
            holding,
            needing,
            placeholders=len(app.live_placeholders()),
            backing_off=backing_off,
            queued_since=record.queued_since,
            priority=app.priority,
            pool=pool,
            lender=lender,
            held=_held(view.held(holders), devices) if not config.empty else {},
            running=app.started(),
            reserving_since=record.reservation_started,
            native=native,
            user=userinfo.of_object(originator) or NOBODY,
            domains=record.domains if state in IN_FLIGHT else Domains(),
            arrived=self.store.arrived(key),
            attempt=p.uid(originator),
            made_together=(p.controller_of(originator) or {}).get("kind") in MADE_TOGETHER,
            devices=devices or GangDevices(),
        )

    @staticmethod
    def _with_devices(devices: DeviceInventory, view: RoomView, apps: dict[p.AppKey, App]) -> tuple[RoomView, Room]:
        """The room with the nodes' devices of every kind the gangs ask for; the gangs (in place) as those
        counts let them be read."""
        with_devices, counts = room_with_devices(devices, view, (k for app in apps.values() for k in app.devices.kinds))
        for key, app in list(apps.items()):
            counted = app.devices.counted(counts)
            if counted is not None:
                apps[key] = replace(app, devices=counted)
        return with_devices, with_devices.whole_room(())

    def _peers(self, apps: Mapping[p.AppKey, App]) -> dict[p.AppKey, Peer]:
        """The applications the candidates' gang groups name that are no candidates themselves."""
        peers: dict[p.AppKey, Peer] = {}
        for app in apps.values():
            for ref in app.spec.gang_group:
                key = p.AppKey.parse(ref)
                if key in apps or key in peers:
                    continue
                read = self.store.application(key, self.pod_group_of(key), self.limits)
                exists = bool(read.members or read.placeholders)
                spec = read.spec if exists else None
                peers[key] = Peer(exists, spec.gang_group if spec is not None else None)
        return peers

    @staticmethod
    def _pool_usage(
        config: QueueConfig, view: RoomView, pods_of: Mapping[p.AppKey, Sequence[str]]
    ) -> dict[str, Amounts]:
        """What pods of no candidate application (ordinary pods, mostly) take on each pool's nodes, by
        the queue that owns the pool: they use its room as much as its gangs do."""
        owners = pool_owners(config)
        if not owners:
            return {}
        gang_pods = {uid for uids in pods_of.values() for uid in uids}
        return {
            queue: pool_room(view.nodes, view.takes, pool, lambda uid: uid not in gang_pods).taken
            for queue, pool in owners.items()
        }

    @staticmethod
    def _capacity(config: QueueConfig, view: RoomView) -> Amounts:
        if not any(queue.ordering is Ordering.FAIR for queue in config.queues.values()):
            return {}
        return pool_room(view.nodes, {}, Pool(), lambda _uid: False).allocatable
