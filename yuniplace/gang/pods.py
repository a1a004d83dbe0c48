"""Reading raw pod dicts: which application a pod belongs to, what role it plays, where it stands.

Only the fields yuniplace reads are kept (`trim`), because a watch of a large cluster would otherwise
hold every pod's managed fields and full spec in memory.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from yuniplace.gang import keys
from yuniplace.gang.dialects.base import GangDialect
from yuniplace.gang.dialects.base import is_gated as is_gated  # held by yuniplace: one home, for the dialects too
from yuniplace.gang.dialects.registry import dialect_of

Pod = dict[str, Any]
TERMINAL_PHASES = ("Succeeded", "Failed")


class AppKey(NamedTuple):
    """Applications are namespaced: the same app id in two namespaces is two applications."""

    namespace: str
    app_id: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.app_id}"

    @classmethod
    def parse(cls, ref: str) -> AppKey:
        """`namespace/app-id`, as gang groups name applications (validated where they are read)."""
        namespace, _, app_id = ref.partition("/")
        return cls(namespace, app_id)


def annotations_of(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("annotations") or {}


def labels_of(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("labels") or {}


def name(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def namespace(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["namespace"])


def uid(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["uid"])


def is_placeholder(pod: Mapping[str, Any]) -> bool:
    return labels_of(pod).get(keys.PLACEHOLDER) == "true"


class Identity(NamedTuple):
    """What a pod is to yuniplace: read once per pod event, since the dialect decides everything else."""

    dialect: GangDialect | None
    placeholder: bool
    app_id: str | None
    group: str | None  # the task group it belongs to
    describes_gang: bool  # it carries the gang's description (YuniKorn's task groups, or another dialect)


def identify(pod: Mapping[str, Any]) -> Identity:
    notes = annotations_of(pod)
    if is_placeholder(pod):
        return Identity(None, True, notes.get(keys.PLACEHOLDER_APP), notes.get(keys.PLACEHOLDER_GROUP), False)
    dialect = dialect_of(pod)
    group = _group(pod, dialect)
    describes_gang = dialect is not None and dialect.describes_gang(pod)
    return Identity(dialect, False, _app_id(pod, dialect, describes_gang or group is not None), group, describes_gang)


def _group(pod: Mapping[str, Any], dialect: GangDialect | None) -> str | None:
    """The task group a member belongs to, as its dialect says; none for a pod of no gang."""
    return None if dialect is None else dialect.task_group(pod)


def _app_id(pod: Mapping[str, Any], dialect: GangDialect | None, gang_pod: bool) -> str | None:
    """The application id, first found of YuniKorn's sources (another dialect's gang name first).
    A gang pod naming none belongs to its controlling owner (a Job's pods form one application) or,
    standing alone, is an application by itself: it must never wait for an id that will not come."""
    dialect_gang = None if dialect is None else dialect.gang_name(pod)
    if dialect_gang:
        return dialect_gang
    sources = {"label": labels_of(pod), "annotation": annotations_of(pod)}
    for where, key in keys.APP_ID_SOURCES:
        value = sources[where].get(key)
        if value:
            return value
    if gang_pod:
        owner = controller_of(pod)
        return str(owner.get("name")) if owner else pod.get("metadata", {}).get("name") or None
    return None


def controller_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's controlling owner (a Job, a ReplicaSet, an operator's object), which makes it again
    when it goes; None for a pod that stands alone."""
    refs = pod.get("metadata", {}).get("ownerReferences") or []
    return next((o for o in refs if isinstance(o, Mapping) and o.get("controller")), None)


def app_id(pod: Mapping[str, Any]) -> str | None:
    return identify(pod).app_id


def app_key(pod: Mapping[str, Any], identity: Identity | None = None) -> AppKey | None:
    found = (identity or identify(pod)).app_id
    return AppKey(namespace(pod), found) if found else None


def task_group_name(pod: Mapping[str, Any]) -> str | None:
    """The task group a pod belongs to, as `identify` says without reading the application id (the
    planner asks it of every pod of a gang on every reconcile)."""
    notes = annotations_of(pod)
    return notes.get(keys.PLACEHOLDER_GROUP) if is_placeholder(pod) else _group(pod, dialect_of(pod))


def carries_task_groups(pod: Mapping[str, Any]) -> bool:
    """Whether the pod describes its gang: YuniKorn's task groups, or any pod of another dialect
    (each of which describes the whole gang)."""
    if is_placeholder(pod):
        return False
    dialect = dialect_of(pod)
    return dialect is not None and dialect.describes_gang(pod)


def provided_queue(pod: Mapping[str, Any]) -> str | None:
    """The queue the pod names, where YuniKorn's shim looks: its queue label, then its queue
    annotation, then a `queue` label; then the ai-scheduler Pool its annotation names."""
    sources = {"label": labels_of(pod), "annotation": annotations_of(pod)}
    return next((value for where, key in keys.QUEUE_SOURCES if (value := sources[where].get(key))), None)


def queue(pod: Mapping[str, Any]) -> str:
    """The admission queue without a queue configuration: the queue the pod names, else its namespace."""
    return provided_queue(pod) or namespace(pod)


def service_account(pod: Mapping[str, Any]) -> str | None:
    return pod.get("spec", {}).get("serviceAccountName") or None


def is_held(pod: Mapping[str, Any]) -> bool:
    """A live pod yuniplace's gate still holds back."""
    return is_gated(pod) and not is_terminal(pod) and not is_deleting(pod)


def node_name(pod: Mapping[str, Any]) -> str | None:
    return pod.get("spec", {}).get("nodeName") or None


def nominated_node(pod: Mapping[str, Any]) -> str | None:
    return pod.get("status", {}).get("nominatedNodeName") or None


def phase(pod: Mapping[str, Any]) -> str:
    return str(pod.get("status", {}).get("phase") or "Pending")


def status_reason(pod: Mapping[str, Any]) -> str | None:
    """Why the pod is in its phase, as whoever set it says (yuniplace, for a pod it failed)."""
    reason = pod.get("status", {}).get("reason")
    return str(reason) if reason else None


def status_message(pod: Mapping[str, Any]) -> str | None:
    """What whoever set the pod's phase says of it (yuniplace, for a pod it failed: why)."""
    message = pod.get("status", {}).get("message")
    return str(message) if message else None


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return phase(pod) in TERMINAL_PHASES


def is_deleting(pod: Mapping[str, Any]) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_SCHEDULERS = frozenset({DEFAULT_SCHEDULER})


def scheduler_name(pod: Mapping[str, Any]) -> str:
    return str(pod.get("spec", {}).get("schedulerName") or DEFAULT_SCHEDULER)


def resource_version(pod: Mapping[str, Any]) -> int:
    """The pod's resourceVersion as a number, 0 where it has none: the API server's are etcd revisions,
    so the newer of two versions of a pod, and the order of a watch's events, can be told by it."""
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def is_concerned(
    pod: Mapping[str, Any], schedulers: frozenset[str] = DEFAULT_SCHEDULERS, identity: Identity | None = None
) -> bool:
    """Whether yuniplace has anything to do with this pod at all. Pods meant for another scheduler
    (YuniKorn's own, say) are left to it, even with the same annotations."""
    identity = identity or identify(pod)
    if identity.placeholder:
        return True
    if scheduler_name(pod) not in schedulers:
        return False
    return identity.describes_gang or identity.group is not None or is_gated(pod)


def is_seated(pod: Mapping[str, Any]) -> bool:
    """A live member with its room: bound, or released by a swap or onto a seat (it names the placeholder
    whose place it took, or its seat) and on its way."""
    return (
        not is_gated(pod)
        and not is_terminal(pod)
        and not is_deleting(pod)
        and (bool(node_name(pod)) or is_handed_off(pod))
    )


def waits_for_scheduler(pod: Mapping[str, Any]) -> bool:
    """Whether a scheduler may bind the pod any moment now: pending, released from every gate, unbound."""
    spec = pod.get("spec", {})
    unbound = not spec.get("nodeName") and not spec.get("schedulingGates")
    return unbound and phase(pod) == "Pending" and not is_deleting(pod)


def may_take_room(pod: Mapping[str, Any]) -> bool:
    """Whether the pod could take the room a swap frees or a seat holds, so that the hand-off must be
    guarded by a nomination: it waits for a scheduler and was not handed a node's room by yuniplace
    (those members go to their own)."""
    return waits_for_scheduler(pod) and not is_handed_off(pod)


def competes_for_room(pod: Mapping[str, Any]) -> bool:
    """Whether the pod may take free room any moment now, room admission would otherwise seat a gang's
    members on: it may take room, and has not already been found to fit nowhere (seating others
    cannot make it fit)."""
    return may_take_room(pod) and not is_unschedulable(pod)


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    """kube-scheduler (or another) tried the pod and found no node for it."""
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in pod.get("status", {}).get("conditions") or []
    )


