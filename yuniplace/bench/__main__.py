"""`scripts/bench`: measure on fresh local clusters and write JSON, Markdown and a chart."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yuniplace.bench import (
    autoscaling,
    campaign,
    chartrun,
    controlplane,
    dra,
    kindcampaign,
    native,
    nativegate,
    profile,
    report,
    scale,
    scenarios,
    topology,
)
from yuniplace.bench import peers as bench_peers
from yuniplace.bench.subjects import ControllerUnderTest
from yuniplace.kube import workloadapi
from yuniplace.localcluster import LocalCluster, NodePool, ensure_built
from yuniplace.localcluster.build import (
    DEFAULT_KUBERNETES,
    SUPPORTED_KUBERNETES,
    BuildError,
    ensure_yunikorn,
    module_dir,
    pinned_versions,
)
from yuniplace.localcluster.cluster import ClusterError
from yuniplace.localcluster.components import Features
from yuniplace.localcluster.kueue import ensure_kueue

SCENARIOS = (
    "control-plane",
    "gang-size",
    "arrivals",
    "contention",
    "cost",
    "decode",
    "scale",
    "topology",
    "autoscaling",
    "dra",
    "native",
)
# Long runs of their own, only when named: a fault campaign and a soak.
CAMPAIGNS = ("faults", "soak")


@dataclass(frozen=True)
class Sizes:
    nodes: int
    gang_sizes: tuple[int, ...]
    repeats: int
    apps: int
    app_members: int
    arrival_rate: float
    contention_nodes: int
    contention_gangs: int
    contention_members: int
    contention_flood: int
    managed_apps: int
    managed_members: int
    scale_nodes: tuple[int, ...]
    scale_pods_per_node: int
    scale_gangs: int
    decode_members: int
    topology: topology.Shape
    autoscaling: autoscaling.Shape
    dra: dra.Shape
    native: native.Shape


FULL = Sizes(
    1000,
    (10, 100, 1000),
    3,
    100,
    10,
    5.0,
    50,
    8,
    20,
    40,
    100,
    100,
    (1000, 5000),
    10,
    200,
    200,
    topology.FULL,
    autoscaling.FULL,
    dra.FULL,
    native.FULL,
)
QUICK = Sizes(
    100,
    (10, 50),
    1,
    10,
    10,
    5.0,
    10,
    2,
    10,
    10,
    5,
    20,
    (50,),
    8,
    10,
    50,
    topology.QUICK,
    autoscaling.QUICK,
    dra.QUICK,
    native.QUICK,
)


def _duration(text: str) -> float:
    """30m, 90s, 1h or a number of seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        seconds = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30m, 90s or 1h") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration greater than 0")
    return seconds


def _interval(text: str) -> tuple[float, float]:
    low, sep, high = text.partition("-")
    try:
        bounds = (float(low), float(high if sep else low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MIN-MAX seconds, such as 20-40") from None
    if not 0 < bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: MIN must be above 0 and at most MAX")
    return bounds


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="scripts/bench",
        description="Benchmarks on fresh local clusters: gang start latency, throughput, contention and cost of "
        "yuniplace, each beside plain kube-scheduler binding the same pods in the same run.",
    )
    root.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a few minutes")
    root.add_argument(
        "--kubernetes",
        choices=SUPPORTED_KUBERNETES,
        default=DEFAULT_KUBERNETES,
        help=f"Kubernetes minor version of the clusters (default: {DEFAULT_KUBERNETES})",
    )
    root.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIOS + CAMPAIGNS,
        help=f"run only these (repeatable; default: all but {' and '.join(CAMPAIGNS)}, which run only when named)",
    )
    long_runs = root.add_argument_group("the fault campaign and the soak")
    long_runs.add_argument(
        "--duration",
        type=_duration,
        default=campaign.DEFAULT_DURATION_S,
        metavar="TIME",
        help="how long gangs arrive (and faults come), e.g. 30m, 8m, 90s (default: 30m)",
    )
    long_runs.add_argument(
        "--seed",
        type=int,
        default=campaign.DEFAULT_SEED,
        help=f"seed of the gangs and the faults: the same seed replays them (default: {campaign.DEFAULT_SEED})",
    )
    long_runs.add_argument(
        "--fault-interval",
        type=_interval,
        default=(20.0, 40.0),
        metavar="MIN-MAX",
        help="seconds between faults, drawn from this range (default: 20-40)",
    )
    long_runs.add_argument(
        "--kind",
        action="store_true",
        help="run the fault campaign on a kind cluster of real kubelets instead (yuniplace's image and chart; "
        "nodes stopped, kubelets killed, networks cut, members failing, images that cannot be pulled); "
        "with --scenario faults only",
    )
    long_runs.add_argument(
        "--workers",
        type=int,
        default=kindcampaign.KindCampaign.workers,
        metavar="N",
        help=f"worker nodes of the kind campaign (default: {kindcampaign.KindCampaign.workers})",
    )
    root.add_argument(
        "--cold-build",
        action="store_true",
        help="also time a build with empty Go caches (downloads and compiles everything: minutes)",
    )
    root.add_argument("--out", type=Path, help="results folder (default bench-results/<UTC time>)")
    root.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `yuniplace controller`, e.g. --controller-arg=--swap-nomination=always",
    )
    root.add_argument(
        "--gang-size",
        type=int,
        action="append",
        metavar="M",
        help="the gang sizes of scenario 1 (repeatable; default: 10, 100 and 1000, or 10 and 50 with --quick)",
    )
    root.add_argument(
        "--profile",
        action="store_true",
        help="sample the controller with py-spy during the largest gang and the arrivals, and report where its "
        "CPU goes (profile-*.txt in the results folder)",
    )
    peer = root.add_mutually_exclusive_group()
    peer.add_argument(
        "--yunikorn",
        dest="yunikorn",
        action="store_true",
        default=None,
        help="also measure Apache YuniKorn's scheduler in scenarios 1 and 2 (default: on, off with --quick)",
    )
    peer.add_argument("--no-yunikorn", dest="yunikorn", action="store_false")
    queued = root.add_mutually_exclusive_group()
    queued.add_argument(
        "--kueue",
        dest="kueue",
        action="store_true",
        default=None,
        help="also measure Kueue (its pod groups, admitted against a ClusterQueue, kube-scheduler binding) in "
        "scenarios 1 and 2 (default: on, off with --quick)",
    )
    queued.add_argument("--no-kueue", dest="kueue", action="store_false")
    return root


