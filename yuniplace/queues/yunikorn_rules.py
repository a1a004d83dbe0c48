"""YuniKorn's placement rules (`placementrules` of a partition) read into yuniplace's, and checked as
YuniKorn checks them when it loads a configuration: known rule names, a value where the rule needs one,
no parent rule under a fixed rule that names a full path, and every path the rules name without
anything dynamic in it must lead to a leaf queue that exists (or may be created).

`provided`, `tag` and `fixed` map one to one. `user` is refused: YuniKorn's user is the person or
controller that submitted the workload, which yuniplace never learns; a service account is not the same
identity, and placing by it would quietly put applications in queues nobody configured for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from yuniplace.queues import identity
from yuniplace.queues.goyaml import Decoder
from yuniplace.queues.model import ROOT, PlacementRule, RuleFilter, RuleKind

RULE_FIELDS = ("name", "create", "filter", "parent", "value")
FILTER_FIELDS = ("type", "users", "groups")
MAX_RULES = 64
MAX_CHAIN = 8  # a rule and its parent rules
QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}$")
_KINDS = {kind.value: kind for kind in RuleKind}


def qualified(name: str) -> bool:
    return name == ROOT or name.startswith(ROOT + ".")


def read_rules(raw: Any, decoder: Decoder, parents: Mapping[str, bool]) -> tuple[PlacementRule, ...]:
    """The partition's rules, in order. `parents`: every configured queue's path, and whether it is a
    parent."""
    items = decoder.items(raw, "", "placementrules")
    if len(items) > MAX_RULES:
        decoder.error("", "placementrules", f"{len(items)} rules", f"are more than the limit of {MAX_RULES}")
        return ()
    rules: list[PlacementRule] = []
    for index, item in enumerate(items):
        field = f"placementrules[{index}]"
        rule = _rule(item, decoder, field, 1)
        if rule is not None:
            _check_paths(rule, decoder, field, parents)
            rules.append(rule)
    return tuple(rules)


def _rule(raw: Any, decoder: Decoder, field: str, depth: int) -> PlacementRule | None:
    if isinstance(raw, list):
        decoder.error("", field, raw, "must be one rule (a mapping with name, create, value…), not a list")
        return None
    entries = decoder.fields(raw, "", field, RULE_FIELDS)
    name = decoder.text(entries.get("name"), "", f"{field}.name")
    value = decoder.text(entries.get("value"), "", f"{field}.value").lower()
    create = decoder.flag(entries.get("create"), "", f"{field}.create")
    rule_filter = _filter(entries.get("filter"), decoder, f"{field}.filter")
    parent = None
    if entries.get("parent") is not None:
        if depth >= MAX_CHAIN:
            decoder.error(
                "", f"{field}.parent", depth + 1, f"rules in one chain are more than the limit of {MAX_CHAIN}"
            )
        else:
            parent = _rule(entries["parent"], decoder, f"{field}.parent", depth + 1)
    kind = _KINDS.get(name.lower())
    if kind is None:
        decoder.error("", f"{field}.name", name, _unknown_rule(name))
        return None
    problems = len(decoder.findings.errors)
    if kind is RuleKind.TAG and not value:
        decoder.error("", f"{field}.value", value, "must name the tag: namespace, or a label of the application's pods")
    if kind is RuleKind.FIXED:
        _check_fixed(value, entries.get("parent") is not None, decoder, field)
    if rule_filter is None or len(decoder.findings.errors) > problems:
        return None
    return PlacementRule(kind, value if kind is not RuleKind.PROVIDED else "", create, parent, rule_filter)


def _unknown_rule(name: str) -> str:
    lowered = name.lower()
    if lowered == "user":
        return (
            "places by the submitting user, whom yuniplace never learns (it knows an application's namespace and "
            "service account): use tag with value namespace, a tag on a label, or provided"
        )
    if lowered == "recovery":
        return "is YuniKorn's internal rule and cannot be configured"
    return "is not a placement rule yuniplace knows (provided, tag, fixed)"


def _check_fixed(value: str, has_parent: bool, decoder: Decoder, field: str) -> None:
    if not value:
        decoder.error("", f"{field}.value", value, "must name the queue")
        return
    bad = [part for part in value.split(".") if not QUEUE_NAME.match(part)]
    if bad:
        decoder.error("", f"{field}.value", value, f"has {bad[0]!r}, which is not a queue name")
    elif qualified(value) and has_parent:
        decoder.error(
            "",
            f"{field}.parent",
            value,
            "cannot be set: a fixed rule that names a full path (root.…) has no parent rule",
        )


def _filter(raw: Any, decoder: Decoder, field: str) -> RuleFilter | None:
    if raw is None:
        return RuleFilter()
    entries = decoder.fields(raw, "", field, FILTER_FIELDS)
    kind = decoder.text(entries.get("type"), "", f"{field}.type")
    if kind.lower() not in ("", "allow", "deny"):
        decoder.error("", f"{field}.type", kind, "must be allow or deny")
        return None
    users = decoder.strings(entries.get("users"), "", f"{field}.users")
    groups = decoder.strings(entries.get("groups"), "", f"{field}.groups")
    return identity.rule_filter(kind, users, groups, decoder.findings, decoder.where(field))


def _chain(rule: PlacementRule) -> list[PlacementRule]:
    """The outermost parent rule first, `rule` last."""
    chain = [rule]
    while chain[0].parent is not None:
        chain.insert(0, chain[0].parent)
    return chain


def _check_paths(rule: PlacementRule, decoder: Decoder, field: str, parents: Mapping[str, bool]) -> None:
    """The longest fixed part of the path the chain yields must fit the configured queues."""
    static, dynamic = "", False
    for link in _chain(rule):
        if link.kind is not RuleKind.FIXED:
            dynamic = True
            break
        if qualified(link.value):
            if static:
                decoder.error(
                    "",
                    field,
                    link.value,
                    "names a full path (root.…) in a fixed rule that is not the first of its chain",
                )
                return
            static = link.value
        else:
            static = f"{static or ROOT}.{link.value}"
    if not static:
        return
    problem = _path_problem(static.split("."), rule.create, dynamic, parents)
    if problem:
        decoder.error("", field, static, problem)


def _path_problem(parts: list[str], create: bool, dynamic: bool, parents: Mapping[str, bool]) -> str:
    current = ""
    for index, name in enumerate(parts):
        path = f"{current}.{name}" if current else name
        if current and not any(p.startswith(current + ".") for p in parents):
            if not parents[current]:
                return f"would put queues under {current}, which is a leaf queue"
            return "" if create else "names queues that do not exist, and create is false"
        if path not in parents:
            return "" if create else "names queues that do not exist, and create is false"
        if index == len(parts) - 1:
            if dynamic and not parents[path]:
                return "puts queues under a leaf queue: a rule's parent must yield a parent queue"
            if not dynamic and parents[path]:
                return "names a parent queue: applications are placed in leaf queues"
        current = path
    return ""
