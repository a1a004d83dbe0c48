"""Carries a plan out against the API: placeholders created and deleted, real pods swapped in,
released or failed, the originator's state written, then events posted.

Independent writes of one plan run concurrently (a 1 000-member gang is 3 000 swap writes); each
answer goes straight into the store so the next reconcile sees the controller's own changes. A write
that fails stops the plan where it is; each event is posted only once the writes it announces are done
(ANNOUNCES), so no event tells of a write that did not happen.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from yuniplace.controller.faults import Moot, PartlyApplied
from yuniplace.controller.landings import Landings
from yuniplace.controller.plan import Event, Failure, Plan, SeatsToRelease, Swap
from yuniplace.controller.podgroups import status_path
from yuniplace.controller.seatcheck import CATCH_UP_S, Clearance
from yuniplace.devices.claims import DRA_API
from yuniplace.gang import keys, topology, watched
from yuniplace.gang import pods as p
from yuniplace.gang.dialects.base import PodGroupApi
from yuniplace.gang.dialects.registry import pod_group_api
from yuniplace.gang.topology import Pin
from yuniplace.kube import (
    JSON_PATCH,
    STRATEGIC_MERGE_PATCH,
    AlreadyExists,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    KubeClient,
    NotFound,
    TooManyRequests,
)
from yuniplace.runtime.events import EventRecorder, Reason
from yuniplace.runtime.metrics import Metrics
from yuniplace.runtime.store import PodStore

log = logging.getLogger(__name__)

Pod = p.Pod
WRITE_CONCURRENCY = 48


def _pod_path(pod: Pod) -> str:
    return f"/api/v1/namespaces/{p.namespace(pod)}/pods/{p.name(pod)}"


def _eviction(pod: Pod) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": p.name(pod), "namespace": p.namespace(pod)},
    }


@dataclass(frozen=True)
class Refusals:
    """What the API refused of a plan."""

    placeholders: str | None = None  # why it would not create them
    eviction: str | None = None  # why it would not evict the gang's pods
    seats_held: bool = False  # members started directly were nominated but not released: see Executor.apply
    # Members started directly left gated for the gang's next reconcile to release, with their seats.
    seats_to_release: SeatsToRelease | None = None
    # A swap waits: its placeholder's DRA claims could not be handed to its member yet; and, where the API
    # forbids it (yuniplace lacks a permission), why, for the gang's event.
    claims_kept: bool = False
    claims_forbidden: str | None = None


PREFERENCE_WEIGHT = 100
FORBIDDEN = "the API forbids yuniplace to"  # how a refusal for want of a permission begins


class Write(enum.Enum):
    """A kind of write a plan asks for, as its events announce them and a plan applied in part says them."""

    RECORD = "its record"
    CREATE = "placeholders created"
    DELETE = "placeholders deleted"
    SWAP = "members swapped in or started"
    UNGATE = "gates lifted"
    FAIL = "pods failed"
    MARK = "pods marked timed out"
    EVICT = "pods evicted"


W = Write
# The writes each event of a plan announces, beyond the gang's record (which every event waits for): it is
# posted once they are all done. A reason not named here announces every write of its plan; one named
# with none tells what was seen, not what is written.
ANNOUNCES: Mapping[Reason, frozenset[Write]] = {
    **{
        reason: frozenset()
        for reason in (
            Reason.TASK_GROUP_MATCH,
            Reason.TASK_GROUP_WARNING,
            Reason.INTERNAL_ERROR,
            Reason.PLACEHOLDER_ALLOCATED,
            Reason.GANG_RESERVATION_COMPLETE,
            Reason.GANG_WAITING,
            Reason.GANG_EXCEEDS_CAPACITY,
            Reason.GANG_GROUP_WAITING,
            Reason.GANG_DEGRADED,
            Reason.GANG_RECOVERED,
            Reason.GANG_BACKING_OFF,
            Reason.GANG_DEVICES,
        )
    },
    Reason.CREATING_PLACEHOLDERS: frozenset({W.CREATE}),
    Reason.GANG_STARTING: frozenset({W.SWAP, W.UNGATE}),
    Reason.NATIVE_GANG: frozenset({W.UNGATE}),
    Reason.TASK_GROUP_RESOURCE_MISMATCH: frozenset({W.DELETE, W.UNGATE}),
    Reason.TASK_GROUPS_ERROR: frozenset({W.DELETE, W.UNGATE, W.FAIL}),
    Reason.GANG_SCHEDULING_FAILED: frozenset({W.DELETE, W.UNGATE}),
    Reason.APPLICATION_FAILED: frozenset({W.DELETE, W.FAIL, W.EVICT}),
    Reason.PLACEHOLDER_TIMEOUT: frozenset({W.DELETE}),
    Reason.GANG_RESERVATION_RELEASED: frozenset({W.DELETE}),
    Reason.PLACEHOLDERS_REFUSED: frozenset({W.DELETE}),
    Reason.GANG_TIMED_OUT: frozenset({W.DELETE, W.MARK}),
    Reason.GANG_PREEMPTED: frozenset({W.DELETE, W.EVICT}),
    Reason.GANG_RESTARTING: frozenset({W.DELETE, W.EVICT}),
    Reason.GANG_RELEASED: frozenset({W.DELETE, W.EVICT}),
}


class Progress:
    """What of a plan's writes are done, by kind, counted as each write returns (from many threads)."""

    def __init__(self, plan: Plan) -> None:
        asked = {
            W.RECORD: 1 if plan.annotate and plan.originator is not None else 0,
            W.CREATE: len(plan.create),
            W.DELETE: len(plan.delete),
            W.SWAP: len(plan.swaps),
            W.UNGATE: len(plan.ungate),
            W.FAIL: len(plan.fail),
            W.MARK: len(plan.mark_timed_out) if plan.timed_out_mark is not None else 0,
            W.EVICT: len(plan.evict),
        }
        self.asked = {kind: count for kind, count in asked.items() if count}
        self.done: Counter[Write] = Counter()
        self._lock = threading.Lock()

    def count(self, kind: Write, times: int = 1) -> None:
        with self._lock:
            self.done[kind] += times

    def counting(
        self, kind: Write, function: Callable[[Any], Any], done: Callable[[Any], bool] = lambda _result: True
    ) -> Callable[[Any], Any]:
        """`function`, counting each call that returns as a write of `kind` done (`done`: whether its
        result says so; a placeholder the API refused to create is none)."""

        def counted(item: Any) -> Any:
            result = function(item)
            if done(result):
                self.count(kind)
            return result

        return counted

    def complete(self, kinds: Iterable[Write]) -> bool:
        return all(self.done[kind] >= self.asked.get(kind, 0) for kind in kinds)

    def announced(self, event: Event) -> bool:
        """Whether every write the event announces is done (see ANNOUNCES)."""
        return self.complete({W.RECORD, *ANNOUNCES.get(event.reason, Write)})

    def said(self) -> str:
        """What was done and what not, as a user reads it."""
        parts = []
        for kind, asked in self.asked.items():
            if kind is W.RECORD:
                parts.append("its record " + ("written" if self.done[kind] else "not written"))
            else:
                parts.append(f"{self.done[kind]} of {asked} {kind.value}")
        return ", ".join(parts)