class Results(list[dict[str, Any]]):
    """The results so far, saved after each scenario: a run that fails late keeps what it measured."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._path = path

    def append(self, result: dict[str, Any]) -> None:
        super().append(result)
        self.save()

    def save(self) -> None:
        self._path.write_text(json.dumps(self, indent=2))


def _cost(gang_rows: list[dict[str, Any]], managed: dict[str, Any]) -> dict[str, Any]:
    """Scenario 4: the controller's CPU, memory and writes for the largest gang of scenario 1 (and with
    placeholders always, 1b), and its memory while managing many gangs."""
    largest = gang_rows[-1]
    return {
        "largest_gang": largest["members"],
        "cpu_s_per_1000": round(largest["controller_cpu_s"] * 1000 / largest["members"], 2),
        "cpu_s_per_1000_placeholders": round(
            largest.get("placeholders", largest)["controller_cpu_s"] * 1000 / largest["members"], 2
        ),
        "peak_rss_mib_largest_gang": largest["controller_peak_rss_mib"],
        "pod_writes_per_member": round(statistics.median(r["pod_writes_per_member"] for r in gang_rows), 2),
        "event_writes_per_member": round(statistics.median(r["event_writes_per_member"] for r in gang_rows), 2),
        "managed": managed,
    }


def run_all(
    sizes: Sizes,
    chosen: Sequence[str],
    cold_build: bool,
    out_dir: Path,
    yunikorn: bool,
    controller_args: Sequence[str] = (),
    kubernetes: str = DEFAULT_KUBERNETES,
    campaigns: Sequence[campaign.Campaign] = (),
    profiled: bool = False,
    kueue: bool = False,
    kind_campaigns: Sequence[kindcampaign.KindCampaign] = (),
) -> list[dict[str, Any]]:
    results = Results(out_dir / "partial-results.json")
    log_dir = out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)

    def progress(text: str) -> None:
        print(f"[bench] {text}", file=sys.stderr, flush=True)

    if "control-plane" in chosen:
        progress(f"control plane: {sizes.nodes} nodes, {sizes.nodes} plain pods")
        results.append(
            controlplane.run(nodes=sizes.nodes, pods=sizes.nodes, cold_build=cold_build, kubernetes=kubernetes)
        )

    binaries = ensure_built(kubernetes, quiet=True)
    peers_chosen = {"gang-size", "arrivals", "cost"} & set(chosen)
    # Built before any cluster starts: a build that fails says so at once, not after an hour's run.
    kueue_build = ensure_kueue() if kueue and peers_chosen else None
    yunikorn_binary = ensure_yunikorn() if yunikorn and peers_chosen else None
    if {"gang-size", "arrivals", "cost", "decode"} & set(chosen):
        cluster = LocalCluster("bench")
        # With the Workload API on, scenario 1 also measures kube-scheduler's own gang plugin.
        workload_api = Features.workload_api(kubernetes)
        cluster.up(
            [NodePool(count=sizes.nodes, cpu="32", memory="256Gi", pods=110)],
            binaries=binaries,
            features=workload_api,
            timeout_s=max(90.0, sizes.nodes * 0.3),
        )
        try:
            chart = chartrun.install(cluster, out_dir / "chart")
            profiles: dict[str, profile.Summary] = {}  # each turn's controller adds its own
            served = workloadapi.version_named(workload_api.apis[0]) if workload_api.apis else None

            def as_shipped(log: str, *extra: str) -> ControllerUnderTest:
                """yuniplace's controller as the chart runs it (its defaults, its webhook)."""
                return ControllerUnderTest(
                    cluster,
                    log_dir / log,
                    [*chart.controller_args(), *extra, *controller_args],
                    profile_dir=out_dir if profiled else None,
                    profiles=profiles,
                )

            gang_rows: list[dict[str, Any]] = []
            if peers_chosen:
                lineup = bench_peers.lineup(
                    cluster,
                    chart,
                    lambda: as_shipped("controller.log"),
                    served=served,
                    kueue_build=kueue_build,
                    kueue_dir=out_dir / "kueue",
                    yunikorn_binary=yunikorn_binary,
                    log_dir=log_dir,
                )
                progress(
                    f"1-2. gang sizes {sizes.gang_sizes} and {sizes.apps} applications of {sizes.app_members} at "
                    f"{sizes.arrival_rate}/s on {sizes.nodes} nodes, {sizes.repeats} repeat(s), each peer in turn: "
                    + ", ".join(peer.label for peer in lineup)
                )
                measured = bench_peers.measure(
                    cluster,
                    lineup,
                    sizes.gang_sizes if {"gang-size", "cost"} & set(chosen) else (),
                    sizes.repeats,
                    bench_peers.Arrivals(sizes.apps, sizes.app_members, sizes.arrival_rate)
                    if "arrivals" in chosen
                    else None,
                    progress,
                    profiled,
                )
                results.append(
                    {
                        "scenario": "peers",
                        "labels": {peer.key: peer.label for peer in lineup},
                        "orders": measured["orders"],
                        "given": measured["given"],
                    }
                )
                if measured["rows"]:
                    gang_rows = measured["rows"]
                    results.append(
                        {"scenario": "gang-size", "nodes": sizes.nodes, "repeats": sizes.repeats, "rows": gang_rows}
                    )
                if "arrivals" in chosen:
                    results.append({"scenario": "arrivals", **measured["arrivals"]})
            if "decode" in chosen:
                with as_shipped("controller-decode.log"):
                    progress(f"4c. decoding the pod watch of a gang of {sizes.decode_members}: json.loads, typed")
                    results.append({"scenario": "decode", **scenarios.decoding(cluster, sizes.decode_members)})
            if gang_rows:
                # The same gangs with placeholders always (YuniKorn's way), plain pods taking turns with them.
                progress(f"1b. gang sizes {sizes.gang_sizes}, --placeholders=always")
                always = bench_peers.measure(
                    cluster,
                    [
                        bench_peers.plain_peer(),
                        bench_peers.yuniplace_peer(
                            chart, lambda: as_shipped("controller-placeholders.log", "--placeholders=always")
                        ),
                    ],
                    sizes.gang_sizes,
                    sizes.repeats,
                )
                for row, other in zip(gang_rows, always["rows"], strict=True):
                    row["placeholders"] = {k: v for k, v in other.items() if k != "members"}
                if served is not None:
                    # Native gangs held and admitted by yuniplace: a controller holding a configured queue.
                    queues = nativegate.queues_configmap(cluster, nativegate.QUEUE)
                    gate = nativegate.prepare(out_dir / "native-gate")
                    with ControllerUnderTest(
                        cluster,
                        log_dir / "controller-native.log",
                        [f"--queues-configmap={queues}", *gate.controller_args(), *controller_args],
                    ):
                        nativegate.register(cluster, gate)
                        progress(
                            f"1c. native gangs {sizes.gang_sizes}: admitted by yuniplace, and the gang plugin alone"
                        )
                        admitted = scenarios.native_admission(
                            cluster, sizes.gang_sizes, sizes.repeats, served, nativegate.QUEUE, nativegate.HELD
                        )
                    for row in gang_rows:
                        row.update(admitted[row["members"]])
                results.save()
            if profiles:
                results.append(
                    {
                        "scenario": "profile",
                        "profiles": {name: dataclasses.asdict(summary) for name, summary in profiles.items()},
                    }
                )
            if "cost" in chosen:
                # A fresh controller process, so its memory is that of the managed pods alone.
                with as_shipped("controller-cost.log") as controller:
                    progress(f"4. memory while managing {sizes.managed_apps * sizes.managed_members} gang pods")
                    managed = scenarios.managed_memory(
                        cluster, controller, apps=sizes.managed_apps, members=sizes.managed_members
                    )
                results.append({"scenario": "cost", **_cost(gang_rows, managed)})
        finally:
            cluster.down(quiet=True)

    if "contention" in chosen:
        cluster = LocalCluster("bench-contention")
        cluster.up([NodePool(count=sizes.contention_nodes, cpu="4", memory="16Gi", pods=110)], binaries=binaries)
        try:
            with ControllerUnderTest(cluster, log_dir / "controller-contention.log", list(controller_args)):
                progress(
                    f"3. contention: {sizes.contention_gangs} gangs of {sizes.contention_members}, "
                    f"{sizes.contention_flood} flood pods, {sizes.contention_nodes} nodes of 4 CPU"
                )
                outcome = scenarios.contention(
                    cluster,
                    gangs=sizes.contention_gangs,
                    members=sizes.contention_members,
                    flood=sizes.contention_flood,
                )
                results.append({"scenario": "contention", "nodes": sizes.contention_nodes, **outcome})
        finally:
            cluster.down(quiet=True)

    if "scale" in chosen:
        # Saved row by row: a larger cluster failing late keeps what the smaller ones measured.
        rows: list[dict[str, Any]] = []
        results.append(
            {"scenario": "scale", "gangs": sizes.scale_gangs, "gang_sizes": list(scale.GANG_SIZES), "rows": rows}
        )
        for nodes in sizes.scale_nodes:
            progress(
                f"5. scale: {nodes} nodes, {nodes * sizes.scale_pods_per_node} ordinary pods, "
                f"{sizes.scale_gangs} waiting gangs"
            )
            rows.append(
                scale.run(
                    binaries,
                    nodes,
                    sizes.scale_pods_per_node,
                    sizes.scale_gangs,
                    log_dir / f"controller-scale-{nodes}.log",
                    controller_args,
                    progress,
                )
            )
            results.save()

    if "topology" in chosen:
        shape = sizes.topology
        progress(
            f"6. topology: {shape.racks} racks of {shape.nodes_per_rack} nodes, {shape.gangs} gangs of "
            f"{list(shape.sizes)} at {shape.rate_per_s}/s, each running {shape.hold_s:.0f}s"
        )
        results.append(topology.run(binaries, shape, log_dir / "controller-topology.log", controller_args, progress))
    if "autoscaling" in chosen:
        results.append(
            autoscaling.run(
                binaries, sizes.autoscaling, log_dir / "controller-autoscaling.log", controller_args, progress
            )
        )
    if "dra" in chosen:
        results.append(dra.run(binaries, sizes.dra, log_dir / "controller-dra.log", controller_args, progress))
    if "native" in chosen:
        log = log_dir / "controller-native-1d.log"
        results.append(native.run(binaries, kubernetes, sizes.native, out_dir, log, controller_args, progress))
    for long_run in campaigns:
        results.append(campaign.run(long_run, out_dir, progress))
    for on_kind in kind_campaigns:
        results.append(kindcampaign.run(on_kind, out_dir, progress))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.gang_size:
        sizes = dataclasses.replace(sizes, gang_sizes=tuple(args.gang_size))
    chosen = args.scenario or list(SCENARIOS)
    if args.kind and chosen != ["faults"]:
        parser().error("--kind runs the fault campaign only: give it with --scenario faults and no other scenario")
    kind_campaigns = [
        kindcampaign.KindCampaign(
            duration_s=args.duration, seed=args.seed, workers=args.workers, interval_s=args.fault_interval
        )
        for _ in range(1 if args.kind else 0)
    ]
    if args.kind:
        chosen = []
    campaigns = [
        campaign.Campaign(
            duration_s=args.duration,
            seed=args.seed,
            faults=name == "faults",
            interval_s=args.fault_interval,
            kubernetes=args.kubernetes,
            controller_args=tuple(args.controller_arg),
        )
        for name in CAMPAIGNS
        if name in chosen
    ]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out or Path("bench-results") / stamp
    environment = {
        "time": stamp,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "controller_args": args.controller_arg,
        "versions": pinned_versions(module_dir(), args.kubernetes),
        **({"seed": args.seed} if args.kind or any(name in chosen for name in CAMPAIGNS) else {}),
    }
    try:
        results = run_all(
            sizes,
            chosen,
            args.cold_build,
            out_dir,
            args.yunikorn if args.yunikorn is not None else not args.quick,
            args.controller_arg,
            args.kubernetes,
            campaigns,
            args.profile,
            args.kueue if args.kueue is not None else not args.quick,
            kind_campaigns,
        )
    except (BuildError, ClusterError, TimeoutError, RuntimeError) as error:
        print(f"scripts/bench: {error}", file=sys.stderr)
        return 1
    markdown = report.write(out_dir, results, environment)
    print(markdown.read_text())
    print(f"Results: {out_dir}/results.json, {markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
