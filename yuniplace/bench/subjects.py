"""What benchmarks run and measure: gang and plain workloads, and yuniplace's controller as a
separate process whose CPU, memory and API calls are read from outside, as an operator would."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yuniplace.bench import profile
from yuniplace.bench.memory import RssSampler
from yuniplace.gang import keys
from yuniplace.kube import NotFound
from yuniplace.localcluster import LocalCluster, wait_until
from yuniplace.localcluster.ports import free_ports

MEMBER_LABEL = "bench.yuniplace.io/member"
WRITE_VERBS = ("post", "patch", "delete", "put")
CLOCK_TICKS_PER_S = 100  # os.sysconf("SC_CLK_TCK") on Linux


def member_pod(
    name: str,
    *,
    app: str | None = None,
    group: str | None = None,
    task_groups: list[dict[str, Any]] | None = None,
    cpu: str = "100m",
    memory: str = "128Mi",
    timeout_s: int = 300,
    gated: bool = True,
) -> dict[str, Any]:
    """A pod of a benchmark workload. With `app`, a gang member (the first member of an application
    carries its task groups), made gated as yuniplace's webhook gates it unless `gated` is false (made
    as its users make it, for the webhook to gate); without, a plain pod."""
    requests = {"cpu": cpu, "memory": memory}
    metadata: dict[str, Any] = {"name": name, "labels": {MEMBER_LABEL: "true"}, "annotations": {}}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}],
    }
    if app is not None:
        metadata["labels"]["applicationId"] = app
        metadata["annotations"][keys.TASK_GROUP_NAME] = group or "members"
        if task_groups is not None:
            metadata["annotations"][keys.TASK_GROUPS] = json.dumps(task_groups)
            metadata["annotations"][keys.SCHEDULING_POLICY_PARAMETERS] = f"placeholderTimeoutInSeconds={timeout_s}"
        if gated:
            spec["schedulingGates"] = [{"name": keys.GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def gang(
    app: str, members: int, *, cpu: str = "100m", memory: str = "128Mi", timeout_s: int = 300, gated: bool = True
) -> list[dict[str, Any]]:
    """One application of `members` pods in one task group of exactly that many (gated: see member_pod)."""
    groups = [{"name": "members", "minMember": members, "minResource": {"cpu": cpu, "memory": memory}}]
    return [
        member_pod(
            f"{app}-{i}",
            app=app,
            task_groups=groups if i == 0 else None,
            cpu=cpu,
            memory=memory,
            timeout_s=timeout_s,
            gated=gated,
        )
        for i in range(members)
    ]


def plain(prefix: str, count: int, *, cpu: str = "100m", memory: str = "128Mi") -> list[dict[str, Any]]:
    return [member_pod(f"{prefix}-{i}", cpu=cpu, memory=memory) for i in range(count)]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


@dataclass
class ControllerUnderTest:
    """`yuniplace controller` in its own process, against a local cluster."""

    cluster: LocalCluster
    log: Path
    extra_args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    port: int = 0
    profile_dir: Path | None = None  # where `profiled` blocks write their samples; None: not profiled
    profiles: dict[str, profile.Summary] = field(default_factory=dict)

    def __enter__(self) -> ControllerUnderTest:
        (self.port,) = free_ports(1)
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "yuniplace",
                    "controller",
                    f"--kubeconfig={self.cluster.kubeconfig}",
                    f"--http-address=127.0.0.1:{self.port}",
                    "--log-level=WARNING",
                    *self.extra_args,
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._ready, 60)
        return self

    @property
    def given(self) -> dict[str, Any]:
        """Its arguments, for the results, but those naming this machine's files and ports."""
        local = ("--kubeconfig", "--tls-", "--webhook-address", "--leader-election-namespace", "--queues-configmap")
        return {"args": [arg for arg in self.extra_args if not arg.startswith(local)]}

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"controller exited ({self.process.returncode}); see {self.log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def __exit__(self, *_: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(60)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    @contextlib.contextmanager
    def profiled(self, name: str) -> Iterator[None]:
        """Sample where the controller's CPU goes while the block runs (when profiling is on)."""
        if self.profile_dir is None:
            yield
            return
        path = self.profile_dir / f"profile-{name}.txt"
        with profile.sampled(self.pid, path):
            yield
        self.profiles[name] = profile.summarize(path)

    def rss_sampler(self) -> RssSampler:
        return RssSampler({"controller": self.pid})

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as response:
            text = response.read().decode()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                samples[key] = float(value)
        return samples

    def writes(self) -> dict[str, float]:
        """API writes so far by resource (pods, pods/status, events, ...)."""
        totals: dict[str, float] = {}
        for key, value in self.metrics().items():
            if key.startswith("yuniplace_api_requests_total{") and any(f'verb="{verb}"' in key for verb in WRITE_VERBS):
                resource = key.split('resource="', 1)[1].split('"', 1)[0]
                totals[resource] = totals.get(resource, 0.0) + value
        return totals

    def placeholders_made(self) -> float:
        return self.metrics().get("yuniplace_placeholders_created_total", 0.0)

    def events_posted(self, reason: str) -> float:
        return sum(
            v
            for k, v in self.metrics().items()
            if k.startswith("yuniplace_events_total{") and f'reason="{reason}"' in k
        )


