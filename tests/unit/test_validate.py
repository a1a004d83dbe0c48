"""`yuniplace validate` on the shipped examples and on the mistakes it exists to catch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yuniplace.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL_EXAMPLES = sorted(str(p) for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".conf", ".properties", ".sh"))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["validate", *args])
    return code, capsys.readouterr().out


def test_every_example_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(ALL_EXAMPLES) >= 8
    code, out = run(capsys, "--strict", *ALL_EXAMPLES)
    assert code == 0, out
    assert (
        out.strip()
        .splitlines()[-1]
        .startswith(f"ok: {len(ALL_EXAMPLES)} file(s), 28 gang pod(s), 0 error(s), 0 warning(s)")
    )


def test_spark_memory_overhead_left_out_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "job.conf"
    conf.write_text(
        "--conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name=driver\n"
        "--conf spark.kubernetes.executor.annotation.yunikorn.apache.org/task-group-name=executors\n"
        "--conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups="
        '[{"name":"driver","minMember":1,"minResource":{"cpu":"1","memory":"2Gi"}},'
        '{"name":"executors","minMember":2,"minResource":{"cpu":"2","memory":"8Gi"}}]'
        "\n--conf spark.driver.memory=2g\n--conf spark.executor.cores=2\n--conf spark.executor.memory=8g\n"
    )
    code, out = run(capsys, str(conf))
    assert code == 0
    assert (
        "spark-submit driver: warning: requests more than task group driver's minResource (memory 2432Mi > 2Gi)" in out
    )
    assert "executor: warning: requests more than task group executors's minResource (memory 9011Mi > 8Gi)" in out
    assert run(capsys, "--strict", str(conf))[0] == 1


def test_sparkapplication_memory_is_computed_like_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "app.yaml"
    text = (EXAMPLES / "spark" / "sparkapplication.yaml").read_text().replace('"memory": "4505Mi"', '"memory": "4Gi"')
    manifest.write_text(text)
    code, out = run(capsys, str(manifest))
    assert "SparkApplication/spark-pi executor: warning" in out and "memory 4505Mi > 4Gi" in out


def test_errors_name_the_place_and_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: broken}\nspec:\n  template:\n    metadata:\n"
        "      annotations:\n        yunikorn.apache.org/task-group-name: workers\n"
        '        yunikorn.apache.org/task-groups: \'[{"name": "workers", "minMember": -1, "minResource": {}}]\'\n'
        "    spec: {containers: [{name: c}]}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: lost, labels: {applicationId: other}, annotations: "
        "{yunikorn.apache.org/task-group-name: Not_A_Label}}\nspec: {containers: [{name: c}]}\n"
    )
    code, out = run(capsys, str(manifest))
    assert code == 1
    assert (
        f"{manifest}#0 Job/broken pod template: error: task-groups[workers].minMember: -1 must be an integer from 1 to 1000"
        in out
    )
    assert (
        f'{manifest}#1 Pod/lost: error: yunikorn.apache.org/task-group-name: "Not_A_Label" must be a DNS-1123 label'
        in out
    )
    assert out.strip().endswith("FAIL: 1 file(s), 2 gang pod(s), 2 error(s), 0 warning(s)")


def test_unreadable_input_is_an_error_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: [unclosed\n")
    code, out = run(capsys, str(broken), str(tmp_path / "missing.yaml"))
    assert code == 1
    assert f"{broken}: error: cannot read:" in out and "missing.yaml: error: cannot read:" in out


def test_json_output_for_ci(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "-o", "json", str(EXAMPLES / "batch-job.yaml"))
    report = json.loads(out)
    assert code == 0 and report["gang_pods"] == 1 and report["errors"] == 0 and report["findings"] == []


# The --conf file yuniplace used to ship, with the usage it documented: spark-submit $(grep -v '^#' FILE).
PASTED_CONF = """\
# spark-submit options for gang scheduling with yuniplace
--conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name=spark-driver
--conf spark.kubernetes.executor.annotation.yunikorn.apache.org/task-group-name=spark-executor
--conf spark.kubernetes.driver.annotation.yunikorn.apache.org/schedulingPolicyParameters="placeholderTimeoutInSeconds=120 gangSchedulingStyle=Hard"
--conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups='[{"name":"spark-driver","minMember":1,"minResource":{"cpu":"1","memory":"2432Mi"}},{"name":"spark-executor","minMember":4,"minResource":{"cpu":"2","memory":"4505Mi"}}]'
--conf spark.driver.cores=1
--conf spark.driver.memory=2g
"""
GROUPS = (
    '[{"name": "driver", "minMember": 1, "minResource": {"cpu": "1", "memory": "2432Mi"}}, '
    '{"name": "executors", "minMember": 2, "minResource": {"cpu": "2", "memory": "4505Mi"}}]'
)


def test_a_conf_file_that_pasting_would_split_or_keep_quoted_is_refused_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "spark-submit.conf"
    conf.write_text(PASTED_CONF)
    code, out = run(capsys, str(conf))
    assert code == 1
    assert (
        f"{conf}:4: error: an unquoted $(...) splits this line at its blanks into 3 arguments (`--conf`, "
        '`spark.kubernetes.driver.annotation.yunikorn.apache.org/schedulingPolicyParameters="placeholderTimeoutInSeconds=120`, '
        '`gangSchedulingStyle=Hard"`): spark-submit takes `gangSchedulingStyle=Hard"` for the application jar'
    ) in out
    assert (
        f"{conf}:5: error: the value of spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups is "
        "wrapped in ' quotes that would stay in the pod's annotation; an unquoted $(...) keeps quotes"
    ) in out
    assert "--properties-file" in out
    assert out.strip().endswith("FAIL: 1 file(s), 2 gang pod(s), 2 error(s), 0 warning(s)")


def test_properties_file_is_read_as_java_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Separators `=`, `:` or blanks; `#` and `!` comments; backslash continuation (leading blanks
    of the next line dropped); escapes; values trimmed; quotes and spaces kept as written."""
    properties = tmp_path / "gang.properties"
    properties.write_text(
        "! spark-submit --properties-file gang.properties\n"
        "spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name = driver\n"
        "spark.kubernetes.executor.annotation.yunikorn.apache.org/task-group-name:executors\n"
        "spark.kubernetes.driver.annotation.yunikorn.apache.org/schedulingPolicyParameters "
        "placeholderTimeoutInSeconds\\=60 gangSchedulingStyle=Hard  \n"
        "spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups=\\\n"
        f"    {GROUPS[:60]}\\\n    {GROUPS[60:]}\n"
        "  # a comment, even indented\n"
        "spark.driver.memory=2g\nspark.executor.cores=2\nspark.executor.memory=4g\n"
    )
    code, out = run(capsys, "-o", "json", str(properties))
    report = json.loads(out)
    assert (code, report["gang_pods"], report["findings"]) == (0, 2, []), out

    from yuniplace.tools.sparkconf import read_properties

    conf = read_properties(properties.read_text())
    assert conf.get("spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups") == GROUPS
    assert conf.get("spark.kubernetes.driver.annotation.yunikorn.apache.org/schedulingPolicyParameters") == (
        "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard"
    )
    assert [s.line for s in conf.settings][:4] == [2, 3, 4, 5]
    # What a Spark driver reads from its ConfigMap: escaped colons, a \uXXXX escape, a `!` comment.
    written = read_properties(
        "#Java properties\nspark.master=k8s\\://https\\://127.0.0.1\\:6443\nspark.app.name=pi\\u00e9\n"
    )
    assert [(s.key, s.value) for s in written.settings] == [
        ("spark.master", "k8s://https://127.0.0.1:6443"),
        ("spark.app.name", "pié"),
    ]


