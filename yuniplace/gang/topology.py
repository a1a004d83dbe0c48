"""Topology domains: a gang asks that its members share one value of a node label (one rack, one
network block, one zone), required or only preferred, at one level or several; admission chooses the
domain (admission/domains.py), and this module says how the ask is written, how the chosen domain is
remembered and how a pod is kept in it. Nothing else parses these keys.

How it is asked:
- yuniplace's own form, `yuniplace.io/topology: "required=<label key> preferred=<label key>"`: levels
  from the coarsest to the finest, each `required=` (every member in one domain of that label, or the
  gang waits) or `preferred=` (one domain when one holds the gang, else as few as hold it), required
  levels before preferred ones. On the pod that describes the gang it is the whole gang's; as the key
  `yuniplace.io/topology` of one of YuniKorn's task groups (YuniKorn ignores keys it does not know),
  that group's, within the gang's domain when both are given.
- Kueue's pod-template annotations, read as they are on the pod that describes the gang, for the whole
  gang: `kueue.x-k8s.io/podset-required-topology` or `kueue.x-k8s.io/podset-preferred-topology` (one
  level each; never both, as Kueue refuses both). yuniplace's own form, when also given, wins.

How a chosen domain is kept: every pin (a label key and the values chosen for it) becomes a node
affinity requirement `key In [values]` added to each required node-selector term of the pod, so a
placeholder (or a member) is kept in it by kube-scheduler however its own node affinity reads. The
choice is remembered on the originator (`yuniplace.io/topology-domain`), so a restarted controller
keeps the same domain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from yuniplace.gang import keys
from yuniplace.kube.names import is_label_key, is_label_value

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KEYS = (
    keys.Key(
        KUEUE_REQUIRED,
        "annotation",
        "pod that describes the gang (a pod template)",
        keys.YOU,
        "Kueue's: a node label key; every member in one domain of it (as `required=<key>`)",
    ),
    keys.Key(
        KUEUE_PREFERRED,
        "annotation",
        "pod that describes the gang (a pod template)",
        keys.YOU,
        "Kueue's: a node label key; one domain of it when one holds the gang (as `preferred=<key>`)",
    ),
)
REQUIRED, PREFERRED = "required", "preferred"
MAX_LEVELS = 4
MAX_TEXT = 1024  # yuniplace.io/topology: four levels of the longest label keys fit well within it
MAX_RECORD = 16 * 1024  # yuniplace.io/topology-domain, as yuniplace writes it
MAX_VALUES = 64  # the domains a preferred level may spread over
MAX_GROUPS = 64  # task groups with domains of their own, in a record
NODE_AFFINITY_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# What a level's label usually names, for messages ("one rack"); any other label is a "domain".
NOUNS = ("subblock", "block", "rack", "zone", "region", "island", "host", "switch")


class BadTopology(ValueError):
    """A topology ask or record that cannot be used: where it is, what was found, what was expected."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(f"{field}: {value!r} {expected}")
        self.field = field
        self.value = value
        self.expected = expected


@dataclass(frozen=True)
class Level:
    key: str  # the node label whose value its members share
    required: bool

    def __str__(self) -> str:
        return f"{REQUIRED if self.required else PREFERRED}={self.key}"


@dataclass(frozen=True)
class Topology:
    """Levels from the coarsest to the finest, required ones first."""

    levels: tuple[Level, ...]

    @property
    def required(self) -> bool:
        return any(level.required for level in self.levels)

    def __str__(self) -> str:
        return " ".join(str(level) for level in self.levels)


def noun(key: str) -> str:
    """What a domain of label `key` is called in messages: "rack" for a rack label, else "domain"."""
    name = key.rpartition("/")[2].lower()
    return next((word for word in NOUNS if word in name.replace("_", "-").split("-") or name == word), "domain")


