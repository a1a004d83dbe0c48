"""A queue's `properties` in YuniKorn's queues.yaml, and yuniplace's own for what YuniKorn has no word
for, read into the settings they set by the settings table (queues.settings: each spelling under
`properties.`).

What a queue sets passes to the queues below it as YuniKorn passes properties: a child starts from its
parent's and overrides what it sets itself (queues.inheritance, by the table). `priority.policy` and
`priority.offset`, which every queue sets for itself in YuniKorn, have no effect here; of
`preemption.policy`, `disabled` passes down (its gangs are never victims) and `fence` holds for the
queues below the fence, as in YuniKorn. A property YuniKorn does not know is kept by YuniKorn and
ignored here, without a word; one in yuniplace.io/ must be one of yuniplace's, so a misspelt switch is
an error rather than a silent default. Values of the properties yuniplace acts on are checked (YuniKorn
would log a bad value and use its default; here the configuration is refused, so the queue never runs
with a setting nobody meant).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from yuniplace.queues.goyaml import Decoder
from yuniplace.queues.settings import Source, keys
from yuniplace.queues.values import BadValue, one_of

PROPERTIES = keys(Source.YUNIKORN)
SORT_POLICY = "application.sort.policy"
PRIORITY_POLICY = "priority.policy"
PRIORITY_OFFSET = "priority.offset"
PREEMPTION_POLICY = "preemption.policy"
OWN_PREFIX = "yuniplace.io/"
OWN = tuple(key for key in PROPERTIES.by_key if key.startswith(OWN_PREFIX))

# YuniKorn's properties that change nothing in yuniplace, and why.
WITHOUT_EFFECT = {
    PRIORITY_OFFSET: "has no effect: yuniplace never compares priorities across queues",
    "preemption.delay": "has no effect: a queue reclaims its guarantee as soon as admission needs it",
    "preemption.quota.delay": "has no effect: yuniplace does not preempt to enforce a lowered max",
    "application.unschedasks.backoff": "has no effect: kube-scheduler retries unschedulable pods itself",
    "application.unschedasks.backoff.delay": "has no effect: kube-scheduler retries unschedulable pods itself",
}
_INT32 = (-(2**31), 2**31 - 1)


def read(own: Mapping[str, str], decoder: Decoder, queue: str, parent_queue: bool) -> dict[str, Any]:
    """The settings `queue`'s own properties set (field → value); the properties that cannot be used,
    and those without effect, are reported."""
    settings: dict[str, Any] = {}
    for key, value in own.items():
        where = f"properties.{key}"
        if key in PROPERTIES.by_key:
            try:
                settings.update(PROPERTIES.read(key, value))
            except BadValue as bad:
                decoder.error(queue, where, value, str(bad))
                continue
            caveat = _caveat(key, value.lower(), parent_queue)
            if caveat:
                decoder.warn(queue, where, value, caveat)
        elif key == PRIORITY_POLICY:
            try:
                one_of(value, "default", "fence")
            except BadValue as bad:
                decoder.error(queue, where, value, str(bad))
        elif key == PRIORITY_OFFSET:
            if not re.fullmatch(r"[+-]?[0-9]{1,10}", value.strip()) or not _INT32[0] <= int(value) <= _INT32[1]:
                decoder.error(queue, where, value, "must be a whole number from -2147483648 to 2147483647")
            else:
                decoder.warn(queue, where, value, WITHOUT_EFFECT[key])
        elif key in WITHOUT_EFFECT:
            decoder.warn(queue, where, value, WITHOUT_EFFECT[key])
        elif key.startswith(OWN_PREFIX):
            decoder.error(queue, where, key, f"is not a yuniplace property (there are {', '.join(OWN)})")
    return settings


def _caveat(key: str, lowered: str, parent_queue: bool) -> str:
    """Where a valid value does not do all it does in YuniKorn."""
    if key == SORT_POLICY and lowered == "stateaware":
        return "is deprecated in YuniKorn, where it means fifo, as here"
    if key == PREEMPTION_POLICY and lowered == "fence" and parent_queue:
        return (
            "keeps reclaim inside this queue's subtree in YuniKorn; yuniplace cannot bound reclaim to a "
            "subtree, so no queue under it reclaims its guarantee"
        )
    return ""