def _marker_ops(pod: Pod, marker: tuple[str, str]) -> list[dict[str, Any]]:
    """JSON-patch operations writing the hand-off's annotation (see Swap.marker) on the member."""
    key, value = marker
    if p.annotations_of(pod):
        return [{"op": "add", "path": "/metadata/annotations/" + key.replace("/", "~1"), "value": value}]
    return [{"op": "add", "path": "/metadata/annotations", "value": {key: value}}]


def _prefer_node_ops(pod: Pod, node: str) -> list[dict[str, Any]]:
    """JSON-patch operations adding a preferred node-affinity term for `node` to whatever affinity
    the pod already has (its own terms are kept)."""
    term = {
        "weight": PREFERENCE_WEIGHT,
        "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]},
    }
    affinity = pod.get("spec", {}).get("affinity")
    if not affinity:
        return [
            {
                "op": "add",
                "path": "/spec/affinity",
                "value": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}},
            }
        ]
    node_affinity = affinity.get("nodeAffinity")
    if not node_affinity:
        return [
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity",
                "value": {"preferredDuringSchedulingIgnoredDuringExecution": [term]},
            }
        ]
    if not node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"):
        return [
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution",
                "value": [term],
            }
        ]
    return [
        {
            "op": "add",
            "path": "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/-",
            "value": term,
        }
    ]


