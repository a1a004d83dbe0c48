"""Task groups and scheduling-policy parameters, parsed and validated from a pod's annotations.

The JSON shape is YuniKorn's, and keys match the way its Go decoder matches them (case-insensitively),
so manifests written for YuniKorn work unchanged. Validation is stricter than YuniKorn's, which
silently falls back to normal scheduling: every problem is reported with the field and the bad value,
so a user can fix the manifest instead of wondering why the gang never formed.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from yuniplace import boundedjson
from yuniplace.gang import keys, topology
from yuniplace.gang.onloss import LossPolicy, OnLoss
from yuniplace.gang.topology import BadTopology, Topology
from yuniplace.kube import parse_quantity

INT64_MAX = 2**63 - 1
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# A resource name is an optional DNS subdomain prefix and a name, as Kubernetes qualifies them.
RESOURCE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
# Kubernetes' quantity grammar: a signed decimal number and one suffix (binary, decimal or exponent).
QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
MAX_SHOWN_VALUE = 60
MAX_SHOWN_NAME = 40
MAX_ERRORS_SHOWN = 5
# Deep enough for any pod affinity a task group may carry (about 11 levels), far below the depth at
# which Python's decoder recurses out.
MAX_JSON_DEPTH = 32


class Mode(enum.Enum):
    """What a partial reservation does when a placeholder cannot be placed (Koordinator's modes)."""

    STRICT = "Strict"  # release every placeholder at once and retry after a backoff
    NON_STRICT = "NonStrict"  # hold what is placed until the timeout


class Style(enum.Enum):
    """YuniKorn's gangSchedulingStyle: what happens when the reservation times out, or the gang cannot
    be one (invalid annotations, refused by admission)."""

    SOFT = "Soft"  # placeholders go, real pods are scheduled normally
    HARD = "Hard"  # placeholders go, real pods fail


class OnTimeout(enum.Enum):
    """What a gang whose reservation times out does: the rule of the scheduler its pods are written for,
    so a gang behaves as its users expect from that scheduler. Its value is the metrics label."""

    SOFT = "Soft"  # YuniKorn's Soft style: placeholders go, real pods are scheduled normally
    HARD = "Hard"  # YuniKorn's Hard style: placeholders go, real pods fail
    # Coscheduling, a scheduler-plugins PodGroup, Volcano: placeholders go, and the gang is reserved again
    # after a backoff, its clock started afresh; its pods never start without it.
    RETRY = "Retry"
    # Koordinator: placeholders go, every pod is marked gang.scheduling.koordinator.sh/timeout=true and
    # never scheduled; the application is over (Failed) until its pods are deleted and created again.
    MARK_TIMED_OUT = "MarkTimedOut"


# What each rule does to a gang whose reservation times out, in words a user reads (`yuniplace explain`).
ON_TIMEOUT_DOES = {
    OnTimeout.SOFT: "its placeholders are removed and its pods are scheduled normally, one by one (Soft)",
    OnTimeout.HARD: "its placeholders are removed and its pods that have not started fail (Hard)",
    OnTimeout.RETRY: "its reservation is given back and made again after a backoff, with a fresh timeout; its pods "
    "never start without it (its scheduler's rule)",
    OnTimeout.MARK_TIMED_OUT: "its pods are marked timed out and never scheduled: delete and recreate them "
    "(Koordinator's rule)",
}


@dataclass(frozen=True)
class Limits:
    """Bounds that keep one application from flooding the cluster with placeholders."""

    max_members_per_group: int = 1000
    max_members_per_app: int = 5000
    max_annotation_bytes: int = 64 * 1024
    default_timeout_s: int = 15 * 60
    default_style: Style = Style.SOFT
    max_timeout_s: int = 7 * 24 * 3600
    on_loss: LossPolicy = field(default_factory=LossPolicy)  # what a started gang losing a member does by default


@dataclass(frozen=True)
class TaskGroup:
    name: str
    min_member: int
    min_resource: Mapping[str, str]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    topology: Topology | None = None  # its members' own domains (the task group's yuniplace.io/topology)


@dataclass(frozen=True)
class Policy:
    timeout_s: int
    style: Style
    # The timeout rule of the gang's own scheduler, when that is not YuniKorn and the pod's
    # schedulingPolicyParameters name no style; None: the style's.
    dialect_rule: OnTimeout | None = None

    @property
    def on_timeout(self) -> OnTimeout:
        return self.dialect_rule or OnTimeout(self.style.value)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where it is, what was found, what was expected."""

    field: str
    value: Any
    expected: str

    def __str__(self) -> str:
        shown = json.dumps(self.value)
        if len(shown) > MAX_SHOWN_VALUE:
            shown = shown[: MAX_SHOWN_VALUE - 1] + "…"
        return f"{self.field}: {shown} {self.expected}"


class InvalidGang(ValueError):
    """The gang annotations cannot be used; `problems` lists every reason found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:MAX_ERRORS_SHOWN])
        more = len(problems) - MAX_ERRORS_SHOWN
        super().__init__(shown + (f"; and {more} more" if more > 0 else ""))


