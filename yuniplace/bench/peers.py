"""Scenarios 1 and 2 with every peer on the same footing: plain kube-scheduler, yuniplace as its users run
it (the chart's controller at its defaults, its pods made ungated and gated by its own webhook on the
timed path), kube-scheduler's own gang plugin, Kueue as it ships and with its client at the control
plane's rate, and Apache YuniKorn's scheduler. Each peer is measured in turns of its own, with only its
own processes running (started for its turn, stopped after it), in an order rotated every repeat: no
peer always comes first on a fresh cluster, or last on a tired one."""

from __future__ import annotations

import contextlib
import functools
import statistics
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yuniplace.bench.chartrun import ChartRun
from yuniplace.bench.gatefloor import GateLifter, floor_gang
from yuniplace.bench.kueue import KueueManager, kueue_gang, managed_namespace
from yuniplace.bench.pods import PHASES, phases
from yuniplace.bench.scenarios import Pods, arrivals, native_gang, time_to_bound
from yuniplace.bench.subjects import (
    ControllerUnderTest,
    YuniKornScheduler,
    cpu_seconds,
    gang,
    plain,
    yunikorn_client,
    yunikorn_gang,
)
from yuniplace.kube import workloadapi
from yuniplace.localcluster import LocalCluster, wait_until
from yuniplace.localcluster.build import YUNIKORN_SHIM, Operator, module_root
from yuniplace.localcluster.components import CLIENT_BURST, CLIENT_QPS

# Each run's figures under arrivals, as scenarios.arrivals reports them.
ARRIVAL_FIGURES = (
    "p50_s",
    "p95_s",
    "p99_s",
    "pods_per_s",
    "reaction_ms_p50",
    "reaction_ms_p95",
    *(figure for figure, *_ in PHASES),
)
LANDED = ("GangStarted", "PlaceholderSwapped")  # the events saying a task group's members have landed
FLOOR_LABEL = "gates lifted by a bare lifter (the floor of gating)"
# The client rate kube-scheduler and kube-controller-manager run with here, given to a peer's second row.
CONTROL_PLANE_CLIENT = {"qps": CLIENT_QPS, "burst": CLIENT_BURST}


def plain_namespace(cluster: LocalCluster, namespace: str) -> None:
    cluster.create_namespace(namespace)


@dataclass(frozen=True)
class Peer:
    """One way of starting the bench's gangs. `pods(name, members)` makes a gang's pods as that peer's
    users write them; `running()` starts what the peer runs beside kube-scheduler for one turn (nothing,
    for plain pods and the gang plugin); `setup` makes a run's namespace (a label its webhook selects, a
    queue it needs); `objects` the API objects a gang needs beside its pods (a native pod group's)."""

    key: str  # its figures' key in the results: baseline, yuniplace, native, kueue, kueue_fast, yunikorn
    label: str
    prefix: str  # the namespaces and applications of its runs begin with it
    pods: Callable[[str, int], Pods]
    running: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext
    setup: Callable[[LocalCluster, str], None] = plain_namespace
    objects: Callable[[str, int], list[tuple[str, dict[str, Any]]]] = lambda _name, _members: []


@dataclass(frozen=True)
class Arrivals:
    apps: int
    members: int
    rate_per_s: float


def rotated(peers: Sequence[Peer], repeat: int) -> list[Peer]:
    """The order of the peers' turns in a repeat: the list turned by one place each repeat."""
    shift = repeat % len(peers)
    return [*peers[shift:], *peers[:shift]]


@dataclass
class _Turns:
    """What the turns measured, by peer: each gang's seconds by size, each arrivals run's figures, and
    for yuniplace what its controller spent."""

    seconds: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    phases: dict[str, dict[int, list[dict[str, float]]]] = field(default_factory=dict)
    cpu_by_process: dict[str, dict[int, list[dict[str, float]]]] = field(default_factory=dict)
    writes: dict[str, dict[int, list[tuple[float, float]]]] = field(default_factory=dict)
    controller_cpu: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    peak_rss: dict[str, dict[int, int]] = field(default_factory=dict)
    arrivals: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    given: dict[str, Any] = field(default_factory=dict)  # what each peer's process was given (Kueue's)
    orders: list[list[str]] = field(default_factory=list)

    def add(self, table: dict[str, dict[int, list[Any]]], peer: Peer, members: int, value: Any) -> None:
        table.setdefault(peer.key, {}).setdefault(members, []).append(value)


def _cpu_now(cluster: LocalCluster, controller: ControllerUnderTest | None) -> dict[str, float]:
    """CPU seconds each process has used so far: every control-plane component, and the controller."""
    used = {process.name: cpu_seconds(process.pid) for process in cluster.processes()}
    if controller is not None:
        used["yuniplace"] = controller.cpu_seconds()
    return used


def _landed(controller: ControllerUnderTest) -> float:
    return sum(controller.events_posted(reason) for reason in LANDED)


