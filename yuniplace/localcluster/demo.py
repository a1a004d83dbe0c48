"""`scripts/demo`: a local cluster, yuniplace installed with its Helm chart, and a Spark-like job
whose gang you watch form, event by event."""

from __future__ import annotations

import argparse
import subprocess
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yuniplace.kube import KubeClient, NotFound
from yuniplace.localcluster import chartinstall
from yuniplace.localcluster.cluster import ClusterError, LocalCluster, wait_until
from yuniplace.localcluster.nodes import NodePool
from yuniplace.localcluster.ports import free_ports

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "spark"
SYSTEM_NAMESPACE = "yuniplace-system"
DEMO_NAMESPACE = "spark-demo"
WAIT_S = 120.0


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def _pod(client: KubeClient, name: str) -> dict[str, Any]:
    try:
        return client.get(f"/api/v1/namespaces/{DEMO_NAMESPACE}/pods/{name}")
    except NotFound:
        return {}


def _exists(client: KubeClient, path: str) -> bool:
    try:
        client.get(path)
    except NotFound:
        return False
    return True


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except OSError:
        return None


def _running(client: KubeClient, names: Sequence[str]) -> bool:
    return all(_pod(client, name).get("status", {}).get("phase") == "Running" for name in names)


def run(name: str) -> int:
    cluster = LocalCluster(name)
    if not cluster.is_running():
        cluster.up([NodePool(count=4, cpu="8", memory="32Gi")])
    client = cluster.client()
    kubectl = [str(cluster.bin_dir() / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    python = sys.executable

    yuniplace = next((p for p in cluster.processes() if p.name == "yuniplace" and p.alive()), None)
    if yuniplace is None:
        say("Installing yuniplace with its Helm chart (the webhook is called on 127.0.0.1)")
        for namespace in (SYSTEM_NAMESPACE, DEMO_NAMESPACE):
            if not _exists(client, f"/api/v1/namespaces/{namespace}"):
                cluster.create_namespace(namespace)
        webhook_port, metrics_port = free_ports(2)
        installation = chartinstall.install(
            cluster,
            release="yuniplace",
            namespace=SYSTEM_NAMESPACE,
            webhook_port=webhook_port,
            workdir=cluster.layout.root / "chart-credentials",
        )
        print(
            f"   release 'yuniplace' in {SYSTEM_NAMESPACE}; the controller and webhook run with its "
            f"ServiceAccount '{installation.service_account}' (log: {cluster.layout.logs / 'yuniplace.log'})"
        )
        cluster.spawn(
            "yuniplace",
            [
                python,
                "-m",
                "yuniplace",
                "controller",
                f"--http-address=127.0.0.1:{metrics_port}",
                *installation.controller_args(f"127.0.0.1:{webhook_port}"),
            ],
            f"http://127.0.0.1:{metrics_port}/readyz",
        )
        cluster.set_note("metrics", f"http://127.0.0.1:{metrics_port}/metrics")
    metrics_url = cluster.note("metrics")

    for pod in ["spark-pi-driver", *(f"spark-pi-exec-{i}" for i in range(1, 5))]:
        subprocess.run(
            [*kubectl, "-n", DEMO_NAMESPACE, "delete", "pod", pod, "--ignore-not-found", "--wait"], capture_output=True
        )

    say(f"Streaming the gang's events (kubectl get events -n {DEMO_NAMESPACE} -w)")
    stream = subprocess.Popen(
        [
            *kubectl,
            "-n",
            DEMO_NAMESPACE,
            "get",
            "events",
            "-w",
            "--watch-only",
            "-o",
            r'jsonpath=  {.reason} {.involvedObject.name}: {.message}{"\n"}',
        ]
    )
    try:
        say("Submitting the Spark driver (examples/spark/driver-pod.yaml): 1 driver + 4 executors, all or nothing")
        subprocess.run([*kubectl, "-n", DEMO_NAMESPACE, "apply", "-f", str(EXAMPLES / "driver-pod.yaml")], check=True)
        wait_until(lambda: _running(client, ["spark-pi-driver"]), WAIT_S)
        say("The driver runs; Spark now creates its executors (examples/spark/executor-pods.yaml)")
        subprocess.run(
            [*kubectl, "-n", DEMO_NAMESPACE, "apply", "-f", str(EXAMPLES / "executor-pods.yaml")], check=True
        )
        wait_until(lambda: _running(client, [f"spark-pi-exec-{i}" for i in range(1, 5)]), WAIT_S)
    finally:
        stream.terminate()
        stream.wait()

    # The API server clears a pod's nomination once it binds (Kubernetes 1.35 on): the events above say
    # which reserved node each took.
    say("Pods: each on the node its placeholder reserved (the PlaceholderSwapped events above); no placeholder left")
    subprocess.run([*kubectl, "-n", DEMO_NAMESPACE, "get", "pods", "-o", "wide"])
    say("yuniplace status")
    subprocess.run([python, "-m", "yuniplace", "status", f"--kubeconfig={cluster.kubeconfig}", "-n", DEMO_NAMESPACE])
    metrics = _get(metrics_url) or ""
    landed = next(
        (
            line.split()[-1]
            for line in metrics.splitlines()
            if line.startswith('yuniplace_swaps_total{outcome="landed"}')
        ),
        "0",
    )
    print(f"\nswaps landed on their reserved node: {float(landed):.0f} (metrics: {metrics_url})")
    print(
        f'Explore:  eval "$(scripts/cluster env --name {name})"; '
        f"kubectl -n {DEMO_NAMESPACE} describe pod spark-pi-exec-1"
    )
    print(f"Stop:     scripts/cluster down --name {name}   (stops yuniplace too)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__)
    parser.add_argument("--name", default="demo", help="local cluster name (default: demo)")
    args = parser.parse_args(argv)
    try:
        return run(args.name)
    except (ClusterError, RuntimeError, TimeoutError, subprocess.CalledProcessError) as error:
        print(f"scripts/demo: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
