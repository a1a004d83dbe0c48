"""The Helm chart (charts/yuniplace): it lints, every object it renders is accepted by the real
apiserver, the rendered policy is the one documented (least-privilege RBAC, restricted pods, webhooks
scoped by matchConditions), the CRDs in crds/ are served as scheduler-plugins', Volcano's and
ai-scheduler's APIs, installs and upgrades keep the webhook certificate, the controller runs with exactly
the permissions the chart grants, and the webhooks work with the chart's certificate and see every gang
dialect's pods, and only those."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    Placement,
    events_for,
    finish,
    free_port,
    gang_as_job,
    gang_pod,
    is_ready,
    is_running,
    make_pod,
)
from tests.e2e.test_queues import app_pods
from yuniplace.gang import keys
from yuniplace.gang.dialects import coscheduling, koordinator, podgroup, volcano
from yuniplace.kube import ApiError, NotFound
from yuniplace.localcluster import wait_until

CHART = Path(__file__).resolve().parents[2] / "charts" / "yuniplace"
Manifest = dict[str, Any]

# The exact API access `yuniplace controller` needs, resource by resource (see templates/rbac.yaml).
CONTROLLER_RULES = {
    ("", "pods"): {"get", "list", "watch", "create", "delete", "patch"},
    ("", "pods/status"): {"patch"},
    ("", "pods/eviction"): {"create"},
    ("", "pods/finalizers"): {"update"},
    ("events.k8s.io", "events"): {"create"},
    ("scheduling.x-k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.x-k8s.io", "podgroups/status"): {"patch"},
    ("scheduling.volcano.sh", "podgroups"): {"list", "watch", "patch"},
    ("scheduling.volcano.sh", "podgroups/status"): {"patch"},
    ("scheduling.k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.k8s.io", "workloads"): {"list", "watch"},
}
# Admission reads, in every namespace, what each node has and what runs on it, Volcano's Queues,
# ai-scheduler's Pools and Karpenter's NodePools and NodeClaims (all cluster-scoped); nothing else.
ADMISSION_RULES = {
    ("", "nodes"): {"list", "watch"},
    ("", "pods"): {"list", "watch"},
    ("scheduling.volcano.sh", "queues"): {"list", "watch"},
    ("resource.aibee.cn", "pools"): {"list", "watch"},
    ("karpenter.sh", "nodepools"): {"list", "watch"},
    ("karpenter.sh", "nodeclaims"): {"list", "watch"},
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaimtemplates"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceclaims/status"): {"patch"},
    ("resource.k8s.io", "resourceclaims/binding"): {"patch"},
}
# The optional APIs as they come and go: CRDs watched (their metadata), unless the install is confined to
# one namespace with admission off.
APIS_RULES = {("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"}}
VOLCANO_CRDS = ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh")
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
GANG_CEL_KEYS = (
    "yunikorn.apache.org/task-groups",
    "yunikorn.apache.org/task-group-name",
    "gang.scheduling.koordinator.sh/name",
    "pod-group.scheduling.sigs.k8s.io/name",
    "scheduling.x-k8s.io/pod-group",
    "scheduling.k8s.io/group-name",
)


# -- helm and kubectl --------------------------------------------------------------------------------


def helm(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(cluster.bin_dir / "helm"), *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}{result.stdout}")
    return result


def server_version(cluster: Cluster) -> str:
    return str(json.loads(cluster.kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"])


def set_flags(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def render(
    cluster: Cluster, release: str, namespace: str, values: dict[str, str] | None = None, *extra: str
) -> list[Manifest]:
    """`helm template` for the session's Kubernetes version, parsed."""
    out = helm(
        cluster,
        "template",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--kube-version",
        server_version(cluster),
        *set_flags(values or {}),
        *extra,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def refused_render(cluster: Cluster, namespace: str, *args: str) -> str:
    """The error of a `helm template` that must fail."""
    result = helm(
        cluster,
        "template",
        "yp",
        str(CHART),
        "--namespace",
        namespace,
        "--kube-version",
        server_version(cluster),
        *args,
        check=False,
    )
    assert result.returncode != 0, f"rendered although it should not:\n{result.stdout}"
    return result.stderr


def objects(manifests: Sequence[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: Sequence[Manifest], kind: str) -> Manifest:
    found = objects(manifests, kind)
    assert len(found) == 1, f"expected one {kind}, rendered {[m['metadata']['name'] for m in found]}"
    return found[0]


def dry_run(cluster: Cluster, manifests: Sequence[Manifest], release_namespace: str) -> str:
    """Server-side dry-run of every object, namespace by namespace (kubectl refuses objects of another
    namespace than --namespace); cluster-scoped ones go with the release namespace."""
    by_namespace: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        by_namespace.setdefault(manifest["metadata"].get("namespace", release_namespace), []).append(manifest)
    out = []
    for namespace, docs in by_namespace.items():
        result = subprocess.run(
            [
                str(cluster.bin_dir / "kubectl"),
                f"--kubeconfig={cluster.kubeconfig}",
                "apply",
                "--dry-run=server",
                f"--namespace={namespace}",
                "-f",
                "-",
            ],
            input=yaml.safe_dump_all(docs),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"apiserver refused objects for {namespace}:\n{result.stderr}"
        out.append(result.stdout)
    return "".join(out)


def container_args(manifests: Sequence[Manifest]) -> list[str]:
    deployment = one(manifests, "Deployment")
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def pod_group_api_served(cluster: Cluster, api: str = podgroup.API) -> bool:
    """Whether discovery lists the PodGroup API yet (it lags the CRD's Established condition a little)."""
    try:
        return bool(cluster.client.get(api)["resources"])
    except NotFound:
        return False


def secret_data(cluster: Cluster, namespace: str, name: str) -> dict[str, bytes]:
    secret = cluster.client.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


def ca_bundles(cluster: Cluster, name: str) -> set[bytes]:
    bundles = set()
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        config = cluster.client.get(f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}")
        bundles.update(base64.b64decode(hook["clientConfig"]["caBundle"]) for hook in config["webhooks"])
    return bundles


def rule_verbs(role: Manifest) -> dict[tuple[str, str], set[str]]:
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs.setdefault((group, resource), set()).update(rule["verbs"])
    return verbs


def dns_names(pem: bytes) -> list[str]:
    certificate = x509.load_pem_x509_certificate(pem)
    return list(
        certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )
    )


def tls_checksum(deployment: Manifest) -> str:
    return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/webhook-tls"])


@pytest.fixture
def release(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A release name unique in the cluster; whatever a test installed under it is uninstalled."""
    name = f"yp-{uuid.uuid4().hex[:6]}"
    yield name
    helm(cluster, "uninstall", name, "--namespace", namespace, "--wait", "--ignore-not-found", check=False)


@pytest.fixture
def other_namespace(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A second namespace: the watched one, or the one gang pods are created in (the release
    namespace is excluded from the webhooks)."""
    name = f"{namespace[:50]}-apps"
    cluster.local.create_namespace(name)
    yield name
    cluster.client.delete(f"/api/v1/namespaces/{name}")


# -- lint and render ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"metrics.serviceMonitor.enabled": "true"},
        {"metrics.grafanaDashboard.enabled": "true"},
        {"webhook.url": "https://127.0.0.1:9443"},
    ],
    ids=["defaults", "service-monitor", "grafana-dashboard", "webhook-url"],
)
def test_chart_lints(cluster: Cluster, values: dict[str, str]) -> None:
    result = helm(cluster, "lint", "--strict", str(CHART), *set_flags(values))
    assert "0 chart(s) failed" in result.stdout, result.stdout


def test_default_objects_are_accepted_by_the_apiserver(cluster: Cluster, namespace: str) -> None:
    manifests = render(cluster, "yp", namespace, None, "--include-crds")
    kinds = {m["kind"] for m in manifests}
    assert kinds >= {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Secret",
        "Deployment",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "CustomResourceDefinition",
    }, kinds
    assert "ServiceMonitor" not in kinds  # off by default: the CRD may not exist
    out = dry_run(cluster, manifests, namespace)
    assert out.count("(server dry run)") == len(manifests), out


def test_watch_namespace_and_outside_webhook_are_accepted_by_the_apiserver(
    cluster: Cluster, namespace: str, other_namespace: str
) -> None:
    manifests = render(
        cluster,
        "yp",
        namespace,
        {
            "watchNamespace": other_namespace,
            "webhook.url": "https://127.0.0.1:9443",
            "webhook.tls.extraIPs": "{127.0.0.1}",
            "webhook.rewriteSchedulerName": "true",
        },
    )
    out = dry_run(cluster, manifests, namespace)
    assert out.count("(server dry run)") == len(manifests), out

    # Pods and events: a Role in the watched namespace instead of a ClusterRole; cluster-wide, only
    # admission's reading of nodes, pods, Volcano's Queues, ai-scheduler's Pools, Karpenter's NodePools and
    # NodeClaims and DRA's objects, and the CRDs' metadata.
    cluster_roles = objects(manifests, "ClusterRole")
    assert [rule_verbs(role) for role in cluster_roles] == [ADMISSION_RULES, APIS_RULES]
    cluster_bindings = objects(manifests, "ClusterRoleBinding")
    assert [b["roleRef"]["name"] for b in cluster_bindings] == [r["metadata"]["name"] for r in cluster_roles]
    roles = {m["metadata"]["namespace"]: m for m in objects(manifests, "Role")}
    assert set(roles) == {namespace, other_namespace}
    assert rule_verbs(roles[other_namespace]) == CONTROLLER_RULES
    binding = next(b for b in objects(manifests, "RoleBinding") if b["metadata"]["namespace"] == other_namespace)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "yp-yuniplace", "namespace": namespace}]
    assert f"--namespace={other_namespace}" in container_args(manifests)

    # The outside webhook: URL client config, no in-cluster serving.
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        hook = one(manifests, kind)["webhooks"][0]
        assert hook["clientConfig"]["url"] == f"https://127.0.0.1:9443{path}"
        assert "service" not in hook["clientConfig"] and hook["clientConfig"]["caBundle"]
        assert hook["namespaceSelector"]["matchExpressions"] == [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [other_namespace]}
        ]
    mutating = one(manifests, "MutatingWebhookConfiguration")["webhooks"][0]
    assert (
        "object.spec.schedulerName in ['yunikorn', 'ai-scheduler', 'scheduler-plugins-scheduler']"
        in mutating["matchConditions"][0]["expression"]
    )
    assert not any(a.startswith("--webhook-address") for a in container_args(manifests))
    assert [s["metadata"]["name"] for s in objects(manifests, "Service")] == ["yp-yuniplace-metrics"]
    certificate = x509.load_pem_x509_certificate(base64.b64decode(one(manifests, "Secret")["data"]["tls.crt"]))
    ips = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in ips.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def assert_native_gate(native: dict[str, Any], gate: dict[str, Any], namespace: str) -> None:
    """The entry that gates pods of Kubernetes' own gangs: pods naming a native pod group, on their
    own path, in every namespace the main gate sees but those labelled to leave them to kube-scheduler."""
    assert native["name"] == "native-gate.yuniplace.io"
    assert native["clientConfig"]["service"]["path"] == "/mutate-native-gangs"
    assert native["matchConditions"] == [
        {"name": "native-pod-group", "expression": "has(object.spec.schedulingGroup) || has(object.spec.workloadRef)"}
    ]
    assert native["rules"] == gate["rules"] and native["objectSelector"] == gate["objectSelector"]
    assert native["namespaceSelector"]["matchExpressions"] == [
        *gate["namespaceSelector"]["matchExpressions"],
        {"key": "yuniplace.io/native-gangs", "operator": "NotIn", "values": ["kube-scheduler"]},
    ]


