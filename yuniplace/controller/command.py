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
from yuniplace.admission.decision import AdmissionRules
from yuniplace.cliargs import (
    add_common_arguments,
    add_limit_arguments,
    configmap_argument,
    limits_from,
    schedulers_from,
)
from yuniplace.controller.controller import Controller
from yuniplace.controller.plan import Settings
from yuniplace.gang import keys
from yuniplace.gang.groups import GroupConsent
from yuniplace.gang.placeholders import DEFAULT_IMAGE
from yuniplace.kube import KubeClient
from yuniplace.kube.versions import check_server
from yuniplace.runtime.events import ObjectRef
from yuniplace.runtime.leader import LeaderElector, LeaseTiming
from yuniplace.runtime.metrics import Metrics
from yuniplace.webhook import command as webhook_command

log = logging.getLogger(__name__)
EXIT_LOST_LEADERSHIP = 3


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "controller",
        help="run the reservation controller",
        description="Watch pods with YuniKorn task-group annotations, reserve room for each gang with "
        "placeholder pods, and swap the real pods in once every group is reserved.",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    parser.add_argument("--namespace", help="watch one namespace only (default: all)")
    parser.add_argument("--workers", type=int, default=4, help="applications reconciled in parallel (default: 4)")
    parser.add_argument(
        "--placeholder-image", default=DEFAULT_IMAGE, help=f"image of placeholder pods (default: {DEFAULT_IMAGE})"
    )
    add_limit_arguments(parser)
    parser.add_argument(
        "--swap-nomination",
        choices=["auto", "always"],
        default="auto",
        help="auto (default): nominate a swapped member to its reserved node, or a member started directly "
        "to its seat, only while pods of other applications wait to be scheduled, else steer it there with a "
        "preferred node affinity in the same write that releases it; always: nominate every member (one API "
        "write more each)",
    )
    parser.add_argument(
        "--admission",
        choices=["capacity", "off"],
        default="capacity",
        help="capacity (default): an application reserves only once its whole gang fits in the free room, "
        "in FIFO order per queue, so gangs never split the cluster and wait on each other; off: every "
        "application reserves at once",
    )
    parser.add_argument(
        "--strict-backoff",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds before a reservation given back (Strict mode, placeholders refused by the API, a quota "
        "say, or a Coscheduling, PodGroup or Volcano gang out of time) is tried again, doubled each attempt up "
        "to 5 minutes (default: 10)",
    )
    rules = AdmissionRules()
    shared = parser.add_argument_group("shared clusters (with --admission=capacity)")
    shared.add_argument(
        "--head-claim",
        type=_positive_seconds,
        default=rules.head_claim_s,
        metavar="SECONDS",
        help="a queue's first application that does not fit claims the free room it can use, so "
        "later ones cannot starve it, for this long at most; then others may use the room while it "
        f"keeps its place (default: {rules.head_claim_s:.0f})",
    )
    shared.add_argument(
        "--max-placeholders-per-namespace",
        type=_count,
        default=rules.max_placeholders_per_namespace,
        metavar="N",
        help="placeholders the gangs of one namespace may hold at once; a gang needing "
        f"more is refused, one that would pass it waits (0: no limit; default: {rules.max_placeholders_per_namespace})",
    )
    shared.add_argument(
        "--max-waiting-per-namespace",
        type=_count,
        default=rules.max_waiting_per_namespace,
        metavar="N",
        help="applications of one namespace that may wait for admission at once; more are refused "
        f"(0: no limit; default: {rules.max_waiting_per_namespace})",
    )
    shared.add_argument(
        "--gang-group-namespaces",
        action="append",
        default=[],
        metavar="NS,NS,...",
        help="namespaces whose applications may form gang groups with each other without each naming "
        "the other (repeatable; by default an application of another namespace joins only when it "
        "names this one too)",
    )
    queues = parser.add_argument_group("queues (with --admission=capacity)")
    queues.add_argument(
        "--queues-configmap",
        type=configmap_argument,
        metavar="NAMESPACE/NAME",
        help="a ConfigMap holding YuniKorn's queues.yaml (key queues.yaml), e.g. yunikorn/yunikorn-configs: "
        "queues with guarantees, limits and placement rules, applied as it changes (default: none; Volcano "
        "Queue objects are read whenever their API is installed)",
    )
    queues.add_argument(
        "--create-placeholders-after",
        type=_positive_seconds,
        metavar="SECONDS",
        help="a queue's first application that has waited this long gets its placeholders created anyway, "
        "so that a cluster autoscaler sees pending pods of the shapes it needs (default: never)",
    )
    parser.add_argument(
        "--member-events",
        action="store_true",
        help="also post an event on every member as it lands on its node (one API write more per member; by "
        "default one event per task group says where its members landed)",
    )
    parser.add_argument(
        "--placeholders",
        choices=["when-needed", "always"],
        default="when-needed",
        help="when-needed (default): a gang whose members all exist and which fits now starts on the nodes "
        "admission chose, without placeholders; always: every gang reserves with placeholders first, as YuniKorn "
        "does",
    )
    parser.add_argument(
        "--restart-backoff",
        type=_positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="least time between two restarts of a gang for lost members, doubled each restart up to 10 minutes "
        "(default: 10)",
    )
    parser.add_argument(
        "--restarts-configmap",
        type=configmap_argument,
        metavar="NAMESPACE/NAME",
        help="the ConfigMap keeping how often each gang was restarted for lost members, so that its restart "
        "limit holds across its own restarts and the controller's (default: yuniplace-restarts in the namespace "
        "of the Lease)",
    )
    add_common_arguments(parser)
    election = parser.add_argument_group("leader election (run several replicas, one reconciles)")
    election.add_argument("--leader-elect", action="store_true", help="reconcile only while holding the Lease")
    election.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the Lease (default: $POD_NAMESPACE or default)",
    )
    election.add_argument("--leader-election-id", default="yuniplace-controller", help="name of the Lease")
    election.add_argument("--lease-duration", type=float, default=LeaseTiming.lease_duration_s, metavar="SECONDS")
    election.add_argument("--renew-deadline", type=float, default=LeaseTiming.renew_deadline_s, metavar="SECONDS")
    election.add_argument("--retry-period", type=float, default=LeaseTiming.retry_period_s, metavar="SECONDS")
    webhook_command.add_webhook_arguments(
        parser.add_argument_group("admission webhook in the same process"), required=False
    )
    parser.set_defaults(run=run)


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds greater than 0, not {text}")
    return value


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number (0 for no limit), not {text}")
    return int(text)


