"""`scripts/cluster`: start, inspect and stop local clusters from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from yuniplace.localcluster.build import BuildError, ensure_built
from yuniplace.localcluster.cluster import DEFAULT_NAME, ClusterError, LocalCluster
from yuniplace.localcluster.nodes import NodePool, Taint


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def _taint(text: str) -> Taint:
    try:
        return Taint.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="scripts/cluster",
        description="A local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, "
        "kube-controller-manager, kwok) on loopback, built from Go modules.",
    )
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    name_help = f"cluster name (default: {DEFAULT_NAME}); clusters of different names run side by side"

    up = commands.add_parser("up", help="build if needed, start the cluster and create kwok nodes")
    up.add_argument("--name", default=DEFAULT_NAME, help=name_help)
    up.add_argument("--nodes", type=_positive, default=3, help="number of kwok nodes (default: 3)")
    up.add_argument("--node-cpu", default="8", help="CPU of each node (default: 8)")
    up.add_argument("--node-memory", default="32Gi", help="memory of each node (default: 32Gi)")
    up.add_argument("--node-pods", type=_positive, default=110, help="pod capacity of each node (default: 110)")
    up.add_argument(
        "--node-resource", type=_key_value, action="append", default=[], metavar="NAME=QTY",
        help="extended resource on each node, e.g. nvidia.com/gpu=8 (repeatable)",
    )
    up.add_argument(
        "--node-label", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
        help="label on each node (repeatable)",
    )
    up.add_argument(
        "--node-taint", type=_taint, action="append", default=[], metavar="KEY[=VALUE]:EFFECT",
        help="taint on each node (repeatable)",
    )
    up.add_argument("--timeout", type=float, default=90.0, help="seconds each component may take to be ready")

    for command, text in (("down", "stop the cluster and remove its state"),
                          ("status", "show components and nodes (JSON)"),
                          ("env", "print export lines for KUBECONFIG and a PATH with kubectl and helm")):
        sub = commands.add_parser(command, help=text)
        sub.add_argument("--name", default=DEFAULT_NAME, help=name_help)

    commands.add_parser("build", help="build (or find in the cache) the control-plane binaries and print their folder")
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "build":
            print(ensure_built().bin_dir)
            return 0
        cluster = LocalCluster(args.name)
        if args.command == "up":
            pool = NodePool(
                count=args.nodes, cpu=args.node_cpu, memory=args.node_memory, pods=args.node_pods,
                extended=dict(args.node_resource), labels=dict(args.node_label), taints=tuple(args.node_taint),
            )
            cluster.up([pool], timeout_s=args.timeout)
        elif args.command == "down":
            cluster.down()
        elif args.command == "status":
            status = cluster.status()
            print(json.dumps(status, indent=2))
            return 0 if status["running"] else 1
        elif args.command == "env":
            sys.stdout.write(cluster.env())
    except (BuildError, ClusterError) as error:
        print(f"scripts/cluster {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