def delete_namespace(cluster: LocalCluster, name: str, timeout_s: float = 300) -> None:
    """Delete a namespace and wait until it is gone, so the next measurement starts on empty nodes."""
    client = cluster.client()
    client.delete(f"/api/v1/namespaces/{name}")

    def gone() -> bool:
        try:
            client.get(f"/api/v1/namespaces/{name}")
        except NotFound:
            return True
        return False

    wait_until(gone, timeout_s, interval_s=0.5)


YUNIKORN_NAMESPACE = "yunikorn"


def yunikorn_gang(
    app: str, members: int, *, cpu: str = "100m", memory: str = "128Mi", timeout_s: int = 300
) -> list[dict[str, Any]]:
    """The same gang written for Apache YuniKorn's own scheduler: schedulerName yunikorn, its queue
    label, and the task-group annotations on every pod, as its documentation's Job does. No gate."""
    pods = gang(app, members, cpu=cpu, memory=memory, timeout_s=timeout_s, gated=False)
    task_groups = pods[0]["metadata"]["annotations"][keys.TASK_GROUPS]
    for pod in pods:
        pod["spec"]["schedulerName"] = "yunikorn"
        pod["metadata"]["labels"]["queue"] = "root.default"
        pod["metadata"]["annotations"][keys.TASK_GROUPS] = task_groups
        pod["metadata"]["annotations"][keys.SCHEDULING_POLICY_PARAMETERS] = f"placeholderTimeoutInSeconds={timeout_s}"
    return pods


# Where YuniKorn's shim sets its client's defaults (kubernetes.qps and kubernetes.burst when its
# ConfigMap leaves them out, as the bench does).
YUNIKORN_CLIENT_DEFAULTS = "pkg/conf/schedulerconf.go"


def yunikorn_client(shim: Path) -> dict[str, int]:
    """YuniKorn's client rate as it ships: the defaults its shim's module (`shim`) sets."""
    source = (shim / YUNIKORN_CLIENT_DEFAULTS).read_text()
    found = {
        name: re.search(rf"\bDefaultKube{constant}\s*=\s*(\d+)", source)
        for name, constant in (("qps", "QPS"), ("burst", "Burst"))
    }
    missing = [name for name, match in found.items() if match is None]
    if missing:
        raise RuntimeError(f"no default client {', '.join(missing)} in {shim / YUNIKORN_CLIENT_DEFAULTS}")
    return {name: int(match.group(1)) for name, match in found.items() if match is not None}


@dataclass
class YuniKornScheduler:
    """Apache YuniKorn's scheduler, built from its Go modules, running against the same cluster with its
    configuration's defaults; `given` says what of them the bench reports."""

    cluster: LocalCluster
    binary: Path
    log: Path
    given: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> YuniKornScheduler:
        client = self.cluster.client()
        try:
            client.get(f"/api/v1/namespaces/{YUNIKORN_NAMESPACE}")
        except NotFound:
            self.cluster.create_namespace(YUNIKORN_NAMESPACE)
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [str(self.binary)],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), "NAMESPACE": YUNIKORN_NAMESPACE},
            )
        # Ready when it schedules a pod.
        probe = member_pod("yunikorn-ready")
        probe["spec"]["schedulerName"] = "yunikorn"
        probe["metadata"]["labels"].update({"applicationId": "yunikorn-ready", "queue": "root.default"})
        path = f"/api/v1/namespaces/{YUNIKORN_NAMESPACE}/pods"
        client.create(path, probe)

        def probe_bound() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"YuniKorn's scheduler exited ({self.process.returncode}); see {self.log}")
            return bool(client.get(f"{path}/yunikorn-ready")["spec"].get("nodeName"))

        wait_until(probe_bound, 120, interval_s=0.2)
        client.delete(f"{path}/yunikorn-ready", {"gracePeriodSeconds": 0})
        return self

    def __exit__(self, *_: object) -> None:
        assert self.process is not None
        stop(self.process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a peer's process: asked first, killed if it has not ended within 30 s."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
