"""Which queue an application goes to, by the placement rules, as YuniKorn 1.8 places it.

The rules are tried in order; the first that yields a queue the application may use places it. A rule
yields nothing when what it reads is missing (no queue named, no such tag), when its filter does not
apply, or when the queue does not exist and the rule may not create it. A queue it yields is still
passed over for the next rule when it is a parent, when the application may not submit to it (its ACLs
and its parents'), or when it is closed. When no rule places the application, `root.default` takes it if
it exists and lets it in. Without rules, YuniKorn's implicit rule applies: the provided queue, never
created.

A name that is not a full path (`root.…`) is put under the parent rule's queue, or under root, with its
dots made `_dot_`; a full path is used as it is. A name that is not a valid queue name refuses the
application outright (YuniKorn's rule errors do), and so does a parent rule that yields a leaf, or a
queue to be created below a leaf. Queues a rule creates are leaves (with parents as needed) with no
guarantee or max of their own.

With an empty configuration there is nothing to place by: the caller keeps its own behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from yuniplace.gang.keys import Key
from yuniplace.queues.inheritance import below
from yuniplace.queues.model import ROOT, PlacementRule, QueueConfig, QueueSpec, RuleKind

DEFAULT_QUEUE = "root.default"
MAX_LEVELS = 32  # below root, as in a configuration: a tenant's queue name cannot make deeper trees
MAX_SHOWN = 80
MAX_REASON = 1024  # an Event's note holds 1 KiB
PARENT_QUEUE_ANNOTATION = "yunikorn.apache.org/parentqueue"  # a namespace's; tag namespace.parentqueue
KEYS = (
    Key(
        PARENT_QUEUE_ANNOTATION,
        "annotation",
        "namespace",
        "you",
        "the parent queue of the namespace's queue, for the placement rule `tag` with `namespace.parentqueue`",
    ),
)
QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}$")
IMPLICIT_RULES = (PlacementRule(RuleKind.PROVIDED),)


@dataclass(frozen=True)
class Placement:
    """Where an application goes: `queue`, the leaf's path, and the queues to create for it first
    (`new_queues`: parents first, the leaf last); or, with `queue` None, why it is refused."""

    queue: str | None
    reason: str
    new_queues: tuple[QueueSpec, ...] = ()

    @property
    def refused(self) -> bool:
        return self.queue is None

    @property
    def created(self) -> bool:
        return bool(self.new_queues)


class _Refused(Exception):
    """A rule failed in a way YuniKorn rejects the application for, rather than trying the next rule."""


@dataclass(frozen=True)
class _Application:
    provided: str
    namespace: str
    labels: Mapping[str, str]
    service_account: str | None
    namespace_annotations: Mapping[str, str]

    def who(self) -> str:
        if self.service_account:
            return f"service account {self.service_account} of namespace {self.namespace}"
        return f"namespace {self.namespace}"

    def tag(self, name: str) -> str:
        """YuniKorn's application tags: the namespace, the namespace's parent queue annotation; then,
        beyond YuniKorn, the application's labels (the key matched as YuniKorn matches tags, ignoring case)."""
        if name == "namespace":
            return self.namespace or "default"
        if name == "namespace.parentqueue":
            return self.namespace_annotations.get(PARENT_QUEUE_ANNOTATION, "")
        if name in self.labels:
            return self.labels[name]
        return next((value for key, value in self.labels.items() if key.lower() == name), "")


class _Queues:
    """The configured queues and the dynamic ones that exist now."""

    def __init__(self, config: QueueConfig, dynamic: Collection[str]) -> None:
        self.config = config
        self.dynamic = {path.lower() for path in dynamic}
        self.dynamic_parents = {p.rpartition(".")[0] for p in self.dynamic}
        for path in list(self.dynamic_parents):
            while "." in path:
                path = path.rpartition(".")[0]
                self.dynamic_parents.add(path)

    def exists(self, path: str) -> bool:
        return path in self.config.queues or path in self.dynamic or path in self.dynamic_parents

    def is_leaf(self, path: str) -> bool:
        if path in self.config.queues:
            return self.config.is_leaf(path) and path not in self.dynamic_parents
        return path not in self.dynamic_parents

    def configured(self, path: str) -> QueueSpec:
        return nearest_configured(self.config, path)

    def nearest_existing(self, path: str) -> str:
        while not self.exists(path) and "." in path:
            path = path.rpartition(".")[0]
        return path


