"""A queue's `properties` in YuniKorn's queues.yaml, and yuniplace's own for what YuniKorn has no word
for, turned into the queue's switches.

Properties pass from a queue to its children as YuniKorn passes them: a child starts from its parent's
and overrides what it sets itself, except `priority.policy` and `priority.offset`, which every queue
sets for itself, and `preemption.policy`, of which only `disabled` passes down. A property YuniKorn
does not know is kept by YuniKorn and ignored here, without a word; one in yuniplace.io/ must be one
of yuniplace's, so a misspelt switch is an error rather than a silent default. Values of the
properties yuniplace acts on are checked (YuniKorn would log a bad value and use its default; here the
configuration is refused, so the queue never runs with a setting nobody meant).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from yuniplace.queues.goyaml import Decoder
from yuniplace.queues.model import Ordering

SORT_POLICY = "application.sort.policy"
SORT_PRIORITY = "application.sort.priority"
PRIORITY_POLICY = "priority.policy"
PRIORITY_OFFSET = "priority.offset"
PREEMPTION_POLICY = "preemption.policy"
SHARING = "yuniplace.io/sharing"
BORROWING = "yuniplace.io/borrowing"
NODE_SELECTOR = "yuniplace.io/node-selector"
OWN_PREFIX = "yuniplace.io/"
OWN = (SHARING, BORROWING, NODE_SELECTOR)

# YuniKorn's properties that change nothing in yuniplace, and why.
WITHOUT_EFFECT = {
    PRIORITY_OFFSET: "has no effect: yuniplace never compares priorities across queues",
    "preemption.delay": "has no effect: a queue reclaims its guarantee as soon as admission needs it",
    "preemption.quota.delay": "has no effect: yuniplace does not preempt to enforce a lowered max",
    "application.unschedasks.backoff": "has no effect: kube-scheduler retries unschedulable pods itself",
    "application.unschedasks.backoff.delay": "has no effect: kube-scheduler retries unschedulable pods itself",
}
_INT32 = (-(2**31), 2**31 - 1)
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
LABEL_KEY = re.compile(rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?{_LABEL_NAME}$")
LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")


def inherit(parent: Mapping[str, str]) -> dict[str, str]:
    """What a child queue starts from, given its parent's properties in force."""
    result = dict(parent)
    result.pop(PRIORITY_POLICY, None)
    result.pop(PRIORITY_OFFSET, None)
    if result.get(PREEMPTION_POLICY, "").lower() != "disabled":
        result.pop(PREEMPTION_POLICY, None)
    return result


def check(own: Mapping[str, str], decoder: Decoder, queue: str, parent_queue: bool) -> None:
    """Report the properties written on `queue` that cannot be used, and those without effect."""
    for key, value in own.items():
        where = f"properties.{key}"
        lowered = value.lower()
        if key == SORT_POLICY:
            if lowered not in ("fifo", "fair", "stateaware"):
                decoder.error(queue, where, value, "must be fifo, fair or stateaware")
            elif lowered == "stateaware":
                decoder.warn(queue, where, value, "is deprecated in YuniKorn, where it means fifo, as here")
        elif key == SORT_PRIORITY:
            if lowered not in ("enabled", "disabled"):
                decoder.error(queue, where, value, "must be enabled or disabled")
        elif key == PRIORITY_POLICY:
            if lowered not in ("default", "fence"):
                decoder.error(queue, where, value, "must be default or fence")
        elif key == PREEMPTION_POLICY:
            if lowered not in ("default", "fence", "disabled"):
                decoder.error(queue, where, value, "must be default, fence or disabled")
            elif lowered == "fence" and parent_queue:
                decoder.warn(
                    queue,
                    where,
                    value,
                    "keeps reclaim inside this queue's subtree in YuniKorn; yuniplace cannot bound reclaim to a "
                    "subtree, so no queue under it reclaims its guarantee",
                )
        elif key == PRIORITY_OFFSET:
            if not re.fullmatch(r"[+-]?[0-9]{1,10}", value.strip()) or not _INT32[0] <= int(value) <= _INT32[1]:
                decoder.error(queue, where, value, "must be a whole number from -2147483648 to 2147483647")
            else:
                decoder.warn(queue, where, value, WITHOUT_EFFECT[key])
        elif key in WITHOUT_EFFECT:
            decoder.warn(queue, where, value, WITHOUT_EFFECT[key])
        elif key in (SHARING, BORROWING):
            if lowered not in ("true", "false"):
                decoder.error(queue, where, value, "must be true or false")
        elif key == NODE_SELECTOR:
            node_selector(value, decoder, queue, where)
        elif key.startswith(OWN_PREFIX):
            decoder.error(queue, where, key, f"is not a yuniplace property (there are {', '.join(OWN)})")


def node_selector(text: str, decoder: Decoder | None, queue: str = "", where: str = "") -> dict[str, str]:
    """`pool=gpu,zone=a` as a node selector; "" for none. Problems go to `decoder` when given."""
    selector: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = (part.strip() for part in item.partition("="))
        problem = _pair_problem(key, sep, value, selector)
        if problem:
            if decoder is not None:
                decoder.error(queue, where, text, problem)
            return {}
        selector[key] = value
    return selector


def _pair_problem(key: str, sep: str, value: str, seen: Mapping[str, str]) -> str:
    if not sep:
        return "must be label=value pairs separated by commas (pool=gpu,zone=a)"
    if not LABEL_KEY.match(key) or len(key) > 317:
        return f"has {key!r}, which is not a label key"
    if not LABEL_VALUE.match(value):
        return f"has {value!r}, which is not a label value"
    if key in seen:
        return f"names {key} twice"
    return ""


@dataclass(frozen=True)
class Switches:
    """What a queue's properties in force turn on or off."""

    ordering: Ordering = Ordering.FIFO
    by_priority: bool = True
    sharing: bool = True
    borrowing: bool = True
    reclaimable: bool = True
    node_selector: Mapping[str, str] = field(default_factory=dict)


def switches(effective: Mapping[str, str]) -> Switches:
    """The switches of a queue from its properties in force (already checked). YuniKorn orders by
    priority first, unless application.sort.priority is disabled, then by its policy: fifo (arrival),
    fair (least usage), stateaware (deprecated: fifo)."""
    policy = effective.get(SORT_POLICY, "fifo").lower()
    return Switches(
        ordering=Ordering.FAIR if policy == "fair" else Ordering.FIFO,
        by_priority=effective.get(SORT_PRIORITY, "enabled").lower() != "disabled",
        sharing=effective.get(SHARING, "true").lower() != "false",
        borrowing=effective.get(BORROWING, "true").lower() != "false",
        reclaimable=effective.get(PREEMPTION_POLICY, "").lower() != "disabled",
        node_selector=node_selector(effective.get(NODE_SELECTOR, ""), None),
    )
