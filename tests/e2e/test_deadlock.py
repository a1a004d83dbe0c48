"""Capacity-aware admission end to end: gangs that would split a full cluster between them and wait
on each other forever, and a large gang among a stream of small ones.

Each application stands for a job that needs all of its pods running to make progress: the test
finishes a job (its pods Succeeded) once every member runs, as the job itself would.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    Placement,
    events_for,
    finish,
    gang_job,
    gang_pod,
)
from yuniplace.gang import keys
from yuniplace.kube.watch import ListWatch
from yuniplace.localcluster import wait_until

# CI runs these on every supported Kubernetes version, not only the default.
pytestmark = pytest.mark.every_version

Pod = dict  # a pod as the watch delivers it


SIZES = {"job-a": 5, "job-b": 5, "job-c": 5}
FINISHING = "(finishing)"  # marks a job whose pods the test is ending, among the names of those that did
LONG = "placeholderTimeoutInSeconds=120"


class Jobs:
    """Watches a namespace's pods: which applications hold room at once (placeholders, or members
    started directly on their seats, until their job is done), when each first reserved (its first
    placeholder, or its first member given a seat), and, playing each job, finishes an application's
    pods once all of them run."""

    def __init__(self, cluster: Cluster, namespace: str, sizes: dict[str, int]) -> None:
        self._cluster = cluster
        self._namespace = namespace
        self.sizes = dict(sizes)
        self.lock = threading.Lock()
        self.live_placeholders: dict[str, set[str]] = defaultdict(set)
        self.placed: dict[str, set[str]] = defaultdict(set)
        self.most_apps_holding_at_once = 0
        self.fullest_holding: dict[str, str] = {}  # who held what when most held room at once
        self.standoff: dict[str, int] | None = None  # placed placeholders by app while all held some, none complete
        self.first_reserved: dict[str, float] = {}
        self.seated: dict[str, set[str]] = defaultdict(set)  # members started directly, until their job is done
        self.running: dict[str, set[str]] = defaultdict(set)
        self.succeeded: dict[str, set[str]] = defaultdict(set)
        self.done_at: dict[str, float] = {}
        self.hold: set[str] = set()  # jobs the test keeps running for now
        self.ended_again = 0  # pods seen Running again after they were ended
        self._watch = ListWatch(
            cluster.client,
            f"/api/v1/namespaces/{namespace}/pods",
            on_list=lambda pods: [self._seen("ADDED", pod) for pod in pods],
            on_event=self._seen,
        )

    def _seen(self, kind: str, pod: Pod) -> None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        finished: list[str] = []
        with self.lock:
            if labels.get(keys.PLACEHOLDER) == "true":
                app = (meta.get("annotations") or {}).get(keys.PLACEHOLDER_APP, "")
                gone = kind == "DELETED" or meta.get("deletionTimestamp")
                (self.live_placeholders[app].discard if gone else self.live_placeholders[app].add)(meta["name"])
                (self.placed[app].discard if gone or not pod["spec"].get("nodeName") else self.placed[app].add)(
                    meta["name"]
                )
                self.first_reserved.setdefault(app, time.monotonic())
                self._count_holding()
                partial = {a: len(self.placed[a]) for a in self.sizes if 0 < len(self.placed[a]) < self.sizes[a]}
                if len(partial) > 1 and sum(partial.values()) > sum((self.standoff or {}).values()):
                    self.standoff = partial  # the fullest split seen
                return
            app = labels.get("spark-app-selector")
            if app not in self.sizes:
                return
            phase = pod.get("status", {}).get("phase")
            if keys.SEAT in (meta.get("annotations") or {}) and phase not in ("Succeeded", "Failed"):
                self.first_reserved.setdefault(app, time.monotonic())
                (self.seated[app].discard if kind == "DELETED" else self.seated[app].add)(meta["name"])
                self._count_holding()
            elif phase in ("Succeeded", "Failed"):
                self.seated[app].discard(meta["name"])
            if phase == "Running" and kind != "DELETED":
                self.running[app].add(meta["name"])
                if meta["name"] in self.succeeded[app]:
                    # Ended already: kwok may apply its Running status once more from a stale view of
                    # the pod (the API lets a status patch take a pod back from Succeeded), which no kubelet
                    # does; the job's program ends it again.
                    self.ended_again += 1
                    finished = [meta["name"]]
            if phase == "Succeeded":
                self.succeeded[app].add(meta["name"])
                if len(self.succeeded[app] - {FINISHING}) == self.sizes[app]:
                    self.done_at.setdefault(app, time.monotonic())
            if len(self.running[app]) == self.sizes[app] and app not in self.hold and not self.succeeded[app]:
                finished = sorted(self.running[app])
                self.succeeded[app].add(FINISHING)
        for name in finished:
            finish(self._cluster, self._namespace, name)

    def _count_holding(self) -> None:
        holding = {a: f"{len(names)} placeholders" for a, names in self.live_placeholders.items() if names}
        for app, names in self.seated.items():
            if names:
                holding[app] = ", ".join(filter(None, [holding.get(app), f"seated {sorted(names)}"]))
        if len(holding) > self.most_apps_holding_at_once:
            self.most_apps_holding_at_once = len(holding)
            self.fullest_holding = holding

    def release(self, *apps: str) -> None:
        """Let held jobs finish (at once for those whose pods all run)."""
        for app in apps:
            with self.lock:
                self.hold.discard(app)
                names = (
                    sorted(self.running[app])
                    if len(self.running[app]) == self.sizes[app] and not self.succeeded[app]
                    else []
                )
                if names:
                    self.succeeded[app].add(FINISHING)
            for name in names:
                finish(self._cluster, self._namespace, name)

    def describe(self) -> str:
        with self.lock:
            return (
                f"placeholders placed {dict((a, len(n)) for a, n in self.placed.items())}, "
                f"live {dict((a, len(n)) for a, n in self.live_placeholders.items())}, "
                f"running {dict((a, len(n)) for a, n in self.running.items())}, "
                f"done {sorted(self.done_at)}, ended again {self.ended_again}, standoff {self.standoff}, "
                f"most holding room at once {self.fullest_holding}"
            )

    def all_done(self) -> bool:
        with self.lock:
            return len(self.done_at) == len(self.sizes)

    def __enter__(self) -> Jobs:
        threading.Thread(target=self._watch.run, daemon=True).start()
        wait_until(self._watch.synced.is_set, 30)
        return self

    def __exit__(self, *_: object) -> None:
        self._watch.stop()


def three_jobs_on_ten_slots(cluster: Cluster, namespace: str, place: Placement, timeout_s: int) -> None:
    """Three jobs of 5 pods created together on 10 free slots, interleaved as concurrent submitters would."""
    groups = [place.group("workers", 5, cpu="1", memory="1Gi")]
    policy = f"placeholderTimeoutInSeconds={timeout_s} gangSchedulingStyle=Soft"
    for i in range(5):
        for app in SIZES:
            pod = gang_pod(f"{app}-{i}", app, "workers", task_groups=groups, cpu="1", memory="1Gi", policy=policy)
            cluster.create_pod(namespace, place.pin(pod))


@pytest.fixture
def ten_slots(pool: Callable[..., Placement]) -> Placement:
    return pool(5, cpu="2", memory="8Gi")


def test_without_admission_three_gangs_split_ten_slots_and_time_out(
    cluster: Cluster,
    namespace: str,
    ten_slots: Placement,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    """Jobs run until the test has seen how the cluster was shared out (here: the first timeout),
    then finish once all their pods run; the makespan is from creation to the last job done."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, "--admission=off")
    process.start()
    try:
        with Jobs(cluster, namespace, SIZES) as jobs:
            jobs.hold.update(SIZES)
            started = time.monotonic()
            three_jobs_on_ten_slots(cluster, namespace, ten_slots, timeout_s=15)
            try:
                wait_until(lambda: events_for(cluster, namespace, "PlaceholderTimeOut"), 60)
            except TimeoutError:
                raise AssertionError(f"no timeout: {jobs.describe()}\n{process.log()}") from None
            # The standoff: several jobs held part of the cluster at once, none of them complete.
            assert jobs.most_apps_holding_at_once == 3
            assert jobs.standoff is not None and len(jobs.standoff) >= 2, jobs.describe()
            jobs.release(*SIZES)
            try:
                wait_until(jobs.all_done, 90)
                makespan = f"{max(jobs.done_at.values()) - started:.1f} s"
            except TimeoutError:
                makespan = "not finished 90 s after the timeouts (pods released normally split the nodes again)"
            timed_out = {e["involvedObject"]["name"] for e in events_for(cluster, namespace, "PlaceholderTimeOut")}
            record_property(
                "figure",
                f"admission off: placeholders of 3 jobs at once; fullest split {jobs.standoff} (of 5 each, "
                f"none complete); {len(timed_out)} job(s) timed out; makespan {makespan}",
            )
    finally:
        assert process.stop() == 0, process.log()


