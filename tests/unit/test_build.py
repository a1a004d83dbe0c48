from __future__ import annotations

from pathlib import Path

import pytest

from yuniplace.localcluster import build


def write_modules(root: Path, kubernetes: str, api: str) -> Path:
    (root / "kwok").mkdir(parents=True)
    (root / "go.mod").write_text(
        "module x\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.6.5\n\thelm.sh/helm/v3 v3.19.5\n"
        f"\tk8s.io/kubernetes {kubernetes}\n)\n\nreplace (\n\tk8s.io/api => k8s.io/api {api}\n"
        f"\tk8s.io/client-go => k8s.io/client-go v0.{kubernetes.split('.', 1)[1]}\n)\n"
    )
    (root / "kwok" / "go.mod").write_text("module y\n\nrequire sigs.k8s.io/kwok v0.7.0\n")
    return root


def test_pinned_versions_are_read_from_the_go_modules(tmp_path: Path) -> None:
    versions = build.pinned_versions(write_modules(tmp_path, "v1.34.10", "v0.34.10"))
    assert versions == {"kubernetes": "v1.34.10", "etcd": "v3.6.5", "helm": "v3.19.5", "kwok": "v0.7.0"}


def test_a_staging_module_of_another_release_is_named(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError, match=r"k8s.io/api v0.34.9"):
        build.pinned_versions(write_modules(tmp_path, "v1.34.10", "v0.34.9"))


def test_the_repository_pins_are_consistent() -> None:
    versions = build.pinned_versions(build.module_dir())
    assert versions["kubernetes"].startswith("v1.")


def test_missing_go_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError, match="Go toolchain is not on PATH"):
        build.ensure_built()
