"""Which optional APIs (CRDs) the cluster serves: the dialects and queue sources that need one are on
only where it is installed."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from yuniplace.kube.client import KubeClient
from yuniplace.kube.errors import ApiError, NotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    """What discovery lists under an API path: a group's versions, or a group version's resources."""

    names: frozenset[str]
    versions: tuple[str, ...]


def served_resources(client: KubeClient, api: str, needed_for: str) -> Served | None:
    """What discovery lists for `api`: the resources of a group version (e.g.
    /apis/scheduling.volcano.sh/v1beta1) or the versions of a group (/apis/scheduling.k8s.io); None
    when it is not installed, or cannot be asked, so that `needed_for` is off (said in the log)."""
    try:
        discovery = client.get(api)
    except NotFound:
        log.info("the %s API is not served: %s are not read (a CRD's: install the chart's CRDs)", api, needed_for)
        return None
    except ApiError as error:
        log.warning("cannot tell whether the %s API is served (%s): %s are not read", api, error, needed_for)
        return None
    return Served(
        frozenset(str(r.get("name")) for r in discovery.get("resources") or []),
        tuple(str(v.get("version")) for v in discovery.get("versions") or []),
    )
