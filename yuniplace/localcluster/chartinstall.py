"""Install the Helm chart into a local cluster and run yuniplace outside it, as the installed
Deployment would run inside: with the chart's ServiceAccount token (so the chart's RBAC is what is
exercised) and the chart's webhook certificate, the apiserver calling the webhook on loopback.

kwok nodes run no containers, so the Deployment's own pods only pretend to run; the processes that
do the work are started from this checkout, configured exactly like those pods.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from yuniplace.localcluster.cluster import LocalCluster

CHART = Path(__file__).resolve().parents[2] / "charts" / "yuniplace"
TOKEN_LIFETIME_S = 3600


@dataclass(frozen=True)
class Installation:
    release: str
    namespace: str
    service_account: str
    tls_secret: str
    lease: str
    kubeconfig: Path  # the ServiceAccount's, not the admin's
    tls_cert: Path
    tls_key: Path
    # What the values give the webhook and the controller beyond the defaults: with webhook.url the
    # Deployment does not serve the webhook, so these are read from the values in force.
    extra_args: tuple[str, ...] = ()

    def controller_args(self, webhook_address: str) -> list[str]:
        """`yuniplace controller` arguments matching the chart's Deployment."""
        return [
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect",
            f"--leader-election-namespace={self.namespace}",
            f"--leader-election-id={self.lease}",
            f"--webhook-address={webhook_address}",
            f"--tls-cert-file={self.tls_cert}",
            f"--tls-key-file={self.tls_key}",
            *self.extra_args,
        ]


def helm(cluster: LocalCluster, *args: str) -> str:
    result = subprocess.run(
        [str(cluster.bin_dir() / "helm"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def _rendered(cluster: LocalCluster, release: str, namespace: str) -> list[dict[str, Any]]:
    manifest = helm(cluster, "get", "manifest", release, "--namespace", namespace)
    return [doc for doc in yaml.safe_load_all(manifest) if isinstance(doc, dict)]


def install(
    cluster: LocalCluster,
    *,
    release: str,
    namespace: str,
    webhook_port: int,
    workdir: Path,
    values: dict[str, str] | None = None,
    token_lifetime_s: int = TOKEN_LIFETIME_S,
) -> Installation:
    """`helm upgrade --install` with the webhook called at https://127.0.0.1:<port>; then a token for the
    chart's ServiceAccount (valid `token_lifetime_s`) and the chart's certificate written under
    `workdir`."""
    settings = {
        "webhook.url": f"https://127.0.0.1:{webhook_port}",
        "webhook.tls.extraIPs[0]": "127.0.0.1",
        **(values or {}),
    }
    arguments = [f"{key}={value}" for key, value in settings.items()]
    helm(
        cluster,
        "upgrade",
        "--install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        *(item for argument in arguments for item in ("--set", argument)),
    )
    objects = _rendered(cluster, release, namespace)
    account = next(o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount")
    secret = next(
        o["metadata"]["name"] for o in objects if o["kind"] == "Secret" and o.get("type") == "kubernetes.io/tls"
    )
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0].get("args", [])
    lease = next((a.split("=", 1)[1] for a in args if a.startswith("--leader-election-id=")), "yuniplace-controller")

    client = cluster.client()
    workdir.mkdir(parents=True, exist_ok=True)
    data = client.get(f"/api/v1/namespaces/{namespace}/secrets/{secret}")["data"]
    cert, key = workdir / "tls.crt", workdir / "tls.key"
    cert.write_bytes(base64.b64decode(data["tls.crt"]))
    key.write_bytes(base64.b64decode(data["tls.key"]))
    key.chmod(0o600)

    token = client.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": token_lifetime_s},
        },
    )["status"]["token"]
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    kubeconfig = workdir / "serviceaccount.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [{"name": "chart", "context": {"cluster": admin["clusters"][0]["name"], "user": account}}],
                "current-context": "chart",
            }
        )
    )
    kubeconfig.chmod(0o600)
    effective = json.loads(
        helm(cluster, "get", "values", release, "--namespace", namespace, "--all", "--output", "json")
    )
    rewrite = {"true": "always", "false": "never"}.get(
        str(effective["webhook"]["rewriteSchedulerName"]).lower(), str(effective["webhook"]["rewriteSchedulerName"])
    )
    taken_over = [str(name) for name in effective["webhook"].get("rewrittenSchedulers") or []]
    # The Deployment's own arguments (its queues ConfigMap, limits, extraArgs…), but those of a pod in the
    # cluster (its address, its leader election, which controller_args sets for this process).
    own = [a for a in args if a != "controller" and not a.startswith(_SET_HERE)]
    extra = (
        *own,
        f"--rewrite-scheduler-name={rewrite if taken_over else 'never'}",
        *(f"--rewritten-scheduler={name}" for name in taken_over),
        *_access_control(effective["webhook"].get("accessControl") or {}),
    )
    return Installation(release, namespace, account, secret, lease, kubeconfig, cert, key, tuple(extra))


_SET_HERE = ("--http-address", "--leader-elect", "--leader-election-", "--webhook-address", "--tls-")


def _patterns(value: Any) -> list[str]:
    """A list of patterns, or YuniKorn's comma-separated string of them."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [str(item).strip() for item in items if str(item).strip()]


def _access_control(access: dict[str, Any]) -> list[str]:
    """The webhook's access-control flags from the values (as the chart's yuniplace.accessControlArgs)."""
    system = _patterns(access.get("systemUsers"))
    flags = [] if str(access.get("trustControllers", True)).lower() == "true" and system else ["--no-trust-controllers"]
    flags += [f"--system-users={pattern}" for pattern in system]
    flags += [f"--external-users={pattern}" for pattern in _patterns(access.get("externalUsers"))]
    return flags + [f"--external-groups={pattern}" for pattern in _patterns(access.get("externalGroups"))]


def uninstall(cluster: LocalCluster, installation: Installation) -> None:
    helm(cluster, "uninstall", installation.release, "--namespace", installation.namespace, "--wait")
