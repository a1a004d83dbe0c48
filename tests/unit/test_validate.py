"""`yuniplace validate` on the shipped examples and on the mistakes it exists to catch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yuniplace.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL_EXAMPLES = sorted(str(p) for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".conf"))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["validate", *args])
    return code, capsys.readouterr().out


def test_every_example_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(ALL_EXAMPLES) >= 8
    code, out = run(capsys, "--strict", *ALL_EXAMPLES)
    assert code == 0, out
    assert out.strip().splitlines()[-1].startswith(f"ok: {len(ALL_EXAMPLES)} file(s), 15 gang pod(s), 0 error(s), 0 warning(s)")


def test_spark_memory_overhead_left_out_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "job.conf"
    conf.write_text(
        "--conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name=driver\n"
        "--conf spark.kubernetes.executor.annotation.yunikorn.apache.org/task-group-name=executors\n"
        "--conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups='"
        '[{"name":"driver","minMember":1,"minResource":{"cpu":"1","memory":"2Gi"}},'
        '{"name":"executors","minMember":2,"minResource":{"cpu":"2","memory":"8Gi"}}]'
        "'\n--conf spark.driver.memory=2g\n--conf spark.executor.cores=2\n--conf spark.executor.memory=8g\n"
    )
    code, out = run(capsys, str(conf))
    assert code == 0
    assert "spark-submit driver: warning: requests more than task group driver's minResource (memory 2432Mi > 2Gi)" in out
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
        "        yunikorn.apache.org/task-groups: '[{\"name\": \"workers\", \"minMember\": -1, \"minResource\": {}}]'\n"
        "    spec: {containers: [{name: c}]}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: lost, labels: {applicationId: other}, annotations: "
        "{yunikorn.apache.org/task-group-name: Not_A_Label}}\nspec: {containers: [{name: c}]}\n"
    )
    code, out = run(capsys, str(manifest))
    assert code == 1
    assert f"{manifest}#0 Job/broken pod template: error: task-groups[workers].minMember: -1 must be an integer from 1 to 1000" in out
    assert f'{manifest}#1 Pod/lost: error: yunikorn.apache.org/task-group-name: "Not_A_Label" must be a DNS-1123 label' in out
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