def test_default_policy_is_the_documented_one(cluster: Cluster, namespace: str) -> None:
    manifests = render(cluster, "yp", namespace)

    # Webhooks: gang pods only (CEL), never placeholders (exactly the controller's label value), never
    # system namespaces; the mutating one on CREATE, the validating one on others' edits.
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        # The mutating configuration's workload hooks (the recorded requester): tests/e2e/test_identity.py.
        hook, *others = one(manifests, kind)["webhooks"]
        if kind.startswith("Mutating"):
            native, *workload_hooks = others
            assert_native_gate(native, hook, namespace)
        else:
            workload_hooks = others
        assert len(workload_hooks) == (2 if kind.startswith("Mutating") else 0)
        assert hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 5
        assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
        operations = ["CREATE"] if kind.startswith("Mutating") else ["UPDATE"]
        assert hook["rules"] == [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "operations": operations,
                "scope": "Namespaced",
            }
        ]
        condition, *edited = hook["matchConditions"]
        assert all(key in condition["expression"] for key in GANG_CEL_KEYS), condition
        # By default (rewriteSchedulerName: auto) the mutating webhook also sees pods of the schedulers taken over.
        assert (
            "object.spec.schedulerName in ['yunikorn', 'ai-scheduler', 'scheduler-plugins-scheduler']"
            in condition["expression"]
        ) == kind.startswith("Mutating")
        if kind.startswith("Validating"):
            [edit] = edited
            assert f"system:serviceaccount:{namespace}:yp-yuniplace" in edit["expression"], edit
        else:
            assert not edited
        assert hook["objectSelector"] == {
            "matchExpressions": [{"key": keys.PLACEHOLDER, "operator": "NotIn", "values": ["true"]}]
        }
        assert hook["namespaceSelector"]["matchExpressions"] == [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kube-node-lease", namespace],
            }
        ]
        service = hook["clientConfig"]["service"]
        assert service == {
            "name": "yp-yuniplace-webhook",
            "namespace": namespace,
            "port": 443,
            "path": "/mutate" if kind.startswith("Mutating") else "/validate",
        }
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == base64.b64decode(
            one(manifests, "Secret")["data"]["ca.crt"]
        )
    assert one(manifests, "MutatingWebhookConfiguration")["webhooks"][0]["reinvocationPolicy"] == "Never"

    # The Deployment: 2 replicas spread across nodes, restricted pods, probes on the metrics port.
    deployment = one(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 65532
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    [spread] = spec["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert "priorityClassName" not in spec
    [container] = spec["containers"]
    assert container["securityContext"].items() >= RESTRICTED_CONTAINER.items()
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http-metrics": 8080, "https-webhook": 9443}
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]} == {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
    }
    assert {"name": "webhook-tls", "mountPath": "/tls", "readOnly": True} in container["volumeMounts"]
    assert "checksum/webhook-tls" in pod["metadata"]["annotations"]
    assert container["args"] == [
        "controller",
        "--workers=4",
        "--placeholder-image=registry.k8s.io/pause:3.10",
        "--default-timeout=900",
        "--default-style=Soft",
        "--max-members-per-group=1000",
        "--max-members-per-app=5000",
        "--admission=capacity",
        "--placeholders=when-needed",
        "--strict-backoff=10",
        "--on-member-lost=none",
        "--restart-limit=3",
        "--recovery-timeout=60",
        "--ready-timeout=300",
        "--restart-backoff=10",
        f"--restarts-configmap={namespace}/yp-yuniplace-restarts",
        "--head-claim=300",
        "--max-placeholders-per-namespace=5000",
        "--max-waiting-per-namespace=100",
        "--http-address=0.0.0.0:8080",
        "--log-level=INFO",
        "--log-format=json",
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--leader-election-id=yp-yuniplace",
        "--lease-duration=15",
        "--renew-deadline=10",
        "--retry-period=2",
        "--webhook-address=0.0.0.0:9443",
        "--tls-cert-file=/tls/tls.crt",
        "--tls-key-file=/tls/tls.key",
        "--rewrite-scheduler-name=auto",
        "--rewritten-scheduler=yunikorn",
        "--rewritten-scheduler=ai-scheduler",
        "--rewritten-scheduler=scheduler-plugins-scheduler",
        "--system-users=^system:serviceaccount:kube-system:",
        "--system-users=^system:kube-controller-manager$",
    ]
    assert container["image"] == "ghcr.io/yuniplace/yuniplace:0.1.0"

    # RBAC: exactly the controller's verbs, no wildcard anywhere, the Lease in a namespaced Role.
    cluster_roles = [rule_verbs(m) for m in objects(manifests, "ClusterRole")]
    assert cluster_roles == [CONTROLLER_RULES, ADMISSION_RULES, APIS_RULES], cluster_roles
    for role in objects(manifests, "ClusterRole") + objects(manifests, "Role"):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
    roles = {role["metadata"]["name"]: role for role in objects(manifests, "Role")}
    assert set(roles) == {"yp-yuniplace-leader-election", "yp-yuniplace-restarts"}
    lease_role, counts_role = roles["yp-yuniplace-leader-election"], roles["yp-yuniplace-restarts"]
    assert lease_role["metadata"]["namespace"] == counts_role["metadata"]["namespace"] == namespace
    # The Lease: created once, then read and written by its name only; events on it (an optional API come
    # or gone).
    assert rule_verbs(lease_role) == {
        ("coordination.k8s.io", "leases"): {"create", "get", "update"},
        ("events.k8s.io", "events"): {"create"},
    }
    assert sorted(
        (r["verbs"], r.get("resourceNames")) for r in lease_role["rules"] if r["resources"] == ["leases"]
    ) == [(["create"], None), (["get", "update"], ["yp-yuniplace"])]
    # The ConfigMap of restart counts: created once, then read and patched by its name only.
    assert sorted((r["verbs"], r.get("resourceNames")) for r in counts_role["rules"]) == [
        (["create"], None),
        (["get", "patch"], ["yp-yuniplace-restarts"]),
    ]
    assert all(r["apiGroups"] == [""] and r["resources"] == ["configmaps"] for r in counts_role["rules"])
    bindings = {b["metadata"]["name"]: b for b in objects(manifests, "RoleBinding")}
    assert {b["roleRef"]["name"] for b in bindings.values()} == set(roles)
    assert all(b["metadata"]["namespace"] == namespace for b in bindings.values())
    assert one(manifests, "PodDisruptionBudget")["spec"]["minAvailable"] == 1

    secret = one(manifests, "Secret")
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    names = dns_names(base64.b64decode(secret["data"]["tls.crt"]))
    service = "yp-yuniplace-webhook"
    assert names == [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def test_optional_parts_render_only_when_enabled(cluster: Cluster, namespace: str) -> None:
    monitored = render(
        cluster,
        "yp",
        namespace,
        {
            "metrics.serviceMonitor.enabled": "true",
            "metrics.serviceMonitor.labels.release": "prometheus",
            "metrics.serviceMonitor.interval": "15s",
        },
    )
    monitor = one(monitored, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0] == {
        "port": "http-metrics",
        "path": "/metrics",
        "interval": "15s",
        "scrapeTimeout": "10s",
    }

    managed = render(cluster, "yp", namespace, {"webhook.tls.certManager.enabled": "true"})
    assert {m["kind"] for m in managed} >= {"Certificate", "Issuer"} and not objects(managed, "Secret")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = one(managed, kind)
        injection = {"cert-manager.io/inject-ca-from": f"{namespace}/yp-yuniplace-webhook"}
        assert config["metadata"]["annotations"] == injection
        assert "caBundle" not in config["webhooks"][0]["clientConfig"]
    assert one(managed, "Certificate")["spec"]["secretName"] == "yp-yuniplace-webhook-tls"
    assert not any(m["kind"] in ("Certificate", "Issuer") for m in render(cluster, "yp", namespace))

    existing = render(
        cluster, "yp", namespace, {"webhook.tls.existingSecret": "my-tls", "webhook.tls.caBundle": "Q0E="}
    )
    assert not objects(existing, "Secret")
    assert {
        h["clientConfig"]["caBundle"]
        for k in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for h in one(existing, k)["webhooks"]
    } == {"Q0E="}
    volumes = one(existing, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "webhook-tls",
        "secret": {
            "secretName": "my-tls",
            "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
        },
    } in volumes

    # Without a caBundle, the CA must come from the Secret, which `helm template` cannot read.
    refused = helm(
        cluster,
        "template",
        "yp",
        str(CHART),
        "--namespace",
        namespace,
        "--kube-version",
        server_version(cluster),
        "--set",
        "webhook.tls.existingSecret=my-tls",
        check=False,
    )
    assert refused.returncode != 0 and "webhook.tls.caBundle is required" in refused.stderr

    plain = render(
        cluster,
        "yp",
        namespace,
        {
            "webhook.enabled": "false",
            "replicaCount": "1",
            "memberEvents": "true",
            "placeholders": "always",
            "priorityClassName": "system-cluster-critical",
        },
    )
    assert not {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Secret", "PodDisruptionBudget"} & {
        m["kind"] for m in plain
    }
    args = container_args(plain)
    assert "--member-events" in args and "--placeholders=always" in args
    assert not any(a.startswith(("--webhook", "--tls")) for a in args)
    assert one(plain, "Deployment")["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"


def test_grafana_dashboard_configmap(cluster: Cluster, namespace: str) -> None:
    """Off by default; on, the dashboard file as it is, in a ConfigMap the apiserver accepts, labelled
    for Grafana's sidecar, in the namespace and with the label and annotations the values give."""
    assert not objects(render(cluster, "yp", namespace), "ConfigMap")
    shipped = one(render(cluster, "yp", namespace, {"metrics.grafanaDashboard.enabled": "true"}), "ConfigMap")
    assert shipped["metadata"]["namespace"] == namespace
    assert shipped["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads((CHART / "dashboards" / "yuniplace.json").read_text())
    assert json.loads(shipped["data"]["yuniplace.json"]) == dashboard
    dry_run(cluster, [shipped], namespace)

    elsewhere = one(
        render(
            cluster,
            "yp",
            namespace,
            {
                "metrics.grafanaDashboard.enabled": "true",
                "metrics.grafanaDashboard.namespace": "monitoring",
                "metrics.grafanaDashboard.label": "grafana.com/dashboard",
                "metrics.grafanaDashboard.labelValue": "true",
                "metrics.grafanaDashboard.annotations.grafana_folder": "Scheduling",
            },
        ),
        "ConfigMap",
    )
    assert elsewhere["metadata"]["namespace"] == "monitoring"
    assert elsewhere["metadata"]["labels"]["grafana.com/dashboard"] == "true"
    assert elsewhere["metadata"]["annotations"] == {"grafana_folder": "Scheduling"}
    refused = refused_render(
        cluster, namespace, "--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.grafanaDashboard.label="
    )
    assert "metrics.grafanaDashboard.label is required" in refused


def test_admission_and_strict_backoff_values(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    """`admission` maps to --admission and decides whether the read-only nodes/pods ClusterRole exists;
    `strictBackoffSeconds` maps to --strict-backoff; values the controller would refuse fail the render."""
    admitted = render(cluster, "yp", namespace, {"strictBackoffSeconds": "2.5"})
    args = container_args(admitted)
    assert "--admission=capacity" in args and "--strict-backoff=2.5" in args, args
    assert "--placeholders=when-needed" in args and "--member-events" not in args, args
    [role] = [r for r in objects(admitted, "ClusterRole") if rule_verbs(r) == ADMISSION_RULES]
    [binding] = [b for b in objects(admitted, "ClusterRoleBinding") if b["roleRef"]["name"] == role["metadata"]["name"]]
    assert binding["roleRef"]["kind"] == "ClusterRole"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "yp-yuniplace", "namespace": namespace}]

    unadmitted = render(cluster, "yp", namespace, {"admission": "off"})
    assert "--admission=off" in container_args(unadmitted)
    assert [rule_verbs(m) for m in objects(unadmitted, "ClusterRole")] == [CONTROLLER_RULES, APIS_RULES]
    assert len(objects(unadmitted, "ClusterRoleBinding")) == 2

    # A values file's bare `off` is YAML's false: still off. With watchNamespace as well, the controller
    # has no cluster-wide access at all.
    values = tmp_path / "values.yaml"
    values.write_text("admission: off\nwatchNamespace: apps\n")
    confined = render(cluster, "yp", namespace, None, "--values", str(values))
    assert "--admission=off" in container_args(confined)
    assert not objects(confined, "ClusterRole") and not objects(confined, "ClusterRoleBinding")
    [apps_role] = [r for r in objects(confined, "Role") if r["metadata"]["namespace"] == "apps"]
    assert rule_verbs(apps_role) == CONTROLLER_RULES

    assert 'admission must be capacity or off, not "sometimes"' in refused_render(
        cluster, namespace, "--set", "admission=sometimes"
    )
    assert 'placeholders must be when-needed or always, not "never"' in refused_render(
        cluster, namespace, "--set", "placeholders=never"
    )
    for wrong in ("0", "-5", "soon"):
        assert "strictBackoffSeconds must be" in refused_render(
            cluster, namespace, "--set", f"strictBackoffSeconds={wrong}"
        ), wrong


def test_rewrite_scheduler_name_values(cluster: Cluster, namespace: str) -> None:
    """auto (the default), always or never, with YAML's true and false read as always and never; the
    mutating webhook sees pods for YuniKorn unless never."""
    for value, mode in (
        ("auto", "auto"),
        ("true", "always"),
        ("always", "always"),
        ("false", "never"),
        ("never", "never"),
    ):
        manifests = render(cluster, "yp", namespace, {"webhook.rewriteSchedulerName": value})
        assert f"--rewrite-scheduler-name={mode}" in container_args(manifests), value
        mutating = one(manifests, "MutatingWebhookConfiguration")["webhooks"][0]
        assert ("schedulerName" in mutating["matchConditions"][0]["expression"]) == (mode != "never"), value
    assert "webhook.rewriteSchedulerName must be auto, always or never" in refused_render(
        cluster, namespace, "--set", "webhook.rewriteSchedulerName=sometimes"
    )
    # The schedulers taken over: each in the flags and the match condition; a name that is none refused
    # (it is written into CEL); none at all takes nothing over.
    manifests = render(cluster, "yp", namespace, {"webhook.rewrittenSchedulers[0]": "volcano"})
    assert [a for a in container_args(manifests) if a.startswith("--rewritten-")] == ["--rewritten-scheduler=volcano"]
    mutating = one(manifests, "MutatingWebhookConfiguration")["webhooks"][0]
    assert "object.spec.schedulerName in ['volcano']" in mutating["matchConditions"][0]["expression"]
    assert "is not another scheduler's name" in refused_render(
        cluster, namespace, "--set", "webhook.rewrittenSchedulers[0]=x') || true || ('"
    )
    manifests = render(cluster, "yp", namespace, None, "--set-json", "webhook.rewrittenSchedulers=[]")
    args = container_args(manifests)
    assert "--rewrite-scheduler-name=never" in args and not [a for a in args if a.startswith("--rewritten-")]
    mutating = one(manifests, "MutatingWebhookConfiguration")["webhooks"][0]
    assert "schedulerName" not in mutating["matchConditions"][0]["expression"]


def test_shared_cluster_values(cluster: Cluster, namespace: str) -> None:
    """Each shared-cluster value maps to its flag; values the controller would refuse fail the render."""
    shared = render(
        cluster,
        "yp",
        namespace,
        {
            "headClaimSeconds": "60",
            "maxPlaceholdersPerNamespace": "0",
            "maxWaitingApplicationsPerNamespace": "10",
            "gangGroupNamespaces[0]": "{team-a,team-b}",
            "gangGroupNamespaces[1]": "{etl,ml}",
        },
    )
    args = container_args(shared)
    for flag in (
        "--head-claim=60",
        "--max-placeholders-per-namespace=0",
        "--max-waiting-per-namespace=10",
        "--gang-group-namespaces=team-a,team-b",
        "--gang-group-namespaces=etl,ml",
    ):
        assert flag in args, (flag, args)
    for value, wrong in (
        ("headClaimSeconds", "0"),
        ("maxPlaceholdersPerNamespace", "-1"),
        ("maxWaitingApplicationsPerNamespace", "many"),
    ):
        assert f"{value} must be" in refused_render(cluster, namespace, "--set", f"{value}={wrong}"), value


def pod_group(name: str, spec: Manifest, status: Manifest | None = None) -> Manifest:
    manifest = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }
    if status is not None:
        manifest["status"] = status
    return manifest


def test_pod_group_crd_is_accepted_and_serves_status(cluster: Cluster, namespace: str) -> None:
    """The chart's crds/ (shipped by helm, not templated): the real apiserver accepts the CRD (no
    api-approved annotation is needed for an x-k8s.io group), serves scheduler-plugins' PodGroup
    under its names, validates its spec, and takes a status through the status subresource only, as
    yuniplace writes it."""
    shipped = objects(render(cluster, "yp", namespace, None, "--include-crds"), "CustomResourceDefinition")
    assert sorted(m["metadata"]["name"] for m in shipped) == sorted(
        ["podgroups.scheduling.x-k8s.io", "pools.resource.aibee.cn", *VOLCANO_CRDS]
    )
    assert not objects(render(cluster, "yp", namespace), "CustomResourceDefinition"), "a CRD in templates/"
    [crd] = [m for m in shipped if m["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"]
    assert "api-approved.kubernetes.io" not in crd["metadata"].get("annotations", {})
    assert crd["spec"]["group"] == "scheduling.x-k8s.io" and crd["spec"]["scope"] == "Namespaced"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1alpha1", True, True)]

    cluster.kubectl("apply", "--server-side", "-f", str(CHART / "crds"))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.x-k8s.io")
    wait_until(lambda: pod_group_api_served(cluster), 30)
    served = {r["name"]: r for r in cluster.client.get(podgroup.API)["resources"]}
    assert set(served) == {"podgroups", "podgroups/status"}, served
    assert served["podgroups"]["kind"] == "PodGroup" and served["podgroups"]["namespaced"] is True
    assert sorted(served["podgroups"]["shortNames"]) == ["pg", "pgs"]
    assert served["podgroups"]["singularName"] == "podgroup"

    # The spec as scheduler-plugins' clients write it; a status sent on create is dropped (subresource).
    path = f"{podgroup.API}/namespaces/{namespace}/podgroups"
    spec = {
        "minMember": 3,
        "minResources": {"cpu": "1500m", "memory": "3Gi", "nvidia.com/gpu": 2},
        "scheduleTimeoutSeconds": 0,
    }
    created = cluster.client.create(path, pod_group("pg", spec, {"phase": "Running", "running": 3}))
    assert created["spec"] == spec and not created.get("status")

    status = {
        "phase": "Scheduled",
        "occupiedBy": f"{namespace}/job",
        "scheduled": 3,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": "2026-01-01T00:00:00Z",
    }
    patched = cluster.client.patch(f"{path}/pg/status", {"status": status, "spec": {"minMember": 9}})
    assert patched["status"] == status and patched["spec"]["minMember"] == 3
    printed = cluster.kubectl("get", "pg", "-n", namespace).splitlines()
    assert printed[0].split() == ["NAME", "PHASE", "MINMEMBER", "RUNNING", "SUCCEEDED", "AGE"], printed
    assert printed[1].split()[:5] == ["pg", "Scheduled", "3", "0", "0"], printed

    # What the schema refuses.
    for name, wrong, field in (
        ("no-members", {"minMember": 0}, "spec.minMember"),
        ("not-a-quantity", {"minMember": 1, "minResources": {"cpu": "lots"}}, "spec.minResources.cpu"),
        ("negative-timeout", {"minMember": 1, "scheduleTimeoutSeconds": -1}, "spec.scheduleTimeoutSeconds"),
    ):
        with pytest.raises(ApiError, match=re.escape(field)):
            cluster.client.create(path, pod_group(name, wrong))
    with pytest.raises(ApiError, match="scheduleStartTime"):
        cluster.client.patch(f"{path}/pg/status", {"status": {"scheduleStartTime": "yesterday"}})


def volcano_pod_group(name: str, spec: Manifest, status: Manifest | None = None) -> Manifest:
    manifest = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }
    if status is not None:
        manifest["status"] = status
    return manifest


def test_volcano_crds_are_accepted_and_serve_status(cluster: Cluster, namespace: str) -> None:
    """The chart's Volcano CRDs: the real apiserver accepts them (no api-approved annotation is needed
    for volcano.sh) and serves Volcano's PodGroup and Queue under Volcano's names, keeping the fields
    they do not describe, defaulting a PodGroup's queue as Volcano does, taking its status through the
    status subresource only (as yuniplace writes it), and refusing what yuniplace could not read."""
    shipped = {
        m["metadata"]["name"]: m
        for m in objects(render(cluster, "yp", namespace, None, "--include-crds"), "CustomResourceDefinition")
    }
    for name in VOLCANO_CRDS:
        crd = shipped[name]
        assert "api-approved.kubernetes.io" not in crd["metadata"].get("annotations", {})
        assert crd["spec"]["group"] == "scheduling.volcano.sh"
        assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1beta1", True, True)]
        assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert shipped["podgroups.scheduling.volcano.sh"]["spec"]["scope"] == "Namespaced"
    assert shipped["queues.scheduling.volcano.sh"]["spec"]["scope"] == "Cluster"

    cluster.kubectl("apply", "--server-side", "-f", str(CHART / "crds"))
    for name in VOLCANO_CRDS:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
    wait_until(lambda: pod_group_api_served(cluster, keys.VOLCANO_API), 30)
    served = {r["name"]: r for r in cluster.client.get(keys.VOLCANO_API)["resources"]}
    assert set(served) == {"podgroups", "podgroups/status", "queues", "queues/status"}, served
    assert served["podgroups"]["kind"] == "PodGroup" and served["podgroups"]["namespaced"] is True
    assert served["podgroups"]["shortNames"] == ["podgroup-v1beta1"]  # `pg` stays scheduler-plugins'
    assert served["queues"]["kind"] == "Queue" and served["queues"]["namespaced"] is False
    assert sorted(served["queues"]["shortNames"]) == ["q", "queue-v1beta1"]

    # A PodGroup as Volcano's Job controller writes it, with a field the CRD does not describe; a status
    # sent on create is dropped (subresource), and the queue defaults to Volcano's.
    path = f"{keys.VOLCANO_API}/namespaces/{namespace}/podgroups"
    spec = {
        "minMember": 3,
        "minTaskMember": {"ps": 1, "worker": 2},
        "minResources": {"cpu": "9", "memory": "17Gi", "nvidia.com/gpu": 2},
        "priorityClassName": "batch-high",
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    created = cluster.client.create(path, volcano_pod_group("tf", spec, {"phase": "Running", "running": 3}))
    assert created["spec"] == {**spec, "queue": "default"} and not created.get("status"), created
    status = {
        "phase": "Inqueue",
        "running": 1,
        "succeeded": 0,
        "failed": 0,
        "conditions": [
            {
                "type": "Scheduled",
                "status": "False",
                "reason": "Reserving",
                "message": "placeholders are reserving room for the whole gang",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    patched = cluster.client.patch(f"{path}/tf/status", {"status": status, "spec": {"minMember": 9}})
    assert patched["status"] == status and patched["spec"]["minMember"] == 3
    printed = cluster.kubectl("get", "podgroups.scheduling.volcano.sh", "-n", namespace).splitlines()
    assert printed[0].split() == ["NAME", "STATUS", "MINMEMBER", "RUNNING", "SUCCEEDED", "QUEUE", "AGE"], printed
    assert printed[1].split()[:6] == ["tf", "Inqueue", "3", "1", "0", "default"], printed
    for name, wrong, field in (
        ("negative-task", {"minMember": 1, "minTaskMember": {"worker": -1}}, "spec.minTaskMember.worker"),
        ("not-a-quantity", {"minMember": 1, "minResources": {"cpu": "lots"}}, "spec.minResources.cpu"),
        ("queue-not-a-name", {"minMember": 1, "queue": 7}, "spec.queue"),
    ):
        with pytest.raises(ApiError, match=re.escape(field)):
            cluster.client.create(path, volcano_pod_group(name, wrong))
    with pytest.raises(ApiError, match="lastTransitionTime"):
        condition = {"type": "Scheduled", "status": "True", "lastTransitionTime": "yesterday"}
        cluster.client.patch(f"{path}/tf/status", {"status": {"conditions": [condition]}})

    # A Queue (cluster-scoped) with what a gang in it may use, and a field the CRD does not describe.
    queue = f"{namespace}-q"
    queue_spec = {"capability": {"cpu": "8", "memory": "16Gi"}, "weight": 1, "parent": "root", "type": "batch"}
    queues = f"{keys.VOLCANO_API}/queues"
    try:
        made = cluster.client.create(
            queues,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": queue_spec,
            },
        )
        assert made["spec"] == queue_spec, made
        with pytest.raises(ApiError, match=re.escape("spec.capability.cpu")):
            cluster.client.create(
                queues,
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": f"{queue}-bad"},
                    "spec": {"capability": {"cpu": "eight"}},
                },
            )
    finally:
        cluster.client.delete(f"{queues}/{queue}")


def test_pool_crd_is_accepted_and_serves_ai_schedulers_pools(cluster: Cluster, namespace: str) -> None:
    """The chart's ai-scheduler Pool CRD: the real apiserver accepts it and serves Pool, cluster-scoped,
    under ai-scheduler's names; a Pool as ai-scheduler's examples write it is kept as written (a field
    of an older release too), its switches are printed, and a switch that is not a boolean is refused."""
    [crd] = [
        m
        for m in objects(render(cluster, "yp", namespace, None, "--include-crds"), "CustomResourceDefinition")
        if m["metadata"]["name"] == "pools.resource.aibee.cn"
    ]
    assert crd["spec"]["group"] == "resource.aibee.cn" and crd["spec"]["scope"] == "Cluster"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1alpha1", True, True)]
    assert "subresources" not in crd["spec"]["versions"][0]  # as ai-scheduler's own: it writes no status

    cluster.kubectl("apply", "--server-side", "-f", str(CHART / "crds"))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/pools.resource.aibee.cn")
    wait_until(lambda: pod_group_api_served(cluster, keys.AI_SCHEDULER_API), 30)
    [served] = cluster.client.get(keys.AI_SCHEDULER_API)["resources"]
    assert (served["name"], served["kind"], served["namespaced"], served["shortNames"]) == (
        "pools",
        "Pool",
        False,
        ["pool"],
    )
    pools = f"{keys.AI_SCHEDULER_API}/pools"
    name = f"{namespace}-masters"
    spec = {
        "nodeSelector": {"matchLabels": {"kubernetes.io/role": "master"}},
        "disablePreemption": True,
        "disableBorrowing": True,
        "disableSharing": True,
        "weight": {"cpu": 1},
    }
    try:
        made = cluster.client.create(
            pools,
            {"apiVersion": "resource.aibee.cn/v1alpha1", "kind": "Pool", "metadata": {"name": name}, "spec": spec},
        )
        assert made["spec"] == spec, made
        printed = cluster.kubectl("get", "pools.resource.aibee.cn", name).splitlines()
        assert printed[0].split() == ["NAME", "NO-PREEMPTION", "NO-BORROWING", "NO-SHARING", "AGE"], printed
        assert printed[1].split()[:4] == [name, "true", "true", "true"], printed
        with pytest.raises(ApiError, match=re.escape("spec.disableSharing")):
            cluster.client.create(
                pools,
                {
                    "apiVersion": "resource.aibee.cn/v1alpha1",
                    "kind": "Pool",
                    "metadata": {"name": f"{name}-bad"},
                    "spec": {"disableSharing": "yes"},
                },
            )
    finally:
        cluster.client.delete(f"{pools}/{name}")


# -- install -----------------------------------------------------------------------------------------


def test_install_and_upgrade_keep_the_webhook_certificate(cluster: Cluster, namespace: str, release: str) -> None:
    helm(cluster, "install", release, str(CHART), "--namespace", namespace, "--wait", "--timeout", "60s")
    secret_name = f"{release}-yuniplace-webhook-tls"
    [config] = cluster.client.get(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        labelSelector=f"app.kubernetes.io/instance={release}",
    )["items"]
    config_name = config["metadata"]["name"]
    assert len(config_name) <= 63 and config_name.startswith(f"{release}-yuniplace-")
    installed = secret_data(cluster, namespace, secret_name)
    assert ca_bundles(cluster, config_name) == {installed["ca.crt"]}
    deployment_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{release}-yuniplace"
    checksum = tls_checksum(cluster.client.get(deployment_path))

    # The lookup path: the Secret in the cluster is reused, nothing rolls.
    helm(cluster, "upgrade", release, str(CHART), "--namespace", namespace, "--wait", "--timeout", "60s")
    assert secret_data(cluster, namespace, secret_name) == installed
    assert ca_bundles(cluster, config_name) == {installed["ca.crt"]}
    deployment = cluster.client.get(deployment_path)
    assert tls_checksum(deployment) == checksum
    assert deployment["metadata"]["generation"] == 1, "an upgrade without changes rolled the replicas"

    # New names need a new certificate: issued, trusted by the webhooks, and the replicas roll to it.
    helm(
        cluster,
        "upgrade",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--wait",
        "--timeout",
        "60s",
        "--set",
        "webhook.tls.extraDNSNames={yuniplace.example.com}",
    )
    renewed = secret_data(cluster, namespace, secret_name)
    assert renewed["tls.crt"] != installed["tls.crt"]
    assert "yuniplace.example.com" in dns_names(renewed["tls.crt"])
    assert ca_bundles(cluster, config_name) == {renewed["ca.crt"]}
    assert tls_checksum(cluster.client.get(deployment_path)) != checksum

    helm(cluster, "uninstall", release, "--namespace", namespace, "--wait")
    cluster.wait_gone(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{config_name}")
    cluster.wait_gone(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{config_name}")


def service_account_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount, as the in-cluster controller does."""
    token = cluster.kubectl("create", "token", account, "--namespace", namespace, "--duration", "1h").strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [{"name": account, "context": {"cluster": admin["clusters"][0]["name"], "user": account}}],
                "current-context": account,
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("scope", "admission"), [("cluster", "capacity"), ("namespace", "capacity"), ("namespace", "off")]
)
def test_controller_needs_no_more_than_the_chart_grants(
    cluster: Cluster,
    namespace: str,
    release: str,
    pool: Callable[..., Placement],
    tmp_path: Path,
    scope: str,
    admission: str,
) -> None:
    """The real controller, authenticated as the chart's ServiceAccount (ClusterRole, or Role with
    watchNamespace; plus the read-only admission ClusterRole unless admission is off), leads through
    the chart's Lease and runs a YuniKorn gang, a PodGroup gang and a Volcano gang to the end."""
    values = {"replicaCount": "0", "webhook.enabled": "false", "admission": admission}
    if scope == "namespace":
        values["watchNamespace"] = namespace
    # helm installs the chart's PodGroup CRDs unless the cluster has them already.
    helm(cluster, "install", release, str(CHART), "--namespace", namespace, *set_flags(values))
    wait_until(lambda: pod_group_api_served(cluster) and pod_group_api_served(cluster, keys.VOLCANO_API), 30)
    account = lease = f"{release}-yuniplace"
    bound = cluster.client.get(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", labelSelector=f"app.kubernetes.io/instance={release}"
    )["items"]
    assert (
        len(bound)
        == {("cluster", "capacity"): 3, ("namespace", "capacity"): 2, ("namespace", "off"): 0}[(scope, admission)]
    ), [b["metadata"]["name"] for b in bound]
    kubeconfig = service_account_kubeconfig(cluster, namespace, account, tmp_path / "kubeconfig")
    process = ControllerProcess.for_namespace(
        kubeconfig,
        namespace,
        tmp_path,
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        f"--leader-election-id={lease}",
        f"--admission={admission}",
        f"--restarts-configmap={namespace}/{release}-yuniplace-restarts",
        name="chart-controller",
    )
    process.start()
    try:
        place = pool(2, cpu="4", memory="8Gi")
        groups = [
            place.group("driver", 1, cpu="500m", memory="512Mi"),
            place.group("executor", 2, cpu="1", memory="1Gi"),
        ]
        members = {
            "app-driver": ("driver", "500m", "512Mi"),
            "app-exec-1": ("executor", "1", "1Gi"),
            "app-exec-2": ("executor", "1", "1Gi"),
        }
        for name, (group, cpu, memory) in members.items():
            pod = gang_pod(
                name, "chart-app", group, task_groups=groups if group == "driver" else None, cpu=cpu, memory=memory
            )
            cluster.create_pod(namespace, place.pin(pod))
        # A PodGroup gang: the PodGroups are read (list, watch) and their status is written back.
        pod_groups = f"{podgroup.API}/namespaces/{namespace}/podgroups"
        cluster.client.create(pod_groups, pod_group("pg-app", {"minMember": 2}))
        for index in (1, 2):
            pod = make_pod(
                f"pg-app-{index}",
                cpu="500m",
                memory="256Mi",
                gates=[keys.GATE],
                labels={podgroup.LABEL: "pg-app"},
            )
            cluster.create_pod(namespace, place.pin(pod))
        # A Volcano gang: Volcano's PodGroups are read, and their status written back as well.
        volcano_groups = f"{keys.VOLCANO_API}/namespaces/{namespace}/podgroups"
        cluster.client.create(volcano_groups, volcano_pod_group("vc-app", {"minMember": 2}))
        for index in (1, 2):
            pod = make_pod(
                f"vc-app-{index}",
                cpu="500m",
                memory="256Mi",
                gates=[keys.GATE],
                annotations={volcano.GROUP_NAME: "vc-app"},
            )
            cluster.create_pod(namespace, place.pin(pod))
        # A Job gang that restarts on a lost member: evicted, and its count kept in the chart's ConfigMap.
        gang_as_job(cluster, namespace, place, "rs-app", 2, {keys.ON_MEMBER_LOST: "restart"}, cpu="500m")
        for name in [*members, "pg-app-1", "pg-app-2", "vc-app-1", "vc-app-2"]:
            cluster.wait_pod(namespace, name, is_running)

        def both_running() -> list[Manifest] | None:
            running = [pod for pod in app_pods(cluster, namespace, "rs-app") if is_running(pod)]
            return running if len(running) == 2 else None

        finish(cluster, namespace, wait_until(both_running, 60)[1]["metadata"]["name"], "Failed")
        wait_until(lambda: events_for(cluster, namespace, "GangRestarting"), 60)
        counts = f"/api/v1/namespaces/{namespace}/configmaps/{release}-yuniplace-restarts"

        def counted() -> dict[str, str] | None:
            try:
                return cluster.client.get(counts).get("data")  # type: ignore[no-any-return]
            except NotFound:
                return None

        kept = wait_until(counted, 30)
        assert len(kept) == 1 and '"count": 1' in next(iter(kept.values())), kept
        status = wait_until(
            lambda: (s := cluster.client.get(f"{pod_groups}/pg-app").get("status") or {}).get("running") == 2 and s, 30
        )
        assert status["phase"] == "Running" and status["scheduled"] == 2, status
        volcano_status = wait_until(
            lambda: (s := cluster.client.get(f"{volcano_groups}/vc-app").get("status") or {}).get("running") == 2 and s,
            30,
        )
        assert volcano_status["phase"] == "Running", volcano_status
        holder = cluster.client.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease}")
        assert holder["spec"]["holderIdentity"] == "chart-controller"
        # Started directly (admission on) or through placeholders (off): either way, its events are posted.
        started = events_for(cluster, namespace, "GangStarting") + events_for(
            cluster, namespace, "GangReservationComplete"
        )
        assert started, "no event was posted"
    except AssertionError as error:
        raise AssertionError(f"{error}\ncontroller log:\n{process.log()}") from None
    finally:
        code = process.stop()
    log = process.log()
    assert code == 0, log
    assert "forbidden" not in log.lower(), log  # typed API errors read "403 Forbidden: ..."


# -- the webhooks, served with the chart's certificate ------------------------------------------------


class WebhookProcess:
    """`yuniplace webhook` on loopback with the certificate the chart generated: how a developer serves
    the chart's webhooks from outside the cluster (webhook.url)."""

    def __init__(self, cert: Path, key: Path, port: int, log_path: Path) -> None:
        self.health_port = free_port()
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "yuniplace",
                "webhook",
                f"--webhook-address=127.0.0.1:{port}",
                f"--tls-cert-file={cert}",
                f"--tls-key-file={key}",
                f"--http-address=127.0.0.1:{self.health_port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"webhook exited ({self.process.returncode})")
        return is_ready(self.health_port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()


def dialect_pods(suffix: str) -> dict[str, Manifest]:
    """A valid pod of each other gang dialect: the webhooks must see (and gate) every one."""
    return {
        "coscheduling": make_pod(
            f"coscheduling-{suffix}", labels={coscheduling.NAME: "cos", coscheduling.MIN_AVAILABLE: "2"}
        ),
        "koordinator": make_pod(
            f"koordinator-{suffix}", annotations={koordinator.NAME: "koord", koordinator.MIN_AVAILABLE: "2"}
        ),
        "pod-group": make_pod(f"pod-group-{suffix}", labels={podgroup.LABEL: "pg"}),
        "volcano": make_pod(f"volcano-{suffix}", annotations={volcano.GROUP_NAME: "vc"}),
    }


def near_misses(suffix: str) -> dict[str, Manifest]:
    """Each gang marker in the map it does not count in (labels for annotations and back): no gang,
    so the matchConditions must not send them."""
    return {
        "task-group-label": make_pod(f"task-group-label-{suffix}", labels={keys.TASK_GROUP_NAME: "driver"}),
        "coscheduling-annotation": make_pod(
            f"coscheduling-annotation-{suffix}", annotations={coscheduling.NAME: "cos"}
        ),
        "koordinator-label": make_pod(f"koordinator-label-{suffix}", labels={koordinator.NAME: "koord"}),
        "pod-group-annotation": make_pod(f"pod-group-annotation-{suffix}", annotations={podgroup.LABEL: "pg"}),
        "volcano-label": make_pod(f"volcano-label-{suffix}", labels={volcano.GROUP_NAME: "vc"}),
    }


def volcanos_own(name: str) -> Manifest:
    """A gang pod for Volcano's own scheduler: Volcano's business, which the webhooks leave as it is."""
    pod = make_pod(name, annotations={volcano.GROUP_NAME: "vc"})
    pod["spec"]["schedulerName"] = "volcano"
    return pod


def refusal(cluster: Cluster, namespace: str, pod: Manifest) -> str:
    """Why the apiserver refused the pod; once, without the client's retries of server errors."""
    try:
        cluster.client.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod, retry=False)
    except ApiError as error:
        return str(error)
    raise AssertionError(f"pod {pod['metadata']['name']} was admitted")


def test_webhooks_gate_and_validate_only_gang_pods(
    cluster: Cluster, namespace: str, other_namespace: str, release: str, tmp_path: Path
) -> None:
    port = free_port()
    helm(
        cluster,
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        *set_flags(
            {
                "replicaCount": "0",
                "webhook.url": f"https://127.0.0.1:{port}",
                "webhook.tls.extraIPs": "{127.0.0.1}",
                # Only the test's namespace: other tests' pods never meet this webhook.
                "webhook.namespaceSelector.matchExpressions[0].key": "kubernetes.io/metadata.name",
                "webhook.namespaceSelector.matchExpressions[0].operator": "In",
                "webhook.namespaceSelector.matchExpressions[0].values": f"{{{other_namespace}}}",
            }
        ),
    )
    tls = secret_data(cluster, namespace, f"{release}-yuniplace-webhook-tls")
    (tmp_path / "tls.crt").write_bytes(tls["tls.crt"])
    (tmp_path / "tls.key").write_bytes(tls["tls.key"])
    webhook = WebhookProcess(tmp_path / "tls.crt", tmp_path / "tls.key", port, tmp_path / "webhook.log")
    try:
        wait_until(webhook.ready, 30)
        cluster.create_pod(
            other_namespace,
            gang_pod(
                "gang-driver",
                "app",
                "driver",
                gated=False,
                task_groups=[{"name": "driver", "minMember": 1, "minResource": {"cpu": "100m", "memory": "128Mi"}}],
            ),
        )
        cluster.create_pod(other_namespace, gang_pod("gang-exec", "app", "driver", gated=False))
        cluster.create_pod(other_namespace, make_pod("plain"))
        placeholder = gang_pod("placeholder-like", "app", "driver", gated=False)
        placeholder["metadata"]["labels"][keys.PLACEHOLDER] = "true"
        cluster.create_pod(other_namespace, placeholder)

        def gates(name: str) -> list[str]:
            pod = cluster.get_pod(other_namespace, name)
            assert pod is not None
            return [gate["name"] for gate in pod["spec"].get("schedulingGates", [])]

        assert gates("gang-driver") == [keys.GATE] and gates("gang-exec") == [keys.GATE]
        assert gates("plain") == [] and gates("placeholder-like") == []

        # Every other dialect's gang pods are sent too, and gated; its markers in the wrong map are not.
        for pod in dialect_pods("up").values():
            cluster.create_pod(other_namespace, pod)
            assert gates(pod["metadata"]["name"]) == [keys.GATE], pod["metadata"]
        for pod in near_misses("up").values():
            cluster.create_pod(other_namespace, pod)
            assert gates(pod["metadata"]["name"]) == [], pod["metadata"]
        # A Volcano gang pod for Volcano's own scheduler is sent, and left alone, however it is written.
        cluster.create_pod(other_namespace, volcanos_own("volcano-scheduler"))
        invalid_for_volcano = volcanos_own("volcano-scheduler-odd-task")
        invalid_for_volcano["metadata"]["annotations"][volcano.TASK] = "PS_0"
        cluster.create_pod(other_namespace, invalid_for_volcano)
        assert gates("volcano-scheduler") == [] and gates("volcano-scheduler-odd-task") == []

        invalid = gang_pod("invalid", "app", "driver", gated=False, task_groups=[{"name": "driver", "minMember": 0}])
        assert "invalid gang annotations" in refusal(cluster, other_namespace, invalid)
        invalid = make_pod("invalid-cos", labels={coscheduling.NAME: "cos", coscheduling.MIN_AVAILABLE: "0"})
        assert coscheduling.MIN_AVAILABLE in refusal(cluster, other_namespace, invalid)
        invalid = make_pod("invalid-volcano", annotations={volcano.GROUP_NAME: "vc", volcano.TASK: "PS_0"})
        assert volcano.TASK in refusal(cluster, other_namespace, invalid)
    finally:
        webhook.stop()

    # failurePolicy Fail with the webhook down: gang pods of every dialect wait for it, which shows the
    # apiserver's matchConditions selected them; every other pod, near misses included, is admitted.
    assert "failed calling webhook" in refusal(cluster, other_namespace, gang_pod("while-down", "app", "driver"))
    for dialect, pod in dialect_pods("down").items():
        assert "failed calling webhook" in refusal(cluster, other_namespace, pod), dialect
    cluster.create_pod(other_namespace, make_pod("plain-while-down"))
    for pod in near_misses("down").values():
        cluster.create_pod(other_namespace, pod)


def test_queues_values_render_the_configmap_its_role_and_the_flags(cluster: Cluster, namespace: str) -> None:
    """A queues.yaml given in values becomes a ConfigMap the controller is pointed at and may read (that
    one only, with a Role in its namespace), and the server accepts all of it; YuniKorn's own ConfigMap
    in its namespace is read where it is; queues without capacity admission are refused."""
    queues_yaml = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
    manifests = render(
        cluster,
        "yp",
        namespace,
        {"queues.placeholdersAfterSeconds": "90"},
        "--set-string",
        f"queues.queuesYaml={queues_yaml}",
    )
    configmap = one(manifests, "ConfigMap")
    assert configmap["metadata"] == {
        "name": "yp-yuniplace-queues",
        "namespace": namespace,
        "labels": configmap["metadata"]["labels"],
    }
    assert configmap["data"] == {"queues.yaml": queues_yaml}
    args = container_args(manifests)
    assert f"--queues-configmap={namespace}/yp-yuniplace-queues" in args and "--create-placeholders-after=90" in args
    queues_role = next(r for r in objects(manifests, "Role") if r["metadata"]["name"] == "yp-yuniplace-queues")
    assert queues_role["metadata"]["namespace"] == namespace
    assert sorted((r["resources"], r["verbs"], r.get("resourceNames")) for r in queues_role["rules"]) == [
        (["configmaps"], ["list", "watch"], ["yp-yuniplace-queues"]),
        (["events"], ["create"], None),
    ]
    admission_role = next(r for r in objects(manifests, "ClusterRole") if ("", "nodes") in rule_verbs(r))
    assert rule_verbs(admission_role) == {**ADMISSION_RULES, ("", "namespaces"): {"list", "watch"}}
    dry_run(cluster, manifests, namespace)  # the server accepts every object (it asserts so)

    yunikorn = render(
        cluster, "yp", namespace, {"queues.configMap": "yunikorn-configs", "queues.configMapNamespace": "yunikorn"}
    )
    assert not objects(yunikorn, "ConfigMap")
    assert "--queues-configmap=yunikorn/yunikorn-configs" in container_args(yunikorn)
    assert "--create-placeholders-after" not in " ".join(container_args(yunikorn))
    role = next(r for r in objects(yunikorn, "Role") if r["metadata"]["name"] == "yp-yuniplace-queues")
    assert role["metadata"]["namespace"] == "yunikorn" and role["rules"][0]["resourceNames"] == ["yunikorn-configs"]

    refused = refused_render(cluster, namespace, "--set", "queues.configMap=q", "--set", "admission=off")
    assert "queues need admission: capacity" in refused
    refused = refused_render(cluster, namespace, "--set", "queues.placeholdersAfterSeconds=soon")
    assert "queues.placeholdersAfterSeconds must be a number of seconds" in refused


def test_native_gangs_left_to_kube_scheduler_have_no_gate(cluster: Cluster, namespace: str) -> None:
    """webhook.holdNativeGangs=false: the webhook never sees pods of Kubernetes' own gangs."""
    hooks = one(render(cluster, "yp", namespace, {"webhook.holdNativeGangs": "false"}), "MutatingWebhookConfiguration")
    assert "native-gate.yuniplace.io" not in [hook["name"] for hook in hooks["webhooks"]]