def _gang(
    cluster: LocalCluster, peer: Peer, process: object, members: int, repeat: int, turns: _Turns, profiled: bool
) -> None:
    """One gang of `members` for `peer`, timed; for yuniplace also its controller's writes, CPU and
    memory, and for it and plain pods the CPU each process used."""
    name = f"{peer.prefix}-{members}-{repeat}"
    timeout_s = max(120.0, members * 0.5)
    controller = process if isinstance(process, ControllerUnderTest) else None
    sampled = controller is not None or peer.key in ("baseline", "floor")

    def sample() -> dict[str, float]:
        return _cpu_now(cluster, controller)

    if controller is None:
        run = time_to_bound(
            cluster,
            name,
            peer.pods(name, members),
            timeout_s,
            objects=peer.objects(name, members),
            sample=sample if sampled else None,
            setup=lambda namespace: peer.setup(cluster, namespace),
        )
        turns.add(turns.seconds, peer, members, run.seconds)
        turns.add(turns.phases, peer, members, phases(run.story))
        if sampled:
            turns.add(turns.cpu_by_process, peer, members, run.cpu)
        return
    before, landed, cpu_before = controller.writes(), _landed(controller), controller.cpu_seconds()

    def settle() -> None:
        # The task group's event is posted after the bindings it reports; count it in this run.
        wait_until(lambda: _landed(controller) >= landed + 1, 120)

    profile = controller.profiled(f"gang-{members}") if profiled else contextlib.nullcontext()
    with controller.rss_sampler() as rss, profile:
        run = time_to_bound(
            cluster,
            name,
            peer.pods(name, members),
            timeout_s,
            settle,
            objects=peer.objects(name, members),
            sample=sample,
            setup=lambda namespace: peer.setup(cluster, namespace),
        )
    after = controller.writes()
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    turns.add(turns.seconds, peer, members, run.seconds)
    turns.add(turns.phases, peer, members, phases(run.story))
    turns.add(turns.cpu_by_process, peer, members, run.cpu)
    turns.add(
        turns.writes, peer, members, (delta.get("pods", 0.0) + delta.get("pods/status", 0.0), delta.get("events", 0.0))
    )
    turns.add(turns.controller_cpu, peer, members, controller.cpu_seconds() - cpu_before)
    peaks = turns.peak_rss.setdefault(peer.key, {})
    peaks[members] = max(peaks.get(members, 0), rss.peak_total)


def _arrivals(
    cluster: LocalCluster, peer: Peer, process: object, shape: Arrivals, repeat: int, profiled: bool
) -> dict[str, float]:
    controller = process if isinstance(process, ControllerUnderTest) else None
    profile = controller.profiled("arrivals") if controller is not None and profiled else contextlib.nullcontext()
    cpu_before = controller.cpu_seconds() if controller is not None else 0.0
    with profile:
        found = arrivals(
            cluster,
            f"arrivals-{peer.prefix}-{repeat}",
            shape.apps,
            shape.members,
            shape.rate_per_s,
            lambda app: peer.pods(app, shape.members),
            60 + shape.apps / shape.rate_per_s * 3,
            setup=lambda namespace: peer.setup(cluster, namespace),
            objects=lambda app: peer.objects(app, shape.members),
        )
    if controller is not None:
        found["controller_cpu_s"] = round(controller.cpu_seconds() - cpu_before, 2)
    return found


def measure(
    cluster: LocalCluster,
    peers: Sequence[Peer],
    sizes: Sequence[int],
    repeats: int,
    shape: Arrivals | None = None,
    progress: Callable[[str], None] = lambda _text: None,
    profiled: bool = False,
) -> dict[str, Any]:
    """Every peer's turns, `repeats` rounds in rotated order: in each turn one gang of each size in
    `sizes`, then (with `shape`) applications arriving at a steady rate. Returns scenario 1's rows, by
    size, and scenario 2's figures, by peer: medians, with every run's figures beside them."""
    turns = _Turns()
    for repeat in range(repeats):
        order = rotated(peers, repeat)
        turns.orders.append([peer.key for peer in order])
        for peer in order:
            progress(f"repeat {repeat + 1}/{repeats}: {peer.label}")
            with peer.running() as process:
                for members in sizes:
                    _gang(cluster, peer, process, members, repeat, turns, profiled and repeat == 0)
                if shape is not None:
                    figures = _arrivals(cluster, peer, process, shape, repeat, profiled and repeat == 0)
                    turns.arrivals.setdefault(peer.key, []).append(figures)
                given = getattr(process, "given", None)
                if given:
                    turns.given.setdefault(peer.key, given)
    measured: dict[str, Any] = {"orders": turns.orders, "rows": [_row(turns, members) for members in sizes]}
    if shape is not None:
        measured["arrivals"] = {
            "apps": shape.apps,
            "members": shape.members,
            "rate_per_s": shape.rate_per_s,
            "repeats": repeats,
            **{key: _median_figures(runs) for key, runs in turns.arrivals.items()},
            "runs": turns.arrivals,
        }
    measured["given"] = turns.given
    return measured


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 2)