@dataclass(frozen=True)
class GangSpec:
    groups: tuple[TaskGroup, ...]
    policy: Policy
    warnings: tuple[str, ...] = ()
    mode: Mode = Mode.NON_STRICT
    # Other applications ("namespace/app-id") reserved all-or-nothing together with this one.
    gang_group: tuple[str, ...] = ()
    # The placeholders' priority class when the gang's dialect names one (a Volcano PodGroup's
    # spec.priorityClassName); otherwise they take the originator's.
    priority_class_name: str | None = None
    # Members naming a task group the gang does not have start with the gang, unreserved, as members
    # naming no group do, rather than being refused: a Volcano task that spec.minTaskMember leaves out
    # has no minimum, so its pods are no part of the reservation.
    other_groups_follow: bool = False
    # The scheduler whose rule it is ("Coscheduling") when no member may start before the gang's whole
    # minimum of pods exists, as that scheduler turns a gang's pods away while fewer exist; None for
    # YuniKorn's rule, where members start as they arrive (a Spark driver creates its executors later).
    starts_when_all_exist: str | None = None
    # The annotation that marks each pod of a gang timed out under its dialect's MARK_TIMED_OUT rule
    # (Koordinator's), which keeps the pod from ever being scheduled.
    timed_out_mark: str | None = None
    # The whole gang's topology domains, as the pod describing it asks them (gang/topology.py); a task
    # group may ask domains of its own besides.
    topology: Topology | None = None
    # Its members belong to the task group of their own role and shape (gang/podshape.py), as a gang of
    # "N pods like these" is read: its groups change as members arrive (those yet to come are reserved
    # as large as the largest seen), so a member may take any placeholder of the gang that holds it.
    groups_by_shape: bool = False
    # Kubernetes' own gang (the Workload API), held by yuniplace until its queue admits it: its gates
    # then come off together and kube-scheduler's gang plugin binds it all or nothing, so nothing is
    # steered to a node (members yet to come are still reserved with placeholders).
    native: bool = False
    # The gang's own priority where its dialect states one (a native PodGroup's spec.priority, which
    # kube-scheduler orders the group by); None: its pods' priority.
    priority: int | None = None
    # kube-scheduler's workload-aware preemption disrupts it, whole (a native PodGroup's disruptionMode
    # all): yuniplace never takes it as a victim of a reclaim.
    disrupted_by_kube_scheduler: bool = False
    # What it does when, started, it loses a member (gang/onloss.py), as its pod asks or the default.
    on_loss: LossPolicy = field(default_factory=LossPolicy)

    def group(self, name: str) -> TaskGroup | None:
        return next((g for g in self.groups if g.name == name), None)

    @property
    def topology_required(self) -> bool:
        """Whether some of its members must share a domain (a required level, the gang's or a group's)."""
        asks = [self.topology, *(g.topology for g in self.groups)]
        return any(ask is not None and ask.required for ask in asks)

    @property
    def min_members(self) -> int:
        return sum(g.min_member for g in self.groups)


# Task-group keys as YuniKorn spells them; matched case-insensitively like Go's encoding/json.
_KNOWN_KEYS = {
    key.lower(): key
    for key in (
        "name",
        "minMember",
        "minResource",
        "nodeSelector",
        "tolerations",
        "affinity",
        "topologySpreadConstraints",
        "labels",
        "annotations",
        keys.TOPOLOGY,  # yuniplace's, which YuniKorn ignores
    )
}


