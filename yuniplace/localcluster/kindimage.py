"""Builds everything a kind cluster of yuniplace needs, with no registry: kind itself, the node image
(systemd, containerd and the kubelet on Debian, with every image kubeadm runs preloaded), yuniplace's
own image from its Dockerfile, and the image of Kubernetes' DRA test driver the kind tests run.

Sources: the Go modules of controlplane/ and controlplane/kind/ (the same Kubernetes pins as the
local control plane, plus kind, containerd, CoreDNS and a pause container), Debian packages through debootstrap
(the node's, kube-proxy's and Python's root filesystems) and PyPI (yuniplace's dependencies). Go
binaries are cached like the control plane's, by a hash of their pins; every image is tagged or
labelled with a hash of its inputs, so a second build of the same pins does nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from yuniplace.localcluster.build import (
    BuildError,
    _cached_build,
    _kubernetes_ldflags,
    _required_version,
    cache_root,
    ensure_built,
    module_dir,
    pinned_versions,
    repo_root,
)
from yuniplace.localcluster.cluster import wait_until
from yuniplace.localcluster.kinddocker import (
    docker,
    ensure_docker,
    ensure_package,
    image_label,
)

# Bumped when a recipe below changes in a way the hashed inputs do not show.
RECIPE = "1"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("YUNIPLACE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
INPUTS_LABEL = "io.yuniplace.inputs"
YUNIPLACE_IMAGE = "yuniplace:dev"
# Tags kubeadm v1.37 and the chart expect (kubeadm's constants: pause 3.10.2, etcd 3.7.0-0, CoreDNS
# v1.14.6); the chart's placeholders default to pause 3.10. The etcd image holds the control plane's
# etcd (go.etcd.io/etcd/server/v3 v3.7.0 in controlplane/kubernetes/1.37.mod).
PAUSE_TAGS = ("registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10")
ETCD_TAG = "registry.k8s.io/etcd:3.7.0-0"
COREDNS_TAG = "registry.k8s.io/coredns/coredns:v1.14.6"

# Root filesystems, by name: Debian packages beyond debootstrap's minbase.
ROOTFS_PACKAGES = {
    # systemd as PID 1, runc, the CNI plugins kind-netd configures, and what kubeadm, the kubelet and
    # kind run on a node (mount, nsenter, iptables, pgrep, ...). Not Debian's containerd: bookworm's
    # 1.6 neither injects CDI devices (DRA) nor is one Kubernetes 1.37 supports; containerd is built.
    "node": (
        "systemd",
        "systemd-sysv",
        "dbus",
        "runc",
        "containernetworking-plugins",
        "iptables",
        "iproute2",
        "conntrack",
        "ethtool",
        "socat",
        "util-linux",
        "mount",
        "procps",
        "kmod",
        "ca-certificates",
        "libseccomp2",
    ),
    # kube-proxy programs iptables.
    "agents": ("iptables", "conntrack"),
    # The base yuniplace's Dockerfile builds on when no registry offers python:3.11-slim.
    "python": ("python3", "python3-venv", "ca-certificates"),
}
# containerd's binaries (controlplane/kind/containerd) and their build tags: without the snapshotters
# the node does not use (btrfs needs cgo) or OpenTelemetry, and the shim without the gRPC server it does
# not serve, as upstream builds it.
CONTAINERD_BUILDS = {
    "containerd": "no_btrfs no_devmapper no_zfs no_tracing urfave_cli_no_docs",
    "ctr": "no_btrfs no_devmapper no_zfs no_tracing urfave_cli_no_docs",
    "containerd-shim-runc-v2": "no_grpc urfave_cli_no_docs",
}
DRA_DRIVER_PACKAGE = "k8s.io/kubernetes/test/e2e/dra/test-driver"
# Trimmed from every root filesystem: nothing at run time reads them.
ROOTFS_TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info")


@dataclass(frozen=True)
class KindImages:
    """What a kind cluster of yuniplace runs: the node image, yuniplace's image, and the tools."""

    node_image: str
    yuniplace_image: str
    dra_driver_image: str
    kind: Path
    bin_dir: Path  # kind, kubectl, helm and the docker wrapper, for PATH

    def env(self) -> dict[str, str]:
        """The environment kind, kubectl and helm are run in: bin_dir first on PATH."""
        return {**os.environ, "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def kind_dir() -> Path:
    return module_dir() / "kind"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _digest(*parts: str | bytes | Path) -> str:
    digest = hashlib.sha256(RECIPE.encode())
    for part in parts:
        if isinstance(part, Path):
            for path in sorted(p for p in ([part] if part.is_file() else part.rglob("*")) if p.is_file()):
                digest.update(str(path.relative_to(part.parent if part.is_file() else part)).encode())
                digest.update(path.read_bytes())
        else:
            digest.update(part.encode() if isinstance(part, str) else part)
    return digest.hexdigest()[:16]


def go_binaries(*, quiet: bool = False) -> Path:
    """kindnode (kubelet, kubeadm, kube-proxy, kubectl, kind-netd), kind, pause, CoreDNS, containerd
    (with ctr and its runc shim) and Kubernetes' DRA test driver, built once per pin hash into
    ~/.cache/yuniplace/kind/<hash>/bin."""
    versions = pinned_versions(module_dir())
    coredns = _required_version((kind_dir() / "coredns" / "go.mod").read_text(), "github.com/coredns/coredns")
    kind = _required_version((kind_dir() / "go.mod").read_text(), "sigs.k8s.io/kind")
    containerd = _required_version(
        (kind_dir() / "containerd" / "go.mod").read_text(), "github.com/containerd/containerd/v2"
    )
    containerd_ldflags = f"-s -w -X github.com/containerd/containerd/v2/version.Version={containerd}"
    return _cached_build(
        "kind",
        (
            "kind/go.mod",
            "kind/go.sum",
            "kind/main.go",
            "kind/netd/netd.go",
            "kind/pause/main.go",
            "kind/coredns/go.mod",
            "kind/coredns/go.sum",
            "kind/containerd/go.mod",
            "kind/containerd/go.sum",
        ),
        [
            ("kindnode", "kind", ["-ldflags", _kubernetes_ldflags(versions["kubernetes"]), "."]),
            # After kindnode, whose Kubernetes packages it shares: a link and little more.
            ("dra-test-driver", "kind", ["-ldflags", _kubernetes_ldflags(versions["kubernetes"]), DRA_DRIVER_PACKAGE]),
            ("kind", "kind", ["-ldflags", "-s -w", "sigs.k8s.io/kind"]),
            ("pause", "kind", ["-ldflags", "-s -w", "./pause"]),
            (
                "coredns",
                "kind/coredns",
                [
                    "-ldflags",
                    f"-s -w -X github.com/coredns/coredns/coremain.GitCommit={coredns}",
                    "github.com/coredns/coredns",
                ],
            ),
            *(
                (
                    binary,
                    "kind/containerd",
                    [
                        "-tags",
                        tags,
                        "-ldflags",
                        containerd_ldflags,
                        f"github.com/containerd/containerd/v2/cmd/{binary}",
                    ],
                )
                for binary, tags in CONTAINERD_BUILDS.items()
            ),
        ],
        announce=None
        if quiet
        else (
            f"Building kind {kind}, the kubelet, kubeadm, kube-proxy and DRA test driver {versions['kubernetes']}, "
            f"CoreDNS {coredns} and containerd {containerd} into {{target}} (about 6 minutes on 2 cores once "
            "the control plane is built)."
        ),
        links=dict.fromkeys(("kubelet", "kubeadm", "kube-proxy", "kind-netd"), "kindnode"),
    )


def _rootfs_image(name: str) -> str:
    """A Debian root filesystem as a Docker image, from debootstrap (about a minute each)."""
    packages = ROOTFS_PACKAGES[name]
    tag = f"yuniplace.local/debian-{name}:{_digest(DEBIAN_SUITE, DEBIAN_MIRROR, ','.join(packages), *ROOTFS_TRIM)}"
    if docker("image", "inspect", tag, check=False).returncode == 0:
        return tag
    ensure_package("debootstrap", "debootstrap")
    started = time.monotonic()
    _say(f"  debootstrap {DEBIAN_SUITE} ({name}: {', '.join(packages)})")
    with tempfile.TemporaryDirectory(prefix=f"rootfs-{name}-", dir=cache_root()) as scratch:
        root = Path(scratch) / "root"
        log = Path(scratch) / "debootstrap.log"
        with log.open("wb") as output:
            result = subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(packages)}",
                    DEBIAN_SUITE,
                    str(root),
                    DEBIAN_MIRROR,
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if result.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise BuildError(f"debootstrap of the {name} root filesystem failed (exit {result.returncode}):\n{tail}")
        for trimmed in ROOTFS_TRIM:
            shutil.rmtree(root / trimmed, ignore_errors=True)
        # Each container made from it gets its own machine id at boot.
        (root / "etc" / "machine-id").write_text("")
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        docker("import", "-", tag, stdin=tar.stdout)
        if tar.wait() != 0:
            raise BuildError(f"packing the {name} root filesystem failed")
    _say(f"  built {tag} in {time.monotonic() - started:.0f}s")
    return tag


