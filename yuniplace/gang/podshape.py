"""Task groups shaped like a pod: how gangs written in other dialects than YuniKorn's, which say "N pods
like these" rather than describing each kind of pod, become task groups yuniplace can reserve room for."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from yuniplace.gang.resources import format_quantity, pod_requests
from yuniplace.gang.taskgroups import Problem

# The one task group of a gang that says "N pods like these".
MEMBER_GROUP = "members"


def whole_number(value: Any, where: str, problems: list[Problem], *, most: int) -> int:
    """A count of pods, as a label (a string) or an API field (an integer) writes it; from 1 to `most`
    (the limit yuniplace is configured with). A problem names `where`, the key the user wrote."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value):
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        number = 0
    if number < 1:
        problems.append(Problem(where, value, "must be a whole number of pods, at least 1"))
    elif number > most:
        problems.append(Problem(where, value, f"must be at most {most} pods, yuniplace's limit for a gang"))
    return number


def shaped_group(
    pod: Mapping[str, Any], name: str, min_member: int, where: str, problems: list[Problem]
) -> dict[str, Any]:
    """A YuniKorn task-group object of `min_member` pods like `pod`: its requests, node selector,
    tolerations and node affinity. `where` names what set the count, for the message when the pod
    requests nothing (a placeholder could then hold no room)."""
    spec = pod.get("spec", {})
    requests = {key: format_quantity(amount) for key, amount in pod_requests(spec).items() if amount > 0}
    if not requests:
        problems.append(
            Problem(
                f"{where}: pod {pod.get('metadata', {}).get('name')} requests",
                {},
                "are empty; a gang reserves room by the members' requests, so set cpu/memory requests",
            )
        )
    group: dict[str, Any] = {"name": name, "minMember": min_member, "minResource": requests}
    for field in ("nodeSelector", "tolerations"):
        if spec.get(field):
            group[field] = spec[field]
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity:
        group["affinity"] = {"nodeAffinity": node_affinity}
    return group
