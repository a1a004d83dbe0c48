"""How a queue's settings come from its parent's, by the settings table (queues.settings): a setting
that inherits passes down unless the queue sets its own, which replaces the parent's or joins it (ACLs
add up; a fence on reclaim holds below it); any other is the queue's own, or the model's default.

YuniKorn derives a queue a placement rule creates from its parent by the same merge as a configured
child, so both are made here: `child` for a configured queue and what it sets itself, `below` for a
created one, which sets nothing but where it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yuniplace.queues.model import QueueSpec
from yuniplace.queues.settings import QUEUE_SETTINGS


def child(parent: QueueSpec | None, own: Mapping[str, Any]) -> QueueSpec:
    """The queue that sets `own` (field → value, its path included) below `parent` (None: the root)."""
    fields: dict[str, Any] = {}
    for setting in QUEUE_SETTINGS:
        passes = parent is not None and setting.inherits
        if setting.name in own:
            value = own[setting.name]
            if passes and setting.join is not None:
                value = setting.join(getattr(parent, setting.name), value)
            fields[setting.name] = value
        elif passes:
            fields[setting.name] = getattr(parent, setting.name)
    return QueueSpec(**fields)


def below(parent: QueueSpec, path: str, *, source: str, parent_queue: bool = False) -> QueueSpec:
    """A queue a placement rule creates under `parent` (its nearest configured queue): every setting
    that inherits is the parent's, and it has no guarantee, max or limits of its own."""
    return child(parent, {"path": path, "source": source, "parent_queue": parent_queue})