def rules_from(args: argparse.Namespace) -> AdmissionRules:
    sets = [[ns.strip() for ns in value.split(",") if ns.strip()] for value in args.gang_group_namespaces]
    return AdmissionRules(
        head_claim_s=args.head_claim,
        max_placeholders_per_namespace=args.max_placeholders_per_namespace,
        max_waiting_per_namespace=args.max_waiting_per_namespace,
        consent=GroupConsent.of(sets),
        placeholders_after_s=args.create_placeholders_after,
        direct_start=args.placeholders == "when-needed",
    )


def speaks_on(args: argparse.Namespace) -> ObjectRef | None:
    """The object the controller's own events go on (an optional API come or gone): its Lease with leader
    election, else its pod where it runs in one (the chart gives it POD_NAME), else none: logged only."""
    if args.leader_elect:
        return ObjectRef("coordination.k8s.io/v1", "Lease", args.leader_election_namespace, args.leader_election_id)
    pod = os.environ.get("POD_NAME")
    namespace = os.environ.get("POD_NAMESPACE") or args.leader_election_namespace
    return None if not pod else ObjectRef("v1", "Pod", namespace, pod)


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level, args.log_format)
    limits = limits_from(args)
    metrics = Metrics()
    client = KubeClient.from_kubeconfig(args.kubeconfig, observer=metrics.observe_api_call)
    check_server(client)
    settings = Settings(
        limits=limits,
        placeholder_image=args.placeholder_image,
        member_events=args.member_events,
        schedulers=schedulers_from(args),
        always_nominate=args.swap_nomination == "always",
        strict_backoff_s=args.strict_backoff,
        restart_backoff_s=args.restart_backoff,
    )
    controller = Controller(
        client,
        namespace=args.namespace,
        settings=settings,
        workers=args.workers,
        metrics=metrics,
        admission=args.admission == "capacity",
        rules=rules_from(args),
        queues_configmap=args.queues_configmap,
        restarts_configmap=args.restarts_configmap or (args.leader_election_namespace, "yuniplace-restarts"),
        speaks_on=speaks_on(args),
    )
    server = httpserver.serve(args.http_address, metrics.registry, ready=controller.synced.is_set)
    webhook = (
        webhook_command.start_webhook(args, limits, client, controller.admits_native) if args.webhook_address else None
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    log.info(
        "yuniplace controller starting (API %s, namespace %s, metrics on %s:%d%s)",
        client.host,
        args.namespace or "all",
        *server.server_address[:2],
        f", webhook on {args.webhook_address}" if webhook else "",
    )
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
            labels={keys.CONTROLLER_LEASE: "true"},
            notes=lambda: {keys.OPTIONAL_APIS: controller.apis.record()},
        )
        log.info(
            "waiting to lead as %s (lease %s/%s)", identity, args.leader_election_namespace, args.leader_election_id
        )
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
