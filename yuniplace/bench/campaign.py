"""A fault campaign, or a soak (the same without faults), on a fresh local cluster: yuniplace installed
with its Helm chart (two controller replicas under leader election, the webhook in a process of its
own, a queues.yaml of two teams that borrow from each other), a steady stream of gangs, a fault every
20-40 s, and the invariants checked as it runs and once more when the last gangs have ended.

Not a test: its figures are reported, never asserted on. A seed replays the same gangs and faults."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from yuniplace.bench import invariants
from yuniplace.bench.deployment import Deployment, webhook_process
from yuniplace.bench.faults import Fault, FaultInjector
from yuniplace.bench.memory import rss_bytes
from yuniplace.bench.observer import NodeObserver, PodObserver
from yuniplace.bench.stream import STREAM_LABEL, GangStream
from yuniplace.bench.subjects import cpu_seconds
from yuniplace.gang import keys
from yuniplace.kube import ApiError, KubeClient
from yuniplace.localcluster import LocalCluster, NodePool, chartinstall, ensure_built, wait_until
from yuniplace.localcluster.build import DEFAULT_KUBERNETES
from yuniplace.localcluster.ports import free_ports

DEFAULT_SEED = 24
DEFAULT_DURATION_S = 1800.0
TEAMS = ("team-a", "team-b")
SYSTEM_NAMESPACE = "yuniplace-system"
CAMPAIGN_LABEL = "faults.yuniplace.io/campaign"
QUEUES_CONFIGMAP = "queues"
# The controller's timeout for members whose gang has no originator (its driver deleted).
DEFAULT_TIMEOUT_S = 60
CHECK_EVERY_S = 30.0
STALL_S = 20.0
SAMPLE_EVERY_S = 10.0
DRAIN_S = 240.0  # after the last arrival, at most this long for the last gangs to end
NODE_CPU = 8


@dataclass(frozen=True)
class Campaign:
    duration_s: float = DEFAULT_DURATION_S
    seed: int = DEFAULT_SEED
    faults: bool = True  # False: a soak
    interval_s: tuple[float, float] = (20.0, 40.0)
    nodes: int = 8
    grace_s: float = 60.0
    kubernetes: str = DEFAULT_KUBERNETES
    controller_args: tuple[str, ...] = ()

    @property
    def scenario(self) -> str:
        return "faults" if self.faults else "soak"


def queues_yaml(nodes: int, node_cpu: int = NODE_CPU) -> str:
    """Each team's namespace is its queue, guaranteed half the cluster's CPU; either may borrow the
    other's idle half, which the other reclaims when it needs it."""
    half = nodes * node_cpu // 2
    queue = "          - name: {}\n            resources:\n              guaranteed: {{vcore: {}}}"
    queues = "\n".join(queue.format(team, half) for team in TEAMS)
    return (
        "partitions:\n  - name: default\n    placementrules:\n      - name: tag\n        value: namespace\n"
        f"    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n{queues}\n"
    )


