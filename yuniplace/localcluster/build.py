"""Builds the local control plane's binaries from the Go modules in controlplane/ into a cache.

One control plane per supported Kubernetes minor version: controlplane/kubernetes/<minor>.mod (with its
.sum) pins that release, its staging modules and the etcd it ships with, and is handed to `go build
-modfile`, so every version links the same main.go. kwok and helm have modules of their own
(controlplane/kwok, controlplane/helm): they are clients, the same for every version. The cache key is
a hash of those module files, the Go version and the build flags, so a second build of the same pins is
a no-op and a version change builds into a fresh directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from yuniplace.kube import versions

KUBERNETES_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
# Each supported Kubernetes release has controlplane/kubernetes/<minor>.mod; the newest is the default.
SUPPORTED_KUBERNETES = versions.SUPPORTED
DEFAULT_KUBERNETES = SUPPORTED_KUBERNETES[-1]
PROGRESS_INTERVAL_S = 30.0
# The oldest Go that builds every module of controlplane/: the highest `go` line among them (Karpenter's;
# the control plane itself asks 1.26.0). A unit test holds it to the go.mod files, and the docs say it.
GO_NEEDED = "1.26.8"


class BuildError(RuntimeError):
    """The control plane could not be built; the message says why and what to do."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the built tools; `bin_dir` holds one executable (or symlink) per component name."""

    bin_dir: Path
    versions: dict[str, str]

    def path(self, component: str) -> Path:
        return self.bin_dir / component


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def module_dir() -> Path:
    """controlplane/ of the source checkout (YUNIPLACE_CONTROLPLANE_DIR overrides it)."""
    override = os.environ.get("YUNIPLACE_CONTROLPLANE_DIR")
    directory = Path(override) if override else repo_root() / "controlplane"
    if not (directory / "go.mod").is_file():
        raise BuildError(
            f"{directory}/go.mod not found: the local control plane is built from a source checkout of "
            "yuniplace (set YUNIPLACE_CONTROLPLANE_DIR to its controlplane/ folder)"
        )
    return directory


def cache_root() -> Path:
    override = os.environ.get("YUNIPLACE_CACHE")
    if override:
        return Path(override)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "yuniplace"


def _required_version(go_mod: str, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.MULTILINE)
    if not match:
        raise BuildError(f"controlplane go.mod does not require {module}")
    return match.group(1)


def modfile(directory: Path, kubernetes: str) -> Path:
    """controlplane/kubernetes/<minor>.mod: the pins of one supported Kubernetes minor version."""
    if kubernetes not in SUPPORTED_KUBERNETES:
        raise BuildError(
            f"Kubernetes {kubernetes} is not one yuniplace's local control plane builds; "
            f"choose one of {', '.join(SUPPORTED_KUBERNETES)}"
        )
    return directory / "kubernetes" / f"{kubernetes}.mod"


def pinned_versions(directory: Path, kubernetes: str = DEFAULT_KUBERNETES) -> dict[str, str]:
    """The versions the go.mod files pin for one Kubernetes minor version, checked for the mistakes
    `go build` reports badly: a staging module replaced with a release other than the Kubernetes one,
    or a file that pins another minor version than its name says."""
    main_mod = modfile(directory, kubernetes).read_text()
    kwok_mod = (directory / "kwok" / "go.mod").read_text()
    helm_mod = (directory / "helm" / "go.mod").read_text()
    release = _required_version(main_mod, "k8s.io/kubernetes")
    if not release.startswith(f"v{kubernetes}."):
        raise BuildError(
            f"controlplane/kubernetes/{kubernetes}.mod pins k8s.io/kubernetes {release}, not a {kubernetes} release"
        )
    staging = "v0." + release.split(".", 1)[1]
    stale = sorted(
        f"{module} {version}"
        for module, version in re.findall(r"^\s*(k8s\.io/[\w-]+) => k8s\.io/[\w-]+ (v\S+)", main_mod, re.MULTILINE)
        if version != staging
    )
    if stale:
        raise BuildError(
            f"controlplane/kubernetes/{kubernetes}.mod pins k8s.io/kubernetes {release}, so every staging module "
            f"must be replaced with {staging}; these are not: {', '.join(stale)}"
        )
    return {
        "kubernetes": release,
        "etcd": _required_version(main_mod, "go.etcd.io/etcd/server/v3"),
        "helm": _required_version(helm_mod, "helm.sh/helm/v3"),
        "kwok": _required_version(kwok_mod, "sigs.k8s.io/kwok"),
    }