def parse(text: object, where: str) -> Topology:
    """yuniplace's form: `required=<label key>` and `preferred=<label key>` words, coarsest first."""
    if not isinstance(text, str):
        raise BadTopology(where, text, 'must be a string such as "required=topology.kubernetes.io/zone"')
    if len(text) > MAX_TEXT:
        raise BadTopology(where, f"{len(text)} characters", f"is longer than the limit of {MAX_TEXT}")
    words = text.split()
    if not words:
        raise BadTopology(where, text, 'must name at least one level, e.g. "required=topology.kubernetes.io/zone"')
    if len(words) > MAX_LEVELS:
        raise BadTopology(where, text, f"has {len(words)} levels, more than the limit of {MAX_LEVELS}")
    levels: list[Level] = []
    for word in words:
        mode, sep, key = word.partition("=")
        if not sep or mode not in (REQUIRED, PREFERRED):
            raise BadTopology(where, word, "is not required=<node label key> or preferred=<node label key>")
        if not is_label_key(key):
            raise BadTopology(where, key, "is not a node label key (such as topology.kubernetes.io/zone)")
        if any(level.key == key for level in levels):
            raise BadTopology(where, key, "is named at more than one level")
        required = mode == REQUIRED
        if required and levels and not levels[-1].required:
            raise BadTopology(
                where,
                text,
                "requires a level after one it only prefers: list levels from the coarsest to the finest, "
                "required ones first (a required domain lies within one domain of every coarser level anyway)",
            )
        levels.append(Level(key, required))
    return Topology(tuple(levels))


def _kueue(notes: Mapping[str, str]) -> Topology | None:
    """Kueue's annotations: one level, required or preferred, never both."""
    required, preferred = notes.get(KUEUE_REQUIRED), notes.get(KUEUE_PREFERRED)
    if required is not None and preferred is not None:
        raise BadTopology(
            KUEUE_PREFERRED, preferred, f"cannot be given with {KUEUE_REQUIRED}: Kueue takes one or the other"
        )
    for key, value in ((KUEUE_REQUIRED, required), (KUEUE_PREFERRED, preferred)):
        if value is not None:
            if not is_label_key(value):
                raise BadTopology(key, value, "is not a node label key (such as topology.kubernetes.io/zone)")
            return Topology((Level(value, key == KUEUE_REQUIRED),))
    return None


@dataclass(frozen=True)
class Asked:
    """What the pod that describes a gang asks of the whole gang, and what of it is ignored."""

    topology: Topology | None = None
    warnings: tuple[str, ...] = ()


def asked(notes: Mapping[str, str]) -> Asked:
    """The whole gang's topology as a pod's annotations ask it; BadTopology names the key at fault."""
    kueue = _kueue(notes)
    if keys.TOPOLOGY not in notes:
        return Asked(kueue)
    own = parse(notes[keys.TOPOLOGY], keys.TOPOLOGY)
    ignored = (f"{KUEUE_REQUIRED if kueue.levels[0].required else KUEUE_PREFERRED} is ignored",) if kueue else ()
    return Asked(own, tuple(f"{warning}: {keys.TOPOLOGY} says where the gang goes" for warning in ignored))


# -- a chosen domain ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """Where a level's domain was chosen: its label key and the values chosen (one: one domain; more:
    the fewest a preferred level spread over)."""

    key: str
    values: tuple[str, ...]
    required: bool

    def __str__(self) -> str:
        return f"{self.key}={','.join(self.values)}"


@dataclass(frozen=True)
class Domains:
    """The domains admission chose for a gang: the whole gang's pins, and each task group's own."""

    gang: tuple[Pin, ...] = ()
    groups: tuple[tuple[str, tuple[Pin, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.gang or self.groups)

    def of(self, group: str) -> tuple[Pin, ...]:
        """The pins a placeholder of `group` is kept in: the gang's, then its group's own."""
        return self.gang + dict(self.groups).get(group, ())

    def of_member(self, group: str | None) -> tuple[Pin, ...]:
        """The pins a member of `group` (None: it names none) is kept in wherever it starts: the
        required ones only, a preference being admission's business and not a member's bond."""
        pins = self.gang if group is None else self.of(group)
        return tuple(pin for pin in pins if pin.required)

    def pins(self) -> tuple[Pin, ...]:
        """Every pin, the gang's and each group's."""
        return self.gang + tuple(pin for _group, pins in self.groups for pin in pins)

    def __str__(self) -> str:
        parts = [" ".join(str(pin) for pin in self.gang)] if self.gang else []
        parts += [f"{group}: {' '.join(str(pin) for pin in pins)}" for group, pins in self.groups]
        return "; ".join(parts)

    def text(self) -> str:
        """As the originator's record keeps it."""

        def pins(chosen: tuple[Pin, ...]) -> list[dict[str, Any]]:
            return [{"key": pin.key, "values": list(pin.values), "required": pin.required} for pin in chosen]

        record: dict[str, Any] = {"gang": pins(self.gang)}
        if self.groups:
            record["groups"] = {group: pins(chosen) for group, chosen in self.groups}
        return json.dumps(record, separators=(",", ":"))


