"""Command-line options shared by the processes: logging, the health endpoint, gang limits, the queues
ConfigMap."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from yuniplace.gang.onloss import LossPolicy, OnLoss
from yuniplace.gang.pods import DEFAULT_SCHEDULER
from yuniplace.gang.taskgroups import Limits, Style


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"], help="json: one object per line")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    add_log_arguments(parser)
    parser.add_argument(
        "--http-address", default="0.0.0.0:8080", help="/metrics, /healthz and /readyz (default: 0.0.0.0:8080)"
    )


def _whole_from(low: int) -> Callable[[str], int]:
    def whole(text: str) -> int:
        if not text.isascii() or not text.isdigit() or int(text) < low:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low}, not {text}")
        return int(text)

    return whole


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Limits()
    parser.add_argument(
        "--default-timeout",
        type=int,
        default=defaults.default_timeout_s,
        metavar="SECONDS",
        help=f"placeholder timeout when a pod sets none (default: {defaults.default_timeout_s})",
    )
    parser.add_argument(
        "--default-style",
        choices=[s.value for s in Style],
        default=defaults.default_style.value,
        help="gangSchedulingStyle when a pod sets none (default: Soft)",
    )
    parser.add_argument(
        "--max-members-per-group",
        type=int,
        default=defaults.max_members_per_group,
        metavar="N",
        help=f"largest minMember accepted in one task group (default: {defaults.max_members_per_group})",
    )
    parser.add_argument(
        "--max-members-per-app",
        type=int,
        default=defaults.max_members_per_app,
        metavar="N",
        help=f"largest sum of minMember accepted for one application (default: {defaults.max_members_per_app})",
    )
    parser.add_argument(
        "--scheduler-name",
        action="append",
        default=None,
        metavar="NAME",
        help="manage gang pods of this scheduler (repeatable; default: default-scheduler); "
        "pods for other schedulers, YuniKorn's say, are left alone",
    )
    loss = defaults.on_loss
    lost = parser.add_argument_group(
        "a started gang that loses a member (defaults; a gang's pod may ask otherwise with yuniplace.io/ annotations)"
    )
    lost.add_argument(
        "--on-member-lost",
        choices=[o.value for o in OnLoss],
        default=loss.on_loss.value,
        help="none: only report it; restart: evict the rest at once for its owner to make it again; release: "
        "evict it whole once it has stayed below its minimum past the recovery timeout "
        f"(default: {loss.on_loss.value})",
    )
    lost.add_argument(
        "--restart-limit",
        type=_whole_from(0),
        default=loss.restart_limit,
        metavar="N",
        help=f"restarts (or releases) after which a further loss fails the gang (default: {loss.restart_limit})",
    )
    lost.add_argument(
        "--recovery-timeout",
        type=_whole_from(1),
        default=loss.recovery_timeout_s,
        metavar="SECONDS",
        help=f"how long a release gang may stay below its minimum (default: {loss.recovery_timeout_s})",
    )
    lost.add_argument(
        "--ready-timeout",
        type=_whole_from(1),
        default=loss.ready_timeout_s,
        metavar="SECONDS",
        help="how long a member may run without being Ready before it counts as lost "
        f"(default: {loss.ready_timeout_s})",
    )


def schedulers_from(args: argparse.Namespace) -> frozenset[str]:
    return frozenset(args.scheduler_name or [DEFAULT_SCHEDULER])


def limits_from(args: argparse.Namespace) -> Limits:
    return Limits(
        default_timeout_s=args.default_timeout,
        default_style=Style(args.default_style),
        max_members_per_group=args.max_members_per_group,
        max_members_per_app=args.max_members_per_app,
        on_loss=LossPolicy(OnLoss(args.on_member_lost), args.restart_limit, args.recovery_timeout, args.ready_timeout),
    )


def add_cluster_arguments(parser: argparse.ArgumentParser, *, namespace_help: str, all_namespaces: bool) -> None:
    """The flags by which kubectl users name a cluster and a namespace, spelled as kubectl spells them, so
    the command reads the same as a kubectl plugin (`kubectl yuniplace`): the kubeconfig ($KUBECONFIG and
    the current context unless told), the context, the namespace, and with `all_namespaces` -A."""
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster), as kubectl's"
    )
    parser.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    parser.add_argument("-n", "--namespace", help=namespace_help)
    if all_namespaces:
        parser.add_argument(
            "-A", "--all-namespaces", action="store_true", help="every namespace (what kubectl's -A means)"
        )


def configmap_argument(text: str) -> tuple[str, str]:
    """A ConfigMap as NAMESPACE/NAME (the queues ConfigMap of the controller and of `status --queues`)."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME (e.g. yunikorn/yunikorn-configs)")
    return namespace, name