NO_DEBUG_INFO = ("-gcflags=all=-dwarf=false",)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain is not on PATH; the local control plane is built from Go modules "
            f"(install Go {GO_NEEDED} or newer: https://go.dev/doc/install)"
        )
    return go


def _kubernetes_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(flags)


def _helm_ldflags(versions: dict[str, str]) -> str:
    """Helm's own version, and the Kubernetes version it assumes when no cluster is asked (helm
    template, helm lint): the pinned one, as helm's release build stamps it, instead of 1.20."""
    major, minor = versions["kubernetes"].lstrip("v").split(".")[:2]
    flags = ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={versions['helm']}"]
    for package in ("helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"):
        flags += [f"-X {package}.k8sVersionMajor={major}", f"-X {package}.k8sVersionMinor={minor}"]
    return " ".join(flags)


def _build_plan(versions: dict[str, str], kubernetes: str) -> list[tuple[str, str, list[str]]]:
    """(output name, module subdirectory, go build arguments) for each binary."""
    pins = f"-modfile=kubernetes/{kubernetes}.mod"
    return [
        ("controlplane", ".", [pins, "-ldflags", _kubernetes_ldflags(versions["kubernetes"]), "."]),
        ("helm", "helm", ["-ldflags", _helm_ldflags(versions), "helm.sh/helm/v3/cmd/helm"]),
        ("kwok", "kwok", ["-ldflags", "-s -w", "sigs.k8s.io/kwok/cmd/kwok"]),
    ]


def _cache_key(directory: Path, files: tuple[str, ...], go_version: str, plan: list[tuple[str, str, list[str]]]) -> str:
    digest = hashlib.sha256(go_version.encode())
    for relative in files:
        digest.update(relative.encode())
        digest.update((directory / relative).read_bytes())
    digest.update(repr(plan).encode())
    return digest.hexdigest()[:16]


