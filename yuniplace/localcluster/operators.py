"""The operators users submit gangs through, built from their Go modules for the end-to-end tests that
run them out of cluster against the local control plane: the Kubeflow spark-operator and KubeRay's
operator. Each is pinned by a module of its own under controlplane/ and cached like the control plane
(by a hash of its go.mod and go.sum); its CustomResourceDefinitions come from the same module."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from yuniplace.localcluster.build import BuildError, _cached_build, _go, _required_version, module_dir

SPARK_OPERATOR_MODULE = "github.com/kubeflow/spark-operator/v2"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"


@dataclass(frozen=True)
class Operator:
    binary: Path
    version: str
    crds: list[Path]  # the CustomResourceDefinitions it serves, from its module


def _ensure(folder: str, module: str, package: str, binary: str, title: str, minutes: int, quiet: bool) -> Operator:
    """Build `package` of `module`, pinned by controlplane/<folder>/go.mod, into the cache on first use;
    find the module's CustomResourceDefinitions (config/crd/bases)."""
    directory = module_dir() / folder
    version = _required_version((directory / "go.mod").read_text(), module)
    bin_dir = _cached_build(
        folder,
        (f"{folder}/go.mod", f"{folder}/go.sum"),
        [(binary, folder, ["-ldflags", "-s -w", package])],
        announce=None if quiet else f"Building {title} {version} into {{target}} (about {minutes} minutes).",
    )
    listed = subprocess.run(
        [_go(), "list", "-m", "-f", "{{.Dir}}", module],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if listed.returncode != 0 or not listed.stdout.strip():
        raise BuildError(f"cannot locate the module {module}: {listed.stderr.strip()}")
    crds = sorted((Path(listed.stdout.strip()) / "config" / "crd" / "bases").glob("*.yaml"))
    if not crds:
        raise BuildError(f"no CustomResourceDefinitions in {listed.stdout.strip()}/config/crd/bases")
    return Operator(bin_dir / binary, version, crds)


def ensure_spark_operator(*, quiet: bool = False) -> Operator:
    """The Kubeflow spark-operator (about 2 minutes to build on 2 cores)."""
    return _ensure(
        "sparkoperator",
        SPARK_OPERATOR_MODULE,
        f"{SPARK_OPERATOR_MODULE}/cmd/operator",
        "spark-operator",
        "the Kubeflow spark-operator",
        2,
        quiet,
    )


def ensure_kuberay(*, quiet: bool = False) -> Operator:
    """KubeRay's operator (about 2 minutes to build on 2 cores)."""
    return _ensure("kuberay", KUBERAY_MODULE, KUBERAY_MODULE, "kuberay-operator", "KubeRay's operator", 2, quiet)


def main() -> int:
    """`python -m yuniplace.localcluster.operators`: build (or find) every operator and print its path."""
    try:
        for operator in (ensure_spark_operator(), ensure_kuberay()):
            print(operator.binary)
    except BuildError as error:
        print(f"operators: {error}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
