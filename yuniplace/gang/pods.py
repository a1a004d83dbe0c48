"""Reading raw pod dicts: which application a pod belongs to, what role it plays, where it stands.

Only the fields yuniplace reads are kept (`trim`), because a watch of a large cluster would otherwise
hold every pod's managed fields and full spec in memory.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, NamedTuple

from yuniplace.gang import keys
from yuniplace.gang.dialects import MEMBER_GROUP, Dialect, dialect_of, gang_name

Pod = dict[str, Any]
TERMINAL_PHASES = ("Succeeded", "Failed")


class AppKey(NamedTuple):
    """Applications are namespaced: the same app id in two namespaces is two applications."""

    namespace: str
    app_id: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.app_id}"


def annotations(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("annotations") or {}


def labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("labels") or {}


def name(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def namespace(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["namespace"])


def uid(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["uid"])


def is_placeholder(pod: Mapping[str, Any]) -> bool:
    return labels(pod).get(keys.PLACEHOLDER) == "true"


def app_id(pod: Mapping[str, Any]) -> str | None:
    """The application id, first found of YuniKorn's sources; placeholders carry theirs verbatim.
    A gang pod naming none belongs to its controlling owner (a Job's pods form one application) or,
    standing alone, is an application by itself: it must never wait for an id that will not come."""
    if is_placeholder(pod):
        return annotations(pod).get(keys.PLACEHOLDER_APP)
    dialect_gang = gang_name(pod)  # another dialect's gang name defines its members
    if dialect_gang:
        return dialect_gang
    sources = {"label": labels(pod), "annotation": annotations(pod)}
    for where, key in keys.APP_ID_SOURCES:
        value = sources[where].get(key)
        if value:
            return value
    if carries_task_groups(pod) or task_group_name(pod) is not None:
        owner = next((o for o in pod.get("metadata", {}).get("ownerReferences") or [] if o.get("controller")), None)
        return str(owner["name"]) if owner else pod.get("metadata", {}).get("name") or None
    return None


def app_key(pod: Mapping[str, Any]) -> AppKey | None:
    found = app_id(pod)
    return AppKey(namespace(pod), found) if found else None


def task_group_name(pod: Mapping[str, Any]) -> str | None:
    if is_placeholder(pod):
        return annotations(pod).get(keys.PLACEHOLDER_GROUP)
    dialect = dialect_of(pod)
    if dialect not in (None, Dialect.YUNIKORN):
        return MEMBER_GROUP
    return annotations(pod).get(keys.TASK_GROUP_NAME) or None


def carries_task_groups(pod: Mapping[str, Any]) -> bool:
    """Whether the pod describes its gang: YuniKorn's task groups, or any pod of another dialect
    (each of which describes the whole gang)."""
    if is_placeholder(pod):
        return False
    dialect = dialect_of(pod)
    return dialect is not None and (dialect != Dialect.YUNIKORN or keys.TASK_GROUPS in annotations(pod))


def queue(pod: Mapping[str, Any]) -> str:
    """The admission queue: YuniKorn's queue label or annotation, a `queue` label, else the namespace."""
    sources = {"label": labels(pod), "annotation": annotations(pod)}
    found = next((value for where, key in keys.QUEUE_SOURCES if (value := sources[where].get(key))), None)
    return found or namespace(pod)


def is_gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == keys.GATE for g in pod.get("spec", {}).get("schedulingGates") or [])


def node_name(pod: Mapping[str, Any]) -> str | None:
    return pod.get("spec", {}).get("nodeName") or None


def nominated_node(pod: Mapping[str, Any]) -> str | None:
    return pod.get("status", {}).get("nominatedNodeName") or None


def phase(pod: Mapping[str, Any]) -> str:
    return str(pod.get("status", {}).get("phase") or "Pending")


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return phase(pod) in TERMINAL_PHASES


def is_deleting(pod: Mapping[str, Any]) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_SCHEDULERS = frozenset({DEFAULT_SCHEDULER})


def scheduler_name(pod: Mapping[str, Any]) -> str:
    return str(pod.get("spec", {}).get("schedulerName") or DEFAULT_SCHEDULER)


def is_concerned(pod: Mapping[str, Any], schedulers: frozenset[str] = DEFAULT_SCHEDULERS) -> bool:
    """Whether yuniplace has anything to do with this pod at all. Pods meant for another scheduler
    (YuniKorn's own, say) are left to it, even with the same annotations."""
    if is_placeholder(pod):
        return True
    if scheduler_name(pod) not in schedulers:
        return False
    return carries_task_groups(pod) or task_group_name(pod) is not None or is_gated(pod)


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def format_time(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def created_at(pod: Mapping[str, Any]) -> float:
    return parse_time(pod["metadata"].get("creationTimestamp")) or 0.0


def scheduled_at(pod: Mapping[str, Any]) -> float | None:
    """When kube-scheduler placed the pod (its PodScheduled condition turned True)."""
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return None


_KEPT_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "annotations",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
)
_KEPT_SPEC = (
    "nodeName", "schedulingGates", "priorityClassName", "priority", "overhead", "resources", "schedulerName", "affinity",
)
# Kept only for pods of the dialects whose gang is shaped like the pod itself: every pod carries the
# default tolerations, and keeping them for all would cost megabytes at tens of thousands of pods.
_KEPT_SPEC_OF_SHAPED_GANGS = ("nodeSelector", "tolerations")


def _resources_only(containers: list[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    return [
        {k: c[k] for k in ("name", "resources", "restartPolicy") if k in c}
        for c in containers or []
    ]


def trim(pod: Mapping[str, Any]) -> Pod:
    """A copy holding only what yuniplace reads; a tenth or less of the size of a full pod."""
    metadata = pod.get("metadata", {})
    spec = pod.get("spec", {})
    status = pod.get("status", {})
    kept_spec: dict[str, Any] = {k: spec[k] for k in _KEPT_SPEC if k in spec}
    if dialect_of(pod) not in (None, Dialect.YUNIKORN):
        kept_spec.update({k: spec[k] for k in _KEPT_SPEC_OF_SHAPED_GANGS if k in spec})
    kept_spec["containers"] = _resources_only(spec.get("containers"))
    if spec.get("initContainers"):
        kept_spec["initContainers"] = _resources_only(spec.get("initContainers"))
    kept_status: dict[str, Any] = {k: status[k] for k in ("phase", "nominatedNodeName", "reason") if k in status}
    scheduled = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
    if scheduled:
        kept_status["conditions"] = scheduled
    return {
        "metadata": {k: metadata[k] for k in _KEPT_METADATA if k in metadata},
        "spec": kept_spec,
        "status": kept_status,
    }
