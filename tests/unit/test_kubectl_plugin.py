"""`kubectl yuniplace`: the commands as a kubectl plugin, reading kubectl's flags where kubectl users put
them, and the kubeconfig's context and namespace as kubectl does."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from yuniplace import cli
from yuniplace.kube import context_namespace
from yuniplace.tools import explain, status, validate


def kubeconfig(path: Path) -> Path:
    """Two contexts: `dev` (current, namespace team-a) and `prod` (no namespace)."""
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "dev", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
            {"name": "prod", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "dev",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """The arguments each command would have run with."""
    calls: list[argparse.Namespace] = []

    def record(args: argparse.Namespace) -> int:
        calls.append(args)
        return 0

    for module in (status, validate, explain):
        monkeypatch.setattr(module, "run", record)
    return calls


@pytest.mark.parametrize(
    "argv",
    [
        ["--context", "prod", "status", "-A"],
        ["status", "--context", "prod", "-A"],
        ["--context=prod", "-A", "status"],
    ],
)
def test_kubectls_flags_may_come_before_the_command_or_after_it(argv: list[str], ran: list[argparse.Namespace]) -> None:
    assert cli.kubectl_main(argv) == 0
    (args,) = ran
    assert (args.command, args.context, args.all_namespaces, args.kubectl) == ("status", "prod", True, True)


def test_a_namespace_before_the_command_is_the_commands(ran: list[argparse.Namespace]) -> None:
    cli.kubectl_main(["-n", "team-b", "--kubeconfig", "/k", "explain", "driver-0"])
    (args,) = ran
    assert (args.pod, args.namespace, args.kubeconfig) == ("driver-0", "team-b", "/k")


def test_validate_takes_files_as_kubectl_does_and_leaves_cluster_flags_aside(ran: list[argparse.Namespace]) -> None:
    cli.kubectl_main(["--context", "prod", "validate", "-f", "job.yaml", "--filename", "b.yaml", "c.yaml"])
    (args,) = ran
    assert [str(f) for f in args.files] == ["c.yaml"] and [str(f) for f in args.filenames] == ["job.yaml", "b.yaml"]
    assert not hasattr(args, "context")


def test_validate_needs_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["validate"])
    assert exited.value.code == 2
    assert "name at least one FILE (or -f FILE)" in capsys.readouterr().err


def test_validate_reads_a_file_named_with_f(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec: {containers: [{name: c}]}\n")
    assert cli.kubectl_main(["validate", "-f", str(manifest)]) == 0
    assert capsys.readouterr().out.strip() == "ok: 1 file(s), 0 gang pod(s), 0 error(s), 0 warning(s)"


def test_without_a_command_it_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.kubectl_main([]) == 2
    assert "usage: kubectl yuniplace" in capsys.readouterr().err


def test_the_context_names_the_namespace_read_without_n_or_a(tmp_path: Path) -> None:
    path = str(kubeconfig(tmp_path / "config"))
    assert context_namespace(path) == "team-a"
    assert context_namespace(path, "prod") == "default"
    with pytest.raises(Exception, match="no context 'staging'"):
        context_namespace(path, "staging")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, "team-a"),  # kubectl's way: the current context's namespace
        ({"context": "prod"}, "default"),
        ({"namespace": "team-b"}, "team-b"),
        ({"all_namespaces": True}, None),
    ],
)
def test_status_as_a_plugin_reads_the_namespace_kubectl_would(
    tmp_path: Path, flags: dict[str, Any], expected: str | None
) -> None:
    args = argparse.Namespace(
        kubeconfig=str(kubeconfig(tmp_path / "config")),
        context=None,
        namespace=None,
        all_namespaces=False,
        kubectl=True,
    )
    vars(args).update(flags)
    assert status.namespace_of(args) == expected


def test_status_as_yuniplace_reads_every_namespace_unless_told() -> None:
    args = argparse.Namespace(kubeconfig=None, context=None, namespace=None, all_namespaces=False)
    assert status.namespace_of(args) is None