def _image_id(tag: str) -> str | None:
    result = docker("image", "inspect", "--format", "{{.Id}}", tag, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def _build(context: Path, dockerfile: str, tags: Sequence[str], *extra: str) -> None:
    """docker build, tagging the result; images these tags named before are removed once nothing
    names them any more, so rebuilds do not pile up untagged node images."""
    (context / "Dockerfile").write_text(dockerfile)
    previous = {image for image in map(_image_id, tags) if image}
    arguments = [arg for tag in tags for arg in ("-t", tag)]
    docker("build", "--quiet", *arguments, *extra, str(context))
    for image in previous - {_image_id(tag) for tag in tags}:
        docker("image", "rm", image, check=False)  # refused while another tag or a container uses it


def _link_dir(target: Path, binary: Path, names: Sequence[str]) -> None:
    """`target` holding `binary` and a symlink to it for each name (multi-call binaries)."""
    target.mkdir(parents=True)
    shutil.copy2(binary, target / binary.name)
    for name in names:
        (target / name).symlink_to(binary.name)


def _side_images(bins: Path, control_plane: Path, agents_base: str, kubernetes: str, scratch: Path) -> list[str]:
    """The images kubeadm and the node run, under the names kubeadm asks for."""
    pause = scratch / "pause"
    pause.mkdir(parents=True)
    shutil.copy2(bins / "pause", pause / "pause")
    # uid 65535 as upstream's pause: it runs as a sandbox and as a non-root placeholder container.
    _build(pause, 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n', PAUSE_TAGS)

    components = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")
    control = scratch / "controlplane"
    _link_dir(control / "bin", (control_plane / "controlplane").resolve(), components)
    control_tags = [f"registry.k8s.io/{name}:{kubernetes}" for name in components[:3]] + [ETCD_TAG]
    _build(control, "FROM scratch\nCOPY bin/ /usr/local/bin/\nENV PATH=/usr/local/bin\n", control_tags)

    coredns = scratch / "coredns"
    coredns.mkdir()
    shutil.copy2(bins / "coredns", coredns / "coredns")
    _build(coredns, 'FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n', [COREDNS_TAG])

    agents = scratch / "agents"
    _link_dir(agents / "bin", (bins / "kindnode").resolve(), ("kube-proxy", "kind-netd"))
    agent_tags = [f"registry.k8s.io/kube-proxy:{kubernetes}", netd_image(kubernetes)]
    _build(agents, f"FROM {agents_base}\nCOPY bin/ /usr/local/bin/\n", agent_tags)
    return [*PAUSE_TAGS, *control_tags, COREDNS_TAG, *agent_tags]


def netd_image(kubernetes: str) -> str:
    return f"yuniplace.local/kind-netd:{kubernetes}"


def node_image_name(kubernetes: str) -> str:
    return f"yuniplace.local/kind-node:{kubernetes}"


def dra_driver_image(kubernetes: str) -> str:
    return f"yuniplace.local/dra-test-driver:{kubernetes}"


DRA_DRIVER_DOCKERFILE = """\
FROM {base}
COPY dra-test-driver /usr/local/bin/dra-test-driver
LABEL {label}={inputs}
ENTRYPOINT ["/usr/local/bin/dra-test-driver"]
"""


def ensure_dra_driver_image(*, quiet: bool = False) -> str:
    """Kubernetes' DRA test driver on the agents' Debian root filesystem: the kubelet plugin of the kind
    tests' DRA driver (tests/kind/dra-test-driver.yaml), with a shell for the pods using its devices to
    show their environment. Not preloaded in the node image: the tests that use it load it."""
    ensure_docker()
    kubernetes = pinned_versions(module_dir())["kubernetes"]
    bins = go_binaries(quiet=quiet)
    base = _rootfs_image("agents")
    name = dra_driver_image(kubernetes)
    inputs = _digest(str(bins), base, DRA_DRIVER_DOCKERFILE)
    if image_label(name, INPUTS_LABEL) == inputs:
        return name
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dra-driver-", dir=cache_root()) as directory:
        context = Path(directory)
        shutil.copy2(bins / "dra-test-driver", context / "dra-test-driver")
        _build(context, DRA_DRIVER_DOCKERFILE.format(base=base, label=INPUTS_LABEL, inputs=inputs), [name])
    if not quiet:
        _say(f"  built {name} in {time.monotonic() - started:.0f}s")
    return name


@contextmanager
def _containerd(bins: Path, scratch: Path) -> Iterator[Path]:
    """The node's containerd (`bins`), run on this host for its content store and metadata only (no
    CRI), whose root becomes the node image's /var/lib/containerd; returns its socket."""
    root = scratch / "containerd"
    socket = scratch / "c.sock"
    config = scratch / "containerd.toml"
    cri = ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images")
    # Version 3: the [grpc] and [ttrpc] sections of the server at the top, where version 4 no longer has them.
    config.write_text(
        "version = 3\n"
        f'root = "{root}"\nstate = "{scratch / "state"}"\n'
        f"disabled_plugins = {json.dumps(list(cri))}\n"
        f'[grpc]\n  address = "{socket}"\n[ttrpc]\n  address = "{socket}.ttrpc"\n'
    )
    log = (scratch / "containerd.log").open("wb")
    process = subprocess.Popen(
        [str(bins / "containerd"), "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    try:

        def answers() -> bool:
            if process.poll() is not None:
                raise BuildError(
                    f"containerd for preloading images exited: {(scratch / 'containerd.log').read_text()[-2000:]}"
                )
            return (
                subprocess.run(
                    [str(bins / "ctr"), "--address", str(socket), "version"], capture_output=True, check=False
                ).returncode
                == 0
            )

        wait_until(answers, 30, interval_s=0.2)
        yield socket
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        log.close()


def _preload(bins: Path, images: Sequence[str], scratch: Path) -> Path:
    """The images in a containerd root, in the k8s.io namespace the kubelet's CRI uses, not
    unpacked: the node's containerd unpacks each on first use."""
    scratch.mkdir(parents=True)
    archive = scratch / "images.tar"
    docker("save", "-o", str(archive), *images)
    with _containerd(bins, scratch) as socket:
        subprocess.run(
            [
                str(bins / "ctr"),
                "--address",
                str(socket),
                "--namespace",
                "k8s.io",
                "images",
                "import",
                "--no-unpack",
                "--all-platforms",
                str(archive),
            ],
            capture_output=True,
            check=True,
        )
    archive.unlink()
    store = scratch / "var-lib-containerd"
    store.mkdir()
    for kept in ("io.containerd.content.v1.content", "io.containerd.metadata.v1.bolt"):
        shutil.move(str(scratch / "containerd" / kept), store / kept)
    return store


NODE_DOCKERFILE = """\
FROM {base}
COPY bin/ /usr/local/bin/
COPY entrypoint /usr/local/bin/entrypoint
COPY containerd.toml /etc/containerd/config.toml
COPY containerd.service kubelet.service /etc/systemd/system/
COPY kind/ /kind/
COPY var-lib-containerd/ /var/lib/containerd/
RUN ln -s /usr/local/bin/kindnode /usr/bin/kubelet \\
 && ln -s /usr/local/bin/kindnode /usr/bin/kubeadm \\
 && ln -s /usr/local/bin/kindnode /usr/bin/kubectl \\
 && ln -s /etc/systemd/system/containerd.service /etc/systemd/system/multi-user.target.wants/containerd.service \\
 && ln -s /etc/systemd/system/kubelet.service /etc/systemd/system/multi-user.target.wants/kubelet.service \\
 && systemctl mask getty@tty1.service serial-getty@.service console-getty.service systemd-logind.service \\
      apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer dpkg-db-backup.timer
ENV container=docker
LABEL {label}={inputs}
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
"""


def tools(*, quiet: bool = False) -> KindImages:
    """kind, kubectl and helm (built when missing), without building or checking any image."""
    control_plane = ensure_built(quiet=quiet).bin_dir
    bins = go_binaries(quiet=quiet)
    kubernetes = pinned_versions(module_dir())["kubernetes"]
    return KindImages(
        node_image_name(kubernetes),
        YUNIPLACE_IMAGE,
        dra_driver_image(kubernetes),
        bins / "kind",
        _tool_dir(bins, control_plane),
    )


def ensure_node_image(*, quiet: bool = False) -> KindImages:
    """Build (or find) the node image and the tools; does not touch yuniplace's image."""
    ensure_docker()
    versions = pinned_versions(module_dir())
    kubernetes = versions["kubernetes"]
    control_plane = ensure_built(quiet=quiet).bin_dir
    bins = go_binaries(quiet=quiet)
    tools = _tool_dir(bins, control_plane)
    name = node_image_name(kubernetes)
    node_files = kind_dir() / "node"
    inputs = _digest(str(bins), str(control_plane), json.dumps(ROOTFS_PACKAGES), NODE_DOCKERFILE, node_files)
    images = KindImages(name, YUNIPLACE_IMAGE, dra_driver_image(kubernetes), bins / "kind", tools)
    if image_label(name, INPUTS_LABEL) == inputs:
        return images
    started = time.monotonic()
    if not quiet:
        _say(
            f"Building the kind node image {name} (Kubernetes {kubernetes}): Debian root filesystems, "
            "side images, preloaded containerd store"
        )
    node_base = _rootfs_image("node")
    agents_base = _rootfs_image("agents")
    with tempfile.TemporaryDirectory(prefix="node-image-", dir=cache_root()) as directory:
        scratch = Path(directory)
        side = _side_images(bins, control_plane, agents_base, kubernetes, scratch / "side")
        context = scratch / "context"
        context.mkdir()
        _preload(bins, side, scratch / "preload").rename(context / "var-lib-containerd")
        _link_dir(context / "bin", (bins / "kindnode").resolve(), ())
        for binary in CONTAINERD_BUILDS:
            shutil.copy2(bins / binary, context / "bin" / binary)
        for file in ("entrypoint", "containerd.toml", "containerd.service", "kubelet.service"):
            shutil.copy2(node_files / file, context / file)
        manifests = context / "kind" / "manifests"
        manifests.mkdir(parents=True)
        (context / "kind" / "version").write_text(kubernetes + "\n")
        cni = (node_files / "default-cni.yaml").read_text().replace("{{NETD_IMAGE}}", netd_image(kubernetes))
        (manifests / "default-cni.yaml").write_text(cni)
        _build(context, NODE_DOCKERFILE.format(base=node_base, label=INPUTS_LABEL, inputs=inputs), [name])
    if not quiet:
        _say(f"  built {name} in {time.monotonic() - started:.0f}s")
    return images


def _tool_dir(bins: Path, control_plane: Path) -> Path:
    """One folder for PATH: kind, kubectl, helm, and the docker wrapper kind needs on hosts without
    --privileged (controlplane/kind/docker)."""
    tools = bins.parent / "tools"
    if not (tools / "docker").exists():
        staging = Path(tempfile.mkdtemp(prefix="tools-", dir=bins.parent))
        (staging / "kind").symlink_to(bins / "kind")
        (staging / "kubectl").symlink_to(control_plane / "kubectl")
        (staging / "helm").symlink_to(control_plane / "helm")
        (staging / "docker").symlink_to(kind_dir() / "docker")
        shutil.rmtree(tools, ignore_errors=True)
        staging.rename(tools)
    return tools


def host_ca_bundle() -> Path:
    """The certificates pip trusts on this host (PIP_CERT, else the system bundle): where PyPI is
    reached through a TLS-inspecting proxy, only they verify it."""
    bundle = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
    return Path(bundle)


def python_base() -> str:
    """A stand-in for python:3.11-slim from Debian's python3 (3.11): a virtualenv first on PATH, so
    the Dockerfile's `pip install` installs into it as it would into the official image's Python. It
    trusts the certificates this host's pip trusts."""
    rootfs = _rootfs_image("python")
    bundle = host_ca_bundle()
    tag = f"yuniplace.local/python:3.11-{_digest(rootfs, bundle if bundle.is_file() else '')}"
    if docker("image", "inspect", tag, check=False).returncode != 0:
        with tempfile.TemporaryDirectory(prefix="python-base-", dir=cache_root()) as directory:
            context = Path(directory)
            copy_bundle = ""
            if bundle.is_file():
                shutil.copyfile(bundle, context / "ca-certificates.crt")
                copy_bundle = "COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n"
            _build(
                context,
                f"FROM {rootfs}\n{copy_bundle}RUN python3 -m venv /usr/local/python\n"
                "ENV PATH=/usr/local/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
                "LANG=C.UTF-8 PIP_CERT=/etc/ssl/certs/ca-certificates.crt\n",
                [tag],
            )
    return tag


def ensure_yuniplace_image(*, quiet: bool = False) -> str:
    """yuniplace's image from its Dockerfile, on the local Python base; Docker's build cache makes
    an unchanged checkout a no-op. pip reaches PyPI through the host's network."""
    ensure_docker()
    base = python_base()
    started = time.monotonic()
    docker(
        "build", "--quiet", "--network", "host", "--build-arg", f"BASE={base}", "-t", YUNIPLACE_IMAGE, str(repo_root())
    )
    if not quiet:
        _say(f"  built {YUNIPLACE_IMAGE} from the Dockerfile (base {base}) in {time.monotonic() - started:.0f}s")
    return YUNIPLACE_IMAGE


def ensure_all(*, quiet: bool = False) -> KindImages:
    """Every image, built by one process at a time: concurrent builds would race for the same tags."""
    lock_path = cache_root() / "kind" / ".images.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        images = ensure_node_image(quiet=quiet)
        ensure_dra_driver_image(quiet=quiet)
        ensure_yuniplace_image(quiet=quiet)
    return images
