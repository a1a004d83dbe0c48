"""What the controller says at start about the API server's Kubernetes release."""

from __future__ import annotations

import pytest

from yuniplace.kube.versions import SUPPORTED, minor_of, support_note
from yuniplace.localcluster.build import DEFAULT_KUBERNETES, SUPPORTED_KUBERNETES


@pytest.mark.parametrize("version", ["v1.35.4", "v1.36.3", "v1.37.2", "v1.37.2-eks-1a2b3c"])
def test_a_supported_release_is_named_so(version: str) -> None:
    supported, note = support_note(version)
    assert supported and "a supported release (1.35, 1.36, 1.37)" in note


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("v1.34.10", "older than yuniplace supports (1.35, 1.36, 1.37)"),
        ("v1.34.10", "no native gang (Workload API) is read; upgrade the cluster"),
        ("v1.38.0", "newer than yuniplace is tested on (1.35, 1.36, 1.37)"),
        ("v1.38.0", 'yuniplace_swaps_total{outcome="moved"}'),
        ("v2.0.0", "newer than"),
        ("unknown", "cannot tell the API server's Kubernetes release from 'unknown'"),
    ],
)
def test_another_release_is_told_what_yuniplace_does_instead(version: str, says: str) -> None:
    supported, note = support_note(version)
    assert not supported and says in note


def test_minor_versions_compare_as_numbers() -> None:
    assert minor_of("v1.9.0") == (1, 9) and minor_of("v1.10.0") == (1, 10)
    assert minor_of("v1.10.0") > minor_of("v1.9.0")  # type: ignore[operator]


def test_the_local_control_plane_builds_every_supported_release_and_defaults_to_the_newest() -> None:
    assert SUPPORTED_KUBERNETES == SUPPORTED and DEFAULT_KUBERNETES == SUPPORTED[-1]