def test_properties_file_with_shell_habits_is_refused_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    properties = tmp_path / "gang.properties"
    properties.write_text(
        "--conf spark.kubernetes.executor.annotation.yunikorn.apache.org/task-group-name=executors\n"
        "spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name=driver\n"
        "yunikorn.apache.org/schedulingPolicyParameters=gangSchedulingStyle=Hard\n"
        f"spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups='{GROUPS}'\n"
        'spark.kubernetes.driver.label.team="ml"\n'
    )
    code, out = run(capsys, str(properties))
    assert code == 1
    assert f"{properties}:1: error: `--conf` is a command-line option: a properties file holds `key=value` lines" in out
    assert f"{properties}:3: error: spark-submit ignores `yunikorn.apache.org/schedulingPolicyParameters`" in out
    assert (
        f"{properties}:4: error: the value of spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups "
        "is wrapped in ' quotes that would stay in the pod's annotation; a properties file takes a value as "
        "written, quotes included"
    ) in out
    assert f'{properties}:5: error: the value of spark.kubernetes.driver.label.team is wrapped in " quotes' in out
    assert f"{properties}:2:" not in out


def test_spark_defaults_conf_is_a_properties_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text(
        "spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name   driver\n"
        f"spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups   {GROUPS}\n"
        "spark.driver.memory   3g\n"
    )
    code, out = run(capsys, str(defaults))
    assert code == 0 and "memory 3456Mi > 2432Mi" in out, out


