"""A steady stream of mixed gangs, as the users of a shared cluster submit them: Spark-like applications
of bare pods (a driver carrying the task groups, executors, sometimes parameter servers; Soft or Hard),
and Jobs whose every pod carries the task groups (Soft); in two teams' namespaces whose queues borrow
from and reclaim from each other; some too large for any node. Each gang runs for a while and ends as
its program would, and some are deleted partway. Everything drawn from one seeded generator.

Where the pods run is the stream's workload: kwok's nodes (nothing runs; the stream ends a gang by
setting its pods Succeeded) or real kubelets (each member runs a program that ends by itself, sized for
the smaller nodes, asking the policies drawn for it on a lost member).

The stream knows what it did on purpose (which gangs and pods it deleted, and when), for the
invariants to tell its deletions from anyone else's, and what became of each gang."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from yuniplace.bench.invariants import EVICTED, FELL_BACK, Gang, PodTrace
from yuniplace.bench.observer import PodObserver
from yuniplace.gang import keys
from yuniplace.gang.onloss import LossPolicy
from yuniplace.kube import ApiError, KubeClient, NotFound
from yuniplace.localcluster.components import KEEPS_RUNNING_ANNOTATION

log = logging.getLogger(__name__)

APP_LABEL = "applicationId"
STREAM_LABEL = "faults.yuniplace.io/stream"
TICK_S = 1.0
CREATE_WORKERS = 4
# After its end (completed, fallen back, failed), how long a gang's pods stay before the stream deletes
# them, as a user cleaning up would; and how long a gang may live at all before it is abandoned.
CLEANUP_AFTER_S = 20.0
ABANDON_AFTER_S = 900.0
JOB_TTL_S = 30
# How a Job of the stream replaces a pod that went. ENDED: once the pod has ended (its podFailurePolicy
# ignores evictions, as the lost-members guide recommends; Kubernetes then sets podReplacementPolicy
# Failed). AT_ONCE: as soon as the pod is being deleted, even on a node that no longer answers (no
# podFailurePolicy, so each eviction counts against a backoffLimit high enough for every restart).
# INDEXED: an Indexed Job with a backoffLimitPerIndex (and the podFailurePolicy), whose pod failure
# backoff counts each index's failures, not the Job's.
ENDED, AT_ONCE, INDEXED = "once ended", "at once", "indexed, once ended"
REPLACEMENTS = (ENDED, AT_ONCE, INDEXED)
REPLACING_BACKOFF_LIMIT = 100
BACKOFF_LIMIT_PER_INDEX = 10
# What the members of a plan's broken group name: no node has it and no registry answers, so the kubelet
# fails to pull it (ErrImagePull, then ImagePullBackOff) for as long as the pod lives.
BROKEN_IMAGE = "yuniplace.local/no-such-image:0"
LOST_NODE_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


@dataclass(frozen=True)
class Workload:
    """How the stream's gangs run on the nodes of the campaign's cluster. The default is kwok's: no
    program runs, a long-running Job pod is kept running by an annotation kwok reads, and the stream
    ends a gang by setting its pods Succeeded."""

    image: str = "busybox"
    # Every request and minResource scaled by this: the stream's sizes are for nodes of 8 CPUs.
    scale: float = 1.0
    # Members run a program (a shell sleeping the gang's lifetime, exiting 1 on SIGTERM) that ends by
    # itself: real kubelets.
    programs: bool = False
    # How long a gang's pods tolerate their node NotReady or unreachable (None: Kubernetes' 300 s).
    lost_node_toleration_s: int | None = None
    # What a long-running Job asks on a lost member, one drawn for each; kwok's always restart.
    policies: tuple[str, ...] = ("restart",)
    # How a Job replaces a pod that went, one drawn for each; kwok's always ENDED.
    replacements: tuple[str, ...] = (ENDED,)
    # Seconds a deleted pod has to end; kwok's 0 deletes it at once, even from a node that no longer
    # answers, where a real pod stays terminating until its node is back.
    termination_grace_s: int = 0
    ready_timeout_s: int | None = None  # yuniplace.io/ready-timeout-seconds, else the controller's
    recovery_timeout_s: int | None = None  # yuniplace.io/recovery-timeout-seconds of `release` gangs


KWOK = Workload()


def scaled(quantity: str, scale: float) -> str:
    """A CPU ("500m", "2") or memory ("1Gi", "512Mi") quantity of the stream's, times `scale`."""
    if scale == 1.0:
        return quantity
    if quantity.endswith(("Gi", "Mi")):
        mebibytes = float(quantity[:-2]) * (1024 if quantity.endswith("Gi") else 1)
        return f"{round(mebibytes * scale)}Mi"
    millis = float(quantity[:-1]) if quantity.endswith("m") else float(quantity) * 1000
    return f"{round(millis * scale)}m"


