"""`yuniplace controller`: run the reservation controller until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from yuniplace import httpserver, logs
from yuniplace.controller.controller import Controller
from yuniplace.controller.metrics import Metrics
from yuniplace.controller.plan import Settings
from yuniplace.gang.placeholders import DEFAULT_IMAGE
from yuniplace.gang.taskgroups import Limits
from yuniplace.kube import KubeClient

log = logging.getLogger(__name__)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "controller",
        help="run the reservation controller",
        description="Watch pods with YuniKorn task-group annotations, reserve room for each gang with "
        "placeholder pods, and swap the real pods in once every group is reserved.",
    )
    add_common_arguments(parser)
    parser.add_argument("--namespace", help="watch one namespace only (default: all)")
    parser.add_argument("--workers", type=int, default=4, help="applications reconciled in parallel (default: 4)")
    parser.add_argument("--placeholder-image", default=DEFAULT_IMAGE, help=f"image of placeholder pods (default: {DEFAULT_IMAGE})")
    parser.add_argument("--default-timeout", type=int, default=Limits.default_timeout_s,
                        help="placeholder timeout in seconds when a pod sets none (default: 900)")
    parser.add_argument("--max-members-per-group", type=int, default=Limits.max_members_per_group)
    parser.add_argument("--max-members-per-app", type=int, default=Limits.max_members_per_app)
    parser.add_argument("--no-member-events", action="store_true",
                        help="skip the PlaceholderSwapped event on every member (saves one API write per member)")
    parser.add_argument("--http-address", default="0.0.0.0:8080", help="address of /metrics, /healthz, /readyz (default: 0.0.0.0:8080)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level, args.log_format)
    metrics = Metrics()
    client = KubeClient.from_kubeconfig(args.kubeconfig, observer=metrics.observe_api_call)
    settings = Settings(
        limits=Limits(
            default_timeout_s=args.default_timeout,
            max_members_per_group=args.max_members_per_group,
            max_members_per_app=args.max_members_per_app,
        ),
        placeholder_image=args.placeholder_image,
        member_events=not args.no_member_events,
    )
    controller = Controller(client, namespace=args.namespace, settings=settings, workers=args.workers, metrics=metrics)
    server = httpserver.serve(args.http_address, metrics.registry, ready=controller.synced.is_set)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    log.info("yuniplace controller starting (API %s, namespace %s, metrics on %s)", client.host,
             args.namespace or "all", f"{server.server_address[0]}:{server.server_address[1]}")
    controller.run(stop)
    server.shutdown()
    log.info("yuniplace controller stopped")
    return 0
