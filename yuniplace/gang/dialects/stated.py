"""From what a dialect states of its gang to yuniplace's GangSpec: the rules every dialect shares.

A dialect reads its own fields into a `StatedGang`; `gang_spec` then applies what yuniplace adds on top
of any dialect (a member's own gang mode, gang group and schedulingPolicyParameters win over what the
dialect says), checks the dialect's timeout against the limits and, for a gang of "N pods like these",
gives each role and shape of its members a task group of its own (gang/podshape.py). A dialect's own
rules beyond that (whether members wait for the whole gang to exist, say) it sets on the GangSpec it
returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from yuniplace.gang import keys, topology
from yuniplace.gang.dialects.base import Pod, PodGroup, PodGroupApi, annotations_of
from yuniplace.gang.podshape import member_group, shaped_groups
from yuniplace.gang.taskgroups import (
    GangSpec,
    InvalidGang,
    Limits,
    Mode,
    OnTimeout,
    Problem,
    gang_group,
    gang_of,
    mode_of,
    policy_of,
)
from yuniplace.gang.topology import BadTopology


@dataclass
class StatedGang:
    """A gang as its dialect's own fields state it. Either `min_member` pods like its members (a task
    group per role and shape, `counted_by` naming the field that says how many), or the task groups it
    lists itself."""

    problems: list[Problem] = field(default_factory=list)
    min_member: int = 0
    counted_by: str = ""
    groups: list[dict[str, Any]] | None = None  # YuniKorn task-group objects, when the dialect lists them
    # The whole gang's resources as the dialect states them (a PodGroup's spec.minResources), and the
    # field that says so: members yet to come are reserved large enough for it.
    wanted: Mapping[str, Decimal] = field(default_factory=dict)
    wanted_by: str = ""
    timeout_s: int | None = None  # the dialect's own timeout, if it has one
    mode: Mode = Mode.NON_STRICT
    group_with: tuple[str, ...] = ()
    on_timeout: OnTimeout | None = None  # the dialect's own timeout rule, unless the pod names a style


def gang_spec(pod: Pod, stated: StatedGang, title: str, limits: Limits, members: Sequence[Pod]) -> GangSpec:
    """The GangSpec of a gang its dialect (`title`, for messages) states, with yuniplace's own
    annotations on the pod applied; InvalidGang lists every problem, the dialect's first. A gang of
    "N pods like these" has a task group per role and shape of its `members` (gang/podshape.py)."""
    notes = annotations_of(pod)
    problems = stated.problems
    timeout_s = stated.timeout_s
    if timeout_s is not None and timeout_s > limits.max_timeout_s:
        problems.append(Problem(f"{title} timeout", timeout_s, f"must be at most {limits.max_timeout_s}s"))
        timeout_s = None
    mode = mode_of(notes[keys.GANG_MODE], problems) if keys.GANG_MODE in notes else stated.mode
    group_with = stated.group_with
    if keys.GANG_GROUP in notes:
        group_with = gang_group(notes[keys.GANG_GROUP], keys.GANG_GROUP, problems)
    groups = stated.groups
    warnings: list[str] = []
    if groups is None:
        groups, warnings = shaped_groups(
            pod,
            members,
            stated.min_member,
            stated.counted_by,
            problems,
            wanted=stated.wanted,
            wanted_where=stated.wanted_by,
        )
    if problems:
        raise InvalidGang(problems)
    policy = policy_of(
        notes.get(keys.SCHEDULING_POLICY_PARAMETERS),
        limits,
        problems,
        default_timeout_s=timeout_s,
        dialect_rule=stated.on_timeout,
    )
    spec = gang_of(groups, policy, mode, group_with, limits, problems)
    if stated.groups is not None:
        return spec
    # Members beyond the minimum, whose shape no group holds, start with the gang, unreserved.
    return dataclasses.replace(
        spec, warnings=spec.warnings + tuple(warnings), groups_by_shape=True, other_groups_follow=True
    )


def most_members(limits: Limits) -> int:
    """The most pods one task group of members may ask for."""
    return min(limits.max_members_per_group, limits.max_members_per_app)


def member_problems(pod: Pod, limits: Limits) -> list[Problem]:
    """What yuniplace's own annotations on a member say wrongly (its schedulingPolicyParameters, gang
    mode, gang group and topology, Kueue's topology annotations with it), whichever dialect its gang
    is written in."""
    notes: Mapping[str, str] = annotations_of(pod)
    problems: list[Problem] = []
    policy_of(notes.get(keys.SCHEDULING_POLICY_PARAMETERS), limits, problems)
    if keys.GANG_MODE in notes:
        mode_of(notes[keys.GANG_MODE], problems)
    if keys.GANG_GROUP in notes:
        gang_group(notes[keys.GANG_GROUP], keys.GANG_GROUP, problems)
    try:
        topology.asked(notes)
    except BadTopology as bad:
        problems.append(Problem(bad.field, bad.value, bad.expected))
    return problems


def no_pod_group(named_by: str, name: str | None, kind: str) -> InvalidGang:
    """The problem of a member naming a PodGroup that does not exist (yet)."""
    return InvalidGang([Problem(named_by, name, f"names no {kind} in this namespace")])


class PodsLikeThese:
    """What a dialect whose gang is "N pods like these" answers unless it says otherwise: every member
    describes the whole gang and belongs to the task group of its own role and shape (so the fields that
    shape it are kept), and a gang with a PodGroup waits until its PodGroup is seen."""

    pod_groups: PodGroupApi | None = None
    started_by_kube_scheduler = False
    spec_fields: tuple[str, ...] = ("nodeSelector", "tolerations")

    def task_group(self, pod: Pod) -> str | None:
        return member_group(pod)

    def describes_gang(self, pod: Pod) -> bool:
        return True

    def readable(self, pod_group: PodGroup | None, members: Sequence[Pod]) -> bool:
        return self.pod_groups is None or pod_group is not None

    def own_problems(self, pod: Pod, limits: Limits) -> list[Problem]:
        return member_problems(pod, limits)