class Outcome:
    """What became of a gang, for the report."""

    COMPLETED = "completed"
    FELL_BACK = "fell back (Soft)"
    FAILED = "failed (Hard)"
    PREEMPTED = "preempted (evicted whole)"
    DELETED = "deleted partway"
    LOST_ORIGINATOR = "originator deleted by a fault"
    NOT_CREATED = "not created whole"
    ABANDONED = "abandoned (still unfinished)"
    UNFINISHED = "unfinished at the end"


@dataclass
class Group:
    name: str
    count: int
    cpu: str
    memory: str


@dataclass
class GangPlan:
    """One gang as the stream drew it, and what became of it."""

    app: str
    namespace: str
    kind: str  # "pods" (a driver and executors) or "job" (one Job per task group)
    style: str
    timeout_s: int
    groups: list[Group]
    fits: bool
    lifetime_s: float | None  # how long it runs once whole; None: its Jobs' pods complete at once
    delete_after_s: float | None  # deleted this long after its creation, partway
    on_loss: str | None = None  # what it asks on a lost member (yuniplace.io/on-member-lost), if anything
    replacement: str = ENDED  # how its Jobs replace a pod that went
    restart_limit: int | None = None  # yuniplace.io/restart-limit, else the controller's
    broken_group: str | None = None  # the members of this group name an image that cannot be pulled
    created_at: float = 0.0
    all_running_at: float | None = None
    finished: bool = False  # its pods were told to succeed
    ended_at: float | None = None
    outcome: str | None = None
    cleaned: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.app}"

    @property
    def originator(self) -> str | None:
        return f"{self.app}-driver-0" if self.kind == "pods" else None

    @property
    def members(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def restarts_on_loss(self) -> bool:
        """Long-running Jobs (a training job, say) ask to be restarted whole when they lose a member."""
        return self.on_loss == "restart"

    def gang(self, workload: Workload = KWOK) -> Gang:
        minimums = {g.name: g.count for g in self.groups}
        return Gang(
            self.key,
            self.style,
            float(self.timeout_s),
            minimums,
            self.originator,
            self.restarts_on_loss,
            on_loss=self.on_loss,
            recovery_timeout_s=float(workload.recovery_timeout_s or LossPolicy().recovery_timeout_s),
            ready_timeout_s=None
            if not workload.programs
            else float(workload.ready_timeout_s or LossPolicy().ready_timeout_s),
            restart_limit=LossPolicy().restart_limit if self.restart_limit is None else self.restart_limit,
        )


def draw(rng: random.Random, index: int, namespaces: Sequence[str], workload: Workload = KWOK) -> GangPlan:
    """The `index`th gang of the stream. What another workload draws besides kwok's comes last, and
    only for it: kwok's stream draws the same gangs whatever the other workloads draw."""
    kind = "pods" if rng.random() < 0.6 else "job"
    fits = rng.random() >= 0.08
    big = "12"  # more CPU than any node has: it fits nowhere
    if kind == "pods":
        groups = [
            Group("driver", 1, "1", "1Gi"),
            Group("executors", rng.randint(2, 6), rng.choice(["1", "2"]) if fits else big, "2Gi"),
        ]
        if rng.random() < 0.3:
            groups.append(Group("ps", rng.randint(1, 2), "1", "1Gi"))
    else:
        groups = [Group("workers", rng.randint(2, 8), rng.choice(["500m", "1", "2"]) if fits else big, "1Gi")]
        if rng.random() < 0.3:
            groups.append(Group("ps", rng.randint(1, 2), "1", "1Gi"))
    instant = kind == "job" and rng.random() < 0.5
    plan = GangPlan(
        app=f"g{index:04d}-{kind}",
        namespace=rng.choice(list(namespaces)),
        kind=kind,
        style=rng.choice(["Soft", "Soft", "Hard"]) if kind == "pods" else "Soft",
        timeout_s=rng.choice([30, 45, 60, 90]),
        groups=groups,
        fits=fits,
        lifetime_s=None if instant else rng.uniform(20.0, 90.0),
        delete_after_s=rng.uniform(5.0, 60.0) if rng.random() < 0.08 else None,
    )
    if kind == "job" and not instant:
        # Long-running Jobs (a training job, say) ask what to do when they lose a member.
        policies = workload.policies
        plan.on_loss = policies[0] if len(policies) == 1 else rng.choice(policies)
    if kind == "job" and len(workload.replacements) > 1:
        plan.replacement = rng.choice(workload.replacements)
    return plan


def _tolerations(workload: Workload) -> list[dict[str, Any]]:
    if workload.lost_node_toleration_s is None:
        return []
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": workload.lost_node_toleration_s}
        for key in LOST_NODE_TAINTS
    ]