def _pins(raw: object, where: str) -> tuple[Pin, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_LEVELS * 2:
        raise BadTopology(where, raw, f"must be a list of at most {MAX_LEVELS * 2} pins")
    pins = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"key", "values", "required"}:
            raise BadTopology(where, item, 'must be {"key": ..., "values": [...], "required": true|false}')
        key, values, required = item["key"], item["values"], item["required"]
        if not isinstance(key, str) or not is_label_key(key):
            raise BadTopology(where, key, "is not a node label key")
        if (
            not isinstance(values, list)
            or not 1 <= len(values) <= MAX_VALUES
            or not all(isinstance(v, str) and v and is_label_value(v) for v in values)
        ):
            raise BadTopology(where, values, f"must be a list of 1 to {MAX_VALUES} label values")
        if not isinstance(required, bool):
            raise BadTopology(where, required, "must be true or false")
        pins.append(Pin(key, tuple(values), required))
    return tuple(pins)


def read_domains(text: str | None) -> Domains:
    """The domains the originator's record keeps (none when it keeps none); BadTopology if unreadable."""
    if text is None:
        return Domains()
    where = keys.TOPOLOGY_DOMAIN
    if len(text) > MAX_RECORD:
        raise BadTopology(where, f"{len(text)} characters", f"is longer than the limit of {MAX_RECORD}")
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    if not isinstance(raw, dict) or not set(raw) <= {"gang", "groups"}:
        raise BadTopology(where, text, "is not a record of chosen domains (yuniplace writes it; remove it to reset)")
    groups = raw.get("groups") or {}
    if not isinstance(groups, dict) or len(groups) > MAX_GROUPS or not all(isinstance(g, str) for g in groups):
        raise BadTopology(where, groups, f"must map at most {MAX_GROUPS} task groups to their pins")
    return Domains(
        _pins(raw.get("gang") or [], where),
        tuple((group, _pins(pins, f"{where}.groups.{group}")) for group, pins in sorted(groups.items())),
    )


# -- keeping a pod in its domain -------------------------------------------------------------------


def expressions(pins: Sequence[Pin]) -> list[dict[str, Any]]:
    """The node-selector requirements that keep a pod in the pinned domains."""
    return [{"key": pin.key, "operator": "In", "values": list(pin.values)} for pin in pins]


def pinned(affinity: Mapping[str, Any] | None, pins: Sequence[Pin]) -> dict[str, Any]:
    """`affinity` with every required node-selector term narrowed to the pinned domains (one term of
    them alone when it has none): what kube-scheduler, and admission's fit, then keep the pod to."""
    result: dict[str, Any] = dict(affinity or {})
    if not pins:
        return result
    node_affinity = dict(result.get("nodeAffinity") or {})
    required = dict(node_affinity.get(NODE_AFFINITY_REQUIRED) or {})
    terms = [dict(term) for term in required.get("nodeSelectorTerms") or []] or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchExpressions": [*(term.get("matchExpressions") or []), *expressions(pins)]} for term in terms
    ]
    node_affinity[NODE_AFFINITY_REQUIRED] = required
    result["nodeAffinity"] = node_affinity
    return result
