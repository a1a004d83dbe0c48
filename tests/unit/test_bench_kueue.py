"""What Kueue is given as the bench's peer: its Configuration, its webhook configurations made from its
module's manifests (called on loopback), its queues, the pods of a group, and how the report shows it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import node
from yuniplace.bench import report
from yuniplace.bench.kueue import cluster_quota, kueue_gang
from yuniplace.bench.subjects import MEMBER_LABEL, gang
from yuniplace.gang import keys
from yuniplace.localcluster import kueue as kq
from yuniplace.localcluster.build import BuildError, Operator


def _webhook(name: str, path: str, group: str, resource: str, operations: list[str]) -> dict[str, Any]:
    """One webhook as Kueue's config/components/webhook/manifests.yaml writes it (a Service to call)."""
    return {
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "failurePolicy": "Fail",
        "name": name,
        "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": operations, "resources": [resource]}],
        "sideEffects": "None",
    }


# The shape of Kueue v0.17's manifests: pod webhooks, webhooks of its own objects, and of other frameworks.
MANIFESTS = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            _webhook(
                "mappwrapper.kb.io",
                "/mutate-workload-codeflare-dev-v1beta2-appwrapper",
                "workload.codeflare.dev",
                "appwrappers",
                ["CREATE"],
            ),
            _webhook(
                "mclusterqueue.kb.io",
                "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
                "kueue.x-k8s.io",
                "clusterqueues",
                ["CREATE"],
            ),
            _webhook("mjob.kb.io", "/mutate-batch-v1-job", "batch", "jobs", ["CREATE"]),
            _webhook("mpod.kb.io", "/mutate--v1-pod", "", "pods", ["CREATE"]),
            _webhook(
                "mworkload.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-workload", "kueue.x-k8s.io", "workloads", ["CREATE"]
            ),
        ],
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validating-webhook-configuration"},
        "webhooks": [
            _webhook("vdeployment.kb.io", "/validate-apps-v1-deployment", "apps", "deployments", ["CREATE", "UPDATE"]),
            _webhook("vpod.kb.io", "/validate--v1-pod", "", "pods", ["CREATE", "UPDATE"]),
            _webhook(
                "vcohort.kb.io",
                "/validate-kueue-x-k8s-io-v1beta2-cohort",
                "kueue.x-k8s.io",
                "cohorts",
                ["CREATE", "UPDATE"],
            ),
        ],
    },
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook-service"}},
]
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


# A Configuration as Kueue's deployment ships one (config/components/manager/controller_manager_config.yaml):
# the keys the bench keeps or replaces, waitForPodsReady left out (commented out there).
SHIPPED = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 5
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - "batch/job"
  - "pod"
  - "deployment"
