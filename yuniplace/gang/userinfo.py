"""Who submitted a workload: the user and groups the API server authenticated when it was created,
recorded by yuniplace's webhook in YuniKorn's annotation `yunikorn.apache.org/user.info`, so queue
limits per user and per group (YuniKorn's `limits:`) count each application against its submitter.

The value is YuniKorn's: `{"user": "alice", "groups": ["devs", "system:authenticated"]}`. The webhook
writes it and never lets a user write it (see webhook/identity.py), so the controller may trust what
it reads here; it still reads it as hostile text, since a pod created while the webhook was down may
carry anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from yuniplace import boundedjson
from yuniplace.gang.keys import Key

ANNOTATION = "yunikorn.apache.org/user.info"
KEYS = (
    Key(
        ANNOTATION,
        "annotation",
        "gang pod, and the pod template of a gang workload",
        "yuniplace's webhook",
        'who created it, `{"user": "alice", "groups": ["devs"]}`, for queue limits per user and group; only '
        "a trusted requester may bring a record of its own",
    ),
)
MAX_NAME = 253  # a user or group name longer than a Kubernetes name is not one the API server issued
MAX_GROUPS = 64
MAX_TEXT = 16 * 1024
MAX_DEPTH = 2  # an object holding a list: deeper nesting is never a record, and `[[[…` must not recurse


@dataclass(frozen=True)
class UserInfo:
    user: str
    groups: tuple[str, ...] = ()


def encode(user: str, groups: Sequence[str]) -> str:
    """The annotation's value, as YuniKorn's admission controller writes it."""
    return json.dumps({"user": user, "groups": list(groups)}, separators=(",", ":"))


def parse(text: str | None) -> UserInfo | None:
    """The recorded submitter; None when there is no record or it cannot be one the webhook wrote."""
    if not text or len(text) > MAX_TEXT:
        return None
    try:
        value: Any = boundedjson.loads(text, max_depth=MAX_DEPTH)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    user, groups = value.get("user"), value.get("groups") or []
    if not isinstance(user, str) or not 0 < len(user) <= MAX_NAME or not isinstance(groups, list):
        return None
    if len(groups) > MAX_GROUPS or not all(isinstance(g, str) and 0 < len(g) <= MAX_NAME for g in groups):
        return None
    return UserInfo(user, tuple(groups))


def of_object(obj: Mapping[str, Any]) -> UserInfo | None:
    """The submitter recorded on a pod (or a workload)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return parse(annotations.get(ANNOTATION)) if isinstance(annotations, Mapping) else None