@pytest.fixture(params=["direct start", "placeholders always"])
def started(
    request: pytest.FixtureRequest, cluster: Cluster, namespace: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """A controller starting gangs either way: directly where they fit (the default), or always with
    placeholders first. No gang may hold up another on either path."""
    args = ["--placeholders=always"] if request.param == "placeholders always" else []
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, *args)
    process.start()
    yield process
    assert process.stop() == 0, process.log()


def test_with_admission_three_gangs_on_ten_slots_all_complete(
    cluster: Cluster,
    namespace: str,
    started: ControllerProcess,
    ten_slots: Placement,
    record_property: Callable[[str, object], None],
) -> None:
    """As above, the jobs run until the test has seen how the cluster was shared out (here: the
    third job told to wait). Then one of the two running ends, and once it is done the others: the
    one waiting starts in the room that freed while the other still runs, and never three hold room
    at once (ending both running jobs together, the third may rightly start in what each has freed)."""
    with Jobs(cluster, namespace, SIZES) as jobs:
        jobs.hold.update(SIZES)
        began = time.monotonic()
        three_jobs_on_ten_slots(cluster, namespace, ten_slots, timeout_s=15)
        told = wait_until(lambda: events_for(cluster, namespace, "GangWaiting"), 60)
        waiter = told[0]["involvedObject"]["name"].rsplit("-", 1)[0]
        first, second = [app for app in SIZES if app != waiter]
        jobs.release(first)
        wait_until(lambda: first in jobs.done_at, 60)
        jobs.release(second, waiter)
        wait_until(jobs.all_done, 120)
        makespan = max(jobs.done_at.values()) - began
        assert jobs.most_apps_holding_at_once <= 2, (
            f"three gangs held room at once on room for two: {jobs.describe()}\n{started.log()}"
        )
    assert not events_for(cluster, namespace, "PlaceholderTimeOut")
    waiting = events_for(cluster, namespace, "GangWaiting")
    assert "waiting for free capacity" in waiting[0]["message"] and "queue" in waiting[0]["message"], waiting
    record_property(
        "figure",
        f"admission on: all 3 jobs completed, none timed out; makespan {makespan:.1f} s; "
        f"{waiting[0]['involvedObject']['name']}: {waiting[0]['message']}",
    )


