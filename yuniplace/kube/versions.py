"""The Kubernetes releases yuniplace supports, and what it tells an operator whose API server is another.

The supported releases are the ones upstream supports; each is built and tested here (the local control
plane builds one per release). On every one of them the swap hands a reserved node to its member by
nominating it (status.nominatedNodeName), which kube-scheduler honours for a gated pod once the gate is
lifted: measured per release by the flood e2e test.
"""

from __future__ import annotations

import logging
import re

from yuniplace.kube.client import KubeClient
from yuniplace.kube.errors import ApiError

log = logging.getLogger(__name__)

# Oldest first; the newest is the default of the local control plane, the demo and the benchmarks.
SUPPORTED = ("1.35", "1.36", "1.37")


def minor_of(git_version: str) -> tuple[int, int] | None:
    """(1, 37) of "v1.37.2" (or of a vendor's "v1.37.2-eks-1a2b"); None when it is no such version."""
    match = re.match(r"^v?(\d+)\.(\d+)", git_version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def support_note(git_version: str) -> tuple[bool, str]:
    """Whether the server's release is supported, and what yuniplace says about it at start."""
    found = minor_of(git_version)
    oldest, newest = (minor_of(v) for v in (SUPPORTED[0], SUPPORTED[-1]))
    assert oldest is not None and newest is not None
    supported = ", ".join(SUPPORTED)
    if found is None:
        return False, (
            f"cannot tell the API server's Kubernetes release from {git_version!r}: yuniplace is tested on "
            f"{supported} and works as it does there (swaps by nomination; native gangs read where served)"
        )
    if found < oldest:
        return False, (
            f"the API server runs Kubernetes {git_version}, older than yuniplace supports ({supported}): gangs are "
            "reserved and swapped by nomination as on 1.35, and no native gang (Workload API) is read; upgrade the "
            "cluster to a supported release"
        )
    if found > newest:
        return False, (
            f"the API server runs Kubernetes {git_version}, newer than yuniplace is tested on ({supported}): it swaps "
            f"by nomination as on {SUPPORTED[-1]} and reads only the Workload API versions it knows; watch "
            'yuniplace_swaps_total{outcome="moved"} for members that miss their reserved node'
        )
    return True, f"the API server runs Kubernetes {git_version}, a supported release ({supported})"


def check_server(client: KubeClient) -> str | None:
    """Log what yuniplace makes of the API server's release; return its gitVersion (None when the
    server cannot be asked: the controller then starts as on a supported release)."""
    try:
        git_version = str(client.get("/version").get("gitVersion") or "")
    except ApiError as error:
        log.warning("cannot read the API server's version (%s): assuming a supported release", error)
        return None
    supported, note = support_note(git_version)
    (log.info if supported else log.warning)(note)
    return git_version
