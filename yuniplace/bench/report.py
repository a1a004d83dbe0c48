"""Writes a run's results as JSON (for machines), a Markdown table per scenario and the targets met
or not (for people), a chart of gang start latency against gang size and one of the controller's
memory and admission time against cluster size."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from yuniplace.bench import profile
from yuniplace.bench.campaignreport import faults_table, kind_faults_table, soak_chart, soak_table
from yuniplace.bench.pods import PHASES

CONTROL_PLANE_ROWS = [
    ("build_cold_s", "Cold build (empty Go caches), s"),
    ("build_warm_s", "Warm build (Go caches kept, binaries relinked), s"),
    ("build_cached_s", "Cached build (pins unchanged: nothing to do), s"),
    ("cluster_start_s", "Cluster start, s"),
    ("nodes_ready_s", "… of which until all nodes Ready, s"),
    ("pods_created_s", "Creating the plain pods, s"),
    ("pods_running_s", "First create → all plain pods Running, s"),
    ("pods_per_s", "Plain pods Running per second"),
    ("peak_rss_total_mib", "Peak control-plane RSS, MiB"),
]


def control_plane_table(result: dict[str, Any]) -> str:
    lines = [
        f"### Control plane: {result['nodes']} kwok nodes, {result['pods']} plain pods",
        "",
        "| Measure | Value |",
        "| --- | ---: |",
    ]
    lines += [f"| {label} | {result[key]} |" for key, label in CONTROL_PLANE_ROWS if key in result]
    per_component = ", ".join(f"{name} {mib}" for name, mib in result.get("peak_rss_mib", {}).items())
    if per_component:
        lines += ["", f"Peak RSS per component (MiB): {per_component}."]
    return "\n".join(lines) + "\n"


# The peers of scenario 1 beside yuniplace, each (key of its seconds, heading, what its column says).
GANG_PEERS = (
    ("yunikorn", "YuniKorn"),
    ("kueue", "Kueue as it ships"),
    ("kueue_fast", "Kueue, client at the control plane's rate"),
    ("native", "kube-scheduler's gang plugin"),
    ("floor", "gates lifted by a bare lifter"),
)


def spread(row: dict[str, Any], key: str) -> str:
    """A median with the range of the runs it is the median of: `0.31 (0.29–0.40)`."""
    runs = row.get(f"runs_{key}_s") or []
    median = row[f"{key}_s"]
    return f"{median} ({min(runs)}–{max(runs)})" if len(runs) > 1 else str(median)


def gang_size_table(result: dict[str, Any]) -> str:
    rows = result["rows"]
    always = all("placeholders" in row for row in rows)
    peers = [(key, name) for key, name in GANG_PEERS if all(f"{key}_s" in row for row in rows)]
    header = "| M | plain kube-scheduler, s | yuniplace, s | yuniplace / plain |"
    rule = "| ---: | ---: | ---: | ---: |"
    if always:
        header += " yuniplace with placeholders always, s | / plain |"
        rule += " ---: | ---: |"
    for _, name in peers:
        header += f" {name}, s | yuniplace / it |"
        rule += " ---: | ---: |"
    admitted = all("native_admitted_s" in row for row in rows)
    if admitted:
        header += " native gang admitted by yuniplace, s | / plain | / gang plugin alone (same runs) |"
        rule += " ---: | ---: | ---: |"
    header += " pod writes / member | event writes / member | controller CPU, s |"
    rule += " ---: | ---: | ---: |"
    lines = [
        f"### 1. One gang of M members on {result['nodes']} kwok nodes (median of {result['repeats']}, "
        "the runs' range in brackets)",
        "",
        header,
        rule,
    ]
    for row in rows:
        line = f"| {row['members']} | {spread(row, 'baseline')} | {spread(row, 'yuniplace')} | {row['ratio']} |"
        other = row.get("placeholders", {})
        if always:
            line += f" {spread(other, 'yuniplace')} | {other['ratio']} |"
        for key, _ in peers:
            line += f" {spread(row, key)} | {row['yuniplace_s'] / row[f'{key}_s']:.2f} |"
        if admitted:
            line += (
                f" {row['native_admitted_s']} | {row['native_admitted_s'] / row['baseline_s']:.2f} |"
                f" {row['native_admitted_vs_alone']} ({row['native_alone_s']} s) |"
            )
        figures = [(row[key], other.get(key)) for key in ("pod_writes_per_member", "event_writes_per_member")]
        figures.append((row["controller_cpu_s"], other.get("controller_cpu_s")))
        line += "".join(f" {mine}{f' ({theirs})' if always else ''} |" for mine, theirs in figures)
        lines.append(line)
    named = {key for key, _ in peers}
    lines += [
        "",
        "Time from the first pod's creation to all M bound. Plain: the same pods, no gang, kube-scheduler alone. "
        "yuniplace: its pods made as users make them and gated by its webhook on the timed path, its controller "
        "as its chart runs it, at its defaults; it starts a gang whose members all exist and fit directly, or "
        "reserves it with placeholders first"
        + (" (`--placeholders=always`, YuniKorn's way; its writes, events and CPU in brackets)" if always else "")
        + ("; YuniKorn's scheduler schedules the same gang with its own annotations" if "yunikorn" in named else "")
        + (
            "; Kueue admits the same pods as one pod group of its own (its labels, its webhook's gate, a "
            "ClusterQueue with the cluster's quota) and kube-scheduler binds them, as it ships and with its "
            "client at the control plane's rate"
            if "kueue" in named
            else ""
        )
        + (
            "; kube-scheduler's own gang plugin binds the same pods as one native pod group (the Workload API)"
            if "native" in named
            else ""
        )
        + (
            "; the floor of gating: the same pods made with a gate, each lifted by the bench in one write the "
            "moment all exist, nothing decided and no webhook (what any controller holding a gang with a gate pays)"
            if "floor" in named
            else ""
        )
        + (
            "; the same native gang held by yuniplace's gate in a configured queue, admitted, and its gates "
            "lifted together (a controller of its own, beside runs of the gang plugin alone, never gated)."
            if admitted
            else "."
        )
        + " Each peer runs in turns of its own, only its own processes running, the order turned every repeat "
        "(the Peers table).",
    ]
    return "\n".join(lines) + "\n\n" + cpu_table(result) + phases_table(result)


def phases_table(result: dict[str, Any]) -> str:
    """Where each peer's gang spent its time: seconds from the first pod's creation to each moment (a
    peer that gates no pod has no gate lifted)."""
    labels = {"baseline": "plain kube-scheduler", "yuniplace": "yuniplace", **dict(GANG_PEERS)}
    lines = [
        "",
        "Where the time went: seconds from the first pod's creation, as the bench's pod watch saw each moment "
        f"(median of {result['repeats']}):",
        "",
        "| M | | " + " | ".join(heading for *_, heading in PHASES) + " |",
        "| ---: | --- |" + " ---: |" * len(PHASES),
    ]
    for row in result["rows"]:
        for key, label in labels.items():
            found = row.get(f"phases_{key}")
            if found:
                cells = " | ".join(str(found.get(figure, "-")) for figure, *_ in PHASES)
                lines.append(f"| {row['members']} | {label} | {cells} |")
    return "\n".join(lines) + "\n" if len(lines) > 5 else ""


def cpu_table(result: dict[str, Any]) -> str:
    """Where the cores went during the largest gang: CPU seconds per process, plain pods beside the gang
    on each start path."""
    largest = result["rows"][-1]
    if "cpu_by_process" not in largest:
        return ""
    paths = [("plain kube-scheduler", largest["cpu_by_process_plain"]), ("yuniplace", largest["cpu_by_process"])]
    if "placeholders" in largest:
        paths.append(("yuniplace, placeholders always", largest["placeholders"]["cpu_by_process"]))
    if "cpu_by_process_floor" in largest:
        paths.append(("gates lifted by a bare lifter", largest["cpu_by_process_floor"]))
    names = list(largest["cpu_by_process"])
    lines = [
        f"CPU seconds per process from the first pod's creation to the last bound, one gang of {largest['members']} "
        f"(median of {result['repeats']}):",
        "",
        "| | " + " | ".join(names) + " | all |",
        "| --- |" + " ---: |" * (len(names) + 1),
    ]
    for label, used in paths:
        lines.append(
            f"| {label} | " + " | ".join(f"{used.get(n, 0.0):.1f}" for n in names) + f" | {sum(used.values()):.1f} |"
        )
    return "\n".join(lines) + "\n"


# The peers of scenario 2, as its table names them.
ARRIVAL_PEERS = (
    ("baseline", "plain kube-scheduler"),
    ("yuniplace", "yuniplace"),
    ("native", "kube-scheduler's gang plugin"),
    ("floor", "gates lifted by a bare lifter"),
    ("kueue", "Kueue as it ships"),
    ("kueue_fast", "Kueue, client at the control plane's rate"),
    ("yunikorn", "YuniKorn"),
)
ARRIVAL_KEYS = ("p50_s", "p95_s", "p99_s", "pods_per_s")


def arrivals_table(result: dict[str, Any]) -> str:
    gang = result["yuniplace"]
    runs = result.get("runs", {})
    peers = [(key, name) for key, name in ARRIVAL_PEERS if key in result]

    def cell(key: str, figure: str) -> str:
        values = [run[figure] for run in runs.get(key, [])]
        median = result[key][figure]
        return f"{median} ({min(values)}–{max(values)})" if len(values) > 1 else str(median)

    def ratio(figure: str, to: dict[str, Any]) -> str:
        return f"{gang[figure] / to[figure]:.2f}" if to[figure] else "-"

    repeats = result.get("repeats", 1)
    lines = [
        f"### 2. {result['apps']} applications of {result['members']} arriving at {result['rate_per_s']}/s "
        f"(median of {repeats}, the runs' range in brackets)",
        "",
        "| | p50 start, s | p95 start, s | p99 start, s | pods bound / s |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {name} | " + " | ".join(cell(key, f) for f in ARRIVAL_KEYS) + " |" for key, name in peers]
    lines += [
        f"| yuniplace / {name} | " + " | ".join(ratio(f, result[key]) for f in ARRIVAL_KEYS) + " |"
        for key, name in peers
        if key != "yuniplace"
    ]
    if "reaction_ms_p50" in gang:
        lines += [
            "",
            f"yuniplace's reaction, from a gang's last member created to its first gate lifted: p50 "
            f"{gang['reaction_ms_p50']} ms, p95 {gang['reaction_ms_p95']} ms; the controller's CPU over the "
            f"arrivals: {gang.get('controller_cpu_s', '-')} s.",
        ]
    if any(figure in result[key] for key, _ in peers for figure, *_ in PHASES):
        lines += [
            "",
            "Where the median gang's time went, s from its arrival (each moment's median over the gangs, then over "
            "the runs):",
            "",
            "| | " + " | ".join(heading for *_, heading in PHASES) + " |",
            "| --- |" + " ---: |" * len(PHASES),
            *(
                f"| {name} | " + " | ".join(str(result[key].get(figure, "-")) for figure, *_ in PHASES) + " |"
                for key, name in peers
            ),
        ]
    return "\n".join(lines) + "\n"


def contention_table(result: dict[str, Any]) -> str:
    rate = "-" if result["landed_rate"] is None else f"{result['landed_rate']:.1%}"
    lines = [
        f"### 3. Contention: {result['gangs']} gangs of {result['members']} starting while {result['flood_pods']} "
        f"ordinary pods flood the same {result['nodes']} nodes",
        "",
        "| members handed a node's room | … of them started directly | landed on that node | landed-rate "
        "| stuck pods |",
        "| ---: | ---: | ---: | ---: | ---: |",
        f"| {result['swapped']} | {result.get('seated', 0)} | {result['landed']} | {rate} | {result['stuck']} |",
    ]
    return "\n".join(lines) + "\n"


def cost_table(result: dict[str, Any]) -> str:
    lines = [
        "### 4. Cost",
        "",
        "| Measure | Value |",
        "| --- | ---: |",
        f"| Controller CPU per 1 000 gang pods, s: direct start (placeholders always) | {result['cpu_s_per_1000']} "
        f"({result.get('cpu_s_per_1000_placeholders', '-')}) |",
        f"| Controller peak RSS during a {result['largest_gang']}-member gang, MiB "
        f"| {result['peak_rss_mib_largest_gang']} |",
        f"| API writes per gang member: pods (+ events) "
        f"| {result['pod_writes_per_member']} (+ {result['event_writes_per_member']}) |",
        f"| Controller peak RSS managing {result['managed']['managed_pods']} gang pods (+ their placeholders), MiB | "
        f"{result['managed']['peak_rss_mib']} |",
    ]
    return "\n".join(lines) + "\n"


def decode_table(result: dict[str, Any]) -> str:
    lines = [
        f"### 4c. Decoding the pod watch: one gang of {result['members']}, {result['events']} events of "
        f"{result['mean_event_bytes']} bytes on average",
        "",
        "| decoder | µs per event |",
        "| --- | ---: |",
        f"| json.loads, then trim to the fields yuniplace reads | {result['json_loads_trim_us']} |",
        f"| msgspec, typed with those fields (then the same trim) | {result['typed_trim_us']} |",
        f"| speed-up | {result['speedup']}× |",
    ]
    return "\n".join(lines) + "\n"


def profile_table(result: dict[str, Any]) -> str:
    """Where the controller's CPU went (py-spy): per profiled part, the functions taking most samples."""
    sections = ["### Profile of the controller (py-spy, on-CPU samples)", ""]
    for name, summary in result["profiles"].items():
        sections.append(
            profile.Summary(
                summary["samples"],
                [tuple(row) for row in summary["inclusive"]],
                [tuple(row) for row in summary["own"]],
            ).table(name)
        )
    return "\n".join(sections)


