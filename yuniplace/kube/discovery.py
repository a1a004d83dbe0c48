"""Which optional APIs (CRDs, and built-in APIs behind feature gates) the cluster serves: the dialects,
queue sources and counts that need one are on only where it is served, and for as long as it is."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from yuniplace.kube.client import KubeClient
from yuniplace.kube.errors import ApiError, NotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Discovered:
    """What discovery listed at one moment for the group versions asked ("/apis/karpenter.sh/v1"): the
    resources of each one served. One missing is not served; one in `unknown` could not be asked (an
    error other than 404), and whatever depends on it is left as it was."""

    resources: Mapping[str, frozenset[str]]
    unknown: frozenset[str] = frozenset()
    # Every version the cluster serves of each group asked about, by group ("scheduling.k8s.io").
    versions: Mapping[str, tuple[str, ...]] | None = None

    def names(self, api: str) -> frozenset[str] | None:
        """The resources `api` serves; empty when it is not served, None when that is not known."""
        if api in self.unknown:
            return None
        return self.resources.get(api, frozenset())


def group_of(api: str) -> str:
    """ "/apis/karpenter.sh/v1" -> "karpenter.sh"."""
    return api.removeprefix("/apis/").split("/")[0]


def discover(client: KubeClient, apis: Iterable[str]) -> Discovered:
    """Ask discovery about `apis` (group version paths): the group list first (one GET of /apis), then
    the resources of each asked group version it lists, so an API not installed costs nothing. An error
    asking the group list (the API server restarting, say) is raised: nothing can be told then."""
    apis = tuple(dict.fromkeys(apis))
    listed = client.get("/apis")
    versions: dict[str, tuple[str, ...]] = {}
    served: set[str] = set()
    for group in listed.get("groups") or []:
        name = str(group.get("name") or "")
        versions[name] = tuple(str(v.get("version") or "") for v in group.get("versions") or [])
        served.update(f"/apis/{name}/{version}" for version in versions[name])
    resources: dict[str, frozenset[str]] = {}
    unknown: set[str] = set()
    for api in apis:
        if api not in served:
            continue
        try:
            found = client.get(api, retry=False)  # an error leaves its API as it was: not retried here
        except NotFound:
            continue  # gone since the group list was read
        except ApiError as error:
            log.debug("cannot ask discovery about %s: %s", api, error)
            unknown.add(api)
            continue
        resources[api] = frozenset(str(r.get("name")) for r in found.get("resources") or [])
    asked = {group_of(api) for api in apis}
    return Discovered(resources, frozenset(unknown), {g: versions.get(g, ()) for g in asked})