def _task_groups(plan: GangPlan, workload: Workload = KWOK) -> str:
    groups: list[dict[str, Any]] = [
        {
            "name": g.name,
            "minMember": g.count,
            "minResource": {"cpu": scaled(g.cpu, workload.scale), "memory": scaled(g.memory, workload.scale)},
        }
        for g in plan.groups
    ]
    if tolerations := _tolerations(workload):  # placeholders leave a lost node as the members do
        for group in groups:
            group["tolerations"] = tolerations
    return json.dumps(groups)


def _program(plan: GangPlan) -> list[str]:
    """What a member runs on a real kubelet: its gang's lifetime asleep (a Job that completes at once,
    nothing), ending with 1 when told to stop (SIGTERM), as a program that did not finish its work."""
    if plan.lifetime_s is None:
        return ["true"]
    return ["sh", "-c", f'trap "exit 1" TERM; sleep {plan.lifetime_s:.0f} & wait $!']


def _pod_template(plan: GangPlan, group: Group, *, carries_groups: bool, workload: Workload = KWOK) -> dict[str, Any]:
    """Labels, annotations and spec of one pod of the gang, as its submitter writes them (the webhook
    adds the gate)."""
    notes = {
        keys.TASK_GROUP_NAME: group.name,
        keys.SCHEDULING_POLICY_PARAMETERS: f"placeholderTimeoutInSeconds={plan.timeout_s} "
        f"gangSchedulingStyle={plan.style}",
    }
    if carries_groups:
        notes[keys.TASK_GROUPS] = _task_groups(plan, workload)
    if plan.kind == "job" and plan.lifetime_s is not None and not workload.programs:
        notes[KEEPS_RUNNING_ANNOTATION] = "never"
    if plan.on_loss is not None:
        notes[keys.ON_MEMBER_LOST] = plan.on_loss
    if workload.ready_timeout_s is not None:
        notes[keys.READY_TIMEOUT] = str(workload.ready_timeout_s)
    if plan.on_loss == "release" and workload.recovery_timeout_s is not None:
        notes[keys.RECOVERY_TIMEOUT] = str(workload.recovery_timeout_s)
    if plan.restart_limit is not None:
        notes[keys.RESTART_LIMIT] = str(plan.restart_limit)
    requests = {"cpu": scaled(group.cpu, workload.scale), "memory": scaled(group.memory, workload.scale)}
    container: dict[str, Any] = {
        "name": "main",
        "image": workload.image,
        "resources": {"requests": requests, "limits": requests},
    }
    if group.name == plan.broken_group:
        container["image"] = BROKEN_IMAGE
    if workload.programs:
        container["command"] = _program(plan)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": workload.termination_grace_s,
        "containers": [container],
    }
    if tolerations := _tolerations(workload):
        spec["tolerations"] = tolerations
    return {"metadata": {"labels": {APP_LABEL: plan.app, STREAM_LABEL: "true"}, "annotations": notes}, "spec": spec}


