"""Command-line options shared by the processes: logging, the health endpoint, gang limits, the queues
ConfigMap."""

from __future__ import annotations

import argparse

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
    parser.add_argument("--max-members-per-group", type=int, default=defaults.max_members_per_group, metavar="N")
    parser.add_argument("--max-members-per-app", type=int, default=defaults.max_members_per_app, metavar="N")
    parser.add_argument(
        "--scheduler-name",
        action="append",
        default=None,
        metavar="NAME",
        help="manage gang pods of this scheduler (repeatable; default: default-scheduler); "
        "pods for other schedulers, YuniKorn's say, are left alone",
    )


def schedulers_from(args: argparse.Namespace) -> frozenset[str]:
    return frozenset(args.scheduler_name or [DEFAULT_SCHEDULER])


def limits_from(args: argparse.Namespace) -> Limits:
    return Limits(
        default_timeout_s=args.default_timeout,
        default_style=Style(args.default_style),
        max_members_per_group=args.max_members_per_group,
        max_members_per_app=args.max_members_per_app,
    )


def configmap_argument(text: str) -> tuple[str, str]:
    """A ConfigMap as NAMESPACE/NAME (the queues ConfigMap of the controller and of `status --queues`)."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME (e.g. yunikorn/yunikorn-configs)")
    return namespace, name
