"""Placeholders that hold a member's DRA claims. A nomination holds a node's CPU and memory for the
member it names, never a device (kube-scheduler's DRA plugin reads no nomination), so the devices of a
member whose pod uses ResourceClaims are held differently: the placeholder made for it names the
member's own claims, kube-scheduler allocates them to the placeholder, and the swap adds the member to
their `reservedFor` before the placeholder goes. The claims then never leave their allocation, and the
member can only go where its devices are.

A member is therefore swapped into the one placeholder holding its claims. Placeholders made before
their members existed (members yet to come) hold CPU and memory only; once such a member exists, gated,
one of them makes way for a placeholder holding its claims, before it starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from yuniplace.controller.lifecycle.context import Context
from yuniplace.devices.claims import claim_names, uses_devices
from yuniplace.gang import pods as p
from yuniplace.gang.placeholders import claims_held_for, placeholder_name, placeholder_pod
from yuniplace.gang.taskgroups import TaskGroup
from yuniplace.gang.topology import pinned
from yuniplace.queues.pools import confine

Pod = p.Pod
CLAIMS_RECHECK_S = 1.0  # a member whose claims are still being made is looked at again this soon


def awaiting_claims(members: Sequence[Pod]) -> list[Pod]:
    """The gated members whose devices a placeholder must hold before they start, oldest first."""
    return [member for member in members if uses_devices(member) and p.is_held(member)]


@dataclass
class Holders:
    """What a task group's placeholders become: created at an index (holding a member's claims, or
    nothing), deleted (to be made again holding a member's claims, or left holding a member gone), and
    whether a member's claims are still being made (its placeholder waits for them)."""

    create: dict[int, Pod | None] = field(default_factory=dict)
    delete: list[Pod] = field(default_factory=list)
    claims_coming: bool = False


def plan_holders(existing: Mapping[int, Pod | None], awaiting: Sequence[Pod], count: int) -> Holders:
    """The group's `count` placeholders by index (`existing`: those there, None where none is), given its
    gated members that use claims (`awaiting`, oldest first): each such member gets a placeholder that
    holds its claims, in place of one that holds nothing, as far as there are placeholders."""
    holders = Holders()
    waiting = {p.uid(member): member for member in awaiting}
    paired: set[str] = set()
    missing: list[int] = []
    plain: list[Pod] = []
    for index in range(count):
        placeholder = existing.get(index)
        if placeholder is None:
            missing.append(index)
            continue
        if p.is_deleting(placeholder):
            continue
        holds = claims_held_for(placeholder)
        if holds is None:
            plain.append(placeholder)
        elif holds in waiting and holds not in paired:
            paired.add(holds)
        else:
            holders.delete.append(placeholder)  # its member went (started, or gone): nobody's claims to hold
    coming = 0
    for member in awaiting:
        if p.uid(member) in paired:
            continue
        if claim_names(member) is None:
            coming += 1  # the resourceclaim controller has not made its claims yet
        elif missing:
            holders.create[missing.pop(0)] = member
        elif plain:
            holders.delete.append(plain.pop(0))  # made again holding this member's claims, once gone
    # A place kept for each member whose claims are still being made, rather than a placeholder holding
    # nothing that would soon make way for it.
    for index in missing[coming:]:
        holders.create[index] = None
    holders.claims_coming = coming > 0
    return holders


def holder_of(member: Pod, placeholders: Sequence[Pod]) -> Pod | None:
    """The placeholder holding the member's claims, if one does."""
    uid = p.uid(member)
    return next((ph for ph in placeholders if claims_held_for(ph) == uid), None)


def keep_holders(ctx: Context, group: str, existing: Mapping[int, Pod | None]) -> Holders:
    """What the group's placeholders (by index) become for its gated members that use DRA claims; a look
    again soon while a member's claims are still being made (their creation is no event of its own)."""
    members = [m for m in ctx.app.gated_members() if ctx.app.group_of(m) == group]
    holders = plan_holders(existing, awaiting_claims(members), len(existing))
    if holders.claims_coming:
        ctx.requeue_within(CLAIMS_RECHECK_S)
    return holders


def new_placeholder(ctx: Context, group: TaskGroup, index: int, holding: Pod | None = None) -> Pod:
    """Placeholder `index` of the group, kept where its queue's pool and its topology domains let it go,
    holding the DRA claims of the member `holding`, if given."""
    confined = confine(group, ctx.around.pool)
    confined = dataclasses.replace(confined, affinity=pinned(confined.affinity, ctx.domains.of(group.name)))
    return placeholder_pod(
        app_id=ctx.app.key.app_id,
        group=confined,
        index=index,
        originator=ctx.originator,
        image=ctx.settings.placeholder_image,
        priority_class_name=ctx.spec.priority_class_name,
        queue_name=ctx.around.queue,
        holding=holding,
    )


def group_placeholders(ctx: Context, group: TaskGroup) -> dict[int, Pod | None]:
    """The group's placeholders by index (None where none is)."""
    by_name = {p.name(ph): ph for ph in ctx.app.placeholders}
    return {
        index: by_name.get(placeholder_name(ctx.app.key.app_id, group.name, index)) for index in range(group.min_member)
    }