def _run_with_progress(command: list[str], cwd: Path, label: str, log: Path) -> None:
    """Run one `go build`, saying every PROGRESS_INTERVAL_S that it is still working: a cold build of
    Kubernetes takes minutes, and silence reads as a hang."""
    started = time.monotonic()
    done = threading.Event()

    def report() -> None:
        while not done.wait(PROGRESS_INTERVAL_S):
            print(f"  ... still building {label} ({time.monotonic() - started:.0f}s)", file=sys.stderr, flush=True)

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    env = {**os.environ, "CGO_ENABLED": "0"}
    with log.open("ab") as output:
        result = subprocess.run(command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT, check=False)
    done.set()
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise BuildError(f"building {label} failed (exit {result.returncode}); last lines of {log}:\n{tail}")
    print(f"  built {label} in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)


def _cached_build(
    kind: str,
    files: tuple[str, ...],
    plan: list[tuple[str, str, list[str]]],
    *,
    announce: str | None,
    links: dict[str, str] | None = None,
) -> Path:
    """Build `plan` (output name, module subdirectory, go build arguments) into the cache once per
    distinct inputs; return the bin directory. Concurrent callers wait on one lock, not race."""
    directory = module_dir()
    go = _go()
    go_version = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()
    target = cache_root() / kind / _cache_key(directory, files, go_version, plan)
    if (target / "complete").exists():
        return target / "bin"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "complete").exists():
            return target / "bin"
        if announce:
            print(announce.format(target=target), file=sys.stderr, flush=True)
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
        try:
            (staging / "bin").mkdir()
            log = staging / "build.log"
            for output, subdirectory, arguments in plan:
                # No DWARF from the compiler either (the linker drops it anyway, -w): a tenth less
                # compile time, which on 2 cores is a minute of each control plane.
                command = [go, "build", "-trimpath", *NO_DEBUG_INFO, "-o", str(staging / "bin" / output), *arguments]
                _run_with_progress(command, directory / subdirectory, output, log)
            for name, points_to in (links or {}).items():
                (staging / "bin" / name).symlink_to(points_to)
            (staging / "complete").write_text(go_version + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target / "bin"


def ensure_built(kubernetes: str = DEFAULT_KUBERNETES, *, quiet: bool = False) -> Binaries:
    """Return the cached binaries of one Kubernetes minor version (SUPPORTED_KUBERNETES), building
    them first when missing."""
    versions = pinned_versions(module_dir(), kubernetes)
    pinned = ", ".join(f"{name} {version}" for name, version in versions.items())
    bin_dir = _cached_build(
        "controlplane",
        (
            "main.go",
            f"kubernetes/{kubernetes}.mod",
            f"kubernetes/{kubernetes}.sum",
            "kwok/go.mod",
            "kwok/go.sum",
            "helm/go.mod",
            "helm/go.sum",
        ),
        _build_plan(versions, kubernetes),
        announce=None
        if quiet
        else (
            f"Building the local control plane ({pinned}) into {{target}}.\n"
            "The first build compiles Kubernetes from source: 8 to 10 minutes on 2 cores, helm and kwok 4 more. "
            "Later builds reuse it."
        ),
        links=dict.fromkeys(KUBERNETES_COMPONENTS, "controlplane"),
    )
    return Binaries(bin_dir, versions)


YUNIKORN_SHIM = "github.com/apache/yunikorn-k8shim"


def ensure_yunikorn(*, quiet: bool = False) -> Path:
    """Apache YuniKorn's scheduler, from its Go modules (controlplane/yunikorn/go.mod), for benchmarks
    that compare with it. Built on first use only: about 3 minutes more on 2 cores."""
    version = _required_version((module_dir() / "yunikorn" / "go.mod").read_text(), YUNIKORN_SHIM)
    bin_dir = _cached_build(
        "yunikorn",
        ("yunikorn/go.mod", "yunikorn/go.sum", "yunikorn/main.go"),
        [("yunikorn-scheduler", "yunikorn", ["-ldflags", "-s -w", "."])],
        announce=None
        if quiet
        else f"Building Apache YuniKorn's scheduler {version} into {{target}} (about 3 minutes).",
    )
    return bin_dir / "yunikorn-scheduler"


@dataclass(frozen=True)
class Operator:
    binary: Path
    version: str
    crds: list[Path]  # the CustomResourceDefinitions it serves, from its module
    root: Path  # the module's folder in the module cache: its other manifests (webhooks, say)


def module_root(folder: str, module: str) -> Path:
    """The folder of `module`, as controlplane/<folder>/go.mod pins it, in Go's module cache (once built)."""
    listed = subprocess.run(
        [_go(), "list", "-m", "-f", "{{.Dir}}", module],
        cwd=module_dir() / folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if listed.returncode != 0 or not listed.stdout.strip():
        raise BuildError(f"cannot locate the module {module}: {listed.stderr.strip()}")
    return Path(listed.stdout.strip())


def ensure_operator(
    folder: str,
    module: str,
    package: str,
    binary: str,
    title: str,
    minutes: int,
    quiet: bool,
    crd_folders: tuple[str, ...] = ("config/crd/bases",),
) -> Operator:
    """Build `package` of `module`, pinned by controlplane/<folder>/go.mod, into the cache on first use;
    find the module's CustomResourceDefinitions (in `crd_folders` of the module)."""
    directory = module_dir() / folder
    version = _required_version((directory / "go.mod").read_text(), module)
    bin_dir = _cached_build(
        folder,
        (f"{folder}/go.mod", f"{folder}/go.sum"),
        [(binary, folder, ["-ldflags", "-s -w", package])],
        announce=None if quiet else f"Building {title} {version} into {{target}} (about {minutes} minutes).",
    )
    root = module_root(folder, module)
    crds = [crd for folder in crd_folders for crd in sorted((root / folder).glob("*.yaml"))]
    if not crds:
        raise BuildError(f"no CustomResourceDefinitions in {', '.join(str(root / f) for f in crd_folders)}")
    return Operator(bin_dir / binary, version, crds, root)