def _median_by_name(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    return {name: _median([run.get(name, 0.0) for run in runs]) for name in runs[0]}


def _median_figures(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each figure's median over the runs (one a repeat)."""
    names = [name for name in (*ARRIVAL_FIGURES, "controller_cpu_s") if all(name in run for run in runs)]
    return {name: _median([run[name] for run in runs]) for name in names}


def _row(turns: _Turns, members: int) -> dict[str, Any]:
    """Scenario 1's row of one size: each peer's median and runs, yuniplace's against plain's, and what
    yuniplace's controller wrote and spent."""
    row: dict[str, Any] = {"members": members}
    for key, by_size in turns.seconds.items():
        runs = by_size[members]
        row[f"{key}_s"] = _median(runs)
        row[f"runs_{key}_s"] = [round(run, 2) for run in runs]
        found = [figures for figures in turns.phases.get(key, {}).get(members, []) if figures]
        if found:
            row[f"phases_{key}"] = _median_by_name(found)
    if "yuniplace_s" in row and "baseline_s" in row:
        row["ratio"] = round(row["yuniplace_s"] / row["baseline_s"], 2)
    writes = turns.writes.get("yuniplace", {}).get(members)
    if writes:
        row["pod_writes_per_member"] = round(statistics.median(w for w, _ in writes) / members, 2)
        row["event_writes_per_member"] = round(statistics.median(e for _, e in writes) / members, 2)
        row["controller_cpu_s"] = _median(turns.controller_cpu["yuniplace"][members])
        row["controller_peak_rss_mib"] = round(turns.peak_rss["yuniplace"][members] / 2**20)
    # CPU seconds of each process from the first pod's creation to the last one bound (median over the
    # repeats): which component took the cores, for plain pods and for the gang.
    for key, name in (
        ("baseline", "cpu_by_process_plain"),
        ("yuniplace", "cpu_by_process"),
        ("floor", "cpu_by_process_floor"),
    ):
        if members in turns.cpu_by_process.get(key, {}):
            row[name] = _median_by_name(turns.cpu_by_process[key][members])
    return row


def plain_peer() -> Peer:
    return Peer("baseline", "plain kube-scheduler", "plain", lambda name, members: plain(name, members))


def yuniplace_peer(chart: ChartRun, controller: Callable[[], ControllerUnderTest]) -> Peer:
    """yuniplace as its users run it: the pods made as users make them, gated by the chart's webhook
    served by `controller()`, a controller as the chart runs it."""
    return Peer(
        "yuniplace",
        "yuniplace",
        "yuniplace",
        lambda name, members: gang(name, members, gated=False),
        running=controller,
        setup=chart.namespace,
    )


def floor_peer(cluster: LocalCluster) -> Peer:
    """The same pods held by a gate in their manifests and lifted by a bare lifter (gatefloor.py)."""
    return Peer("floor", FLOOR_LABEL, "floor", floor_gang, running=lambda: GateLifter(cluster))


def lineup(
    cluster: LocalCluster,
    chart: ChartRun,
    controller: Callable[[], ControllerUnderTest],
    *,
    served: workloadapi.ServedVersion | None,
    kueue_build: Operator | None,
    kueue_dir: Path,
    yunikorn_binary: Path | None,
    log_dir: Path,
) -> list[Peer]:
    """The peers of scenarios 1 and 2, in the order of the first repeat: plain pods, yuniplace, the gang
    plugin (where the cluster serves the Workload API), the floor of gating (gatefloor.py), Kueue as it
    ships and with its client at the control plane's rate (where it is built), YuniKorn (where it is
    built)."""
    peers = [plain_peer(), yuniplace_peer(chart, controller)]
    if served is not None:
        peers.append(
            Peer(
                "native",
                "kube-scheduler's gang plugin",
                "gangplugin",
                lambda name, members: native_gang(served, name, members)[1],
                objects=lambda name, members: native_gang(served, name, members)[0],
            )
        )
    peers.append(floor_peer(cluster))
    if kueue_build is not None:
        for key, label, prefix, client in (
            ("kueue", "Kueue as it ships", "kueue", None),
            ("kueue_fast", "Kueue, its client at the control plane's rate", "kueue-fast", CONTROL_PLANE_CLIENT),
        ):
            peers.append(
                Peer(
                    key,
                    label,
                    prefix,
                    kueue_gang,
                    running=functools.partial(
                        KueueManager, cluster, kueue_build, kueue_dir / prefix, log_dir / f"{prefix}.log", client
                    ),
                    setup=managed_namespace,
                )
            )
    if yunikorn_binary is not None:
        given = {"client": yunikorn_client(module_root("yunikorn", YUNIKORN_SHIM))}
        peers.append(
            Peer(
                "yunikorn",
                "Apache YuniKorn",
                "yunikorn",
                lambda name, members: yunikorn_gang(name, members),
                running=lambda: YuniKornScheduler(cluster, yunikorn_binary, log_dir / "yunikorn.log", given),
            )
        )
    return peers