def test_a_large_gang_is_not_starved_by_a_stream_of_small_ones(
    cluster: Cluster,
    namespace: str,
    started: ControllerProcess,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    """4 slots; two small jobs (2 pods) run when a big one (4 pods) arrives, then small jobs keep
    arriving, one more each time a job finishes. The bound: the big job reserves as soon as the
    jobs running when it arrived have finished, before any small job that arrived after it, since
    every slot they free is one the big job can use."""
    place = pool(2, cpu="2", memory="8Gi")
    sizes = {"small-0": 2, "small-1": 2, "big": 4, **{f"small-{i}": 2 for i in range(2, 8)}}
    with Jobs(cluster, namespace, sizes) as jobs:
        jobs.hold.update({"small-0", "small-1"})
        gang_job(cluster, namespace, place, "small-0", 2, policy=LONG)
        gang_job(cluster, namespace, place, "small-1", 2, policy=LONG)
        wait_until(lambda: len(jobs.running["small-0"]) == 2 and len(jobs.running["small-1"]) == 2, 60)
        arrived = time.monotonic()
        gang_job(cluster, namespace, place, "big", 4, policy=LONG)
        wait_until(lambda: events_for(cluster, namespace, "GangWaiting"), 30)
        stream = iter(range(2, 8))

        def next_small() -> None:
            index = next(stream, None)
            if index is not None:
                gang_job(cluster, namespace, place, f"small-{index}", 2, policy=LONG)

        next_small()
        next_small()  # two small jobs queue behind the big one before anything finishes
        for held in ("small-0", "small-1"):
            jobs.release(held)
            next_small()
        freed = time.monotonic()  # the jobs running when the big one arrived are finishing
        wait_until(lambda: "big" in jobs.done_at, 90)
        big_started = jobs.first_reserved["big"] - arrived
        after_freed = jobs.first_reserved["big"] - freed
        for _ in range(4):
            next_small()
        try:
            wait_until(jobs.all_done, 120)
        except TimeoutError:
            raise AssertionError(f"not every job done: {jobs.describe()}\n{started.log()}") from None
        later = {
            app: jobs.first_reserved[app]
            for app in sizes
            if app.startswith("small-") and app not in ("small-0", "small-1")
        }
        assert all(t > jobs.first_reserved["big"] for t in later.values()), (
            f"a small job that arrived after the big one reserved first: {later} vs {jobs.first_reserved['big']}"
        )
    waiting = [e["message"] for e in events_for(cluster, namespace, "GangWaiting")]
    assert any("position" in note for note in waiting), waiting
    record_property(
        "figure",
        f"starvation: big gang reserved {big_started:.2f} s after arriving, {after_freed:.2f} s after the jobs "
        f"running then were let finish; {len(later)} small jobs that arrived later all reserved after it",
    )