ESCAPED_GROUPS = GROUPS.replace('"', '\\"')  # for a double-quoted shell word


def test_script_is_read_with_the_shells_quoting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "submit.sh"
    script.write_text(
        "#!/bin/sh\n"
        'exec "${SPARK_HOME}/bin/spark-submit" --master "$1" \\\n'
        "  --conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name=driver \\\n"
        "  -c spark.kubernetes.executor.annotation.yunikorn.apache.org/task-group-name=executors \\\n"
        "  --conf 'spark.kubernetes.driver.annotation.yunikorn.apache.org/schedulingPolicyParameters="
        "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard' \\\n"
        f'  --conf "spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups={ESCAPED_GROUPS}" \\\n'
        "  --conf=spark.driver.memory=2g --conf spark.executor.cores=2 --conf spark.executor.memory=4g \\\n"
        "  local:///opt/app.jar  # the application\n"
    )
    code, out = run(capsys, "--strict", str(script))
    assert code == 0 and "2 gang pod(s), 0 error(s), 0 warning(s)" in out, out

    script.write_text(
        "spark-submit \\\n"
        "  --conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name=driver \\\n"
        f"  --conf \"spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups='{GROUPS}'\" \\\n"
        "  --conf spark.driver.memory \\\n"
        "  app.jar\n"
    )
    code, out = run(capsys, str(script))
    assert code == 1
    assert (
        f"{script}:3: error: the value of spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups is "
        "wrapped in ' quotes that would stay in the pod's annotation; the shell removes one level of quotes"
    ) in out
    assert (
        f"{script}:4: error: `spark.driver.memory` is not key=value: spark-submit stops with \"Spark config without '='\""
        in out
    )

    script.write_text("spark-submit \\\n  --conf 'spark.driver.memory=2g\n")
    code, out = run(capsys, str(script))
    assert code == 1 and f"{script}:2: error: the ' opened on this line is never closed" in out


QUEUE_DATA = Path(__file__).parent / "data"


def test_a_yunikorn_queues_yaml_is_recognised_and_counted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, str(QUEUE_DATA / "yunikorn-static-queues-sample.yaml"))
    assert (code, out) == (0, "ok: 1 file(s), 0 gang pod(s), 0 error(s), 0 warning(s), 3 queue(s)\n")


def test_a_malformed_queues_yaml_fails_with_each_problem_by_queue_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text(
        "partitions:\n- name: default\n  queues:\n  - name: root\n    submitacl: '*'\n    queues:\n"
        "    - {name: a, resources: {guaranteed: {vcore: 4}, max: {vcore: 2, memory: 1.5G}}}\n"
        "    - {name: A}\n"
    )
    code, out = run(capsys, str(queues))
    assert code == 1
    assert out.splitlines() == [
        f'{queues}: error: queues.yaml: root.a: resources.max.memory: "1.5G" is not a whole number: YuniKorn takes '
        'no fractions or exponents (write "1536Mi")',
        f'{queues}: error: queues.yaml: root: queues[1].name: "A" is the name of another queue under root '
        "(queues[0]; names ignore case)",
        f'{queues}: error: queues.yaml: root.a: resources.guaranteed.vcore: "4" is above resources.max.vcore (2)',
        "FAIL: 1 file(s), 0 gang pod(s), 3 error(s), 0 warning(s), 0 queue(s)",
    ]


def test_a_configmap_and_volcano_queues_are_checked_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "queues.yaml"
    manifests.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yunikorn-configs}\ndata:\n  queues.yaml: |\n"
        "    partitions: [{queues: [{name: root, submitacl: '*', queues: [{name: ml}, {name: web}]}]}]\n"
        "---\napiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: ml}, spec: {weight: 2}}\n"
        "- apiVersion: scheduling.volcano.sh/v1beta1\n  kind: Queue\n  metadata: {name: batch}\n"
        "  spec: {parent: team, capability: {cpu: lots}}\n"
    )
    code, out = run(capsys, str(manifests))
    assert code == 1
    assert out.splitlines() == [
        f'{manifests}: error: Volcano Queue batch: spec.capability.cpu: "lots" is not a quantity (examples: "4", '
        '"500m", "8Gi")',
        f'{manifests}: error: Volcano Queue batch: spec.parent: "team" is not a Volcano Queue',
        "FAIL: 1 file(s), 0 gang pod(s), 2 error(s), 0 warning(s), 2 queue(s)",
    ]
    manifests.write_text(manifests.read_text().replace("spec: {parent: team, capability: {cpu: lots}}", "spec: {}"))
    code, out = run(capsys, str(manifests))
    assert code == 1 and out.splitlines() == [
        f'{manifests}: error: Volcano Queue ml: root.ml: "ml" is also configured in ConfigMap yunikorn-configs '
        "queues.yaml: each queue is configured in one place",
        f"{manifests}: warning: Volcano Queue ml: spec.weight: 2 has no effect: yuniplace does not divide room "
        "between queues by weight",
        "FAIL: 1 file(s), 0 gang pod(s), 1 error(s), 1 warning(s), 4 queue(s)",
    ]