def is_handed_off(pod: Mapping[str, Any]) -> bool:
    """Whether the pod was given a node's room by yuniplace: a swap's placeholder, or a seat."""
    notes = annotations_of(pod)
    return keys.SWAP_PLACEHOLDER in notes or keys.SEAT in notes


def is_in_flight(pod: Mapping[str, Any]) -> bool:
    """A member released by a nominated swap (or onto a nominated seat) and not bound yet: its node's
    room is promised to it."""
    return (
        bool(nominated_node(pod))
        and is_handed_off(pod)
        and not is_gated(pod)
        and not node_name(pod)
        and not is_terminal(pod)
    )


def is_unserved(pod: Mapping[str, Any], schedulers: frozenset[str] = DEFAULT_SCHEDULERS) -> bool:
    """A gang pod for a scheduler yuniplace does not work with that no scheduler has looked at yet:
    every scheduler marks a pod it tried (PodScheduled), so one without the mark, left long enough,
    names a scheduler that does not run (YuniKorn's name, say, where YuniKorn is not installed)."""
    if is_placeholder(pod) or scheduler_name(pod) in schedulers or dialect_of(pod) is None:
        return False
    if node_name(pod) or phase(pod) != "Pending" or is_deleting(pod):
        return False
    return not any(c.get("type") == "PodScheduled" for c in pod.get("status", {}).get("conditions") or [])


