"""The phase of a gang reserving its room: one placeholder per member its task groups require, made,
made again when evicted or too small, and counted as kube-scheduler places them. Every one placed, it
is reserved (placed); out of time, it follows its timeout rule; in Strict mode a placeholder that
cannot be placed gives the partial reservation back."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from yuniplace.controller.lifecycle.acts import follow_peers, give_back, refused
from yuniplace.controller.lifecycle.context import Context, Step
from yuniplace.controller.lifecycle.holders import group_placeholders, keep_holders, new_placeholder
from yuniplace.controller.lifecycle.seats import members_missing
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.placeholders import placeholder_name, placeholder_size
from yuniplace.gang.resources import said_short, shortfalls
from yuniplace.gang.taskgroups import Mode
from yuniplace.runtime.events import Reason

Pod = p.Pod
# kube-scheduler's verdict on a pod it could place nowhere.
UNSCHEDULABLE = "Unschedulable"


@dataclasses.dataclass
class Count:
    """Its placeholders as this pass finds them."""

    placed: int = 0
    unplaceable: list[tuple[Pod, str]] = dataclasses.field(default_factory=list)
    required: set[str] = dataclasses.field(default_factory=set)
    undersized: dict[str, list[tuple[str, Decimal, Decimal]]] = dataclasses.field(default_factory=dict)


def run(ctx: Context) -> Step | None:
    """A gang reserving: it follows a gang group that gave up, gives back what the API refused, and
    otherwise keeps its placeholders."""
    return follow_peers(ctx) or refused(ctx) or place(ctx)


def place(ctx: Context) -> Step | None:
    """Make what is missing of its placeholders, and see how many are placed."""
    app, plan, spec = ctx.app, ctx.plan, ctx.spec
    count = _placeholders(ctx)
    for name, short in count.undersized.items():
        ctx.event(
            ctx.originator,
            Reason.TASK_GROUP_WARNING,
            f"task group {name}: its members request more than its placeholders hold ({said_short(short)}, init "
            "containers and overhead included): making them again that large before any member starts",
        )
    if spec.groups_by_shape:
        # Placeholders made for members yet to come, sized as the largest seen, are given back once
        # those members exist in shapes of their own, each of which is reserved as it is.
        plan.delete += [
            ph for ph in app.live_placeholders() if p.name(ph) not in count.required and ph not in plan.delete
        ]
    if count.placed == spec.min_members:
        _reserved(ctx, count.placed)
        return Step(Trigger.PLACED)
    deadline = app.reservation_deadline()
    if deadline is not None and ctx.now >= deadline:
        return Step(
            Trigger.TIMED_OUT, f"{count.placed}/{spec.min_members} placeholders placed after {spec.policy.timeout_s}s"
        )
    if spec.mode == Mode.STRICT and count.unplaceable:
        pod, why = count.unplaceable[0]
        return give_back(
            ctx,
            Reason.GANG_RESERVATION_RELEASED,
            f"placeholder {p.name(pod)} cannot be placed ({why}); Strict mode releases the partial "
            f"reservation ({count.placed}/{spec.min_members} placed)",
        )
    if deadline is not None:
        plan.requeue_after_s = max(0.0, deadline - ctx.now)
        if count.placed and app.record.first_allocated is None:
            # The clock is kept from the first placement on: placeholders deleted and made again (or
            # a reservation given back to a reclaim and begun again) must not move the timeout later.
            plan.annotate[keys.FIRST_ALLOCATED] = p.format_time(app.first_placement() or ctx.now)
    return None


def _placeholders(ctx: Context) -> Count:
    """Create each placeholder missing; delete one evicted, failed or smaller than its group now asks
    (made again once it is gone); count those placed and those kube-scheduler cannot place."""
    app, plan, spec = ctx.app, ctx.plan, ctx.spec
    existing = {p.name(ph): ph for ph in app.placeholders}
    count = Count()
    for group in spec.groups:
        size = placeholder_size(group)
        holders = keep_holders(ctx, group.name, group_placeholders(ctx, group))
        for index in range(group.min_member):
            count.required.add(name := placeholder_name(app.key.app_id, group.name, index))
            found = existing.get(name)
            if found is None:
                if index in holders.create:
                    plan.create.append(new_placeholder(ctx, group, index, holders.create[index]))
            elif found in holders.delete:
                plan.delete.append(found)  # made again once gone, holding a member's DRA claims
            elif p.is_terminal(found) and not p.is_deleting(found):
                plan.delete.append(found)  # evicted or failed: recreated once it is gone
            elif not p.is_deleting(found) and (short := shortfalls(size, app.requests_of(found))):
                plan.delete.append(found)  # smaller than its group now asks: made again once it is gone
                count.undersized.setdefault(group.name, short)
            elif p.node_name(found) and not p.is_deleting(found):
                count.placed += 1
            elif not p.is_deleting(found) and (why := _unschedulable(found)) is not None:
                count.unplaceable.append((found, why))
    return count


def _reserved(ctx: Context, placed: int) -> None:
    """Every placeholder is placed: its first placement is recorded, and its events say where."""
    plan, spec, app = ctx.plan, ctx.spec, ctx.app
    first = app.record.first_allocated or app.first_placement() or ctx.now
    plan.annotate[keys.FIRST_ALLOCATED] = p.format_time(first)
    for group in spec.groups:
        nodes = {p.node_name(ph) for ph in app.placeholders if app.group_of(ph) == group.name}
        ctx.event(
            ctx.originator,
            Reason.PLACEHOLDER_ALLOCATED,
            f"task group {group.name}: {group.min_member}/{group.min_member} placeholders placed "
            f"on {len(nodes)} node(s)",
        )
    missing = members_missing(ctx)
    ctx.event(
        ctx.originator,
        Reason.GANG_RESERVATION_COMPLETE,
        f"all {placed} placeholders are placed; "
        + (
            f"the real pods start once all {spec.min_members} exist ({spec.min_members - missing} so far), as "
            f"{spec.starts_when_all_exist} starts a gang"
            if missing
            else "swapping the real pods in"
        ),
    )


def _unschedulable(pod: Pod) -> str | None:
    """kube-scheduler's message when it found no node for the pod, else None."""
    for condition in pod.get("status", {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == UNSCHEDULABLE
        ):
            return str(condition.get("message") or "no node fits it")
    return None