def test_queue_warnings_are_shown_and_fail_only_with_strict(capsys: pytest.CaptureFixture[str]) -> None:
    sample = str(QUEUE_DATA / "yunikorn-queue-config-sample.yaml")
    code, out = run(capsys, sample)
    assert code == 0
    assert out.splitlines() == [
        f'{sample}: warning: queues.yaml: root: submitacl: "" lets no one in, nor does any queue\'s submitacl or '
        "adminacl: every application is refused (YuniKorn's rule); write submitacl: '*' on root to let everyone in",
        "ok: 1 file(s), 0 gang pod(s), 0 error(s), 1 warning(s), 2 queue(s)",
    ]
    assert run(capsys, "--strict", sample)[0] == 1
    code, out = run(capsys, "-o", "json", sample)
    report = json.loads(out)
    assert (report["queues"], report["warnings"], report["findings"][0]["level"]) == (2, 1, "warning")


def test_ai_scheduler_pools_are_checked_and_merged_with_the_other_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "pools.yaml"
    manifests.write_text(
        "apiVersion: resource.aibee.cn/v1alpha1\nkind: Pool\nmetadata: {name: demo}\n"
        "spec: {nodeSelector: {matchLabels: {pool: demo}}, disableSharing: maybe}\n"
    )
    code, out = run(capsys, str(manifests))
    assert code == 1 and 'ai-scheduler Pool demo: spec.disableSharing: "maybe" must be true or false' in out, out
    manifests.write_text(
        manifests.read_text().replace("maybe", "true")
        + "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: demo}\n"
    )
    code, out = run(capsys, str(manifests))
    assert code == 1 and "root.demo" in out and "configured" in out, out


# -- KubeRay's objects -----------------------------------------------------------------------------


def test_a_ray_cluster_is_read_as_kuberays_operator_writes_its_pods(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, str(EXAMPLES / "kuberay" / "raycluster.yaml"))
    assert code == 0, out
    assert (
        "RayCluster/raycluster-gang head: gang: 4 pods, all or nothing: headgroup 1 × (cpu 1, memory 2Gi), "
        "small 2 × (cpu 1, memory 1Gi), large 1 × (cpu 2, memory 4Gi)"
    ) in out
    assert out.strip().splitlines()[-1] == "ok: 1 file(s), 3 gang pod(s), 0 error(s), 0 warning(s)"