class Checker:
    """The invariants over what the campaign observed so far; each violation reported once, when found."""

    def __init__(
        self,
        observer: PodObserver,
        stream: GangStream,
        grace_s: float,
        report: Callable[[str], None],
        nodes: NodeObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._observer = observer
        self._nodes = nodes
        self._stream = stream
        self._grace_s = grace_s
        self._report = report
        self.started = time.time()
        self.found: dict[tuple[str, str, tuple[str, ...]], invariants.Violation] = {}
        self.checks = 0
        # A check comes CHECK_EVERY_S after the last one ended; a much longer gap means the campaign
        # itself stood still (a machine not quiet, whose processes were paused), which delays everything
        # it drives: the time it stood still is added to the grace, so what a pause delayed is not taken
        # for a defect. A check that was slow (its reads retried while the API server was away in a fault)
        # is not a pause: the gap is counted from when it ended.
        self.stalls: list[dict[str, float]] = []
        self.stalled_s = 0.0
        self._clock = clock
        self._last = clock()

    def observed(self) -> invariants.Observed:
        return invariants.Observed(
            pods=self._observer.snapshot(),
            events=self._observer.events(),
            gangs=self._stream.gangs(),
            disturbed=self._stream.disturbed(),
            deleted_by_campaign=self._stream.deleted(),
            now=time.time(),
            grace_s=self._grace_s + self.stalled_s,
            default_timeout_s=DEFAULT_TIMEOUT_S,
            node_troubles=self._nodes.troubles() if self._nodes is not None else {},
        )

    def check(self) -> None:
        try:
            self._check()
        finally:
            self._last = self._clock()

    def _check(self) -> None:
        gap = self._clock() - self._last
        if gap > CHECK_EVERY_S + STALL_S:
            self.stalls.append({"at_s": round(time.time() - self.started, 1), "gap_s": round(gap, 1)})
            self.stalled_s += gap - CHECK_EVERY_S
            self._report(f"WARNING: the campaign stood still for {gap:.0f}s: is the machine quiet?")
        try:
            observed = self.observed()
        except (ApiError, OSError) as error:  # the API server is away (a fault): next time
            self._report(f"check skipped: {error}")
            return
        self.checks += 1
        for violation in invariants.check(observed):
            key = (violation.invariant, violation.app, violation.objects)
            if key not in self.found:
                self.found[key] = violation
                self._report(
                    f"VIOLATION {violation.invariant}: {violation.app} {', '.join(violation.objects)}: "
                    f"{violation.detail} (due at +{violation.due - self.started:.0f}s)"
                )

    def write_traces(self, path: Path) -> None:
        """Everything observed of every pod, to see what happened to an application."""
        traces = [dataclasses.asdict(t) for t in self._observer.snapshot().values()]
        path.write_text(json.dumps(sorted(traces, key=lambda t: (t["app"], t["first_seen"]))))

    def live(self) -> list[dict[str, Any]]:
        """The gangs not ended and cleaned up: where each stands, for a gang left unfinished."""
        rows = []
        for plan in self._stream.live():
            traces = self._observer.of_app(plan.key)
            members = [t for t in traces if not t.placeholder]
            states = [state for m in members for _, state in m.states]
            rows.append(
                {
                    "app": plan.key,
                    "kind": plan.kind,
                    "style": plan.style,
                    "fits": plan.fits,
                    "created_s": round(plan.created_at - self.started, 1),
                    "outcome": plan.outcome,
                    "states": states,
                    "phases": dict(Counter(m.phase for m in members if m.gone_at is None)),
                    "gated": sum(1 for m in members if m.unheld_at is None and m.gated_since is not None),
                    "placeholders": sum(1 for t in traces if t.placeholder and t.ended_at is None),
                }
            )
        return rows

    def violations(self) -> list[dict[str, Any]]:
        return [
            {
                "invariant": v.invariant,
                "app": v.app,
                "objects": list(v.objects),
                "detail": v.detail,
                "due_s": round(v.due - self.started, 1),
            }
            for v in sorted(self.found.values(), key=lambda v: v.due)
        ]


class Sampler:
    """The leading controller's RSS and CPU, every SAMPLE_EVERY_S, in a thread of its own."""

    def __init__(self, deployment: Deployment) -> None:
        self._deployment = deployment
        self.samples: list[dict[str, float]] = []
        self._started = time.monotonic()

    def run(self, stop: threading.Event) -> None:
        last: tuple[int, float, float] | None = None  # pid, CPU seconds, when
        while not stop.wait(SAMPLE_EVERY_S):
            replica = self._deployment.leader()
            pid = replica.pid if replica is not None else None
            if pid is None:
                continue
            try:
                cpu, at = cpu_seconds(pid), time.monotonic()
            except OSError:
                continue
            if last is not None and last[0] == pid and at > last[2]:
                self.samples.append(
                    {
                        "t_s": round(at - self._started, 1),
                        "rss_mib": round(rss_bytes(pid) / 2**20, 1),
                        "cpu_percent": round(100 * (cpu - last[1]) / (at - last[2]), 2),
                    }
                )
            last = (pid, cpu, at)

    def slopes(self) -> dict[str, float | None]:
        """Least-squares slopes per hour of RSS (MiB) and CPU (%): a leak shows as a rise."""
        if len(self.samples) < 3:
            return {"rss_mib_per_hour": None, "cpu_percent_per_hour": None}
        hours = [s["t_s"] / 3600 for s in self.samples]
        return {
            "rss_mib_per_hour": round(statistics.linear_regression(hours, [s["rss_mib"] for s in self.samples])[0], 2),
            "cpu_percent_per_hour": round(
                statistics.linear_regression(hours, [s["cpu_percent"] for s in self.samples])[0], 2
            ),
        }


def _count(client: KubeClient, path: str, **query: str) -> int:
    """Objects in a collection, read page by page."""
    total = 0
    page_query: dict[str, Any] = {"limit": "500", **query}
    while True:
        page = client.get(path, **page_query)
        total += len(page.get("items", []))
        token = page.get("metadata", {}).get("continue")
        if not token:
            return total
        page_query["continue"] = token


def leftovers(client: KubeClient) -> dict[str, int]:
    """What is left in etcd (through the API) once the stream has ended."""
    counts = {
        "placeholders": _count(client, "/api/v1/pods", labelSelector=f"{keys.PLACEHOLDER}=true"),
        "gang_pods": _count(client, "/api/v1/pods", labelSelector=f"{STREAM_LABEL}=true"),
        "events_total": _count(client, "/apis/events.k8s.io/v1/events"),
    }
    for team in TEAMS:
        counts[f"events_{team}"] = _count(client, f"/apis/events.k8s.io/v1/namespaces/{team}/events")
    return counts


class Settings(Protocol):
    """What the driver reads of a campaign, wherever it runs."""

    @property
    def scenario(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def duration_s(self) -> float: ...

    @property
    def nodes(self) -> int: ...

    @property
    def grace_s(self) -> float: ...


class Injector(Protocol):
    """What injects a campaign's faults, wherever it runs: from `run(stop)` until stopped, every part it
    took away back when `run` returns."""

    faults: list[Fault]

    def run(self, stop: threading.Event) -> None: ...

    def counts(self) -> dict[str, int]: ...


@dataclass
class Parts:
    """What a campaign drives, wherever it runs: the cluster's API, the watch, the stream of gangs, the
    checker, and what the cluster adds (faults, samples of the controller, its restarts)."""

    client: KubeClient
    stream: GangStream
    checker: Checker
    injector: Injector | None = None
    sampler: Sampler | None = None
    controller_restarts: Callable[[], list[dict[str, Any]]] = list


def drive(campaign: Settings, parts: Parts, out_dir: Path, report: Callable[[str], None]) -> dict[str, Any]:
    """The stream, the faults and the samples for the campaign's duration, the invariants checked every
    CHECK_EVERY_S, then the drain: the figures and violations of the run."""
    stream, checker, injector, sampler = parts.stream, parts.checker, parts.injector, parts.sampler
    stop_faults, stop_sampling, stop_stream = threading.Event(), threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    try:
        if injector is not None:
            threads.append(threading.Thread(target=injector.run, args=(stop_faults,), name="faults"))
        if sampler is not None:
            threads.append(threading.Thread(target=sampler.run, args=(stop_sampling,), name="sampler"))
        threads.append(threading.Thread(target=stream.run, args=(stop_stream,), name="stream"))
        for thread in threads:
            thread.start()
        started = time.monotonic()
        deadline = started + campaign.duration_s
        while (left := deadline - time.monotonic()) > 0:
            stop_stream.wait(min(CHECK_EVERY_S, left))  # the schedule of checks
            checker.check()
        stop_faults.set()
        if injector is not None:
            threads[0].join()  # the last fault's parts are back
        stream.stop_arrivals()
        report(f"arrivals stopped; waiting up to {DRAIN_S:.0f}s for the last gangs to end")
        # Checked on the same schedule while the last gangs end, so that the wait is not taken for the
        # machine standing still (which would widen the last check's grace).
        drain_deadline = time.monotonic() + DRAIN_S
        while not stream.settled() and (left := drain_deadline - time.monotonic()) > 0:
            stop_stream.wait(min(CHECK_EVERY_S, left))
            checker.check()
        if not stream.settled():
            report(f"{len(stream.live())} gang(s) still live after the drain")
        checker.check()
        checker.write_traces(out_dir / f"{campaign.scenario}-traces.json")
        stop_sampling.set()
        counts = leftovers(parts.client)
        outcomes = stream.outcomes()
        result: dict[str, Any] = {
            "scenario": campaign.scenario,
            "seed": campaign.seed,
            "duration_s": campaign.duration_s,
            "nodes": campaign.nodes,
            "grace_s": campaign.grace_s,
            "stalled_s": round(checker.stalled_s, 1),
            "ran_s": round(time.monotonic() - started, 1),
            "gangs": sum(outcomes.values()),
            "outcomes": dict(sorted(outcomes.items())),
            "checks": checker.checks,
            "stalls": checker.stalls,
            "violations": checker.violations(),
            "controller_restarts": parts.controller_restarts(),
            "leftovers": counts,
            "live_after_drain": checker.live(),
            "samples": sampler.samples if sampler is not None else [],
            **(sampler.slopes() if sampler is not None else {}),
        }
        if injector is not None:
            result["faults"] = injector.counts()
            result["fault_log"] = [
                {"at_s": round(f.at - checker.started, 1), "kind": f.kind, "detail": f.detail, "down_s": f.down_s}
                for f in injector.faults
            ]
        return result
    finally:
        for stop in (stop_faults, stop_sampling, stop_stream):
            stop.set()
        for thread in threads:
            thread.join(120)


def run(campaign: Campaign, out_dir: Path, report: Callable[[str], None]) -> dict[str, Any]:
    """Run the campaign on a fresh local cluster and return its figures and violations."""
    report(
        f"{campaign.scenario}: seed {campaign.seed}, {campaign.duration_s / 60:.0f} min, {campaign.nodes} nodes"
        + (f", a fault every {campaign.interval_s[0]:.0f}-{campaign.interval_s[1]:.0f}s" if campaign.faults else "")
        + f" (replay: scripts/bench --scenario {campaign.scenario} --seed {campaign.seed})"
    )
    # Faults make the campaign's own API calls fail and retry: that is expected, not news.
    logging.getLogger("yuniplace.kube").setLevel(logging.ERROR)
    logs = out_dir / "logs" / campaign.scenario
    logs.mkdir(parents=True, exist_ok=True)
    binaries = ensure_built(campaign.kubernetes, quiet=True)
    pool = NodePool(count=campaign.nodes, cpu=str(NODE_CPU), memory="32Gi", pods=110)
    cluster = LocalCluster(f"bench-{campaign.scenario}")
    cluster.up([pool], binaries=binaries)
    deployment: Deployment | None = None
    observer: PodObserver | None = None
    webhook = None
    try:
        client = cluster.client()
        cluster.create_namespace(SYSTEM_NAMESPACE)
        for team in TEAMS:
            cluster.create_namespace(team, labels={CAMPAIGN_LABEL: "enabled"})
        client.create(
            f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": QUEUES_CONFIGMAP},
                "data": {"queues.yaml": queues_yaml(campaign.nodes)},
            },
        )
        (port,) = free_ports(1)
        installation = chartinstall.install(
            cluster,
            release="yuniplace",
            namespace=SYSTEM_NAMESPACE,
            webhook_port=port,
            workdir=out_dir / "chart" / campaign.scenario,
            values={
                r"webhook.namespaceSelector.matchLabels.faults\.yuniplace\.io/campaign": "enabled",
                "queues.configMap": QUEUES_CONFIGMAP,
                "queues.configMapNamespace": SYSTEM_NAMESPACE,
                "defaultTimeoutSeconds": str(DEFAULT_TIMEOUT_S),
            },
        )
        webhook = webhook_process(installation, f"127.0.0.1:{port}", logs)
        webhook.start()
        wait_until(webhook.ready, 60)
        deployment = Deployment(client, installation, logs, extra_args=campaign.controller_args)
        deployment.start()
        observer = PodObserver(client, TEAMS)
        observer.start()
        stream = GangStream(
            client,
            TEAMS,
            observer,
            random.Random(f"stream-{campaign.seed}"),
            default_timeout_s=DEFAULT_TIMEOUT_S,
            report=report,
        )
        checker = Checker(observer, stream, campaign.grace_s, report)
        injector = None
        if campaign.faults:
            injector = FaultInjector(
                cluster,
                deployment,
                webhook,
                stream,
                observer,
                pool,
                random.Random(f"faults-{campaign.seed}"),
                interval_s=campaign.interval_s,
                report=report,
            )
        replicas = deployment

        def controller_restarts() -> list[dict[str, Any]]:
            return [
                {"at_s": round(at - checker.started, 1), "replica": name, "exit_code": code}
                for at, name, code in replicas.restarts
            ]

        parts = Parts(client, stream, checker, injector, Sampler(deployment), controller_restarts)
        return drive(campaign, parts, out_dir, report)
    finally:
        if observer is not None:
            observer.stop()
        if deployment is not None:
            deployment.stop()
        if webhook is not None:
            webhook.stop()
        cluster.down(quiet=True)
