"""`yuniplace controller`: run the reservation controller (and, optionally, the admission webhook in
the same process) until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading

from yuniplace import httpserver, logs
from yuniplace.cliargs import add_common_arguments, add_limit_arguments, limits_from, schedulers_from
from yuniplace.controller.controller import Controller
from yuniplace.controller.leader import LeaderElector, LeaseTiming
from yuniplace.controller.metrics import Metrics
from yuniplace.controller.plan import Settings
from yuniplace.gang.placeholders import DEFAULT_IMAGE
from yuniplace.kube import KubeClient
from yuniplace.webhook import command as webhook_command

log = logging.getLogger(__name__)
EXIT_LOST_LEADERSHIP = 3


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "controller",
        help="run the reservation controller",
        description="Watch pods with YuniKorn task-group annotations, reserve room for each gang with "
        "placeholder pods, and swap the real pods in once every group is reserved.",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    parser.add_argument("--namespace", help="watch one namespace only (default: all)")
    parser.add_argument("--workers", type=int, default=4, help="applications reconciled in parallel (default: 4)")
    parser.add_argument("--placeholder-image", default=DEFAULT_IMAGE, help=f"image of placeholder pods (default: {DEFAULT_IMAGE})")
    add_limit_arguments(parser)
    parser.add_argument("--swap-nomination", choices=["auto", "always"], default="auto",
                        help="auto (default): nominate a swapped member to its reserved node only while pods of other "
                        "applications wait to be scheduled, else steer it there with a preferred node affinity in the "
                        "same write that releases it; always: nominate every member (one API write more each)")
    parser.add_argument("--admission", choices=["capacity", "off"], default="capacity",
                        help="capacity (default): an application reserves only once its whole gang fits in the free room, "
                        "in FIFO order per queue, so gangs never split the cluster and wait on each other; off: every "
                        "application reserves at once")
    parser.add_argument("--strict-backoff", type=float, default=10.0, metavar="SECONDS",
                        help="Strict mode: seconds before a released reservation is tried again, doubled each attempt "
                        "up to 5 minutes (default: 10)")
    parser.add_argument("--no-member-events", action="store_true",
                        help="skip the PlaceholderSwapped event on every member (one API write less per member)")
    add_common_arguments(parser)
    election = parser.add_argument_group("leader election (run several replicas, one reconciles)")
    election.add_argument("--leader-elect", action="store_true", help="reconcile only while holding the Lease")
    election.add_argument("--leader-election-namespace", default=os.environ.get("POD_NAMESPACE", "default"),
                          help="namespace of the Lease (default: $POD_NAMESPACE or default)")
    election.add_argument("--leader-election-id", default="yuniplace-controller", help="name of the Lease")
    election.add_argument("--lease-duration", type=float, default=LeaseTiming.lease_duration_s, metavar="SECONDS")
    election.add_argument("--renew-deadline", type=float, default=LeaseTiming.renew_deadline_s, metavar="SECONDS")
    election.add_argument("--retry-period", type=float, default=LeaseTiming.retry_period_s, metavar="SECONDS")
    webhook_command.add_webhook_arguments(parser.add_argument_group("admission webhook in the same process"), required=False)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level, args.log_format)
    limits = limits_from(args)
    metrics = Metrics()
    client = KubeClient.from_kubeconfig(args.kubeconfig, observer=metrics.observe_api_call)
    settings = Settings(limits=limits, placeholder_image=args.placeholder_image, member_events=not args.no_member_events,
                        schedulers=schedulers_from(args), always_nominate=args.swap_nomination == "always",
                        strict_backoff_s=args.strict_backoff)
    controller = Controller(client, namespace=args.namespace, settings=settings, workers=args.workers, metrics=metrics,
                            admission=args.admission == "capacity")
    server = httpserver.serve(args.http_address, metrics.registry, ready=controller.synced.is_set)
    webhook = webhook_command.start_webhook(args, limits) if args.webhook_address else None
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    log.info("yuniplace controller starting (API %s, namespace %s, metrics on %s:%d%s)", client.host,
             args.namespace or "all", *server.server_address[:2],
             f", webhook on {args.webhook_address}" if webhook else "")
    controller.start()
    code = 0
    if args.leader_elect:
        identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
        elector = LeaderElector(
            client,
            namespace=args.leader_election_namespace,
            name=args.leader_election_id,
            identity=identity,
            timing=LeaseTiming(args.lease_duration, args.renew_deadline, args.retry_period),
        )
        log.info("waiting to lead as %s (lease %s/%s)", identity, args.leader_election_namespace, args.leader_election_id)
        if elector.run(controller.run_workers, stop):
            code = EXIT_LOST_LEADERSHIP  # start afresh rather than risk acting on a stale view
    else:
        controller.run_workers(stop)
    controller.close()
    if webhook is not None:
        webhook.shutdown()
    server.shutdown()
    log.info("yuniplace controller stopped")
    return code
