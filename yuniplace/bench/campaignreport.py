"""The tables of a fault campaign and of a soak (faults by kind, gangs by outcome, violations with their
objects; memory and CPU over time with their slopes, what is left in etcd) and the soak's chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from yuniplace.bench.invariants import INVARIANTS


def _header(result: dict[str, Any], title: str) -> list[str]:
    return [
        f"### {title}: {result['duration_s'] / 60:.0f} minutes, seed {result['seed']}, {result['nodes']} nodes "
        f"(`scripts/bench --scenario {result['scenario']} --seed {result['seed']}` replays it)",
        "",
        *_stalls(result),
    ]


def _stalls(result: dict[str, Any]) -> list[str]:
    stalls = result.get("stalls") or []
    if not stalls:
        return []
    gaps = ", ".join(f"{s['gap_s']:.0f} s at +{s['at_s']:.0f} s" for s in stalls)
    return [
        f"**The campaign itself stood still** ({gaps}): the machine was not quiet. The time it stood still was "
        "added to the grace; run it again on a quiet machine.",
        "",
    ]


def _outcomes(result: dict[str, Any]) -> list[str]:
    lines = ["| gangs | outcome |", "| ---: | --- |"]
    lines += [f"| {count} | {outcome} |" for outcome, count in result["outcomes"].items()]
    return [*lines, f"| **{result['gangs']}** | all |", ""]


def _violations(result: dict[str, Any]) -> list[str]:
    violations = result["violations"]
    by_invariant = {name: sum(1 for v in violations if v["invariant"] == name) for name in INVARIANTS}
    lines = [
        f"Invariants checked {result['checks']} times, the last when the last gangs had ended (grace "
        f"{result['grace_s'] + result.get('stalled_s', 0):.0f} s): {len(violations)} violation(s).",
        "",
        "| invariant | violations |",
        "| --- | ---: |",
    ]
    lines += [f"| {name} | {count} |" for name, count in by_invariant.items()]
    if violations:
        lines += ["", "| due at | invariant | application | objects | what |", "| ---: | --- | --- | --- | --- |"]
        lines += [
            f"| +{v['due_s']:.0f} s | {v['invariant']} | {v['app']} | {', '.join(v['objects'])} | {v['detail']} |"
            for v in violations
        ]
    return [*lines, ""]


def faults_table(result: dict[str, Any]) -> str:
    lines = _header(result, "Faults")
    lines += ["| faults | kind |", "| ---: | --- |"]
    lines += [f"| {count} | {kind} |" for kind, count in result["faults"].items()]
    lines += [f"| **{sum(result['faults'].values())}** | all |", ""]
    restarts = result["controller_restarts"]
    if restarts:
        exits = ", ".join(f"{r['replica']} ({r['exit_code']})" for r in restarts)
        lines += [f"Controller replicas ended and started again ({len(restarts)}): {exits}.", ""]
    lines += _outcomes(result) + _violations(result)
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def kind_faults_table(result: dict[str, Any]) -> str:
    """The campaign on kind: what ran and what held, as faults_table, then what 2 cores held and, for
    every node taken away, Kubernetes' times beside yuniplace's."""
    lines = [
        f"### Faults on kind: {result['duration_s'] / 60:.0f} minutes, seed {result['seed']}, {result['workers']} "
        f"workers (`scripts/bench --scenario faults --kind --seed {result['seed']}` replays it)",
        "",
        *_stalls(result),
        f"The cluster came up in {result['cluster_up_s']:.0f} s (every node Ready), yuniplace's image loaded "
        f"{result['cluster_loaded_s'] - result['cluster_up_s']:.0f} s later, the chart installed and its two replicas "
        f"Ready in {result['chart_installed_s']:.0f} s. Gang pods tolerate a NotReady or unreachable node for "
        f"{result['toleration_s']} s (Kubernetes' default: 300 s).",
        "",
    ]
    used = result.get("resources") or {}
    if used:
        lines += [
            "| what 2 cores held | mean | peak |",
            "| --- | ---: | ---: |",
            f"| the cluster's containers, CPU (% of one core) | {used['cluster_cpu_percent_mean']} | "
            f"{used['cluster_cpu_percent_max']} |",
            f"| the cluster's containers, memory (MiB) | {used['cluster_mem_mib_mean']} | "
            f"{used['cluster_mem_mib_max']} |",
            f"| the host's load (1 min) | {used['host_load1_mean']} | {used['host_load1_max']} |",
            "",
        ]
    lines += ["| faults | kind |", "| ---: | --- |"]
    lines += [f"| {count} | {kind} |" for kind, count in result["faults"].items()]
    lines += [f"| **{sum(result['faults'].values())}** | all |", ""]
    lines += _outcomes(result) + _violations(result)
    summary = result.get("recovery_summary") or {}
    if summary.get("by_fault"):
        lines += [
            "A node taken away, seconds from the fault (medians): Kubernetes' own marks",
            "",
            "| fault | faults | node marked | NotReady | tainted unreachable | first pod evicted for the taint |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {kind} | {row['faults']} | {row['marked']} | {_seconds(row['not_ready_s'])} | "
            f"{_seconds(row['tainted_s'])} | {_seconds(row['taint_eviction_s'])} |"
            for kind, row in summary["by_fault"].items()
        ]
        lines.append("")
    if summary.get("by_policy"):
        lines += [
            "and yuniplace's, for each gang with a member on a node that was marked (medians):",
            "",
            "| policy, how its Job replaces a pod | gangs | GangDegraded | answered | running whole again "
            "| never whole |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {key} | {row['gangs']} | {_seconds(row['degraded_s'])} | {_seconds(row['answered_s'])} | "
            f"{_seconds(row['whole_again_s'])} | {row['never_whole']} |"
            for key, row in summary["by_policy"].items()
        ]
        lines.append("")
    return "\n".join(lines)


def soak_table(result: dict[str, Any]) -> str:
    lines = _header(result, "Soak")
    left = result["leftovers"]
    samples = result["samples"]
    first, last = (samples[0], samples[-1]) if samples else ({}, {})
    lines += [
        "| measure | value |",
        "| --- | ---: |",
        f"| controller RSS, first → last sample, MiB | {first.get('rss_mib', '-')} → {last.get('rss_mib', '-')} |",
        f"| controller RSS slope, MiB per hour | {result['rss_mib_per_hour']} |",
        f"| controller CPU slope, % per hour | {result['cpu_percent_per_hour']} |",
        f"| placeholders left in etcd | {left['placeholders']} |",
        f"| gang pods left | {left['gang_pods']} |",
        f"| events in etcd (all namespaces) | {left['events_total']} |",
        "",
        "![controller memory and CPU over the soak](soak.png)",
        "",
    ]
    lines += _outcomes(result) + _violations(result)
    return "\n".join(lines)


def soak_chart(result: dict[str, Any], path: Path) -> None:
    samples = result["samples"]
    minutes = [s["t_s"] / 60 for s in samples]
    figure, rss_axes = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    rss_line = rss_axes.plot(minutes, [s["rss_mib"] for s in samples], color="tab:blue", label="RSS")
    rss_axes.set_xlabel("minutes")
    rss_axes.set_ylabel("controller RSS (MiB)", color="tab:blue")
    cpu_axes = rss_axes.twinx()
    cpu_line = cpu_axes.plot(
        minutes, [s["cpu_percent"] for s in samples], color="tab:red", linestyle="--", alpha=0.6, label="CPU"
    )
    cpu_axes.set_ylabel("controller CPU (% of one core)", color="tab:red")
    rss_axes.set_title(
        f"Soak: RSS {result['rss_mib_per_hour']} MiB/h, CPU {result['cpu_percent_per_hour']} %/h (least squares)"
    )
    rss_axes.grid(True, alpha=0.3)
    lines = rss_line + cpu_line
    rss_axes.legend(lines, [str(line.get_label()) for line in lines], loc="upper left")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