# Each line of the gang-size chart: its label, marker, and how to read it from a row (None: not measured).
GANG_LINES: tuple[tuple[str, str, Callable[[dict[str, Any]], float | None]], ...] = (
    ("plain kube-scheduler (no gang)", "o", lambda row: row.get("baseline_s")),
    ("yuniplace gang, direct start", "s", lambda row: row.get("yuniplace_s")),
    ("yuniplace gang, placeholders always", "v", lambda row: row.get("placeholders", {}).get("yuniplace_s")),
    ("YuniKorn gang", "^", lambda row: row.get("yunikorn_s")),
    ("Kueue pod group, as it ships", "D", lambda row: row.get("kueue_s")),
    ("Kueue pod group, client at the control plane's rate", "d", lambda row: row.get("kueue_fast_s")),
    ("kube-scheduler's gang plugin", "x", lambda row: row.get("native_s")),
    ("gates lifted by a bare lifter (the floor of gating)", "+", lambda row: row.get("floor_s")),
)


def gang_lines(rows: list[dict[str, Any]]) -> list[tuple[str, str, list[float]]]:
    """The gang-size chart's lines: (label, marker, seconds at each size) for each way of starting the
    gang the run measured at every size (YuniKorn's and Kueue's only where they ran)."""
    lines = []
    for label, marker, seconds in GANG_LINES:
        measured = [value for row in rows if (value := seconds(row)) is not None]
        if len(measured) == len(rows):
            lines.append((label, marker, measured))
    return lines


