"""`scripts/bench`: measure on fresh local clusters and write JSON + Markdown results."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

from yuniplace.bench import controlplane, report
from yuniplace.localcluster.build import BuildError, module_dir, pinned_versions
from yuniplace.localcluster.cluster import ClusterError


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="scripts/bench",
        description="Benchmarks on fresh local clusters, each figure beside a baseline measured in the same run.",
    )
    root.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a few minutes at most")
    root.add_argument("--nodes", type=int, help="kwok nodes for the control-plane baseline (default 1000, quick 50)")
    root.add_argument("--pods", type=int, help="plain pods for the control-plane baseline (default 1000, quick 100)")
    root.add_argument("--cold-build", action="store_true",
                      help="also time a build with empty Go caches (downloads and compiles everything: minutes)")
    root.add_argument("--out", type=Path, help="results folder (default bench-results/<UTC time>)")
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    nodes = args.nodes or (50 if args.quick else 1000)
    pods = args.pods or (100 if args.quick else 1000)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out or Path("bench-results") / stamp
    environment = {
        "time": stamp,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "versions": pinned_versions(module_dir()),
    }
    try:
        print(f"control-plane baseline: {nodes} nodes, {pods} pods", file=sys.stderr, flush=True)
        results = [controlplane.run(nodes=nodes, pods=pods, cold_build=args.cold_build)]
    except (BuildError, ClusterError, TimeoutError) as error:
        print(f"scripts/bench: {error}", file=sys.stderr)
        return 1
    markdown = report.write(out_dir, results, environment)
    print(markdown.read_text())
    print(f"Results: {out_dir}/results.json, {markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