def _pin_ops(pod: Pod, pins: Sequence[Pin]) -> list[dict[str, Any]]:
    """JSON-patch operations narrowing the pod's required node affinity to the pinned topology domains
    (topology.pinned, written as a patch): while a pod is gated, requirements may be added to its
    node-selector terms, or terms given where it has none."""
    base = "/spec/affinity"
    affinity = pod.get("spec", {}).get("affinity")
    if not affinity:
        return [{"op": "add", "path": base, "value": topology.pinned(None, pins)}]
    node_affinity = affinity.get("nodeAffinity")
    if not node_affinity:
        return [{"op": "add", "path": f"{base}/nodeAffinity", "value": topology.pinned(None, pins)["nodeAffinity"]}]
    required = f"{base}/nodeAffinity/{topology.NODE_AFFINITY_REQUIRED}"
    terms = (node_affinity.get(topology.NODE_AFFINITY_REQUIRED) or {}).get("nodeSelectorTerms")
    if not terms:
        value = topology.pinned(None, pins)["nodeAffinity"][topology.NODE_AFFINITY_REQUIRED]
        return [{"op": "add", "path": required, "value": value}]
    ops: list[dict[str, Any]] = []
    for index, term in enumerate(terms):
        path = f"{required}/nodeSelectorTerms/{index}/matchExpressions"
        if term.get("matchExpressions"):
            ops += [
                {"op": "add", "path": f"{path}/-", "value": expression} for expression in topology.expressions(pins)
            ]
        else:
            ops.append({"op": "add", "path": path, "value": topology.expressions(pins)})
    return ops


