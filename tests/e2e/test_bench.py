"""`scripts/bench --quick` as a smoke test: the benchmark itself runs and reports every scenario.
Its figures are not asserted on; timing belongs to benchmarks, not to tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import Cluster

# The benchmark starts clusters of its own; beside another pytest worker on two cores it can take
# three times as long as alone, so it gets a budget of its own rather than the suite's 600 s.
BENCH_TIMEOUT_S = 1500

SCENARIOS = {
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
    "peers",  # who scenarios 1 and 2 measured, what each was given, the order of their turns
}


@pytest.mark.timeout(BENCH_TIMEOUT_S + 60)
def test_quick_benchmark_reports_every_scenario(cluster: Cluster, tmp_path: Path) -> None:
    """(The session cluster fixture only applies the e2e policy; the benchmark starts clusters of its own.)"""
    run = subprocess.run(
        [sys.executable, "-m", "yuniplace.bench", "--quick", "--no-yunikorn", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=BENCH_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = {r["scenario"]: r for r in json.loads((tmp_path / "results.json").read_text())["results"]}
    assert set(results) == SCENARIOS
    assert [row["members"] for row in results["gang-size"]["rows"]] == [10, 50]
    assert all(row["baseline_s"] > 0 and row["yuniplace_s"] > 0 for row in results["gang-size"]["rows"])
    # Every peer of the quick run took its turn (Kueue and YuniKorn are left out of it); yuniplace ran as
    # its chart runs it, at its defaults, its pods gated by its webhook.
    peers = results["peers"]
    assert peers["orders"] == [["baseline", "yuniplace", "native", "floor"]], peers["orders"]
    assert (
        "--workers=4" in peers["given"]["yuniplace"]["args"] and "--leader-elect" in peers["given"]["yuniplace"]["args"]
    )
    assert all(row["native_s"] > 0 and row["floor_s"] > 0 for row in results["gang-size"]["rows"])
    assert results["arrivals"]["native"]["p50_s"] > 0 and results["arrivals"]["floor"]["p50_s"] > 0
    # Where each gang's time went: the floor's gates were lifted only once every pod was seen, and before
    # its last pod was bound; the gang plugin gates nothing.
    for row in results["gang-size"]["rows"]:
        floor = row["phases_floor"]
        assert floor["all_seen_s"] <= floor["first_free_s"] <= floor["last_free_s"] <= floor["last_bound_s"], floor
        assert "first_free_s" not in row["phases_native"] and row["phases_yuniplace"]["last_bound_s"] > 0
        assert row["cpu_by_process_floor"]["kube-apiserver"] > 0
    # Native gangs admitted by yuniplace (the bench cluster serves the Workload API), beside the plugin alone.
    assert all(row["native_admitted_s"] > 0 and row["native_alone_s"] > 0 for row in results["gang-size"]["rows"])
    assert results["contention"]["stuck"] == 0 and results["contention"]["swapped"] > 0
    assert results["cost"]["managed"]["managed_pods"] == 100
    assert results["decode"]["events"] > 0 and results["decode"]["typed_trim_us"] > 0
    scale = results["scale"]["rows"]
    assert [row["nodes"] for row in scale] == [50] and scale[0]["admission_cycles"] > 0
    topology = results["topology"]
    assert topology["on"]["one_rack_share_requiring"] == 1.0  # a required rack is kept, whatever the timing
    assert topology["on"]["samples"] > 0 and topology["off"]["samples"] > 0
    # On the autoscaled cluster, every pod of the gang got a node of its own, and the nodes went again.
    [autoscaled] = results["autoscaling"]["rows"]
    assert autoscaled["yuniplace"]["nodes_made"] >= autoscaled["yuniplace"]["nodes_needed"] == 10
    assert autoscaled["yuniplace"]["back_to_size_s"] > 0 and autoscaled["baseline"]["start_s"] > 0
    # Every member of a DRA gang had its claim held by a placeholder and handed over in the swap.
    [dra] = results["dra"]["rows"]
    assert dra["claims_handed_over"] == dra["members"] == 10 and dra["plain_s"] > 0
    # A native gang whose pods come over 2 s is admitted at its first: placeholders hold its whole minimum
    # until its last comes. One made in a burst holds them only if admitted before its last pod existed.
    [native] = results["native"]["rows"]
    assert native["spread"]["native_placeholders"] == [10], native
    assert native["burst"]["native_placeholders"] in ([0], [10]), native
    assert native["spread"]["native_admitted_after_last_s"] > 0 and native["spread"]["native_alone_s"] > 2
    for chart in ("gang-latency.png", "scale.png"):
        assert (tmp_path / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (tmp_path / "results.md").read_text()
    headings = (
        "### Targets",
        "### 1. One gang",
        "### 2.",
        "### 3. Contention",
        "### 4. Cost",
        "### 4c. Decoding",
        "### 5. Scale",
        "### 6. Topology",
        "### 7. Autoscaled",
        "### 8. DRA gangs",
        "### 1d. Native gangs",
        "### Peers: what each was given",
    )
    for heading in (*headings, "### Control plane"):
        assert heading in markdown
