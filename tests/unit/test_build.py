from __future__ import annotations

from pathlib import Path

import pytest

from yuniplace.localcluster import build


def write_modules(root: Path, minor: str, kubernetes: str, api: str) -> Path:
    for folder in ("kwok", "helm", "kubernetes"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "kubernetes" / f"{minor}.mod").write_text(
        "module x\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.6.5\n"
        f"\tk8s.io/kubernetes {kubernetes}\n)\n\nreplace (\n\tk8s.io/api => k8s.io/api {api}\n"
        f"\tk8s.io/client-go => k8s.io/client-go v0.{kubernetes.split('.', 1)[1]}\n)\n"
    )
    (root / "kwok" / "go.mod").write_text("module y\n\nrequire sigs.k8s.io/kwok v0.7.0\n")
    (root / "helm" / "go.mod").write_text("module z\n\nrequire (\n\thelm.sh/helm/v3 v3.19.5 // indirect\n)\n")
    return root


def test_pinned_versions_are_read_from_the_go_modules(tmp_path: Path) -> None:
    versions = build.pinned_versions(write_modules(tmp_path, "1.35", "v1.35.4", "v0.35.4"), "1.35")
    assert versions == {"kubernetes": "v1.35.4", "etcd": "v3.6.5", "helm": "v3.19.5", "kwok": "v0.7.0"}


def test_a_staging_module_of_another_release_is_named(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError, match=r"k8s.io/api v0.35.3"):
        build.pinned_versions(write_modules(tmp_path, "1.35", "v1.35.4", "v0.35.3"), "1.35")


def test_a_pin_file_of_another_minor_version_is_named(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError, match=r"1.36.mod pins k8s.io/kubernetes v1.35.4, not a 1.36 release"):
        build.pinned_versions(write_modules(tmp_path, "1.36", "v1.35.4", "v0.35.4"), "1.36")


def test_an_unsupported_version_names_the_supported_ones(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError, match=r"Kubernetes 1.34 .* one of 1.35, 1.36, 1.37"):
        build.pinned_versions(write_modules(tmp_path, "1.35", "v1.35.4", "v0.35.4"), "1.34")


@pytest.mark.parametrize("minor", build.SUPPORTED_KUBERNETES)
def test_the_repository_pins_each_supported_version(minor: str) -> None:
    versions = build.pinned_versions(build.module_dir(), minor)
    assert versions["kubernetes"].startswith(f"v{minor}.")


def test_missing_go_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError, match="Go toolchain is not on PATH"):
        build.ensure_built()
