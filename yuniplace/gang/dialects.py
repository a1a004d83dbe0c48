"""The gang dialects users already write, read as YuniKorn's task groups.

Coscheduling's labels, Koordinator's annotations and scheduler-plugins' PodGroup each describe a gang
as "N pods like these". Each becomes one task group built from the pod's own spec (its requests,
node selector, tolerations and node affinity), so the rest of yuniplace speaks one language. A gang
whose pods differ in size should use YuniKorn's task groups, which describe each kind of pod.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang.resources import format_quantity, pod_requests
from yuniplace.gang.taskgroups import InvalidGang, Mode, Problem, gang_group

# The one task group of a gang written in another dialect.
MEMBER_GROUP = "members"
GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s))+$")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class Dialect(enum.Enum):
    YUNIKORN = "YuniKorn"
    COSCHEDULING = "Coscheduling"
    KOORDINATOR = "Koordinator"
    POD_GROUP = "PodGroup"


def _meta(pod: Mapping[str, Any], kind: str) -> Mapping[str, str]:
    return pod.get("metadata", {}).get(kind) or {}


def dialect_of(pod: Mapping[str, Any]) -> Dialect | None:
    """The dialect a pod's gang is written in; YuniKorn's wins when a pod carries several."""
    notes, labels = _meta(pod, "annotations"), _meta(pod, "labels")
    if keys.TASK_GROUPS in notes or keys.TASK_GROUP_NAME in notes:
        return Dialect.YUNIKORN
    if notes.get(keys.KOORDINATOR_NAME):
        return Dialect.KOORDINATOR
    if labels.get(keys.COSCHEDULING_NAME):
        return Dialect.COSCHEDULING
    if labels.get(keys.POD_GROUP_LABEL):
        return Dialect.POD_GROUP
    return None


def gang_name(pod: Mapping[str, Any]) -> str | None:
    """The gang a pod of another dialect belongs to: its application id."""
    dialect = dialect_of(pod)
    if dialect == Dialect.KOORDINATOR:
        return _meta(pod, "annotations")[keys.KOORDINATOR_NAME]
    if dialect == Dialect.COSCHEDULING:
        return _meta(pod, "labels")[keys.COSCHEDULING_NAME]
    if dialect == Dialect.POD_GROUP:
        return _meta(pod, "labels")[keys.POD_GROUP_LABEL]
    return None


def _min_available(text: Any, where: str, problems: list[Problem]) -> int:
    if isinstance(text, str) and re.fullmatch(r"[0-9]{1,9}", text):
        value = int(text)
    elif isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        value = 0
    if value < 1:
        problems.append(Problem(where, text, "must be a whole number of pods, at least 1"))
    return value


def _duration_s(text: str, where: str, problems: list[Problem]) -> int | None:
    """Go's duration syntax ("90s", "10m", "1h30m"), as Koordinator's waiting-time is written."""
    if not GO_DURATION.match(text):
        problems.append(Problem(where, text, 'must be a duration such as "600s", "10m" or "1h30m"'))
        return None
    seconds = sum(float(amount) * SECONDS[unit] for amount, unit in DURATION_PART.findall(text))
    if seconds < 1:
        problems.append(Problem(where, text, "must be at least 1s"))
        return None
    return int(seconds)


def _member_group(pod: Mapping[str, Any], min_member: int, where: str, problems: list[Problem]) -> dict[str, Any]:
    spec = pod.get("spec", {})
    requests = {name: format_quantity(amount) for name, amount in pod_requests(spec).items() if amount > 0}
    if not requests:
        problems.append(Problem(f"{where}: pod {pod.get('metadata', {}).get('name')} requests", {},
                                "are empty; a gang reserves room by the members' requests, so set cpu/memory requests"))
    group: dict[str, Any] = {"name": MEMBER_GROUP, "minMember": min_member, "minResource": requests}
    for field in ("nodeSelector", "tolerations"):
        if spec.get(field):
            group[field] = spec[field]
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity:
        group["affinity"] = {"nodeAffinity": node_affinity}
    return group


def _policy(notes: Mapping[str, str], timeout_s: int | None) -> str:
    """The pod's own schedulingPolicyParameters (a style, say) with the dialect's timeout added."""
    own = notes.get(keys.SCHEDULING_POLICY_PARAMETERS, "")
    if timeout_s is not None and "placeholderTimeoutInSeconds=" not in own:
        own = f"{own} placeholderTimeoutInSeconds={timeout_s}".strip()
    return own


def gang_annotations(pod: Mapping[str, Any], pod_group: Mapping[str, Any] | None = None) -> Mapping[str, str]:
    """The annotations, in YuniKorn's dialect, that describe the gang `pod` belongs to: its own for a
    YuniKorn pod, else built from the other dialect. `pod_group` is the PodGroup a pod of that dialect
    names. InvalidGang names the dialect's own fields, so the message points at what the user wrote."""
    notes, labels = _meta(pod, "annotations"), _meta(pod, "labels")
    dialect = dialect_of(pod)
    if dialect in (None, Dialect.YUNIKORN):
        return notes
    problems: list[Problem] = []
    timeout_s: int | None = None
    built: dict[str, str] = {}
    if dialect == Dialect.COSCHEDULING:
        where = keys.COSCHEDULING_MIN_AVAILABLE
        min_member = _min_available(labels.get(where, "1"), f"label {where}", problems)
    elif dialect == Dialect.KOORDINATOR:
        where = keys.KOORDINATOR_MIN_AVAILABLE
        min_member = _min_available(notes.get(where, "1"), where, problems)
        if keys.KOORDINATOR_WAITING_TIME in notes:
            timeout_s = _duration_s(notes[keys.KOORDINATOR_WAITING_TIME], keys.KOORDINATOR_WAITING_TIME, problems)
        # Koordinator's default mode is Strict.
        mode = notes.get(keys.KOORDINATOR_MODE, Mode.STRICT.value)
        if mode not in (m.value for m in Mode):
            problems.append(Problem(keys.KOORDINATOR_MODE, mode, "must be Strict or NonStrict"))
        built[keys.GANG_MODE] = mode
        if keys.KOORDINATOR_GROUPS in notes:
            gang_group(notes[keys.KOORDINATOR_GROUPS], keys.KOORDINATOR_GROUPS, problems)
            built[keys.GANG_GROUP] = notes[keys.KOORDINATOR_GROUPS]
    else:
        if pod_group is None:
            raise InvalidGang([Problem(f"label {keys.POD_GROUP_LABEL}", labels.get(keys.POD_GROUP_LABEL),
                                       "names no PodGroup in this namespace")])
        spec = pod_group.get("spec") or {}
        where = "PodGroup spec.minMember"
        min_member = _min_available(spec.get("minMember"), where, problems)
        scheduled_timeout = spec.get("scheduleTimeoutSeconds")
        if isinstance(scheduled_timeout, int) and scheduled_timeout > 0:
            timeout_s = scheduled_timeout
    group = _member_group(pod, min_member, where, problems)
    if problems:
        raise InvalidGang(problems)
    return {**notes, keys.TASK_GROUPS: json.dumps([group]), keys.SCHEDULING_POLICY_PARAMETERS: _policy(notes, timeout_s),
            **{k: v for k, v in built.items() if k not in notes}}
