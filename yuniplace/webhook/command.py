"""`yuniplace webhook`: the admission webhook on its own (it can also run inside the controller)."""

from __future__ import annotations

import argparse
import logging
import re
import signal
import threading
from collections.abc import Callable, Mapping
from http.server import ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry

from yuniplace import httpserver, logs
from yuniplace.cliargs import (
    add_common_arguments,
    add_limit_arguments,
    limits_from,
    schedulers_from,
)
from yuniplace.gang.taskgroups import Limits
from yuniplace.gang.userinfo import ANNOTATION
from yuniplace.kube import KubeClient
from yuniplace.webhook import identity, server
from yuniplace.webhook.admission import DEFAULT_SCHEDULER, REWRITTEN_SCHEDULERS
from yuniplace.webhook.rewrite import Mode, rewrites

log = logging.getLogger(__name__)
SCHEDULER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_SCHEDULER_NAME = 253


def _pattern(text: str) -> str:
    """A trusted-requester pattern, checked when the flags are read rather than at the first request."""
    try:
        identity.compile_pattern(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _scheduler_name(text: str) -> str:
    """A scheduler's name as a pod's spec.schedulerName holds it (a DNS subdomain), not the default one."""
    if len(text) > MAX_SCHEDULER_NAME or not SCHEDULER_NAME.fullmatch(text) or text == DEFAULT_SCHEDULER:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not another scheduler's name "
            f"(a DNS subdomain: a-z, 0-9, '-' and '.'; not {DEFAULT_SCHEDULER})"
        )
    return text


def add_webhook_arguments(group: Any, *, required: bool) -> None:
    group.add_argument(
        "--webhook-address",
        required=required,
        metavar="HOST:PORT",
        help="serve /mutate and /validate over HTTPS here" + ("" if required else " (default: no webhook)"),
    )
    group.add_argument("--tls-cert-file", metavar="PATH", help="serving certificate (PEM), re-read when it changes")
    group.add_argument("--tls-key-file", metavar="PATH", help="its private key (PEM)")
    group.add_argument(
        "--rewrite-scheduler-name",
        nargs="?",
        const=Mode.ALWAYS.value,
        default=Mode.AUTO.value,
        choices=[m.value for m in Mode],
        metavar="auto|always|never",
        help="rewrite the schedulerName of pods naming a scheduler taken over (--rewritten-scheduler) to the default "
        "scheduler, so that pods written for it (spark.kubernetes.scheduler.name=yunikorn, an operator's batch "
        "scheduler) are gang-scheduled by yuniplace: auto (default) while the scheduler the pod names does not run "
        "in the cluster, always (the flag alone), or never",
    )
    group.add_argument(
        "--rewritten-scheduler",
        action="append",
        type=_scheduler_name,
        metavar="NAME",
        help="a scheduler whose pods --rewrite-scheduler-name takes over (repeatable; default: "
        + ", ".join(REWRITTEN_SCHEDULERS)
        + ")",
    )
    # Who may carry a record of the requester (ANNOTATION) of their choosing, with YuniKorn's names
    # (admissionController.accessControl.*). Patterns are searched in the names, as YuniKorn's are.
    group.add_argument(
        "--trust-controllers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"trust the requesters --system-users matches, Kubernetes' controllers, to create gang pods and "
        f"workloads carrying the {ANNOTATION} their template gave them (default: on; off refuses it from them)",
    )
    group.add_argument(
        "--system-users",
        action="append",
        type=_pattern,
        metavar="REGEX",
        help="a regular expression matching Kubernetes' controllers (repeatable; default: "
        + " and ".join(identity.SYSTEM_USERS)
        + ")",
    )
    group.add_argument(
        "--external-users",
        action="append",
        type=_pattern,
        metavar="REGEX",
        help=f"a regular expression matching users trusted to set {ANNOTATION} to anything, e.g. an operator "
        "that submits for others (repeatable; searched anywhere in the name: anchor it with ^ and $)",
    )
    group.add_argument(
        "--external-groups",
        action="append",
        type=_pattern,
        metavar="REGEX",
        help=f"a regular expression matching groups whose members are trusted to set {ANNOTATION} to anything "
        "(repeatable)",
    )


def start_webhook(
    args: argparse.Namespace,
    limits: Limits,
    client: KubeClient | None,
    admitted: Callable[[Mapping[str, Any]], bool] = lambda _pod: False,
) -> ThreadingHTTPServer:
    """`client` lets `--rewrite-scheduler-name=auto` ask whether YuniKorn (or ai-scheduler) runs (None: never
    rewrite in auto); `admitted`, whether a native gang pod's gang is admitted (the controller's, when the
    webhook serves in its process)."""
    if not args.tls_cert_file or not args.tls_key_file:
        raise SystemExit(
            "yuniplace: --webhook-address needs --tls-cert-file and --tls-key-file "
            "(the apiserver only calls webhooks over HTTPS)"
        )
    trust = identity.Trust.of(
        controllers=args.trust_controllers,
        system_users=args.system_users or identity.SYSTEM_USERS,
        external_users=args.external_users or (),
        external_groups=args.external_groups or (),
    )
    return server.serve(
        args.webhook_address,
        args.tls_cert_file,
        args.tls_key_file,
        rewrites=rewrites(Mode(args.rewrite_scheduler_name), client, args.rewritten_scheduler or REWRITTEN_SCHEDULERS),
        limits=limits,
        schedulers=schedulers_from(args),
        trust=trust,
        admitted=admitted,
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "webhook",
        help="run the admission webhook alone",
        description="Mutating: add the yuniplace.io/gang scheduling gate to pods with gang annotations, or deny "
        "those whose gang annotations are invalid, naming the field and the value, and record who created them "
        f"(and gang workloads) in {ANNOTATION}. Validating: deny edits that make a pod's gang annotations invalid, "
        "and edits of the record by requesters not trusted to write it.",
    )
    add_webhook_arguments(parser, required=True)
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig file, to see whether YuniKorn or ai-scheduler runs for --rewrite-scheduler-name=auto "
        "(default: $KUBECONFIG, ~/.kube/config, or in-cluster)",
    )
    add_limit_arguments(parser)
    add_common_arguments(parser)
    parser.set_defaults(run=run)


def _client(kubeconfig: str | None) -> KubeClient | None:
    """A client when one can be configured; the webhook serves without it, rewriting only as told."""
    try:
        return KubeClient.from_kubeconfig(kubeconfig)
    except Exception as error:  # noqa: BLE001 - the kubernetes config loader raises several kinds
        log.warning("no Kubernetes client (%s): --rewrite-scheduler-name=auto rewrites nothing", error)
        return None


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level, args.log_format)
    webhook = start_webhook(args, limits_from(args), _client(args.kubeconfig))
    health = httpserver.serve(args.http_address, CollectorRegistry(), ready=lambda: True)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    log.info("yuniplace webhook serving on %s:%d", *webhook.server_address[:2])
    stop.wait()
    webhook.shutdown()
    health.shutdown()
    return 0
