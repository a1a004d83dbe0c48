"""`scripts/cluster`: start, inspect and stop local clusters, or one of their components, from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from yuniplace.localcluster import karpenter
from yuniplace.localcluster.build import DEFAULT_KUBERNETES, SUPPORTED_KUBERNETES, BuildError, ensure_built
from yuniplace.localcluster.cluster import COMPONENTS, DEFAULT_NAME, ClusterError, LocalCluster
from yuniplace.localcluster.components import Features
from yuniplace.localcluster.kind import KindCluster, KindError
from yuniplace.localcluster.kindimage import ensure_all
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


def _gates(text: str) -> dict[str, bool]:
    """kube's own syntax: Name=true,Other=false."""
    gates: dict[str, bool] = {}
    for item in filter(None, text.split(",")):
        name, value = _key_value(item)
        if value.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"feature gate {name}: {value!r} is not true or false")
        gates[name] = value.lower() == "true"
    return gates


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
        "--node-resource",
        type=_key_value,
        action="append",
        default=[],
        metavar="NAME=QTY",
        help="extended resource on each node, e.g. nvidia.com/gpu=8 (repeatable)",
    )
    up.add_argument(
        "--node-label",
        type=_key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label on each node (repeatable)",
    )
    up.add_argument(
        "--node-taint",
        type=_taint,
        action="append",
        default=[],
        metavar="KEY[=VALUE]:EFFECT",
        help="taint on each node (repeatable)",
    )
    up.add_argument(
        "--kubernetes",
        choices=SUPPORTED_KUBERNETES,
        default=DEFAULT_KUBERNETES,
        help=f"Kubernetes minor version, each built from its own Go module pins (default: {DEFAULT_KUBERNETES})",
    )
    up.add_argument(
        "--workload-api",
        action="store_true",
        help="serve the native Workload API (scheduling.k8s.io Workload/PodGroup) with kube-scheduler's gang "
        "plugin: the feature gates and API version this Kubernetes version needs",
    )
    up.add_argument(
        "--feature-gates",
        type=_gates,
        default={},
        metavar="NAME=BOOL,...",
        help="feature gates for every component, as Kubernetes writes them",
    )
    up.add_argument(
        "--runtime-config",
        action="append",
        default=[],
        metavar="GROUP/VERSION",
        help="an API version for the apiserver to serve beyond its defaults (repeatable)",
    )
    up.add_argument(
        "--autoscaler",
        choices=("karpenter",),
        help="run an autoscaler beside the cluster: Karpenter with its kwok provider (built from its Go module), "
        "and a NodePool 'default' of kwok nodes it makes as pending pods need them",
    )
    up.add_argument(
        "--pool-node-cpu",
        type=int,
        choices=(1, 2, 4, 8, 16, 32, 48, 64),
        default=4,
        help="with --autoscaler: CPUs of each node the NodePool makes (instance family c: 2 GiB a CPU; default: 4)",
    )
    up.add_argument(
        "--pool-cpu-limit",
        type=_positive,
        default=64,
        help="with --autoscaler: CPUs the NodePool's nodes may have in all (its limits; default: 64)",
    )
    up.add_argument("--timeout", type=float, default=90.0, help="seconds each component may take to be ready")
    up.add_argument(
        "--kind",
        action="store_true",
        help="a kind cluster instead (Docker containers as nodes, real kubelets; Docker is installed "
        "and started if absent): 1 control plane + --workers, yuniplace's image loaded",
    )
    up.add_argument("--workers", type=_positive, default=2, help="with --kind: worker nodes (default: 2)")

    for command, text in (
        ("down", "stop the cluster and remove its state"),
        ("status", "show components and nodes (JSON)"),
        ("env", "print export lines for KUBECONFIG and a PATH with kubectl, helm, yuniplace and kubectl-yuniplace"),
    ):
        sub = commands.add_parser(command, help=text)
        sub.add_argument("--name", default=DEFAULT_NAME, help=name_help)
        if command != "status":
            sub.add_argument("--kind", action="store_true", help="the kind cluster of that name")

    for command, text in (
        ("stop", "stop one component, leaving the others (and etcd's data) as they are"),
        ("start", "start a stopped component again, on its ports with its flags, and wait until it is healthy"),
        ("restart", "stop one component and start it again"),
    ):
        sub = commands.add_parser(command, help=text)
        sub.add_argument("--name", default=DEFAULT_NAME, help=name_help)
        sub.add_argument(
            "--component",
            required=True,
            choices=(*COMPONENTS, karpenter.NAME),
            help="the component (or the autoscaler)",
        )
        if command != "start":
            sub.add_argument("--kill", action="store_true", help="SIGKILL, as a crash ends it (default: SIGTERM)")
        if command != "stop":
            sub.add_argument(
                "--timeout", type=float, default=90.0, help="seconds it may take to be healthy (default: 90)"
            )

    build = commands.add_parser(
        "build", help="build (or find in the cache) the control-plane binaries and print their folder"
    )
    build.add_argument("--kubernetes", choices=SUPPORTED_KUBERNETES, default=DEFAULT_KUBERNETES)
    build.add_argument(
        "--with-oldest",
        action="store_true",
        help=f"build the oldest supported release ({SUPPORTED_KUBERNETES[0]}) as well: the tests start a cluster of it",
    )
    kind_image = commands.add_parser(
        "kind-image",
        help="build (or find in the cache) kind, its node image with every image kubeadm runs, and "
        "yuniplace's image (yuniplace:dev); print the node image and the tools' folder",
    )
    kind_image.add_argument(
        "--env", action="store_true", help="print instead an export line putting kind, kubectl and helm first on PATH"
    )
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "build":
            for release in dict.fromkeys([args.kubernetes, *SUPPORTED_KUBERNETES[:1] * args.with_oldest]):
                print(ensure_built(release).bin_dir)
            return 0
        if args.command == "kind-image":
            images = ensure_all()
            if args.env:
                print(f'export PATH="{images.bin_dir}:$PATH"')
            else:
                print(
                    f"node image: {images.node_image}\nyuniplace image: {images.yuniplace_image}\n"
                    f"kind, kubectl, helm: {images.bin_dir}"
                )
            return 0
        if getattr(args, "kind", False):
            return _kind(args)
        cluster = LocalCluster(args.name)
        if args.command == "up":
            pool = NodePool(
                count=args.nodes,
                cpu=args.node_cpu,
                memory=args.node_memory,
                pods=args.node_pods,
                extended=dict(args.node_resource),
                labels=dict(args.node_label),
                taints=tuple(args.node_taint),
            )
            features = Features(args.feature_gates, tuple(args.runtime_config))
            if args.workload_api:
                features = Features.workload_api(args.kubernetes).merged(features)
            cluster.up([pool], kubernetes=args.kubernetes, features=features, timeout_s=args.timeout)
            if args.autoscaler == "karpenter":
                _karpenter(cluster, args)
        elif args.command == "down":
            cluster.down()
        elif args.command == "stop":
            cluster.stop_component(args.component, kill=args.kill)
            print(f"{args.component} of cluster {args.name!r} stopped.", file=sys.stderr)
        elif args.command == "start":
            cluster.start_component(args.component, timeout_s=args.timeout)
            print(f"{args.component} of cluster {args.name!r} started and healthy.", file=sys.stderr)
        elif args.command == "restart":
            cluster.restart_component(args.component, kill=args.kill, timeout_s=args.timeout)
            print(f"{args.component} of cluster {args.name!r} restarted and healthy.", file=sys.stderr)
        elif args.command == "status":
            status = cluster.status()
            print(json.dumps(status, indent=2))
            return 0 if status["running"] else 1
        elif args.command == "env":
            sys.stdout.write(cluster.env())
    except (BuildError, ClusterError, KindError) as error:
        print(f"scripts/cluster {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _karpenter(cluster: LocalCluster, args: argparse.Namespace) -> None:
    """Karpenter beside the cluster, with a NodePool named default."""
    karpenter.start(cluster, karpenter.ensure_karpenter(), timeout_s=args.timeout)
    pool = karpenter.node_pool("default", cpu=args.pool_node_cpu, limits={"cpu": str(args.pool_cpu_limit)})
    cluster.client().create("/apis/karpenter.sh/v1/nodepools", pool)
    print(
        f"Karpenter runs beside cluster {cluster.name!r}: NodePool default makes nodes of {args.pool_node_cpu} CPUs, "
        f"{args.pool_cpu_limit} CPUs in all (kubectl get nodepools,nodeclaims)",
        file=sys.stderr,
    )


def _kind(args: argparse.Namespace) -> int:
    cluster = KindCluster("yuniplace" if args.name == DEFAULT_NAME else args.name)
    if args.command == "up":
        took = cluster.up(workers=args.workers)
        print(
            f"kind cluster {cluster.name}: 1 control plane + {args.workers} workers Ready in {took:.0f}s, "
            f'{cluster.images.yuniplace_image} loaded; eval "$(scripts/cluster env --kind --name {cluster.name})"',
            file=sys.stderr,
        )
    elif args.command == "down":
        cluster.down()
    elif args.command == "env":
        sys.stdout.write(cluster.env())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