def place(
    config: QueueConfig,
    *,
    provided_queue: str | None,
    namespace: str,
    labels: Mapping[str, str],
    service_account: str | None,
    namespace_annotations: Mapping[str, str] | None = None,
    dynamic_queues: Collection[str] = (),
) -> Placement:
    """The queue for an application that names `provided_queue` (label or annotation
    yunikorn.apache.org/queue, or label queue; a Volcano Queue's name also works), runs in `namespace`
    as `service_account`, and carries `labels`. `namespace_annotations`: the namespace's, for the tag
    namespace.parentqueue. `dynamic_queues`: the leaves rules created earlier that still exist."""
    app = _Application(provided_queue or "", namespace, labels, service_account, namespace_annotations or {})
    queues = _Queues(config, dynamic_queues)
    rules = config.rules or IMPLICIT_RULES
    notes: list[str] = []
    try:
        for index, rule in enumerate(rules, 1):
            label = f"rule {index} ({describe(rule)})"
            path = _evaluate(rule, app, queues, notes, label)
            if path is not None:
                placement = _admit(path, app, queues, notes, label)
                if placement is not None:
                    return placement
        if queues.exists(DEFAULT_QUEUE):
            placement = _admit(
                DEFAULT_QUEUE, app, queues, notes, f"{DEFAULT_QUEUE}, where YuniKorn puts what no rule placed"
            )
            if placement is not None:
                return placement
        else:
            notes.append(f"{DEFAULT_QUEUE} does not exist")
    except _Refused as error:
        return Placement(None, str(error))
    reason = "no placement rule placed the application: " + "; ".join(notes)
    return Placement(None, reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…")


def describe(rule: PlacementRule) -> str:
    text = rule.kind.value + (f" {rule.value}" if rule.value else "")
    return f"{text} under {describe(rule.parent)}" if rule.parent is not None else text


def _evaluate(rule: PlacementRule, app: _Application, queues: _Queues, notes: list[str], label: str) -> str | None:
    """The path `rule` yields for `app`, or None (with a note saying why)."""
    if rule.kind is RuleKind.PROVIDED:
        name = app.provided
        if not name:
            notes.append(f"{label}: the application names no queue")
            return None
        if name in queues.config.names and not _qualified(name):
            name = queues.config.names[name]
    elif rule.kind is RuleKind.TAG:
        name = app.tag(rule.value)
        if not name:
            notes.append(f"{label}: the application has no {rule.value}")
            return None
    else:
        name = rule.value
    if not rule.filter.applies(app.namespace, app.service_account):
        notes.append(f"{label}: its filter does not take {app.who()}")
        return None
    path = _qualify(name, rule, app, queues, notes, label)
    if path is None:
        return None
    if not rule.create and not queues.exists(path):
        notes.append(f"{label}: {path} does not exist and the rule does not create queues")
        return None
    return path


def _qualify(
    name: str, rule: PlacementRule, app: _Application, queues: _Queues, notes: list[str], label: str
) -> str | None:
    if _qualified(name):
        if name.count(".") > MAX_LEVELS:
            raise _Refused(f"{label}: {_shown(name)} is more than {MAX_LEVELS} queues deep")
        bad = [part for part in name.split(".") if not QUEUE_NAME.match(part)]
        if bad:
            raise _Refused(f"{label}: {_shown(name)} is not a queue path ({_shown(bad[0])} is not a queue name)")
        return name.lower()
    child = name.replace(".", "_dot_")
    if not QUEUE_NAME.match(child):
        raise _Refused(f"{label}: {_shown(name)} is not a queue name (letters, digits and _ : # / @ -, at most 64)")
    parent = ROOT
    if rule.parent is not None:
        found = _evaluate(rule.parent, app, queues, notes, f"{label}, its parent rule")
        if found is None:
            return None
        parent = found if found.startswith(ROOT + ".") else f"{ROOT}.{found}"
        if parent.count(".") >= MAX_LEVELS:
            raise _Refused(f"{label}: {_shown(parent)}.{child} is more than {MAX_LEVELS} queues deep")
        if queues.exists(parent) and queues.is_leaf(parent):
            raise _Refused(f"{label}: its parent rule yields {parent}, a leaf queue, where no queue can be created")
    return f"{parent}.{child}".lower()


def _shown(name: str) -> str:
    """A name as messages show it: quoted, and cut short (a tenant's annotation can be 256 KiB)."""
    return repr(name if len(name) <= MAX_SHOWN else name[: MAX_SHOWN - 1] + "…")


def _qualified(name: str) -> bool:
    return name.startswith(ROOT + ".")


def _admit(path: str, app: _Application, queues: _Queues, notes: list[str], label: str) -> Placement | None:
    """The placement in `path`, if the application may go there; None (with a note) to try the next rule."""
    if queues.exists(path):
        spec = queues.configured(path)
        if not queues.is_leaf(path):
            notes.append(f"{label}: {path} is a parent queue")
        elif not spec.submitters.allow(app.namespace, app.service_account):
            notes.append(f"{label}: {path} does not take applications of {app.who()} (submitacl)")
        elif spec.path == path and not spec.open:
            notes.append(f"{label}: {path} is closed")
        else:
            return Placement(path, f"placed by {label}")
        return None
    above = queues.nearest_existing(path)
    spec = queues.configured(above)
    if not spec.submitters.allow(app.namespace, app.service_account):
        notes.append(f"{label}: {above}, where {path} would be created, does not take applications of {app.who()}")
        return None
    if queues.is_leaf(above):
        raise _Refused(f"{label}: {path} cannot be created: {above} is a leaf queue")
    if not spec.open:
        raise _Refused(f"{label}: {path} cannot be created: {above} is closed")
    names = path[len(above) + 1 :].split(".")
    created = []
    for depth in range(1, len(names) + 1):
        created.append(
            dynamic_queue(queues.config, f"{above}.{'.'.join(names[:depth])}", leaf=depth == len(names), rule=label)
        )
    return Placement(path, f"placed by {label}, which creates {path}", tuple(created))


def dynamic_queue(config: QueueConfig, path: str, *, leaf: bool = True, rule: str = "a placement rule") -> QueueSpec:
    """A queue a rule creates: no guarantee, max or limits of its own, and every setting that passes
    down from the nearest configured queue above it (inheritance.below)."""
    return below(nearest_configured(config, path), path, source=f"created by {rule}", parent_queue=not leaf)


def nearest_configured(config: QueueConfig, path: str) -> QueueSpec:
    """The queue, or the nearest configured queue above it."""
    while path not in config.queues and "." in path:
        path = path.rpartition(".")[0]
    return config.queues.get(path) or QueueSpec(ROOT, parent_queue=True)
