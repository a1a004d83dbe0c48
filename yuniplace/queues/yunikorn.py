"""YuniKorn's queues.yaml, read verbatim as YuniKorn 1.8 reads it, into yuniplace's queue model.

The file YuniKorn's users already have (usually the `queues.yaml` key of the ConfigMap `yunikorn-configs`)
works unchanged: the same keys (strict, lower case), the same quantities (`vcore` in cores or with `m`,
everything else in its base unit; no fractions), the same tree rules (a root is added when the top level
is not one `root` queue; names unique among siblings, ignoring case; a max at least the guarantee and no
more than the parents'; children's guarantees within the parent's), the same placement rule checks.
Where YuniKorn would accept something and quietly do otherwise (a bad property value, a property no code
reads), yuniplace refuses or warns, naming the queue and the field.

yuniplace schedules one partition: `default` (YuniKorn's Kubernetes shim uses no other), or the only one
written. The others are still checked, as YuniKorn checks them, so a file yuniplace accepts YuniKorn
accepts too. Resources keep their Kubernetes names (`vcore` becomes `cpu`); amounts become milli-units.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from yuniplace.gang import userinfo
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.taskgroups import RESOURCE_NAME
from yuniplace.queues import identity, inheritance, rawyaml, tree, yunikorn_properties, yunikorn_rules
from yuniplace.queues.goyaml import Decoder
from yuniplace.queues.model import ROOT, Limit, QueueConfig, QueueSpec, Submitters
from yuniplace.queues.problems import OMITTED, Findings, InvalidQueues, QueueProblem
from yuniplace.queues.quantity import VCORE, BadQuantity, yunikorn_milli

QUEUES_KEY = "queues.yaml"
POLICY_GROUP_KEY = "service.policyGroup"  # YuniKorn's ConfigMap may name another key: <policyGroup>.yaml
DEFAULT_PARTITION = "default"
MAX_QUEUES = 10_000
MAX_DEPTH = 32  # levels of queues below root
QUEUE_NAME = yunikorn_rules.QUEUE_NAME

CONFIG_FIELDS = ("partitions", "checksum")
PARTITION_FIELDS = ("name", "queues", "placementrules", "limits", "preemption", "nodesortpolicy", "usergroupresolver")
QUEUE_FIELDS = (
    "name",
    "parent",
    "resources",
    "maxapplications",
    "properties",
    "adminacl",
    "submitacl",
    "childtemplate",
    "queues",
    "limits",
)
RESOURCES_FIELDS = ("guaranteed", "max")
TEMPLATE_FIELDS = ("maxapplications", "properties", "resources")
LIMIT_FIELDS = ("limit", "users", "groups", "maxresources", "maxapplications")
PREEMPTION_FIELDS = ("enabled", "quotapreemptionenabled")
NODE_SORT_FIELDS = ("type", "resourceweights")
RESOLVER_FIELDS = ("type",)


@dataclass
class _Queue:
    """A queue as written, with what reading it found."""

    path: str
    name: str
    explicit_parent: bool | None
    guaranteed: dict[str, int] = field(default_factory=dict)
    max: dict[str, int] | None = None
    written: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, cpu|memory|…) → text as written
    settings: dict[str, Any] = field(default_factory=dict)  # what its properties set (field → value)
    submitters: Submitters = identity.NOBODY
    max_applications: int = 0
    limits: tuple[Limit, ...] = ()
    children: list[_Queue] = field(default_factory=list)

    @property
    def is_parent(self) -> bool:
        return bool(self.children) or bool(self.explicit_parent)


def read_configmap(configmap: Mapping[str, Any]) -> QueueConfig:
    """The queues of a ConfigMap as YuniKorn's shim finds them: the key `queues.yaml`, or
    `<service.policyGroup>.yaml` when the ConfigMap names a policy group. A ConfigMap without the key is
    an error naming it; a blank value is no configuration."""
    metadata = configmap.get("metadata") or {}
    name = metadata.get("name", "?") if isinstance(metadata, Mapping) else "?"
    data = configmap.get("data") or {}
    source = f"ConfigMap {name}"
    if not isinstance(data, Mapping):
        raise InvalidQueues([QueueProblem(source, "", "data", data, "must be a mapping of keys to text")])
    group = data.get(POLICY_GROUP_KEY)
    key = f"{group}.yaml" if isinstance(group, str) and group else QUEUES_KEY
    text = data.get(key)
    if not isinstance(text, str):
        expected = "is missing: the queue configuration is read from this key" + (
            f" (named by {POLICY_GROUP_KEY})" if key != QUEUES_KEY else ""
        )
        raise InvalidQueues([QueueProblem(source, "", f"data.{key}", OMITTED, expected)])
    return read_queues_yaml(text, f"{source} {key}")


def read_queues_yaml(text: str, source: str = QUEUES_KEY) -> QueueConfig:
    """The queues and placement rules of a YuniKorn queues.yaml. A blank file is no configuration
    (an empty QueueConfig: admission behaves as without one). InvalidQueues lists every problem."""
    findings = Findings(source)
    try:
        document = rawyaml.load(text)
    except rawyaml.Unreadable as error:
        findings.error("", "", OMITTED, str(error))
        findings.raise_errors()
    if document is None:
        return QueueConfig()
    decoder = Decoder(findings)
    top = decoder.fields(document, "", "", CONFIG_FIELDS)
    partitions = decoder.items(top.get("partitions"), "", "partitions")
    if not partitions and not findings.errors:
        decoder.error("", "partitions", top.get("partitions"), "must list at least one partition (name: default)")
    chosen = _choose_partition(partitions, decoder)
    config = QueueConfig()
    for index, (name, raw) in enumerate(_partitions_named(partitions, decoder)):
        scope = "" if index == chosen else f"partitions[{name}]"
        read = _Partition(Decoder(findings, scope)).read(raw, f"partitions[{index}]")
        if index == chosen:
            config = read
    findings.raise_errors()
    return QueueConfig(config.queues, config.rules, config.names, findings.warning_lines())


def _partitions_named(partitions: list[Any], decoder: Decoder) -> list[tuple[str, Any]]:
    """Each partition with its name as YuniKorn normalises it (none, or any case of default: default)."""
    named = []
    for index, raw in enumerate(partitions):
        name = decoder.text(raw.get("name") if isinstance(raw, dict) else None, "", f"partitions[{index}].name")
        named.append((DEFAULT_PARTITION if name.lower() in ("", DEFAULT_PARTITION) else name, raw))
    return named


def _choose_partition(partitions: list[Any], decoder: Decoder) -> int | None:
    named = _partitions_named(partitions, Decoder(Findings("")))
    seen: dict[str, int] = {}
    for index, (name, _) in enumerate(named):
        if name.lower() in seen:
            decoder.error("", f"partitions[{index}].name", name, "is the name of another partition")
        seen.setdefault(name.lower(), index)
    if DEFAULT_PARTITION in seen:
        for name, _ in named:
            if name != DEFAULT_PARTITION:
                decoder.warn(
                    "",
                    "partitions",
                    name,
                    "is checked but not used: yuniplace, like YuniKorn's Kubernetes shim, schedules partition default",
                )
        return seen[DEFAULT_PARTITION]
    if len(named) == 1:
        decoder.warn(
            "",
            "partitions[0].name",
            named[0][0],
            "is used as yuniplace's only partition (YuniKorn's Kubernetes shim would schedule in one named default)",
        )
        return 0
    if named:
        decoder.error(
            "", "partitions", [n for n, _ in named], "has no partition named default, the one yuniplace schedules"
        )
    return None


class _Partition:
    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.count = 0
        self.by_path: dict[str, _Queue] = {}

    def read(self, raw: Any, field_: str) -> QueueConfig:
        d = self.decoder
        entries = d.fields(raw, "", field_, PARTITION_FIELDS)
        if entries.get("queues") is None:
            d.error("", "queues", OMITTED, "must be set: a partition needs its queues, at least root")
            return QueueConfig()
        root = self._root(d.items(entries["queues"], "", "queues"))
        preemption = d.fields(entries.get("preemption"), "", "preemption", PREEMPTION_FIELDS)
        preemption_on = d.flag(preemption.get("enabled"), "", "preemption.enabled", default=True)
        if d.flag(preemption.get("quotapreemptionenabled"), "", "preemption.quotapreemptionenabled"):
            d.warn(
                "",
                "preemption.quotapreemptionenabled",
                "true",
                "has no effect: yuniplace does not preempt to enforce a lowered max",
            )
        self._node_sort_policy(entries.get("nodesortpolicy"))
        d.fields(entries.get("usergroupresolver"), "", "usergroupresolver", RESOLVER_FIELDS)
        partition_limits = self._limits(entries.get("limits"), "", "limits")
        if root is None:
            return QueueConfig()
        root.limits = partition_limits + root.limits  # the partition's limits hold for all of it: at root
        _check_max_applications(root, d)
        tree.check(_tree_node(root), lambda excess: _report(excess, self.by_path[excess.path], d))
        if not preemption_on:
            root.settings["preemption"] = False  # the partition's switch holds at root, so below it too
        queues: dict[str, QueueSpec] = {}
        self._specs(root, None, queues)
        if not any(spec.submitters != identity.NOBODY for spec in queues.values()):
            d.warn(
                ROOT,
                "submitacl",
                "",
                "lets no one in, nor does any queue's submitacl or adminacl: every application is refused "
                "(YuniKorn's rule); write submitacl: '*' on root to let everyone in",
            )
        parents = {path: self.by_path[path].is_parent for path in queues}
        rules = yunikorn_rules.read_rules(entries.get("placementrules"), d, parents)
        return QueueConfig(queues, rules)

    def _root(self, tops: list[Any]) -> _Queue | None:
        """The root queue: the one top-level queue named root, or one added above the top level."""
        d = self.decoder
        if len(tops) == 1 and isinstance(tops[0], dict) and str(tops[0].get("name") or "").lower() == ROOT:
            root = self._queue(tops[0], "", 0, 0)
            if root is not None:
                root.explicit_parent = True
                self.by_path[ROOT] = root
            raw_resources = tops[0].get("resources")
            if isinstance(raw_resources, dict) and (
                raw_resources.get("guaranteed") is not None or raw_resources.get("max") is not None
            ):
                d.error(ROOT, "resources", raw_resources, "must not be set: the root queue's room is the cluster")
            return root
        root = _Queue(ROOT, ROOT, True)
        self.by_path[ROOT] = root
        root.children = self._children(tops, root, 1)
        return root

    def _children(self, raws: list[Any], parent: _Queue, depth: int) -> list[_Queue]:
        d = self.decoder
        children: list[_Queue] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raws):
            child = self._queue(raw, parent.path, index, depth)
            if child is None:
                continue
            if child.name in seen:
                d.error(
                    parent.path,
                    f"queues[{index}].name",
                    raw.get("name"),
                    f"is the name of another queue under {parent.path} (queues[{seen[child.name]}]; names ignore case)",
                )
                continue
            seen[child.name] = index
            children.append(child)
            self.by_path[child.path] = child
        return children

    def _queue(self, raw: Any, parent_path: str, index: int, depth: int) -> _Queue | None:
        d = self.decoder
        field_ = f"queues[{index}]"
        self.count += 1
        if self.count > MAX_QUEUES:
            if self.count == MAX_QUEUES + 1:
                d.error(parent_path, field_, self.count, f"queues are more than the limit of {MAX_QUEUES}")
            return None
        if depth > MAX_DEPTH:
            d.error(parent_path, field_, depth, f"levels of queues are more than the limit of {MAX_DEPTH}")
            return None
        if not isinstance(raw, dict):
            d.error(parent_path, field_, raw, "must be a queue (a mapping with name, resources, queues…)")
            return None
        name = d.text(raw.get("name"), parent_path, f"{field_}.name")
        problem = _name_problem(name)
        if problem:
            d.error(parent_path, f"{field_}.name", name, problem)
            return None
        path = f"{parent_path}.{name.lower()}" if parent_path else ROOT
        entries = d.fields(raw, path, "", QUEUE_FIELDS)
        explicit = None if entries.get("parent") is None else d.flag(entries["parent"], path, "parent")
        queue = _Queue(path, name.lower(), explicit)
        resources = d.fields(entries.get("resources"), path, "resources", RESOURCES_FIELDS)
        if path != ROOT:
            queue.guaranteed = self._amounts(resources.get("guaranteed"), path, "resources.guaranteed", queue.written)
            if resources.get("max") is not None:
                queue.max = self._amounts(resources["max"], path, "resources.max", queue.written)
        queue.max_applications = d.count(entries.get("maxapplications"), path, "maxapplications")
        properties = d.string_map(entries.get("properties"), path, "properties")
        queue.submitters = identity.either(
            identity.submitters_of_acl(
                d.text(entries.get("submitacl"), path, "submitacl"), d.findings, d.where(path), "submitacl"
            ),
            identity.submitters_of_acl(
                d.text(entries.get("adminacl"), path, "adminacl"), d.findings, d.where(path), "adminacl"
            ),
        )
        queue.limits = self._limits(entries.get("limits"), path, "limits")
        children = d.items(entries.get("queues"), path, "queues")
        queue.children = self._children(children, queue, depth + 1)
        if explicit is False and children:
            d.error(path, "parent", entries["parent"], "contradicts its queues: a queue with children is a parent")
        queue.settings = yunikorn_properties.read(properties, d, path, queue.is_parent)
        self._child_template(entries.get("childtemplate"), path)
        return queue

    def _amounts(self, raw: Any, path: str, where: str, written: dict[tuple[str, str], str]) -> dict[str, int]:
        d = self.decoder
        amounts: dict[str, int] = {}
        kind = where.rpartition(".")[2]
        for resource, text in d.string_map(raw, path, where).items():
            entry = f"{where}.{resource}"
            if resource == "cpu":
                d.error(
                    path, entry, text, 'is not YuniKorn\'s name for CPU: write vcore (in cores, or millicores with "m")'
                )
                continue
            if not RESOURCE_NAME.match(resource) or len(resource) > 253:
                d.error(path, entry, resource, "is not a resource name (cpu is vcore; memory, pods, nvidia.com/gpu…)")
                continue
            try:
                amount = yunikorn_milli(resource, text)
            except BadQuantity as error:
                d.error(path, entry, text, str(error))
                continue
            name = "cpu" if resource == VCORE else resource
            amounts[name] = amount
            written[(kind, name)] = text
        return amounts

    def _limits(self, raw: Any, path: str, where: str) -> tuple[Limit, ...]:
        """YuniKorn's user and group limits of a queue (`path` "": the partition's, which hold at root).
        Each names users or groups (`*`: each one without a limit of its own) and sets maxapplications,
        maxresources or both; a user or group is named in one limit of a queue at most."""
        d = self.decoder
        limits: list[Limit] = []
        seen: dict[tuple[str, str], int] = {}
        for index, item in enumerate(d.items(raw, path, where)):
            field_ = f"{where}[{index}]"
            entries = d.fields(item, path, field_, LIMIT_FIELDS)
            name = d.text(entries.get("limit"), path, f"{field_}.limit")
            users = d.strings(entries.get("users"), path, f"{field_}.users")
            groups = d.strings(entries.get("groups"), path, f"{field_}.groups")
            applications = d.count(entries.get("maxapplications"), path, f"{field_}.maxapplications")
            resources = self._amounts(entries.get("maxresources"), path, f"{field_}.maxresources", {})
            if not users and not groups:
                d.error(path, field_, name or index, "names no users and no groups: a limit is for someone")
            if not applications and not any(resources.values()):
                d.error(path, field_, name or index, "sets neither maxapplications nor maxresources: it limits nothing")
            for kind, names in (("users", users), ("groups", groups)):
                for entry in names:
                    if not entry or len(entry) > userinfo.MAX_NAME:
                        d.error(
                            path, f"{field_}.{kind}", entry, f"must be a name of 1 to {userinfo.MAX_NAME} characters"
                        )
                    elif (kind, entry) in seen:
                        d.error(
                            path,
                            f"{field_}.{kind}",
                            entry,
                            f"is also in {where}[{seen[kind, entry]}]: a queue limits each user and group once",
                        )
                    else:
                        seen[kind, entry] = index
            limits.append(Limit(frozenset(users), frozenset(groups), applications, resources, name))
        return tuple(limits)

    def _child_template(self, raw: Any, path: str) -> None:
        d = self.decoder
        if raw is None:
            return
        entries = d.fields(raw, path, "childtemplate", TEMPLATE_FIELDS)
        d.count(entries.get("maxapplications"), path, "childtemplate.maxapplications")
        d.string_map(entries.get("properties"), path, "childtemplate.properties")
        resources = d.fields(entries.get("resources"), path, "childtemplate.resources", RESOURCES_FIELDS)
        for kind in RESOURCES_FIELDS:
            self._amounts(resources.get(kind), path, f"childtemplate.resources.{kind}", {})
        if entries:
            d.warn(
                path,
                "childtemplate",
                sorted(entries),
                "is not applied: queues the placement rules create have no guarantee or max of their own",
            )

    def _node_sort_policy(self, raw: Any) -> None:
        d = self.decoder
        if raw is None:
            return
        if isinstance(raw, str):
            d.error("", "nodesortpolicy", raw, f"must be a mapping: nodesortpolicy: {{type: {raw}}}")
            return
        entries = d.fields(raw, "", "nodesortpolicy", NODE_SORT_FIELDS)
        kind = d.text(entries.get("type"), "", "nodesortpolicy.type")
        if kind not in ("", "fair", "binpacking"):
            d.error("", "nodesortpolicy.type", kind, "must be fair or binpacking")
        weights = entries.get("resourceweights")
        if weights is not None:
            for resource, weight in d.string_map(weights, "", "nodesortpolicy.resourceweights").items():
                if not re.fullmatch(r"[+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", weight.strip()):
                    d.error("", f"nodesortpolicy.resourceweights.{resource}", weight, "must be a number, 0 or more")
        if entries:
            d.warn("", "nodesortpolicy", kind or "fair", "has no effect: kube-scheduler chooses the nodes")

    def _specs(self, queue: _Queue, parent: QueueSpec | None, out: dict[str, QueueSpec]) -> None:
        """The specs of `queue` and every queue under it, each from its parent's by what it sets itself
        (queues.inheritance): its properties, its ACLs (which add to its parents'), its own amounts and
        limits."""
        spec = inheritance.child(
            parent,
            {
                **queue.settings,
                "path": queue.path,
                "guaranteed": dict(queue.guaranteed),
                "max": None if queue.max is None else dict(queue.max),
                "submitters": queue.submitters,
                "source": self.decoder.findings.source,
                "parent_queue": queue.is_parent,
                "max_applications": queue.max_applications,
                "limits": queue.limits,
            },
        )
        out[queue.path] = spec
        for child in queue.children:
            self._specs(child, spec, out)


def _name_problem(name: str) -> str:
    if not name:
        return "must be set"
    if "." in name:
        return "must not contain a dot: dots separate the queues of a path"
    if len(name) > 64:
        return "is longer than 64 characters"
    if not QUEUE_NAME.match(name):
        return "may only hold letters, digits and _ : # / @ -"
    return ""


def _check_max_applications(queue: _Queue, d: Decoder) -> None:
    """YuniKorn's rule: under a parent with maxapplications, every child sets its own, no larger."""
    for child in queue.children:
        if queue.max_applications and child.max_applications > queue.max_applications:
            d.error(
                child.path,
                "maxapplications",
                str(child.max_applications),
                f"is more than its parent's ({queue.max_applications})",
            )
        elif queue.max_applications and not child.max_applications:
            d.error(
                child.path,
                "maxapplications",
                str(child.max_applications),
                f"must be set, 1 or more, as its parent's is ({queue.max_applications})",
            )
        _check_max_applications(child, d)


def _tree_node(queue: _Queue) -> tree.Node:
    return tree.Node(queue.path, queue.guaranteed, queue.max, [_tree_node(child) for child in queue.children])


def _yunikorn_amount(resource: str, milli: int) -> str:
    if resource == "cpu":
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    return format_quantity(Decimal(milli) / 1000)


def _report(excess: tree.Excess, queue: _Queue, d: Decoder) -> None:
    def name(resource: str) -> str:
        return VCORE if resource == "cpu" else resource

    field_ = f"resources.{excess.kind}.{name(excess.resource)}"
    shown = queue.written.get((excess.kind, excess.resource), _yunikorn_amount(excess.resource, excess.amount))
    bound = _yunikorn_amount(excess.resource, excess.bound)
    if excess.bound_kind == "children":
        under = "its children" if excess.bound_path == excess.path else f"the children of {excess.bound_path}"
        d.error(excess.path, field_, shown, f"is below the sum of the guarantees of {under} ({bound})")
    elif excess.bound_path == excess.path:
        d.error(excess.path, field_, shown, f"is above resources.max.{name(excess.resource)} ({bound})")
    else:
        d.error(excess.path, field_, shown, f"is above the max of its parent {excess.bound_path} ({bound})")