class Executor:
    def __init__(
        self,
        client: KubeClient,
        store: PodStore,
        recorder: EventRecorder,
        metrics: Metrics,
        landings: Landings,
        *,
        concurrency: int = WRITE_CONCURRENCY,
        contended: Callable[[p.AppKey], bool] = lambda _key: True,
        seats_hold: Callable[[p.AppKey, Sequence[Swap], int], bool] = lambda _key, _swaps, _version: True,
        seats_clear: Callable[[Sequence[Swap], int], Clearance] = lambda _swaps, _version: Clearance.CONTENDED,
        pod_group_status_path: Callable[[PodGroupApi, p.AppKey], str] = status_path,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._clock = clock
        self._contended = contended
        self._seats_hold = seats_hold
        self._seats_clear = seats_clear
        self._pod_group_status_path = pod_group_status_path
        self._store = store
        self._recorder = recorder
        self._metrics = metrics
        self._landings = landings
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="writes")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _each(self, function: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """Run `function` on every item concurrently and return its results; re-raise the first
        failure after all ran."""
        futures = [self._pool.submit(function, item) for item in items]
        errors = [error for f in futures if (error := f.exception()) is not None]
        if errors:
            raise errors[0]
        return [f.result() for f in futures]

    def apply(self, plan: Plan) -> Refusals:
        """Carry the plan out, then post its events; return what the API refused: to create its
        placeholders (a quota, an admission policy), or to evict its pods (a PodDisruptionBudget), for the
        controller to decide what that means. A write that fails stops the plan there: the events of what
        was done are posted, none of the rest, and PartlyApplied says what was done (the gang's next look
        makes the rest again); Moot where the write found its pod gone (deleted meanwhile)."""
        progress = Progress(plan)
        self._landings.hold(plan.key)  # a member bound meanwhile is told after the plan's own events
        try:
            try:
                refused = self._write(plan, progress)
            except NotFound as error:
                self._announce(plan, progress)
                raise Moot(progress.said(), error) from error
            except Exception as error:
                self._announce(plan, progress)
                raise PartlyApplied(progress.said(), error) from error
            self._announce(plan, progress)
            return refused
        finally:
            self._landings.release(plan.key)

    def _announce(self, plan: Plan, progress: Progress) -> None:
        """Post each event whose writes are done, in the plan's order: after the writes, and before
        the landings of members its writes released (held until then), so a gang's GangStarting
        comes before its GangStarted; never an event before what it tells of."""
        for event in plan.events:
            if progress.announced(event):
                self._recorder.record(event.pod, event.reason, event.note, kind=event.kind)

    def _write(self, plan: Plan, progress: Progress) -> Refusals:
        direct = [swap for swap in plan.swaps if swap.direct]
        # Whether the swaps are nominated is known first where the record may ride in a nomination,
        # else only once the plan's other writes are done, as close as may be to the swaps.
        candidate = self._record_carrier(plan)
        nominated = self._nominates(plan) if candidate is not None else None
        carrier = candidate if nominated else None
        recorded: int | None = None  # the version the record was written at, when written on its own
        if plan.annotate and plan.originator is not None and carrier is None:
            # First (or with the originator's nomination: see _record_carrier), so a controller restarted
            # after any later step knows the reservation began.
            with self._stage("record", bool(direct)):
                recorded = self._annotate(plan.originator, plan.annotate)
            progress.count(W.RECORD)
        created = self._each(progress.counting(W.CREATE, self._create, lambda why: why is None), plan.create)
        refusals = [why for why in created if why is not None]
        self._each(progress.counting(W.DELETE, lambda pod: self._delete(pod, "released")), plan.delete)
        kept: list[str | None] = []  # why each swap waits for its DRA claims to be handed over (None: it went)
        # Nominations guard the freed room against pods waiting to be scheduled; when none waits
        # (the controller sees every pod), nothing can take it, and the swap saves that write.
        for swap in plan.swaps:
            self._landings.expect(swap, plan.key, plan.originator)
        pins = plan.pins
        held = False
        if nominated is None:
            nominated = self._nominates(plan)
        to_release: SeatsToRelease | None = None
        if direct and not nominated:
            # Seats nobody else waits for go without nominations, once the pod watch has brought the
            # record back (every pod stored before it is known) and none of those took a seat or waits
            # to be tried for a seat's node; else they are nominated and held as seatcheck.py says. No
            # worker waits for the watch: until it has the record, the members are left to a next
            # reconcile (SeatsToRelease), and nominated if it has not come by the deadline.
            given = plan.seats_given
            barrier = recorded if recorded is not None else given.recorded_at if given is not None else None
            clearance = Clearance.UNSEEN
            if barrier is not None:
                with self._stage("check", True):
                    clearance = self._seats_clear(direct, barrier)
            if clearance is Clearance.UNSEEN and len(direct) == len(plan.swaps):
                if recorded is not None:
                    seats = {p.uid(swap.member): swap.node for swap in direct}
                    to_release = SeatsToRelease(seats, recorded, self._clock() + CATCH_UP_S)
                elif given is not None and self._clock() < given.deadline:
                    to_release = given
            nominated = clearance is not Clearance.CLEAR
        if to_release is not None:
            progress.count(W.SWAP, len(plan.swaps))  # started: its next look releases them
        elif nominated:
            # A batch of nominated swaps goes step by step: every nomination, then every placeholder
            # deleted, then every member released. No member is released while a placeholder of its
            # batch still holds room it is nominated to, which would make the two count twice there.
            # A seat holds nothing until its member's nomination does: a pod kube-scheduler took up
            # before it saw the nominations may have taken one, so members started directly are
            # released only once the seats are seen to hold (else they stay nominated, and gated, which
            # counts as done: their gang is started, its next look releases them).
            carried = p.uid(carrier.member) if carrier is not None else None

            def nominate(swap: Swap) -> int:
                version = self._nominate(swap, plan.annotate if p.uid(swap.member) == carried else None)
                if p.uid(swap.member) == carried:
                    progress.count(W.RECORD)
                return version

            with self._stage("nominate", bool(direct)):
                version = max(self._each(nominate, plan.swaps), default=0)
            with self._stage("check", bool(direct)):
                held = bool(direct) and not self._seats_hold(plan.key, direct, version)
            going = [swap for swap in plan.swaps if not (held and swap.direct)]
            kept = self._each(self._hand_over_claims, going)
            going = [swap for swap, why in zip(going, kept, strict=True) if why is None]
            # Held seats, and swaps waiting for their claims, count as done: their gang is reserved or
            # started, and its next look completes them.
            progress.count(W.SWAP, len(plan.swaps) - len(going))
            self._each(lambda s: self._delete(s.placeholder, "swapped"), [s for s in going if s.placeholder])
            release = progress.counting(W.SWAP, lambda s: self._ungate(s.member, pins=pins.get(p.uid(s.member), ())))
            with self._stage("release", bool(direct and going)):
                self._each(release, going)
        else:
            # Steered, not nominated, each member counts only once it is released, on the node its own
            # placeholder has just left: each swap goes at its own pace, and the first members are
            # bound while the last placeholders are still being deleted.
            steer = progress.counting(W.SWAP, lambda s: self._swap_steered(s, pins.get(p.uid(s.member), ())))
            with self._stage("release", bool(direct)):
                kept = self._each(steer, plan.swaps)
        ungate = progress.counting(W.UNGATE, lambda pod: self._ungate(pod, pins=pins.get(p.uid(pod), ())))
        self._each(ungate, plan.ungate)
        self._each(progress.counting(W.FAIL, self._fail), plan.fail)
        if plan.timed_out_mark is not None:
            mark: dict[str, str | None] = {plan.timed_out_mark: "true"}
            self._each(progress.counting(W.MARK, lambda pod: self._annotate(pod, mark)), plan.mark_timed_out)
        eviction = self._evict_all(plan.evict, evicted=lambda: progress.count(W.EVICT)) if plan.evict else None
        api = pod_group_api([plan.originator] if plan.originator is not None else [])
        if plan.pod_group_status is not None and api is not None:
            self._report_pod_group(api, plan.key, plan.pod_group_status)
        forbidden = next((why for why in kept if why is not None and why.startswith(FORBIDDEN)), None)
        return Refusals(refusals[0] if refusals else None, eviction, held, to_release, any(kept), forbidden)

    def _stage(self, stage: str, timed: bool) -> contextlib.AbstractContextManager[Any]:
        """Time a stage of a direct start (where `timed`): what holds a worker, under load, shows by stage."""
        return self._metrics.direct_start_seconds.labels(stage).time() if timed else contextlib.nullcontext()

    def _nominates(self, plan: Plan) -> bool:
        """Whether the plan's swaps go as a nominated batch: room a swap frees, or a seat, that a pod of
        another application waits to take."""
        return self._contended(plan.key)

    @staticmethod
    def _record_carrier(plan: Plan) -> Swap | None:
        """The originator's own swap, whose nomination, if the swaps are nominated, carries the gang's
        record (plan.annotate) in the same write, a round of writes sooner than the record alone would
        go. Only where the nominations would be the plan's first writes: a controller restarted before
        the record is written then finds the gang as it was (no placeholder made or deleted, no member
        released, at most some members nominated, which it nominates again) and makes the same plan."""
        if not plan.annotate or plan.originator is None or plan.create or plan.delete:
            return None
        originator = p.uid(plan.originator)
        return next((s for s in plan.swaps if p.uid(s.member) == originator and s.marker is not None), None)

    def _evict_all(self, pods: list[Pod], evicted: Callable[[], None] = lambda: None) -> str | None:
        """Evict every pod, or none: each eviction is tried as a dry run first, so that a
        PodDisruptionBudget that forbids one of them leaves the whole gang running. Return why not;
        `evicted` is called as each pod is."""
        for pod in pods:
            try:
                self._client.request(
                    "POST", f"{_pod_path(pod)}/eviction", body=_eviction(pod), query={"dryRun": "All"}, retry=False
                )
            except NotFound:
                continue
            except (TooManyRequests, Forbidden) as error:
                return f"pod {p.name(pod)}: {error.message}"
        # One after another: each eviction updates the pods' PodDisruptionBudget, and concurrent ones
        # conflict on it, which the API answers with 429s to back off from. Those not on a node yet go
        # first: evicted after the others, one could be bound to the room they free and run alone.
        for pod in sorted(pods, key=lambda pod: bool(p.node_name(pod))):
            self._evict(pod)
            evicted()
        return None

    def _evict(self, pod: Pod) -> None:
        """Evict the pod, then read it back into the store: the next reconcile must not see it as it
        was before (and evict it, and announce it, once more) because its watch event is still on
        its way."""
        try:
            self._client.request("POST", f"{_pod_path(pod)}/eviction", body=_eviction(pod))
            self._store.upsert(self._client.get(_pod_path(pod), decode=watched.PODS.object))
        except NotFound:
            self._store.delete(pod)

    def _report_pod_group(self, api: PodGroupApi, key: p.AppKey, status: dict[str, Any]) -> None:
        """Keep a PodGroup's status as its users read it (kubectl get podgroups), in its own scheduler's
        terms (scheduler-plugins' or Volcano's)."""
        with contextlib.suppress(NotFound):  # deleted meanwhile
            self._client.patch(self._pod_group_status_path(api, key), {"status": status})

    def _annotate(self, pod: Pod, annotations: dict[str, str | None]) -> int:
        """Write the annotations; return the version written."""
        updated = self._client.patch(
            _pod_path(pod), {"metadata": {"annotations": annotations}}, decode=watched.PODS.object
        )
        self._store.upsert(updated)
        return p.resource_version(updated)

    def _create(self, manifest: Pod) -> str | None:
        """Create a placeholder; return the API's reason when it refuses to (a ResourceQuota or an
        admission policy of the namespace): that is the application's outcome, not a controller error."""
        path = f"/api/v1/namespaces/{manifest['metadata']['namespace']}/pods"
        try:
            created = self._client.create(path, manifest, decode=watched.PODS.object)
        except AlreadyExists:
            return None  # deterministic name: an earlier attempt (or another replica) made it
        except (Forbidden, Invalid, BadRequest) as error:
            return f"placeholder {manifest['metadata']['name']}: {error.message}"
        self._metrics.placeholders_created.inc()
        self._store.upsert(created)
        return None

    def _delete(self, pod: Pod, reason: str) -> None:
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": p.uid(pod)}}
        try:
            self._client.delete(_pod_path(pod), body)
        except (NotFound, Conflict):
            pass  # already gone, or the name now belongs to a newer pod that is not ours to delete
        else:
            self._metrics.placeholders_deleted.labels(reason).inc()
        self._store.delete(pod)

    def _swap_steered(self, swap: Swap, pins: Sequence[Pin]) -> str | None:
        """A swap at its own pace; why it waits, where it does (its placeholder's claims not handed over)."""
        why = self._hand_over_claims(swap)
        if why is not None:
            return why
        if swap.placeholder is not None:
            self._delete(swap.placeholder, "swapped")
        self._ungate(swap.member, marker=swap.marker, prefer=swap.node, pins=pins)
        return None

    def _hand_over_claims(self, swap: Swap) -> str | None:
        """Before its placeholder goes, the member joins the `reservedFor` of each DRA claim the
        placeholder holds for it: a claim stays allocated while it names a pod that lives, so its devices
        pass from one to the other and are never free in between (a nomination holds no device). The
        API refuses the entry on a claim that is not allocated (the placeholder is not placed, or the
        claim was given up) or is being deleted: the swap then waits. Return why it waits, or None once
        every claim is handed over."""
        member = swap.member
        consumer = {"resource": "pods", "name": p.name(member), "uid": p.uid(member)}
        for claim in swap.claims:
            path = f"{DRA_API}/namespaces/{p.namespace(member)}/resourceclaims/{claim}/status"
            try:
                self._client.patch(path, {"status": {"reservedFor": [consumer]}}, content_type=STRATEGIC_MERGE_PATCH)
            except Forbidden as error:
                why = (
                    f"{FORBIDDEN} hand DRA claim {claim} to member {p.name(member)} ({error.message}): grant it "
                    "resourceclaims/status and, from Kubernetes 1.36, resourceclaims/binding (the chart's ClusterRole "
                    "does); the member stays gated and its devices held by its placeholder"
                )
                log.error("%s/%s: %s", p.namespace(member), p.name(member), why)
                return why
            except (NotFound, Invalid, Conflict) as error:
                log.info("claim %s/%s not handed to %s yet: %s", p.namespace(member), claim, p.name(member), error)
                return f"claim {claim} not handed over yet: {error.message}"
        if swap.claims:
            self._metrics.claims_handed_over.inc(len(swap.claims))
        return None

    def _nominate(self, swap: Swap, record: Mapping[str, str | None] | None = None) -> int:
        """Step 1 of a swap: nominate the member to the reserved node while its placeholder (or, started
        directly, admission's count of its seat) still holds the room. kube-scheduler counts a
        nominated pod's requests as taken on that node for pods of lower or equal priority from the
        moment it sees the nomination, gated or not (its queue records the nomination of a gated pod
        updated), so no pod it takes up after that can take the room; and a nomination, unlike a node
        pin, lets the member go elsewhere if the node fails it after all. The originator's nomination may
        carry the gang's `record` too (see _record_carrier). Return the member's resourceVersion once
        nominated."""
        member, marker = swap.member, swap.marker
        done = p.annotations_of(member).get(marker[0]) == marker[1] if marker else True
        if marker is None or (done and p.nominated_node(member) == swap.node and not record):
            return p.resource_version(member)
        # One write for both: pods/status accepts metadata, and the annotation tells a restarted
        # controller which placeholder this pod is taking the place of (or which seat it was given).
        step_one = {
            "metadata": {"annotations": {marker[0]: marker[1], **(record or {})}},
            "status": {"nominatedNodeName": swap.node},
        }
        nominated = self._client.patch(f"{_pod_path(member)}/status", step_one, decode=watched.PODS.object)
        self._store.upsert(nominated)
        return p.resource_version(nominated)

    def _ungate(
        self, pod: Pod, marker: tuple[str, str] | None = None, prefer: str | None = None, pins: Sequence[Pin] = ()
    ) -> None:
        """Remove yuniplace's scheduling gate (and only it). An unnominated swap's member also gets, in
        the same write, the hand-off's annotation (as a nomination records it) and a preference for its
        node: while a pod is gated its node affinity may still be extended, and kube-scheduler's
        NodeAffinity score then steers it to the room just freed for it (or its seat). A member of a
        gang that requires a topology domain is kept in it, in the same write, wherever it lands."""
        for _ in range(3):
            gates = pod.get("spec", {}).get("schedulingGates") or []
            index = next((i for i, g in enumerate(gates) if g.get("name") == keys.GATE), None)
            if index is None:
                return
            patch: list[dict[str, Any]] = [
                {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": keys.GATE},
                {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
            ]
            if marker is not None:
                patch += _marker_ops(pod, marker)
            steered = pod
            if pins:
                patch += _pin_ops(pod, pins)
                spec = pod.get("spec", {})
                steered = {**pod, "spec": {**spec, "affinity": topology.pinned(spec.get("affinity"), pins)}}
            if prefer is not None:
                patch += _prefer_node_ops(steered, prefer)
            try:
                updated = self._client.patch(_pod_path(pod), patch, content_type=JSON_PATCH, decode=watched.PODS.object)
            except NotFound:
                return
            except (Invalid, Conflict):
                pod = self._client.get(_pod_path(pod), decode=watched.PODS.object)  # the gates moved: look again
                continue
            self._store.upsert(updated)
            return
        raise Conflict(409, "Conflict", f"could not remove the {keys.GATE} gate from {_pod_path(pod)}")

    def _fail(self, failure: Failure) -> None:
        """Fail a held pod: its phase first, so kube-scheduler (which passes terminal pods over) never
        sees it ungated and pending; then its gate, so `kubectl get pods` shows it Failed rather
        than SchedulingGated."""
        pod = failure.pod
        # kubectl shows a pod whose PodScheduled condition says SchedulingGated as such, whatever its
        # phase: the condition is replaced (strategic merge: by type) with why it will not be scheduled.
        reason = failure.reason.value
        scheduled = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": failure.message,
            "lastTransitionTime": p.format_time(time.time()),
        }
        status = {"phase": "Failed", "reason": reason, "message": failure.message, "conditions": [scheduled]}
        try:
            updated = self._client.patch(
                f"{_pod_path(pod)}/status",
                {"status": status},
                content_type=STRATEGIC_MERGE_PATCH,
                decode=watched.PODS.object,
            )
        except NotFound:
            return
        self._store.upsert(updated)
        self._recorder.record(pod, failure.reason, failure.message)
        self._ungate(updated)