@functools.lru_cache(maxsize=4096)
def parse_time(text: str | None) -> float | None:
    """An API timestamp in seconds. Remembered: the pods of a gang share their creation second, and
    ordering an application's pods reads each of them on every reconcile."""
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def format_time(epoch_s: float) -> str:
    """RFC 3339 in UTC, to the millisecond: gangs admitted in the same second still have an order."""
    moment = datetime.datetime.fromtimestamp(epoch_s, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def created_at(pod: Mapping[str, Any]) -> float:
    return parse_time(pod["metadata"].get("creationTimestamp")) or 0.0


def scheduled_at(pod: Mapping[str, Any]) -> float | None:
    """When kube-scheduler placed the pod (its PodScheduled condition turned True)."""
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return None


def unready_since(pod: Mapping[str, Any]) -> float | None:
    """Since when a pod bound to a node has not been Ready (its Ready condition's last change, or its
    binding while the kubelet has not said yet); None when it is Ready, or not bound."""
    if not node_name(pod):
        return None
    ready = next((c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None:
        return scheduled_at(pod)
    return None if ready.get("status") == "True" else parse_time(ready.get("lastTransitionTime"))


def waiting_reasons(pod: Mapping[str, Any]) -> list[str]:
    """Why each of its containers still waits to run ("main: ErrImagePull"), as the kubelet says."""
    return [f"{c['name']}: {c['reason']}" for c in _waiting(pod.get("status", {}))]


def _waiting(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The container statuses that wait, each as {name, reason}; whatever else the list holds (anyone
    allowed to write pods' status may write it) is passed over."""
    found = []
    for status_of in status.get("containerStatuses") or []:
        state = status_of.get("state") if isinstance(status_of, dict) else None
        waiting = state.get("waiting") if isinstance(state, dict) else None
        reason = waiting.get("reason") if isinstance(waiting, dict) else None
        if isinstance(reason, str) and reason:
            found.append({"name": status_of.get("name"), "reason": reason})
    return found


KEPT_METADATA = (
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
KEPT_SPEC = (
    "nodeName",
    "schedulingGates",
    "priorityClassName",
    "priority",
    "overhead",
    "resources",
    "schedulerName",
    "affinity",
    "serviceAccountName",
    "resourceClaims",  # DRA: the claims whose devices a placeholder holds for its member
)
# Of the conditions, KEPT_CONDITIONS only; of the container statuses, the reason of each container still
# waiting (an image that cannot be pulled, a program that keeps crashing): what a lost member says.
KEPT_STATUS = ("phase", "nominatedNodeName", "reason", "conditions", "containerStatuses", "resourceClaimStatuses")
KEPT_CONDITIONS = ("PodScheduled", "Ready")
KEPT_CONTAINER = ("name", "resources", "restartPolicy")
# Besides, each pod keeps the fields its gang's dialect reads (GangDialect.spec_fields), and only
# those: every pod carries the default tolerations, say, and keeping them for all would cost megabytes
# at tens of thousands of pods.


def _resources_only(containers: list[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    return [{k: c[k] for k in KEPT_CONTAINER if k in c} for c in containers or []]


def trim(pod: Mapping[str, Any], identity: Identity | None = None) -> Pod:
    """A copy holding only what yuniplace reads; a tenth or less of the size of a full pod."""
    metadata = pod.get("metadata", {})
    spec = pod.get("spec", {})
    status = pod.get("status", {})
    kept_spec: dict[str, Any] = {k: spec[k] for k in KEPT_SPEC if k in spec}
    dialect = (identity or identify(pod)).dialect
    if dialect is not None:
        kept_spec.update({k: spec[k] for k in dialect.spec_fields if k in spec})
    kept_spec["containers"] = _resources_only(spec.get("containers"))
    if spec.get("initContainers"):
        kept_spec["initContainers"] = _resources_only(spec.get("initContainers"))
    listed = ("conditions", "containerStatuses")
    kept_status: dict[str, Any] = {k: status[k] for k in KEPT_STATUS if k in status and k not in listed}
    conditions = [c for c in status.get("conditions") or [] if c.get("type") in KEPT_CONDITIONS]
    if conditions:
        kept_status["conditions"] = conditions
    waiting = [{"name": c["name"], "state": {"waiting": {"reason": c["reason"]}}} for c in _waiting(status)]
    if waiting:
        kept_status["containerStatuses"] = waiting
    return {
        "metadata": {k: metadata[k] for k in KEPT_METADATA if k in metadata},
        "spec": kept_spec,
        "status": kept_status,
    }