"""


def _kueue_module(tmp_path: Path, text: str = SHIPPED) -> Operator:
    shipped = tmp_path / kq.SHIPPED_CONFIGURATION
    shipped.parent.mkdir(parents=True, exist_ok=True)
    shipped.write_text(text)
    return Operator(tmp_path / "kueue", "v0.17.0", [], tmp_path)


def _settings(tmp_path: Path, **given: Any) -> dict[str, Any]:
    shipped = kq.shipped_configuration(_kueue_module(tmp_path))
    return kq.configuration(
        shipped, webhook_port=9443, cert_dir=Path("/work/certs"), metrics_port=8443, health_port=8081, **given
    )


def test_the_configuration_is_the_modules_run_on_loopback_with_the_pod_integration(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert (settings["apiVersion"], settings["kind"]) == ("config.kueue.x-k8s.io/v1beta2", "Configuration")
    assert settings["webhook"] == {"port": 9443, "host": "127.0.0.1", "certDir": "/work/certs"}
    assert settings["metrics"]["bindAddress"] == "127.0.0.1:8443"
    assert settings["health"]["healthProbeBindAddress"] == "127.0.0.1:8081"
    assert settings["leaderElection"] == {"leaderElect": False}
    assert settings["internalCertManagement"] == {"enable": False}
    assert settings["integrations"]["frameworks"] == ["pod"]
    assert settings["managedJobsNamespaceSelector"] == {"matchLabels": {kq.MANAGED_NAMESPACE_LABEL: "true"}}
    assert settings["manageJobsWithoutQueueName"] is False
    assert settings["featureGates"] == {"VisibilityOnDemand": False}
    # As the module ships them: its client rate, its concurrency, and no waitForPodsReady.
    assert settings["clientConnection"] == {"qps": 50, "burst": 100}
    assert settings["controller"]["groupKindConcurrency"] == {"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5}
    assert "waitForPodsReady" not in settings


def test_what_the_module_ships_is_what_kueue_is_given(tmp_path: Path) -> None:
    """A module whose Configuration switches waitForPodsReady on and raises the client's rate gives Kueue
    exactly that: nothing of it is typed into the bench."""
    text = SHIPPED.replace("qps: 50", "qps: 70") + "waitForPodsReady:\n  timeout: 7m\n  blockAdmission: true\n"
    settings = kq.configuration(
        kq.shipped_configuration(_kueue_module(tmp_path, text)),
        webhook_port=1,
        cert_dir=Path("/c"),
        metrics_port=2,
        health_port=3,
    )
    assert settings["clientConnection"]["qps"] == 70
    assert settings["waitForPodsReady"] == {"timeout": "7m", "blockAdmission": True}


def test_a_client_rate_given_replaces_the_shipped_one_alone(tmp_path: Path) -> None:
    fast = _settings(tmp_path, client={"qps": 1000, "burst": 2000})
    assert fast["clientConnection"] == {"qps": 1000, "burst": 2000}
    assert {k: v for k, v in fast.items() if k != "clientConnection"} == {
        k: v for k, v in _settings(tmp_path).items() if k != "clientConnection"
    }


def test_a_file_that_is_no_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="is not a Kueue Configuration"):
        kq.shipped_configuration(_kueue_module(tmp_path, "kind: ConfigMap\n"))


def test_the_configurations_are_separate_objects(tmp_path: Path) -> None:
    """A caller changing one run's Configuration never changes the shipped one, nor the next run's."""
    shipped = kq.shipped_configuration(_kueue_module(tmp_path))
    first = kq.configuration(shipped, webhook_port=1, cert_dir=Path("/a"), metrics_port=2, health_port=3)
    first["controller"]["groupKindConcurrency"]["Pod"] = 50
    second = kq.configuration(shipped, webhook_port=1, cert_dir=Path("/a"), metrics_port=2, health_port=3)
    assert second["controller"]["groupKindConcurrency"]["Pod"] == 5


def test_webhook_configurations_keep_the_pod_webhooks_and_kueues_own_called_on_loopback() -> None:
    made = kq.webhook_configurations(MANIFESTS, "https://127.0.0.1:9443/", CA)
    assert [(c["kind"], c["metadata"]["name"]) for c in made] == [
        ("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"),
    ]
    hooks = {hook["name"]: hook for configuration in made for hook in configuration["webhooks"]}
    assert set(hooks) == {"mclusterqueue.kb.io", "mpod.kb.io", "mworkload.kb.io", "vpod.kb.io", "vcohort.kb.io"}
    assert hooks["mpod.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate--v1-pod",
        "caBundle": base64.b64encode(CA).decode(),
    }
    assert (
        hooks["vcohort.kb.io"]["clientConfig"]["url"] == "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta2-cohort"
    )
    # Pods of other namespaces never call Kueue; its own objects are cluster-wide or its alone.
    for name in ("mpod.kb.io", "vpod.kb.io"):
        assert hooks[name]["namespaceSelector"] == {"matchLabels": {kq.MANAGED_NAMESPACE_LABEL: "true"}}
    assert "namespaceSelector" not in hooks["mclusterqueue.kb.io"]
    assert all(hook["failurePolicy"] == "Fail" for hook in hooks.values())
    # The module's manifests are left as they were.
    assert MANIFESTS[0]["webhooks"][3]["clientConfig"]["service"]["path"] == "/mutate--v1-pod"


def test_the_cluster_queue_covers_the_whole_cluster_in_one_flavor() -> None:
    quota = cluster_quota([node("a", "32", memory="256Gi"), node("b", "32", memory="256Gi", pods="100")])
    assert quota == {"cpu": "64", "memory": "512Gi", "pods": "210"}
    queue = kq.cluster_queue(quota)
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "pods"]
    assert group["flavors"] == [
        {
            "name": kq.FLAVOR,
            "resources": [
                {"name": "cpu", "nominalQuota": "64"},
                {"name": "memory", "nominalQuota": "512Gi"},
                {"name": "pods", "nominalQuota": "210"},
            ],
        }
    ]
    assert queue["spec"]["namespaceSelector"] == {}
    assert kq.local_queue("ns")["spec"] == {"clusterQueue": kq.CLUSTER_QUEUE}


def test_a_kueue_gang_is_the_same_pods_as_one_pod_group_with_no_gate_of_yuniplaces() -> None:
    pods = kueue_gang("app", 3)
    ours = gang("app", 3)
    assert [p["metadata"]["name"] for p in pods] == [p["metadata"]["name"] for p in ours]
    for pod, same in zip(pods, ours, strict=True):
        assert pod["spec"]["containers"] == same["spec"]["containers"]
        assert "schedulingGates" not in pod["spec"]
        assert pod["metadata"]["labels"] == {
            MEMBER_LABEL: "true",
            "kueue.x-k8s.io/queue-name": kq.LOCAL_QUEUE,
            "kueue.x-k8s.io/pod-group-name": "app",
        }
        assert pod["metadata"]["annotations"] == {"kueue.x-k8s.io/pod-group-total-count": "3"}
        assert not any(key.startswith(keys.TASK_GROUPS) for key in pod["metadata"]["annotations"])


def _results() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"members": 10, "baseline_s": 0.2, "yuniplace_s": 0.3, "ratio": 1.5, "kueue_s": 0.6, "kueue_fast_s": 0.4},
        {"members": 50, "baseline_s": 1.0, "yuniplace_s": 1.5, "ratio": 1.5, "kueue_s": 1.2, "kueue_fast_s": 2.0},
    ]
    for row in rows:
        row.update(pod_writes_per_member=1.0, event_writes_per_member=0.1, controller_cpu_s=0.1, native_s=0.3)
    rows[0]["runs_yuniplace_s"] = [0.3, 0.28, 0.41]
    rows[0]["phases_yuniplace"] = {"all_seen_s": 0.1, "first_free_s": 0.2, "last_free_s": 0.25, "last_bound_s": 0.3}
    rows[0]["phases_native"] = {"all_seen_s": 0.05, "first_bound_s": 0.2, "last_bound_s": 0.3}
    figures = {"p50_s": 0.2, "p95_s": 0.3, "p99_s": 0.4, "pods_per_s": 50.0}
    shipped = yaml.safe_load(SHIPPED)
    settings = kq.configuration(shipped, webhook_port=1, cert_dir=Path("/c"), metrics_port=2, health_port=3)
    fast = kq.configuration(
        shipped, webhook_port=1, cert_dir=Path("/c"), metrics_port=2, health_port=3, client={"qps": 1000, "burst": 2000}
    )
    labels = {
        "baseline": "plain kube-scheduler",
        "yuniplace": "yuniplace",
        "kueue": "Kueue as it ships",
        "kueue_fast": "Kueue, its client at the control plane's rate",
    }
    return [
        {"scenario": "gang-size", "nodes": 100, "repeats": 3, "rows": rows},
        {
            "scenario": "arrivals",
            "apps": 10,
            "members": 10,
            "rate_per_s": 5.0,
            "repeats": 2,
            "baseline": figures,
            "yuniplace": figures,
            "kueue": {**figures, "p50_s": 0.5, "p99_s": 0.9},
            "kueue_fast": {**figures, "p50_s": 0.1, "p99_s": 0.9},
            "runs": {"kueue": [{**figures, "p50_s": 0.4, "p99_s": 0.9}, {**figures, "p50_s": 0.6, "p99_s": 0.9}]},
        },
        {
            "scenario": "peers",
            "labels": labels,
            "orders": [list(labels), [*list(labels)[1:], "baseline"]],
            "given": {
                "yuniplace": {"args": ["--leader-elect", "--workers=4"]},
                "kueue": {"version": "v0.17.0", "configuration": settings, "quota": {"cpu": "3200"}},
                "kueue_fast": {"version": "v0.17.0", "configuration": fast, "quota": {"cpu": "3200"}},
            },
        },
    ]


def test_the_report_shows_every_peer_beside_yuniplace_with_the_runs_range() -> None:
    results = _results()
    gangs = report.gang_size_table(results[0])
    assert "| Kueue as it ships, s | yuniplace / it | Kueue, client at the control plane's rate, s |" in gangs
    assert "| 10 | 0.2 | 0.3 (0.28–0.41) | 1.5 | 0.6 | 0.50 | 0.4 | 0.75 | 0.3 | 1.00 |" in gangs
    assert "| 50 | 1.0 | 1.5 | 1.5 | 1.2 | 1.25 | 2.0 | 0.75 | 0.3 | 5.00 |" in gangs
    # Where the time went: each peer's moments, "-" for one it does not have (the gang plugin gates nothing).
    assert "| 10 | yuniplace | 0.1 | 0.2 | 0.25 | - | 0.3 |" in gangs
    assert "| 10 | kube-scheduler's gang plugin | 0.05 | - | - | 0.2 | 0.3 |" in gangs
    assert "| 50 |" not in gangs.split("Where the time went")[1]  # no phases measured for it
    arrivals = report.arrivals_table(results[1])
    assert "(median of 2, the runs' range in brackets)" in arrivals
    assert "| Kueue as it ships | 0.5 (0.4–0.6) | 0.3 (0.3–0.3) | 0.9 (0.9–0.9) | 50.0 (50.0–50.0) |" in arrivals
    assert "| yuniplace | 0.2 | 0.3 | 0.4 | 50.0 |" in arrivals  # one run: no range
    assert "| yuniplace / Kueue as it ships | 0.40 | 1.00 | 0.44 | 1.00 |" in arrivals
    assert "| yuniplace / Kueue, client at the control plane's rate | 2.00 | 1.00 | 0.44 | 1.00 |" in arrivals
    assert "Where the median gang's time went" not in arrivals  # no phases measured


def test_the_arrivals_report_shows_where_the_median_gangs_time_went() -> None:
    result = _results()[1]
    result["yuniplace"] = {**result["yuniplace"], "all_seen_s": 0.05, "first_free_s": 0.4, "last_bound_s": 0.9}
    arrivals = report.arrivals_table(result)
    assert "| yuniplace | 0.05 | 0.4 | - | - | 0.9 |" in arrivals
    assert "| plain kube-scheduler | - | - | - | - | - |" in arrivals


def test_the_peers_table_says_what_each_was_given_and_the_order_of_their_turns() -> None:
    given = report.peers_table(_results()[2])
    shipped, fast = [line for line in given.splitlines() if line.startswith("| Kueue")]
    assert "v0.17.0" in shipped and "50 QPS, burst 100" in shipped and "waitForPodsReady off" in shipped
    assert "cpu 3200" in shipped and "integration pod" in shipped
    assert "1000 QPS, burst 2000" in fast
    assert "`--leader-elect` `--workers=4`" in given
    assert "Turns, by repeat: 1: plain kube-scheduler, yuniplace, Kueue as it ships, Kueue, its client" in given
    assert "2: yuniplace, Kueue as it ships, Kueue, its client at the control plane's rate, plain kube-scheduler." in (
        given
    )


def test_the_targets_hold_yuniplace_against_each_kueue_and_the_gang_plugin() -> None:
    targets = report.targets_table(_results())
    # Behind Kueue as it ships at M=50: not met, and the worst size is named.
    assert (
        "| yuniplace's direct start ahead of Kueue as it ships at every size (worst: M=50) | < 1× | 1.25 | no |"
        in targets
    )
    assert (
        "ahead of Kueue with its client at the control plane's rate at every size (worst: M=50) | < 1× | 0.75 | yes"
        in (targets)
    )
    assert "at or below kube-scheduler's gang plugin at every size (worst: M=50) | ≤ 1× | 5.0 | no |" in targets
    assert (
        "| p50 and p99 under arrivals ahead of Kueue as it ships (yuniplace / it) | < | 0.2 / 0.5, 0.4 / 0.9 s | yes"
        in (targets)
    )
    assert "ahead of Kueue, client at the control plane's rate (yuniplace / it) | < | 0.2 / 0.1, 0.4 / 0.9 s | no" in (
        targets
    )


def test_the_report_of_a_run_with_kueue_writes_its_chart(tmp_path: Path) -> None:
    markdown = report.write(tmp_path, _results(), {"time": "t", "cpus": 2, "versions": {"kubernetes": "v1.37.2"}})
    assert "### Peers: what each was given" in markdown.read_text()
    assert (tmp_path / "gang-latency.png").read_bytes()[:4] == b"\x89PNG"
    given = json.loads((tmp_path / "results.json").read_text())["results"][2]["given"]
    assert given["kueue"]["version"] == "v0.17.0"


def test_the_gang_chart_draws_every_peer_the_run_measured_at_every_size() -> None:
    rows = _results()[0]["rows"]
    labels = [label for label, _, _ in report.gang_lines(rows)]
    assert "Kueue pod group, as it ships" in labels and "plain kube-scheduler (no gang)" in labels
    assert [seconds for label, _, seconds in report.gang_lines(rows) if label == "Kueue pod group, as it ships"] == [
        [row["kueue_s"] for row in rows]
    ]
    # A peer missing at one size is left out rather than drawn in part.
    del rows[-1]["kueue_s"]
    assert "Kueue pod group, as it ships" not in [label for label, _, _ in report.gang_lines(rows)]


def test_the_cpu_table_shows_the_floor_of_gating_beside_plain_and_yuniplace() -> None:
    plain = {"kube-apiserver": 1.0, "kube-scheduler": 0.5}
    row = {
        "members": 100,
        "cpu_by_process_plain": plain,
        "cpu_by_process": {**plain, "kube-apiserver": 2.5, "yuniplace": 1.0},
        "cpu_by_process_floor": {**plain, "kube-apiserver": 1.5},
    }
    table = report.cpu_table({"rows": [row], "repeats": 3})
    assert "| gates lifted by a bare lifter | 1.5 | 0.5 | 0.0 | 2.0 |" in table
    assert "| yuniplace | 2.5 | 0.5 | 1.0 | 4.0 |" in table