def _canonical_keys(raw: Mapping[str, Any], where: str, warnings: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in raw.items():
        canonical = _KNOWN_KEYS.get(key.lower())
        if canonical is None:
            warnings.append(f"{where}.{_shown(key)} is not a task-group field and is ignored")
        else:
            result[canonical] = value
    return result


def _shown(name: str) -> str:
    """A name as it appears inside a field path: cut short, so one problem stays one line."""
    return name if len(name) <= MAX_SHOWN_NAME else name[: MAX_SHOWN_NAME - 1] + "…"


def _string_map(value: Any, where: str, problems: list[Problem]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        problems.append(Problem(where, value, "must be an object of string values"))
        return {}
    return dict(value)


def _object_list(value: Any, where: str, problems: list[Problem]) -> tuple[Mapping[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        problems.append(Problem(where, value, "must be a list of objects"))
        return ()
    return tuple(value)


def _quantity(value: Any, where: str, problems: list[Problem]) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        problems.append(Problem(where, value, 'must be a quantity such as "500m" or "2Gi"'))
        return None
    text = value if isinstance(value, str) else json.dumps(value)
    try:
        if not QUANTITY.match(text):
            raise ValueError(text)
        amount = Decimal(parse_quantity(text))
    except (ValueError, ArithmeticError):
        problems.append(Problem(where, value, 'is not a valid quantity (examples: "500m", "2", "4Gi", "1e3")'))
        return None
    if not amount.is_finite() or amount <= 0:
        problems.append(Problem(where, value, "must be a positive quantity"))
        return None
    return amount


def _min_resource(value: Any, where: str, min_member: int, problems: list[Problem]) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        problems.append(
            Problem(
                where, value, 'must be a non-empty object of resource quantities, e.g. {"cpu": "1", "memory": "2Gi"}'
            )
        )
        return {}
    resources: dict[str, str] = {}
    for name, raw in value.items():
        entry = f"{where}.{_shown(name)}"
        if not RESOURCE_NAME.match(name) or len(name) > 253:
            problems.append(Problem(entry, name, "is not a valid resource name"))
            continue
        amount = _quantity(raw, entry, problems)
        if amount is None:
            continue
        # Kubernetes stores quantities as int64 milli-units; the whole group's total must fit too.
        if amount.adjusted() > 18 or amount * 1000 * max(min_member, 1) > INT64_MAX:
            problems.append(Problem(entry, raw, f"times minMember {min_member} overflows a 64-bit quantity"))
            continue
        resources[name] = str(raw)
    return resources


def _task_group(raw: Any, index: int, limits: Limits, problems: list[Problem], warnings: list[str]) -> TaskGroup | None:
    where = f"task-groups[{index}]"
    if not isinstance(raw, dict):
        problems.append(Problem(where, raw, "must be an object with name, minMember and minResource"))
        return None
    group = _canonical_keys(raw, where, warnings)
    before = len(problems)

    name = group.get("name")
    if not isinstance(name, str) or not name:
        problems.append(Problem(f"{where}.name", name, "must be a non-empty string"))
    elif len(name) > 63 or not DNS1123_LABEL.match(name):
        problems.append(
            Problem(f"{where}.name", name, "must be a DNS-1123 label (lower-case letters, digits, '-'; at most 63)")
        )
    where = f"task-groups[{_shown(name) if isinstance(name, str) and name else index}]"

    raw_min_member = group.get("minMember")
    min_member = raw_min_member if isinstance(raw_min_member, int) and not isinstance(raw_min_member, bool) else 0
    if not 1 <= min_member <= limits.max_members_per_group:
        problems.append(
            Problem(
                f"{where}.minMember", raw_min_member, f"must be an integer from 1 to {limits.max_members_per_group}"
            )
        )
        min_member = 0
    min_resource = _min_resource(group.get("minResource"), f"{where}.minResource", min_member, problems)
    result = TaskGroup(
        name=name if isinstance(name, str) else "",
        min_member=min_member,
        min_resource=min_resource,
        node_selector=_string_map(group.get("nodeSelector"), f"{where}.nodeSelector", problems),
        tolerations=_object_list(group.get("tolerations"), f"{where}.tolerations", problems),
        affinity=affinity if isinstance(affinity := group.get("affinity", {}), dict) else {},
        topology_spread_constraints=_object_list(
            group.get("topologySpreadConstraints"), f"{where}.topologySpreadConstraints", problems
        ),
        labels=_string_map(group.get("labels"), f"{where}.labels", problems),
        annotations=_string_map(group.get("annotations"), f"{where}.annotations", problems),
        topology=_topology(group.get(keys.TOPOLOGY), f"{where}.{keys.TOPOLOGY}", problems),
    )
    if not isinstance(group.get("affinity", {}), (dict, type(None))):
        problems.append(Problem(f"{where}.affinity", group["affinity"], "must be an object (a pod affinity spec)"))
    return result if len(problems) == before else None


def _topology(value: Any, where: str, problems: list[Problem]) -> Topology | None:
    if value is None:
        return None
    try:
        return topology.parse(value, where)
    except BadTopology as bad:
        problems.append(Problem(bad.field, bad.value, bad.expected))
        return None


def parse_policy(text: str | None, limits: Limits = Limits()) -> Policy:
    """`placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard` (space separated, both optional)."""
    problems: list[Problem] = []
    policy = policy_of(text, limits, problems)
    if problems:
        raise InvalidGang(problems)
    return policy


def policy_of(
    text: str | None,
    limits: Limits,
    problems: list[Problem],
    *,
    default_timeout_s: int | None = None,
    dialect_rule: OnTimeout | None = None,
) -> Policy:
    """The policy `text` states; what it leaves out is the default (`default_timeout_s`: another
    dialect's own timeout, instead of the configured one; `dialect_rule`: its own timeout rule, which a
    gangSchedulingStyle in `text` overrides). Problems are added to `problems`."""
    timeout_s, style = default_timeout_s or limits.default_timeout_s, limits.default_style
    where = keys.SCHEDULING_POLICY_PARAMETERS
    for item in (text or "").split():
        key, sep, value = item.partition("=")
        if key == "placeholderTimeoutInSeconds" and sep:
            if re.fullmatch(r"[0-9]{1,9}", value) and 1 <= int(value) <= limits.max_timeout_s:
                timeout_s = int(value)
            else:
                problems.append(
                    Problem(
                        f"{where}.placeholderTimeoutInSeconds",
                        value,
                        f"must be a whole number of seconds from 1 to {limits.max_timeout_s}",
                    )
                )
        elif key == "gangSchedulingStyle" and sep:
            matched = next((s for s in Style if s.value.lower() == value.lower()), None)
            if matched is None:
                problems.append(Problem(f"{where}.gangSchedulingStyle", value, "must be Soft or Hard"))
            else:
                style, dialect_rule = matched, None
        else:
            problems.append(
                Problem(where, item, "is not placeholderTimeoutInSeconds=N or gangSchedulingStyle=Soft|Hard")
            )
    return Policy(timeout_s, style, dialect_rule)


def style_of(annotations: Mapping[str, str], limits: Limits = Limits()) -> Style:
    """The style to apply even when the rest of the input is invalid: a Hard request stays Hard."""
    return policy_of(annotations.get(keys.SCHEDULING_POLICY_PARAMETERS), limits, []).style


MAX_GANG_GROUP = 64
APP_REFERENCE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[^/\s]{1,253}$")


def mode_of(text: str | None, problems: list[Problem], default: Mode = Mode.NON_STRICT) -> Mode:
    """yuniplace.io/gang-mode (any case)."""
    if text is None:
        return default
    matched = next((m for m in Mode if m.value.lower() == text.lower()), None)
    if matched is None:
        problems.append(Problem(keys.GANG_MODE, text, "must be Strict or NonStrict"))
        return default
    return matched


def gang_group(text: str | None, where: str, problems: list[Problem]) -> tuple[str, ...]:
    """`["team-a/job-1", "team-b/job-2"]`: the applications reserved together (this one may be listed).
    `where` names the annotation it was read from, for the message."""
    if text is None:
        return ()
    try:
        raw = boundedjson.loads(text, max_depth=MAX_JSON_DEPTH)
    except ValueError:
        raw = text
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw) or not raw:
        problems.append(Problem(where, raw, 'must be a JSON array of "namespace/app-id" strings'))
        return ()
    if len(raw) > MAX_GANG_GROUP:
        problems.append(Problem(where, len(raw), f"applications are more than the limit of {MAX_GANG_GROUP}"))
        return ()
    bad = [item for item in raw if not APP_REFERENCE.match(item)]
    if bad:
        problems.append(Problem(where, bad[0], 'is not "namespace/app-id"'))
        return ()
    return tuple(dict.fromkeys(raw))


MAX_RESTART_LIMIT = 1000


def _whole(notes: Mapping[str, str], key: str, default: int, low: int, high: int, problems: list[Problem]) -> int:
    text = notes.get(key)
    if text is None:
        return default
    if re.fullmatch(r"[0-9]{1,9}", text.strip()) and low <= int(text) <= high:
        return int(text)
    problems.append(Problem(key, text, f"must be a whole number from {low} to {high}"))
    return default


def loss_policy_of(notes: Mapping[str, str], default: LossPolicy, problems: list[Problem]) -> LossPolicy:
    """What the gang does when it loses a member, as the pod describing it asks (in any dialect), each
    annotation not given taken from `default`; each value that cannot be read is a Problem naming it."""
    if not any(key in notes for key in LOSS_KEYS):
        return default
    on_loss = default.on_loss
    text = notes.get(keys.ON_MEMBER_LOST)
    if text is not None:
        matched = next((o for o in OnLoss if o.value == text.strip().lower()), None)
        if matched is None:
            problems.append(Problem(keys.ON_MEMBER_LOST, text, "must be none, restart or release"))
        on_loss = matched or on_loss
    return LossPolicy(
        on_loss,
        _whole(notes, keys.RESTART_LIMIT, default.restart_limit, 0, MAX_RESTART_LIMIT, problems),
        _whole(notes, keys.RECOVERY_TIMEOUT, default.recovery_timeout_s, 1, Limits.max_timeout_s, problems),
        _whole(notes, keys.READY_TIMEOUT, default.ready_timeout_s, 1, Limits.max_timeout_s, problems),
    )


LOSS_KEYS = (keys.ON_MEMBER_LOST, keys.RESTART_LIMIT, keys.RECOVERY_TIMEOUT, keys.READY_TIMEOUT)


def parse_gang(annotations: Mapping[str, str], limits: Limits = Limits()) -> GangSpec:
    """The gang described by an originator pod's annotations; InvalidGang lists every problem."""
    text = annotations.get(keys.TASK_GROUPS, "")
    problems: list[Problem] = []
    policy = policy_of(annotations.get(keys.SCHEDULING_POLICY_PARAMETERS), limits, problems)
    mode = mode_of(annotations.get(keys.GANG_MODE), problems)
    group_with = gang_group(annotations.get(keys.GANG_GROUP), keys.GANG_GROUP, problems)
    if len(text.encode()) > limits.max_annotation_bytes:
        raise InvalidGang(
            [
                Problem(
                    keys.TASK_GROUPS,
                    f"{len(text.encode())} bytes",
                    f"is larger than the {limits.max_annotation_bytes}-byte limit",
                ),
                *problems,
            ]
        )
    try:
        raw = boundedjson.loads(text, max_depth=MAX_JSON_DEPTH)
    except boundedjson.TooDeep:
        raise InvalidGang(
            [Problem(keys.TASK_GROUPS, text, "is nested too deeply to be task groups"), *problems]
        ) from None
    except ValueError as error:
        raise InvalidGang([Problem(keys.TASK_GROUPS, text, f"is not valid JSON ({error})"), *problems]) from None
    if not isinstance(raw, list) or not raw:
        raise InvalidGang([Problem(keys.TASK_GROUPS, raw, "must be a non-empty JSON array of task groups"), *problems])
    return gang_of(raw, policy, mode, group_with, limits, problems)


def gang_of(
    raw_groups: list[Any],
    policy: Policy,
    mode: Mode,
    group_with: tuple[str, ...],
    limits: Limits,
    problems: list[Problem],
) -> GangSpec:
    """The gang of these task groups (decoded YuniKorn task-group objects), checked group by group and
    as a whole; InvalidGang lists the problems found here and those already in `problems`."""
    warnings: list[str] = []
    groups = [
        g for i, item in enumerate(raw_groups) if (g := _task_group(item, i, limits, problems, warnings)) is not None
    ]
    seen: set[str] = set()
    for group in groups:
        if group.name in seen:
            problems.append(
                Problem(f"task-groups[{group.name}].name", group.name, "is used by more than one task group")
            )
        seen.add(group.name)
    total = sum(g.min_member for g in groups)
    if total > limits.max_members_per_app:
        problems.append(
            Problem(
                "task-groups[*].minMember",
                total,
                f"in total exceeds the per-application limit of {limits.max_members_per_app}",
            )
        )
    if problems:
        raise InvalidGang(problems)
    return GangSpec(tuple(groups), policy, tuple(warnings), mode, group_with)


def check_member(spec: GangSpec, group_name: str) -> None:
    """A real pod's task-group-name must name one of the application's groups."""
    if spec.group(group_name) is None:
        names = ", ".join(g.name for g in spec.groups)
        raise InvalidGang(
            [Problem(keys.TASK_GROUP_NAME, group_name, f"is not a task group of this application (groups: {names})")]
        )
