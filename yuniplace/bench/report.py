"""Writes a run's results as JSON (for machines) and a Markdown table (for people)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def write(out_dir: Path, results: list[dict[str, Any]], environment: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps({"environment": environment, "results": results}, indent=2))
    sections = [control_plane_table(r) for r in results if r["scenario"] == "control-plane"]
    markdown = out_dir / "results.md"
    markdown.write_text("\n".join(sections))
    return markdown
