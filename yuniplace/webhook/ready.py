"""`yuniplace webhook-ready`: wait until the API server reaches the webhook, as the chart's hook runs it
after an install or an upgrade.

A replica is Ready a moment before its Service routes to it (the EndpointSlice, then each node's
kube-proxy, follow), and with failurePolicy Fail a gang pod or Job created in that moment is refused
("failed calling webhook"). With this hook, `helm install --wait` returns once a gang pod would be
admitted. It asks the way a user's `kubectl apply` will: a server-side dry run of a gang pod, which
passes through the admission webhooks and stores nothing."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

import urllib3
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from yuniplace import logs
from yuniplace.cliargs import add_log_arguments
from yuniplace.gang import keys
from yuniplace.kube import ApiError, KubeClient

log = logging.getLogger(__name__)

PROBE = "yuniplace-webhook-ready"
UNREACHED = "failed calling webhook"  # the API server's words when it cannot call a webhook


def probe_pod() -> dict[str, Any]:
    """A gang pod of one, as small and as locked down as a pod can be, so that nothing but the webhook
    (a namespace's Pod Security level included) has a reason to refuse it."""
    group = [{"name": "probe", "minMember": 1, "minResource": {"cpu": "1m", "memory": "1Mi"}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": PROBE,
            "labels": {keys.APP_ID: PROBE},
            "annotations": {keys.TASK_GROUP_NAME: "probe", keys.TASK_GROUPS: json.dumps(group)},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65535, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def webhook_answers(client: KubeClient, namespace: str) -> bool:
    """Whether the API server got past the webhook for a gang pod. Refused for another reason (a quota, a
    policy: a 4xx) still means the webhook answered, which is all a user's next `kubectl apply` needs of
    it; a busy or unreachable API server (5xx, 429, a broken connection) is asked again."""
    try:
        path = f"/api/v1/namespaces/{namespace}/pods"
        client.request("POST", path, query={"dryRun": "All"}, body=probe_pod(), retry=False)
    except ApiError as error:
        if UNREACHED in error.message:
            log.info("the API server cannot reach the webhook yet: %s", error.message)
            return False
        if error.status >= 500 or error.status == 429:
            log.info("the API server is not answering yet: %s", error)
            return False
        log.info("the webhook answered (the dry-run pod was then refused: %s)", error)
        return True
    except (urllib3.exceptions.HTTPError, OSError) as error:
        log.info("the API server is not reachable yet: %s", error)
        return False
    log.info("the webhook answered: a gang pod would be admitted in namespace %s", namespace)
    return True


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level, args.log_format)
    client = KubeClient.from_kubeconfig(args.kubeconfig)
    retrying = Retrying(
        stop=stop_after_delay(args.timeout), wait=wait_fixed(1), retry=retry_if_result(lambda answered: not answered)
    )
    try:
        retrying(webhook_answers, client, args.namespace)
    except RetryError:
        log.error(
            "the API server did not reach the webhook within %ss: see the webhook Service's endpoints "
            "(`kubectl get endpointslices -n <release namespace>`) and the replicas' logs",
            args.timeout,
        )
        return 1
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "webhook-ready",
        help="wait until the API server reaches the webhook (the chart's post-install hook)",
        description="Dry-run a gang pod in NAMESPACE until the API server no longer fails to call the webhook.",
    )
    parser.add_argument("--namespace", required=True, help="where to dry-run the gang pod (one the webhook covers)")
    parser.add_argument("--timeout", type=int, default=240, metavar="SECONDS", help="give up after (default: 240)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    add_log_arguments(parser)
    parser.set_defaults(run=run)