def test_what_keeps_a_ray_gang_from_starting_whole_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Workers smaller than the init container KubeRay adds to them, a RayJob without YuniKorn's app id,
    and a RayCluster without the gang label."""
    job = tmp_path / "rayjob.yaml"
    job.write_text(
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: tiny, labels: {ray.io/gang-scheduling-enabled: 'true'}}\n"
        "spec:\n  entrypoint: x\n  rayClusterSpec:\n    headGroupSpec:\n      template: {spec: {containers: "
        "[{name: h, resources: {requests: {cpu: '1', memory: 1Gi}}}]}}\n    workerGroupSpecs:\n"
        "      - {groupName: tiny, minReplicas: 2, replicas: 2, template: {spec: {containers: "
        "[{name: w, resources: {limits: {cpu: 100m, memory: 128Mi}}}]}}}\n"
        "---\napiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: plain}\nspec:\n  headGroupSpec:\n"
        "    template: {spec: {containers: [{name: h}]}}\n"
    )
    code, out = run(capsys, "--strict", str(job))
    assert code == 1, out
    assert (
        "RayJob/tiny head: gang: 4 pods, all or nothing: headgroup 1 × (cpu 1, memory 1Gi), tiny 2 × (cpu 100m, "
        "memory 128Mi), submittergroup 1 × (cpu 500m, memory 200Mi)"
    ) in out
    assert "RayJob/tiny head: warning: without the label yunikorn.apache.org/app-id, the submitter" in out
    assert (
        "RayJob/tiny worker group tiny: warning: requests more than task group tiny's minResource (cpu 200m > 100m, "
        "memory 256Mi > 128Mi)"
    ) in out
    assert (
        "RayCluster/plain head: warning: without the label ray.io/gang-scheduling-enabled, KubeRay writes no gang for "
        "it: its pods are scheduled one by one"
    ) in out


def test_a_native_gang_is_read_as_yuniplace_will_hold_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, str(EXAMPLES / "native" / "training-gang.yaml"))
    assert code == 0, out
    assert (
        "Job/training pod template: gang: 4 pods, all or nothing: 4 × (cpu 2, memory 4Gi), Kubernetes' own "
        "(PodGroup training): yuniplace holds it for queue root.training (timeout 300s, Hard), then "
        "kube-scheduler's gang plugin binds it"
    ) in out
    assert out.strip().splitlines()[-1] == "ok: 1 file(s), 1 gang pod(s), 0 error(s), 0 warning(s)"


def test_a_native_gangs_bad_policy_or_missing_group_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (EXAMPLES / "native" / "training-gang.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("placeholderTimeoutInSeconds=300", "placeholderTimeoutInSeconds=soon"))
    code, out = run(capsys, str(bad))
    assert code == 1 and "error: PodGroup training:" in out and "placeholderTimeoutInSeconds" in out, out
    alone = tmp_path / "alone.yaml"
    alone.write_text(text.split("---", 1)[1])
    code, out = run(capsys, str(alone))
    assert code == 0 and "warning: names pod group training of the Workload API, which these files do not" in out


def test_a_malformed_workload_api_object_is_an_error_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: training\nspec: [1]\n")
    code, out = run(capsys, str(bad))
    assert code == 1 and "a Workload API object whose metadata or spec is no map" in out, out


GPU_GANG = """
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  template:
    metadata:
      labels: {yunikorn.apache.org/app-id: train}
      annotations:
        yunikorn.apache.org/task-group-name: workers
        yunikorn.apache.org/task-groups: '[{"name": "workers", "minMember": 2, "minResource": {"cpu": "1"}}]'
    spec:
      resourceClaims: [{name: gpus, resourceClaimTemplateName: TEMPLATE}]
      containers:
        - name: main
          resources: {requests: {cpu: "1"}, claims: [{name: gpus}]}
"""


def dra_objects(request: str, selector: str = 'device.driver == "gpu.example.com"') -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu.example.com}}
spec:
  selectors: [{{cel: {{expression: '{selector}'}}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: two}}
spec:
  spec:
    devices:
      requests: [{request}]
"""


@pytest.mark.parametrize(
    ("template", "objects", "level", "says"),
    [
        ("two", dra_objects("{name: gpus, exactly: {deviceClassName: gpu.example.com, count: 2}}"), None, None),
        (
            "missing",
            dra_objects("{name: gpus, exactly: {deviceClassName: gpu.example.com}}"),
            "warning",
            "ResourceClaimTemplate missing, which these files do not describe",
        ),
        (
            "two",
            dra_objects("{name: gpus, exactly: {deviceClassName: tpu.example.com}}"),
            "warning",
            "DeviceClass tpu.example.com, which these files do not describe",
        ),
        (
            "two",
            dra_objects("{name: gpus, firstAvailable: [{name: a, deviceClassName: gpu.example.com}]}"),
            "error",
            "firstAvailable",
        ),
        (
            "two",
            dra_objects("{name: gpus, exactly: {deviceClassName: gpu.example.com}}", 'ip("10.0.0.1").family() == 4'),
            "error",
            "yuniplace cannot evaluate the selector",
        ),
    ],
    ids=["counted", "template missing", "class missing", "alternatives", "selector"],
)
def test_a_gang_members_dra_claims_are_checked_as_admission_will_count_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    template: str,
    objects: str,
    level: str | None,
    says: str | None,
) -> None:
    manifest = tmp_path / "train.yaml"
    manifest.write_text(GPU_GANG.replace("TEMPLATE", template) + "---" + objects)
    code, out = run(capsys, "--strict", str(manifest))
    if level is None:
        assert code == 0 and "0 error(s), 0 warning(s)" in out, out
    else:
        assert code == 1 and f"Job/train pod template: {level}: " in out and str(says) in out, out
