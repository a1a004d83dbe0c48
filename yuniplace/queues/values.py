"""How the text of a queue setting written under a key (a YuniKorn property, a Volcano Queue's
annotation) becomes its value in the queue model. Each function takes the text as written and gives
the value, or raises BadValue with what the text must be, so that every source refuses the same bad
text in the same words. Case does not matter, as YuniKorn lower-cases its property values; label keys
and values keep theirs.
"""

from __future__ import annotations

from yuniplace.kube.names import LABEL_KEY, LABEL_VALUE, MAX_LABEL_KEY
from yuniplace.queues.model import Ordering


class BadValue(ValueError):
    """The text cannot be the setting's value; the message says what it must be."""


def one_of(text: str, *choices: str) -> str:
    """The text, lower case, if it is one of the choices."""
    lowered = text.lower()
    if lowered not in choices:
        raise BadValue(f"must be {', '.join(choices[:-1])} or {choices[-1]}")
    return lowered


def switch(text: str) -> bool:
    """`true` or `false` (yuniplace's switches)."""
    return one_of(text, "true", "false") == "true"


def ordering(text: str) -> Ordering:
    """YuniKorn's application.sort.policy: fifo, fair, or stateaware (deprecated; YuniKorn reads it as fifo)."""
    return Ordering.FAIR if one_of(text, "fifo", "fair", "stateaware") == "fair" else Ordering.FIFO


def enabled(text: str) -> bool:
    """`enabled` or `disabled` (YuniKorn's application.sort.priority)."""
    return one_of(text, "enabled", "disabled") == "enabled"


def preemption_policy(text: str) -> str:
    """YuniKorn's preemption.policy, lower case: default, fence or disabled."""
    return one_of(text, "default", "fence", "disabled")


def reclaims(text: str) -> bool:
    """Whether a queue with this preemption.policy reclaims its guarantee: not behind a fence."""
    return preemption_policy(text) != "fence"


def victim(text: str) -> bool:
    """Whether a queue with this preemption.policy may have what it borrowed reclaimed: not when disabled."""
    return preemption_policy(text) != "disabled"


def node_selector(text: str) -> dict[str, str]:
    """`pool=gpu,zone=a` as a node selector; "" for none."""
    selector: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep:
            raise BadValue("must be label=value pairs separated by commas (pool=gpu,zone=a)")
        if not LABEL_KEY.match(key) or len(key) > MAX_LABEL_KEY:
            raise BadValue(f"has {key!r}, which is not a label key")
        if not LABEL_VALUE.match(value):
            raise BadValue(f"has {value!r}, which is not a label value")
        if key in selector:
            raise BadValue(f"names {key} twice")
        selector[key] = value
    return selector