def manifests(plan: GangPlan, workload: Workload = KWOK) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) for each object of the gang, in the order a submitter creates them."""
    objects: list[tuple[str, dict[str, Any]]] = []
    if plan.kind == "pods":
        for group in plan.groups:
            for i in range(group.count):
                template = _pod_template(plan, group, carries_groups=group.name == "driver", workload=workload)
                pod = {"apiVersion": "v1", "kind": "Pod", **template}
                pod["metadata"] = {"name": f"{plan.app}-{group.name}-{i}", **template["metadata"]}
                objects.append((f"/api/v1/namespaces/{plan.namespace}/pods", pod))
        return objects
    for group in plan.groups:
        job: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"{plan.app}-{group.name}", "labels": {APP_LABEL: plan.app, STREAM_LABEL: "true"}},
            "spec": {
                "completions": group.count,
                "parallelism": group.count,
                "ttlSecondsAfterFinished": JOB_TTL_S,
                # Evictions (a reclaim, a node drained) do not count against its backoffLimit.
                "podFailurePolicy": {
                    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
                },
                "template": _pod_template(plan, group, carries_groups=True, workload=workload),
            },
        }
        if plan.replacement == AT_ONCE:
            del job["spec"]["podFailurePolicy"]
            job["spec"]["backoffLimit"] = REPLACING_BACKOFF_LIMIT
        elif plan.replacement == INDEXED:
            job["spec"]["completionMode"] = "Indexed"
            job["spec"]["backoffLimitPerIndex"] = BACKOFF_LIMIT_PER_INDEX
        objects.append((f"/apis/batch/v1/namespaces/{plan.namespace}/jobs", job))
    return objects


@dataclass
class StreamRecord:
    """What the stream did on purpose."""

    disturbed: dict[str, float] = field(default_factory=dict)  # application -> when it deleted part of it
    deleted: set[str] = field(default_factory=set)  # UIDs of pods it deleted


class GangStream:
    """Creates gangs at seeded intervals and tends them (each ends as its program would, some are
    deleted partway) from `run(stop)` until stopped; `drain(deadline)` then lets the last ones end."""

    def __init__(
        self,
        client: KubeClient,
        namespaces: Sequence[str],
        observer: PodObserver,
        rng: random.Random,
        *,
        interval_s: tuple[float, float] = (2.0, 6.0),
        default_timeout_s: float = 900.0,
        workload: Workload = KWOK,
        report: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self._client = client
        self.workload = workload
        self._namespaces = list(namespaces)
        self._observer = observer
        self._rng = rng
        self._interval_s = interval_s
        self._default_timeout_s = default_timeout_s
        self._report = report
        self._lock = threading.Lock()
        self.plans: dict[str, GangPlan] = {}
        self.record = StreamRecord()
        self._pool = ThreadPoolExecutor(CREATE_WORKERS, thread_name_prefix="stream")
        self._arriving = threading.Event()
        self._arriving.set()

    # -- what the stream did --------------------------------------------------------------------------

    @property
    def namespaces(self) -> list[str]:
        return list(self._namespaces)

    def gangs(self) -> dict[str, Gang]:
        with self._lock:
            return {key: plan.gang(self.workload) for key, plan in self.plans.items()}

    def disturbed(self) -> dict[str, float]:
        with self._lock:
            return dict(self.record.disturbed)

    def deleted(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self.record.deleted)

    def outcomes(self) -> Counter[str]:
        with self._lock:
            return Counter(plan.outcome or Outcome.UNFINISHED for plan in self.plans.values())

    def live(self) -> list[GangPlan]:
        with self._lock:
            return [plan for plan in self.plans.values() if not plan.cleaned]

    def note_deleted(self, app: str, uid: str, at: float) -> None:
        """A pod of the application deleted on purpose by someone other than the stream (a fault)."""
        with self._lock:
            self.record.deleted.add(uid)
            self.record.disturbed.setdefault(app, at)

    def note_failed(self, app: str, at: float) -> None:
        """A member of the application failed on purpose by someone other than the stream (a fault)."""
        with self._lock:
            self.record.disturbed.setdefault(app, at)

    def _disturb(self, plan: GangPlan, at: float) -> None:
        with self._lock:
            self.record.disturbed.setdefault(plan.key, at)

    # -- creating ---------------------------------------------------------------------------------------

    def _create(self, plan: GangPlan) -> None:
        for path, body in manifests(plan, self.workload):
            try:
                self._client.create(path, body)
            except ApiError as error:
                # Refused after the client's retries (the webhook out for longer than they last, say).
                self._report(f"gang {plan.key} not created whole: {error}")
                self._disturb(plan, time.time())
                plan.outcome = Outcome.NOT_CREATED
                self._delete(plan)
                return

    def _arrive(self, index: int) -> None:
        self.add(draw(self._rng, index, self._namespaces, self.workload))

    def add(self, plan: GangPlan) -> None:
        """Submit a gang now and tend it with the others (a gang a fault brings, say)."""
        plan.created_at = time.time()
        with self._lock:
            self.plans[plan.key] = plan
        self._pool.submit(self._create, plan).add_done_callback(lambda done: self._created(plan, done))

    def _created(self, plan: GangPlan, done: Future[None]) -> None:
        """A gang the stream could not even write (its manifests, say) is reported, not lost in the pool."""
        if (error := done.exception()) is not None:
            self._report(f"gang {plan.key} not created: {error!r}")
            plan.outcome = Outcome.NOT_CREATED

    # -- ending -----------------------------------------------------------------------------------------

    def _delete(self, plan: GangPlan) -> None:
        """Delete what is left of the gang: its Jobs (their pods with them) or its pods."""
        at = time.time()
        for trace in self._observer.of_app(plan.key):
            if trace.placeholder or trace.gone_at is not None:
                continue
            if trace.terminal_at is None:
                self._disturb(plan, at)
            with self._lock:
                self.record.deleted.add(trace.uid)
            if plan.kind == "pods":
                with contextlib.suppress(NotFound):
                    self._client.delete(
                        f"/api/v1/namespaces/{plan.namespace}/pods/{trace.name}", {"gracePeriodSeconds": 0}
                    )
        if plan.kind == "job":
            for group in plan.groups:
                with contextlib.suppress(NotFound):
                    self._client.delete(
                        f"/apis/batch/v1/namespaces/{plan.namespace}/jobs/{plan.app}-{group.name}",
                        {"propagationPolicy": "Background"},
                    )

    def _finish(self, plan: GangPlan, members: list[PodTrace]) -> None:
        """End a gang as its program would: every running member succeeds (members that run a program
        of their own end by themselves)."""
        for member in members if not self.workload.programs else ():
            if member.terminal_at is None and member.gone_at is None and member.deleting_at is None:
                with contextlib.suppress(NotFound):
                    self._client.patch(
                        f"/api/v1/namespaces/{plan.namespace}/pods/{member.name}/status",
                        {"status": {"phase": "Succeeded"}},
                    )
        plan.finished = True

    def _tend(self, plan: GangPlan, now: float) -> None:
        traces = self._observer.of_app(plan.key)
        members = [t for t in traces if not t.placeholder]
        live = [m for m in members if m.gone_at is None and m.deleting_at is None]
        states = [state for m in members for _, state in m.states]
        if plan.outcome is None:
            plan.outcome = self._outcome(plan, members, states, now)
            if plan.outcome is not None:
                plan.ended_at = now
        if plan.outcome is None and plan.delete_after_s is not None and now >= plan.created_at + plan.delete_after_s:
            plan.outcome, plan.ended_at = Outcome.DELETED, now
            self._delete(plan)
        if plan.outcome is None and plan.lifetime_s is not None:
            running = [m for m in live if m.phase == "Running"]
            if plan.all_running_at is None and len(running) >= plan.members:
                plan.all_running_at = now
            # Once its time is up, whatever of it runs ends: pods a Job made again after an eviction too.
            if plan.all_running_at is not None and now >= plan.all_running_at + plan.lifetime_s:
                self._finish(plan, running)
        # A gang whose driver a fault deleted is left until the controller has released its executors
        # (after its default timeout), so that release is observed too.
        linger = self._default_timeout_s if plan.outcome == Outcome.LOST_ORIGINATOR else 0.0
        if plan.outcome is not None and plan.ended_at is not None and now >= plan.ended_at + CLEANUP_AFTER_S + linger:
            if any(m.gone_at is None and m.deleting_at is None for m in members):
                self._delete(plan)
            if plan.kind == "pods" or not live:
                plan.cleaned = True
        elif plan.outcome is None and now >= plan.created_at + ABANDON_AFTER_S:
            plan.outcome, plan.ended_at = Outcome.ABANDONED, now

    def _outcome(self, plan: GangPlan, members: list[PodTrace], states: list[str], now: float) -> str | None:
        if not members:
            return None
        if any(m.disruption == EVICTED for m in members) and plan.kind == "pods":
            return Outcome.PREEMPTED
        if plan.originator is not None:
            driver = [m for m in members if m.name == plan.originator]
            if driver and all(d.deleting_at or d.gone_at for d in driver) and not all(d.terminal_at for d in driver):
                return Outcome.LOST_ORIGINATOR
        if FELL_BACK in states:
            ended = all(m.terminal_at or m.gone_at for m in members)
            unschedulable = not plan.fits
            return Outcome.FELL_BACK if ended or unschedulable or plan.finished else None
        if "Failed" in states:
            return Outcome.FAILED
        done = [m for m in members if m.phase == "Succeeded"]
        if len(done) >= plan.members and all(m.terminal_at for m in members):
            return Outcome.COMPLETED
        return None

    # -- running ----------------------------------------------------------------------------------------

    def stop_arrivals(self) -> None:
        self._arriving.clear()

    def run(self, stop: threading.Event) -> None:
        """Create gangs at the seeded pace while arrivals last, and tend every gang until `stop`."""
        index = 0
        next_arrival = time.monotonic()
        while not stop.wait(TICK_S):
            if self._arriving.is_set() and time.monotonic() >= next_arrival:
                self._arrive(index)
                index += 1
                next_arrival = time.monotonic() + self._rng.uniform(*self._interval_s)
            now = time.time()
            for plan in self.live():
                try:
                    self._tend(plan, now)
                except (ApiError, OSError) as error:  # the API is away (a fault): tend it next tick
                    log.debug("tending %s: %s", plan.key, error)
        self._pool.shutdown(wait=True)

    def settled(self) -> bool:
        """Every gang has ended and been cleaned up."""
        return not self.live()
