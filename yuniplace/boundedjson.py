"""JSON from writers yuniplace does not trust (annotations any tenant can set, webhook request bodies),
accepted only within a bound on nesting.

Python's decoder recurses once per level, so a few kilobytes of `[[[[…` raise RecursionError (not
ValueError) deep inside whoever parsed them; a tenant could use that to crash a cycle that serves
every tenant. Here every such input is a TooDeep, a ValueError, which callers handling bad JSON
already handle.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


class TooDeep(ValueError):
    """Nested deeper than allowed."""


def depth(value: Any) -> int:
    """The deepest nesting of lists and dicts in a decoded value (0 for a scalar); iterative, so any
    value the decoder produced can be measured."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads(text: str | bytes, *, max_depth: int) -> Any:
    """json.loads, refusing (TooDeep) input nested deeper than `max_depth`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(f"is nested more deeply than the {max_depth} levels allowed") from None
    if depth(value) > max_depth:
        raise TooDeep(f"is nested more deeply than the {max_depth} levels allowed")
    return value