def chart(result: dict[str, Any], path: Path) -> None:
    """Start time against gang size, one line per way of starting the gang, on log scales: the sizes
    span a hundredfold, and a ratio between two lines reads the same at every size."""
    rows = result["rows"]
    sizes = [row["members"] for row in rows]
    figure, axes = plt.subplots(figsize=(6.4, 4.6), dpi=120)
    for label, marker, seconds in gang_lines(rows):
        axes.plot(sizes, seconds, marker=marker, label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("gang size M (pods)")
    axes.set_ylabel("first pod created → all M bound (s, log scale)")
    axes.set_title(f"Gang start latency, {result['nodes']} kwok nodes")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _growth(ratio: float, growth: float) -> str:
    """How a figure that changed by `ratio` grew against nodes that grew by `growth`: the exponent k
    of ratio = growth^k, read as flat, less than, about, or more than linear."""
    exponent = math.log(max(ratio, 1e-9)) / math.log(growth)
    if exponent < 0.2:
        return "flat"
    if exponent < 0.9:
        return "sublinear"
    return "linear" if exponent <= 1.1 else "worse than linear"


def scale_table(result: dict[str, Any]) -> str:
    rows = result["rows"]
    lines = [
        f"### 5. Scale: full clusters with {result['gangs']} gangs waiting (sizes {result['gang_sizes']}, 1 CPU a pod)",
        "",
        "| nodes | ordinary pods | controller ready, s | controller peak RSS, MiB | admission cycle, ms "
        "| … CPU, ms | CPU per 1 000 pod events, s | room freed → head gang admitted, s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['nodes']} | {r['ordinary_pods']} | {r['controller_ready_s']} | {r['controller_peak_rss_mib']} "
        f"| {r['admission_cycle_ms']} | {r['admission_cycle_cpu_ms']} | {r['cpu_s_per_1000_pod_events']} "
        f"| {r['freed_to_admitted_s']} |"
        for r in rows
    ]
    if len(rows) >= 2:
        first, last = rows[0], rows[-1]
        growth = last["nodes"] / first["nodes"]
        figures = (
            ("RSS", "controller_peak_rss_mib", 1),
            ("admission cycle", "admission_cycle_ms", 0.1),
            ("CPU per pod event", "cpu_s_per_1000_pod_events", 0.01),
            ("freed → admitted", "freed_to_admitted_s", 0.001),
        )
        grown = ", ".join(
            f"{name} ×{(ratio := last[key] / max(first[key], floor)):.2f} ({_growth(ratio, growth)})"
            for name, key, floor in figures
        )
        lines += ["", f"From {first['nodes']} to {last['nodes']} nodes (×{growth:g}): {grown}."]
    return "\n".join(lines) + "\n"


def scale_chart(result: dict[str, Any], path: Path) -> None:
    """Controller memory and admission time against cluster size, side by side, each on its own axis from
    zero: drawn on two y axes of one plot, two series of two points each lay exactly on top of each other."""
    rows = result["rows"]
    nodes = [row["nodes"] for row in rows]
    figure, (rss_axes, cycle_axes) = plt.subplots(1, 2, figsize=(7.6, 3.8), dpi=120)
    panels = (
        (rss_axes, "controller_peak_rss_mib", "controller peak RSS (MiB)", "o", "tab:blue"),
        (cycle_axes, "admission_cycle_ms", "admission cycle (ms)", "s", "tab:red"),
    )
    for axes, key, label, marker, colour in panels:
        values = [row[key] for row in rows]
        axes.plot(nodes, values, marker=marker, color=colour)
        for x, y in zip(nodes, values, strict=True):
            axes.annotate(f"{y:g}", (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize="small")
        axes.set_ylim(0, max(values) * 1.25)
        axes.set_xlabel("kwok nodes (full, with waiting gangs)")
        axes.set_ylabel(label)
        axes.set_xticks(nodes)
        axes.grid(True, alpha=0.3)
    figure.suptitle("Controller memory and admission decision time against cluster size")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def targets_table(results: list[dict[str, Any]]) -> str:
    """Each performance target beside the figure this run measured, met or not."""
    by_name = {r["scenario"]: r for r in results}
    checks: list[tuple[str, str, Any, bool]] = []
    if "arrivals" in by_name:
        gang = by_name["arrivals"]["yuniplace"]
        base = by_name["arrivals"]["baseline"]
        checks.append(("p50 start of a 10-pod gang at 5 arrivals/s", "≤ 0.35 s", gang["p50_s"], gang["p50_s"] <= 0.35))
        checks.append(("p99 start of a 10-pod gang at 5 arrivals/s", "≤ 0.8 s", gang["p99_s"], gang["p99_s"] <= 0.8))
        ratio = round(gang["pods_per_s"] / base["pods_per_s"], 2) if base["pods_per_s"] else 0.0
        checks.append(("pods bound per second against plain kube-scheduler", "≥ 0.97×", ratio, ratio >= 0.97))
        if "reaction_ms_p50" in gang:
            reaction = gang["reaction_ms_p50"]
            checks.append(
                ("from a gang's last member created to its first gate lifted, p50", "< 20 ms", reaction, reaction < 20)
            )
        for key, name in (("kueue", "Kueue as it ships"), ("kueue_fast", "Kueue, client at the control plane's rate")):
            if key in by_name["arrivals"]:
                peer = by_name["arrivals"][key]
                ahead = all(gang[figure] < peer[figure] for figure in ("p50_s", "p99_s"))
                measured = f"{gang['p50_s']} / {peer['p50_s']}, {gang['p99_s']} / {peer['p99_s']} s"
                checks.append((f"p50 and p99 under arrivals ahead of {name} (yuniplace / it)", "<", measured, ahead))
    if "gang-size" in by_name:
        largest = by_name["gang-size"]["rows"][-1]
        name = f"one gang of {largest['members']} against plain kube-scheduler"
        checks.append((f"{name}, direct start", "≤ 1.5×", largest["ratio"], largest["ratio"] <= 1.5))
        if "placeholders" in largest:
            ratio = largest["placeholders"]["ratio"]
            checks.append((f"{name}, `--placeholders=always`", "≤ 2.2×", ratio, ratio <= 2.2))
        rows = by_name["gang-size"]["rows"]
        for key, name, goal in (
            ("kueue", "ahead of Kueue as it ships", "< 1×"),
            ("kueue_fast", "ahead of Kueue with its client at the control plane's rate", "< 1×"),
            ("native", "at or below kube-scheduler's gang plugin", "≤ 1×"),
        ):
            if all(f"{key}_s" in row for row in rows):
                worst = max(rows, key=lambda row: row["yuniplace_s"] / row[f"{key}_s"])
                ratio = round(worst["yuniplace_s"] / worst[f"{key}_s"], 2)
                met = all(
                    row["yuniplace_s"] < row[f"{key}_s"] if goal == "< 1×" else row["yuniplace_s"] <= row[f"{key}_s"]
                    for row in rows
                )
                checks.append(
                    (f"yuniplace's direct start {name} at every size (worst: M={worst['members']})", goal, ratio, met)
                )
        if all("native_admitted_vs_alone" in row for row in rows):
            worst = max(rows, key=lambda row: row["native_admitted_vs_alone"])
            ratio = worst["native_admitted_vs_alone"]
            checks.append(
                (
                    f"a native gang admitted by yuniplace against the gang plugin alone (worst: M={worst['members']})",
                    "≤ 1.1×",
                    ratio,
                    ratio <= 1.1,
                )
            )
    if "cost" in by_name:
        cost = by_name["cost"]
        cpu = cost["cpu_s_per_1000"]
        checks.append(("controller CPU per 1 000 gang members", "≤ 3 s", cpu, cpu <= 3.0))
        writes, events = cost["pod_writes_per_member"], cost["event_writes_per_member"]
        checks.append(("pod writes per gang member", "≤ 3.0", writes, writes <= 3.0))
        checks.append(("event writes per gang member", "≤ 1.0", events, events <= 1.0))
    if "autoscaling" in by_name:
        autoscaled = by_name["autoscaling"]
        rows = autoscaled["rows"]
        stream = autoscaled["stream"]
        ratios = {f"M={row['members']}": row["gang_vs_plain"] for row in rows}
        ratios["the stream's p50"] = round(stream["yuniplace"]["p50_s"] / stream["baseline"]["p50_s"], 2)
        worst_of = max(ratios, key=lambda name: ratios[name])
        checks.append(
            (
                f"a gang's start against the same pods plain, on the same autoscaler (worst: {worst_of})",
                "≤ 1.2×",
                ratios[worst_of],
                ratios[worst_of] <= 1.2,
            )
        )
        extra = max(row["yuniplace"]["nodes_made"] - row["baseline"]["nodes_made"] for row in rows)
        checks.append(("nodes a gang made beyond what the same pods plain made", "0", extra, extra <= 0))
    if "scale" in by_name:
        largest = by_name["scale"]["rows"][-1]
        rss = largest["controller_peak_rss_mib"]
        checks.append((f"controller RSS at {largest['nodes']} nodes", "< 400 MiB", rss, rss < 400))
    if not checks:
        return ""
    lines = ["### Targets", "", "| target | goal | measured | met |", "| --- | ---: | ---: | :---: |"]
    lines += [f"| {name} | {goal} | {value} | {'yes' if met else 'no'} |" for name, goal, value, met in checks]
    return "\n".join(lines) + "\n"


def topology_table(result: dict[str, Any]) -> str:
    on, off = result["on"], result["off"]

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    def latency(figures: dict[str, Any]) -> str:
        return f"{figures['p50_s']} / {figures['p95_s']}"

    def stranded(run: dict[str, Any]) -> str:
        return "-" if run["stranded_mean"] is None else f"{run['stranded_mean']:.0%} / {run['stranded_p95']:.0%}"

    rows = [
        ("Gangs placed in one rack", share(on["one_rack_share"]), share(off["one_rack_share"])),
        (
            f"… of the {result['requiring']} that require one (topology on)",
            share(on["one_rack_share_requiring"]),
            share(off["one_rack_share_requiring"]),
        ),
        ("Start p50 / p95 of those gangs, s", latency(on["latency_requiring"]), latency(off["latency_requiring"])),
        ("Start p50 / p95 of the other gangs, s", latency(on["latency_others"]), latency(off["latency_others"])),
        ("Free CPU stranded in partly used racks, mean / p95 of samples", stranded(on), stranded(off)),
        ("Run, s", str(on["run_s"]), str(off["run_s"])),
    ]
    lines = [
        f"### 6. Topology: {result['racks']} racks of {result['nodes_per_rack']} nodes of {result['node_cpu']} CPUs, "
        f"{result['gangs']} gangs of {result['sizes']} pods (1 or 2 CPUs) at {result['rate_per_s']}/s, each running "
        f"{result['hold_s']:.0f}s",
        "",
        "| | topology on | topology off (same arrivals) |",
        "| --- | ---: | ---: |",
        *(f"| {label} | {a} | {b} |" for label, a, b in rows),
        "",
        "Start: from a gang's first pod created to all of its pods bound. Stranded: free CPU in racks that "
        "are neither empty nor full, as a share of all free CPU, sampled through the run.",
    ]
    return "\n".join(lines) + "\n"


def autoscaling_table(result: dict[str, Any]) -> str:
    def row(label: str, base: dict[str, Any], gang: dict[str, Any], start: str) -> str:
        return (
            f"| {label} | {base[start]} | {gang[start]} | {round(gang[start] / base[start], 2)}× | "
            f"{base['nodes_made']} / {gang['nodes_made']} / {gang['nodes_needed']} | "
            f"{base['back_to_size_s']} / {gang['back_to_size_s']} |"
        )

    stream = result["stream"]
    lines = [
        f"### 7. Autoscaled: Karpenter {result['karpenter']} (kwok provider), a NodePool of {result['node_cpu']}-CPU "
        f"nodes (limit {result['limit_cpu']} CPUs, consolidateAfter {result['consolidate_after']}, disruption "
        f"budget {result['disruption_budget']} of its nodes at once), no node at the start; pods of "
        f"{result['pod_cpu']} CPUs",
        "",
        "| work | plain pods, s | yuniplace gang, s | gang / plain | nodes made: plain / gang / needed | "
        "back to no node after the work: plain / gang, s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *(row(f"{r['members']} pods (one gang)", r["baseline"], r["yuniplace"], "start_s") for r in result["rows"]),
        row(
            f"{stream['gangs']} gangs of {stream['members']} at {stream['rate_per_s']}/s, start p50",
            stream["baseline"],
            stream["yuniplace"],
            "p50_s",
        ),
        row("… start p99", stream["baseline"], stream["yuniplace"], "p99_s"),
        "",
        "Start: from the first pod's creation to the last one bound (for the stream, each gang's or group's own), "
        "new nodes included; plain pods are the same pods with no gang, on the same Karpenter. Back to no node: "
        "from the work's end until Karpenter has consolidated every node it made. "
        f"Each figure is the median of {result.get('rounds', 1)} run(s), plain and gang taking turns; every run's "
        "figures are in results.json.",
    ]
    return "\n".join(lines) + "\n"


def dra_table(result: dict[str, Any]) -> str:
    lines = [
        f"### 8. DRA gangs: {result['nodes']} nodes of {result['devices_per_node']} devices (ResourceSlices as a "
        "driver publishes them), each member a claim of one device",
        "",
        "| M | plain pods, s | yuniplace gang, s | gang / plain | claims handed over | API writes a member |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {r['members']} | {r['plain_s']} | {r['yuniplace_s']} | {r['ratio']}× | {r['claims_handed_over']} | "
            f"{r['writes_per_member']} |"
            for r in result["rows"]
        ),
        "",
        "Start: from the first pod's creation to the last one bound. Plain pods are the same pods with no gang "
        "(kube-scheduler allocates each claim as it places the pod); the gang holds each member's claim with a "
        "placeholder and hands it over in the swap (the member added to the claim's reservedFor before the "
        "placeholder goes). Writes: pods, pod status and claims' status, by the controller. "
        f"Medians of {result['repeats']} run(s), plain and gang taking turns; every run is in results.json.",
    ]
    return "\n".join(lines) + "\n"


def native_table(result: dict[str, Any]) -> str:
    if "skipped" in result:
        return f"### 1d. Native gangs whose members come over a while\n\nNot run: {result['skipped']}.\n"
    spread = result["spread_s"]
    lines = [
        f"### 1d. Native gangs held by yuniplace, their pods made in one burst and over {spread:.0f} s "
        f"({result['nodes']} nodes, {result['api']})",
        "",
        "| M | pods made | gang plugin alone, s | held by yuniplace, s | held / alone | after the last pod: "
        "alone, s | held, s | API writes a member | placeholders made |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in result["rows"]:
        for label, how in (("burst", "in one burst"), ("spread", f"over {spread:.0f} s")):
            r = row[label]
            after = (
                f"{r['native_alone_after_last_s']} | {r['native_admitted_after_last_s']}"
                if "native_alone_after_last_s" in r
                else "– | –"
            )
            lines.append(
                f"| {row['members']} | {how} | {r['native_alone_s']} | {r['native_admitted_s']} | "
                f"{r['native_admitted_vs_alone']}× | {after} | {r.get('native_writes_per_member', '–')} | "
                f"{', '.join(str(n) for n in r.get('native_placeholders', [])) or '–'} |"
            )
    lines += [
        "",
        "Times run from the first pod's creation to the last one bound; 'after the last pod' from the last one's "
        "creation. Held: the gang's pods labelled with a configured queue, gated by yuniplace's native-gang "
        "webhook (served in the controller's process, as the chart runs it) until its gang is admitted. A gang "
        "admitted with its whole minimum there has its gates lifted, with nothing else written; one admitted "
        "before its last pod exists holds its room with placeholders until it does (the placeholders made are "
        "listed for each run). The controller runs with its defaults. Medians of "
        f"{result['repeats']} run(s), the two taking turns; every run is in results.json.",
    ]
    return "\n".join(lines) + "\n"


def _kueue_given(given: dict[str, Any]) -> str:
    settings = given["configuration"]
    waiting = settings.get("waitForPodsReady")
    client = settings["clientConnection"]
    quota = ", ".join(f"{name} {amount}" for name, amount in given["quota"].items())
    concurrency = ", ".join(f"{k} {v}" for k, v in settings["controller"]["groupKindConcurrency"].items())
    return (
        f"{given['version']}, its Configuration as its module ships it, run out of cluster; client "
        f"{client['qps']} QPS, burst {client['burst']}; waitForPodsReady "
        + (
            f"on (timeout {waiting['timeout']}, blockAdmission {str(waiting['blockAdmission']).lower()})"
            if waiting
            else "off"
        )
        + f"; concurrency {concurrency}; integration {', '.join(settings['integrations']['frameworks'])} "
        f"(pod groups); one ClusterQueue, nominal quota {quota} (the whole cluster); a LocalQueue per namespace"
    )


def peers_table(result: dict[str, Any]) -> str:
    """Who was measured in scenarios 1 and 2, with what each was given (read from what the run used), and
    the order of their turns in each repeat."""
    given = result["given"]
    described: dict[str, Callable[[dict[str, Any]], str]] = {
        "baseline": lambda _given: "the same pods, no gang; kube-scheduler alone",
        "native": lambda _given: "the same pods as one native pod group (the Workload API); kube-scheduler alone",
        "yuniplace": lambda g: (
            "its chart's controller, arguments "
            + " ".join(f"`{arg}`" for arg in g["args"])
            + "; its pods gated by the chart's webhook, served in the controller's process"
        ),
        "floor": lambda _given: (
            "the same pods, made with a scheduling gate; the bench lifts each gate by one write the moment it has "
            "seen every member (no webhook, nothing decided): the floor of holding a gang with a gate"
        ),
        "kueue": _kueue_given,
        "kueue_fast": _kueue_given,
        "yunikorn": lambda g: (
            f"its scheduler's defaults: client {g['client']['qps']} QPS, burst {g['client']['burst']}"
        ),
    }
    lines = ["### Peers: what each was given", "", "| peer | settings |", "| --- | --- |"]
    for key, label in result["labels"].items():
        lines.append(f"| {label} | {described[key](given.get(key, {}))} |")
    orders = "; ".join(
        f"{index + 1}: " + ", ".join(result["labels"][key] for key in order)
        for index, order in enumerate(result["orders"])
    )
    lines += ["", f"Turns, by repeat: {orders}."]
    return "\n".join(lines) + "\n"


TABLES = {
    "autoscaling": autoscaling_table,
    "control-plane": control_plane_table,
    "dra": dra_table,
    "native": native_table,
    "gang-size": gang_size_table,
    "peers": peers_table,
    "arrivals": arrivals_table,
    "contention": contention_table,
    "cost": cost_table,
    "decode": decode_table,
    "profile": profile_table,
    "scale": scale_table,
    "topology": topology_table,
    "faults": faults_table,
    "kind-faults": kind_faults_table,
    "soak": soak_table,
}


def write(out_dir: Path, results: list[dict[str, Any]], environment: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps({"environment": environment, "results": results}, indent=2))
    sections = [
        f"Measured {environment['time']} on {environment['cpus']} CPUs; "
        f"Kubernetes {environment['versions']['kubernetes']}.\n"
    ]
    targets = targets_table(results)
    if targets:
        sections.append(targets)
    sections += [TABLES[r["scenario"]](r) for r in results]
    for result in results:
        if result["scenario"] == "gang-size":
            chart(result, out_dir / "gang-latency.png")
            sections.append("![gang start latency](gang-latency.png)\n")
        if result["scenario"] == "scale":
            scale_chart(result, out_dir / "scale.png")
            sections.append("![controller memory and admission time against nodes](scale.png)\n")
        if result["scenario"] == "soak" and result["samples"]:
            soak_chart(result, out_dir / "soak.png")
    markdown = out_dir / "results.md"
    markdown.write_text("\n".join(sections))
    return markdown
