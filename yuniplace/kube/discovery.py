"""Which optional APIs (CRDs) the cluster serves: the dialects and queue sources that need one are on
only where it is installed."""

from __future__ import annotations

import logging

from yuniplace.kube.client import KubeClient
from yuniplace.kube.errors import ApiError, NotFound

log = logging.getLogger(__name__)


def served_resources(client: KubeClient, api: str, needed_for: str) -> set[str] | None:
    """The resources discovery lists for the API group version `api` (e.g.
    /apis/scheduling.volcano.sh/v1beta1); None when it is not installed, or cannot be asked, so that
    `needed_for` is off (said in the log)."""
    try:
        discovery = client.get(api)
    except NotFound:
        log.info(
            "the %s API is not installed: %s are not read (install the chart's CRDs to enable them)", api, needed_for
        )
        return None
    except ApiError as error:
        log.warning("cannot tell whether the %s API is installed (%s): %s are not read", api, error, needed_for)
        return None
    return {str(r.get("name")) for r in discovery.get("resources") or []}
