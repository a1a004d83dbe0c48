"""Choosing a gang's topology domains over one cycle's room, before any placeholder exists: only
domains where the whole gang fits (in the room left after everything admission already counts), and of
those the tightest, as Kueue's topology-aware scheduling chooses (best fit: the domain holding the
fewest pods of the gang's largest size), so that large domains stay whole for large gangs.

A required level takes one domain or none (the gang waits); a preferred one takes one when one holds
the gang, else the fewest that do, largest first, and where not even all of its domains do (nodes
without the label hold the rest), it pins nothing. Levels nest: a finer level's domain is chosen within
the coarser one's, and a task group's own topology within the gang's domains. Pure functions of a
Room: a try takes room on a copy, and the room given is changed only when the gang fits.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import NamedTuple, TypeVar

from yuniplace.admission.room import RoomView
from yuniplace.gang.fit import Need, Node, Room
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.taskgroups import GangSpec
from yuniplace.gang.topology import MAX_VALUES, Domains, Level, Pin, noun

T = TypeVar("T")
# What is placed inside a domain once it is chosen: None when it does not fit there.
Inside = Callable[[Room, Sequence[Node] | None], T | None]
GroupPins = tuple[tuple[str, tuple[Pin, ...]], ...]


def _largest(needs: Sequence[Need]) -> Need:
    return max(needs, key=lambda need: (sum(need.requests.values()), need.count))


def _domains(
    room: Room, level: Level, among: Sequence[Node] | None, needs: Sequence[Need], within: Pin | None
) -> list[tuple[int, str, list[Node]]]:
    """The level's domains the needs may use (within `among`, and `within` when it pins this level),
    each with the pods of the largest size it holds now, tightest first."""
    accepted = room.accepting([need.constraints for need in needs])
    allowed = None if among is None else {node.name for node in among}
    probe = _largest(needs)
    found = []
    for value, nodes in room.domains(level.key).items():
        if within is not None and within.key == level.key and value not in within.values:
            continue
        usable = [n for n in nodes if n.name in accepted and (allowed is None or n.name in allowed)]
        if usable:
            found.append((room.copies(probe, usable), value, usable))
    return sorted(found, key=lambda domain: (domain[0], domain[1]))


def _within_levels(
    room: Room,
    levels: Sequence[Level],
    among: Sequence[Node] | None,
    needs: Sequence[Need],
    inside: Inside[T],
    within: Pin | None = None,
) -> tuple[tuple[Pin, ...], T] | None:
    """Place `inside` in one domain of each level (or, at a preferred level that no one domain holds,
    the fewest), on `room`, which is changed only when it fits: the pins chosen and what `inside`
    returned, or None."""
    if not levels:
        trial = room.copy()
        placed = inside(trial, among)
        if placed is None:
            return None
        room.adopt(trial)
        return (), placed
    level, finer = levels[0], levels[1:]
    domains = _domains(room, level, among, needs, within)
    wanted = _largest(needs).count
    best: tuple[int, str, Room, tuple[tuple[Pin, ...], T]] | None = None
    for capacity, value, nodes in domains:
        if capacity < wanted:
            continue  # not even the largest pods fit: the gang cannot
        trial = room.copy()
        found = _within_levels(trial, finer, nodes, needs, inside)
        if found is None:
            continue
        spread = sum(len(pin.values) - 1 for pin in found[0])
        if best is None or spread < best[0]:
            best = (spread, value, trial, found)
            if spread == 0:
                break  # the tightest domain that holds it whole at every finer level
    if best is not None:
        _, value, trial, (pins, placed) = best
        room.adopt(trial)
        return (Pin(level.key, (value,), level.required), *pins), placed
    if level.required:
        return None
    return _spread(room, level, among, needs, inside, domains)


def _spread(
    room: Room,
    level: Level,
    among: Sequence[Node] | None,
    needs: Sequence[Need],
    inside: Inside[T],
    domains: list[tuple[int, str, list[Node]]],
) -> tuple[tuple[Pin, ...], T] | None:
    """A preferred level no one domain holds: the fewest domains that do, the largest first (finer
    levels are not chosen within a spread); else no pin at this level."""
    largest = sorted(domains, key=lambda domain: (-domain[0], domain[1]))[:MAX_VALUES]
    wanted = _largest(needs).count
    held = list(itertools.accumulate(domain[0] for domain in largest))
    first = next((count for count, total in enumerate(held, start=1) if total >= wanted), None)
    for count in range(max(2, first or len(largest) + 1), len(largest) + 1):
        chosen = largest[:count]
        nodes = sorted((node for domain in chosen for node in domain[2]), key=lambda node: node.name)
        found = _within_levels(room, (), nodes, needs, inside)
        if found is not None:
            return (Pin(level.key, tuple(sorted(domain[1] for domain in chosen)), False),), found[1]
    return _within_levels(room, (), among, needs, inside)


def _fits(needs: Sequence[Need]) -> Inside[tuple[()]]:
    def inside(room: Room, among: Sequence[Node] | None) -> tuple[()] | None:
        return None if any(room.take_all(needs, among)) else ()

    return inside


def place(room: Room, spec: GangSpec, needs: Sequence[Need], within: Pin | None = None) -> Domains | None:
    """Take the room of the whole gang (`needs`, one per task group of `spec`, in order) in the domains
    its topology asks: the domains chosen (none asked: empty), or None, with nothing taken, when it
    does not fit. `within`: only the domains it pins at the gang's first level (a reclaim that frees
    one domain)."""
    own = [(group.name, group.topology, need) for group, need in zip(spec.groups, needs, strict=True) if group.topology]
    rest = [need for group, need in zip(spec.groups, needs, strict=True) if not group.topology]
    # Groups with domains of their own first, the largest pods first: fewer domains can hold them.
    own.sort(key=lambda item: -sum(item[2].requests.values()))

    def inside(trial: Room, among: Sequence[Node] | None) -> GroupPins | None:
        chosen = []
        for name, topology, need in own:
            assert topology is not None
            found = _within_levels(trial, topology.levels, among, [need], _fits([need]))
            if found is None:
                return None
            chosen.append((name, found[0]))
        if any(trial.take_all(rest, among)):
            return None
        return tuple(sorted(chosen))

    levels = spec.topology.levels if spec.topology is not None else ()
    found = _within_levels(room, levels, None, needs, inside, within)
    return None if found is None else Domains(found[0], found[1])


def first_required(spec: GangSpec) -> Level | None:
    """The gang's first level when it is required: the level whose one domain a reclaim frees."""
    if spec.topology is None or not spec.topology.levels[0].required:
        return None
    return spec.topology.levels[0]


# -- why it does not fit ---------------------------------------------------------------------------


def _size(needs: Sequence[Need]) -> str:
    def one(need: Need) -> str:
        amounts = ", ".join(
            f"{name} {format_quantity(Decimal(amount) / 1000)}" for name, amount in sorted(need.requests.items())
        )
        return f"{need.count} × ({amounts})"

    return " and ".join(one(need) for need in needs if need.count)


def _most_held(room: Room, level: Level, needs: Sequence[Need]) -> int:
    """The most of the needs' pods one domain of the level holds."""
    held = 0
    accepted = room.accepting([need.constraints for need in needs])
    for nodes in room.domains(level.key).values():
        usable = [node for node in nodes if node.name in accepted]
        if usable:
            held = max(held, sum(need.count for need in needs) - sum(room.copy().take_all(needs, usable)))
    return held


def _required_levels(spec: GangSpec, needs: Sequence[Need]) -> Iterable[tuple[str, Level, Sequence[Need]]]:
    """Each required level with what must fit in one of its domains: the gang's, then each group's."""
    for level in spec.topology.levels if spec.topology is not None else ():
        if level.required:
            yield "", level, needs
    for group, need in zip(spec.groups, needs, strict=True):
        for level in group.topology.levels if group.topology is not None else ():
            if level.required:
                yield f"task group {group.name} ", level, [need]


def shortfall(room: Room, spec: GangSpec, needs: Sequence[Need], *, empty: bool = False) -> str | None:
    """Why the gang fits in no domain it requires, when that, and not the room as a whole, is why: "needs
    16 × (cpu 1) in one rack (topology.k8s.aws/network-node-layer-3); the largest free rack holds 12"
    (`empty`: the room is every node's whole room, and the gang can never fit). Only the gang's own
    sizes are named."""
    required = list(_required_levels(spec, needs))
    if not required or any(room.copy().take_all(needs)):
        return None
    for who, level, held in required:
        most = _most_held(room, level, held)
        total = sum(need.count for need in held)
        if most < total:
            kind = noun(level.key)
            largest = f"the largest {kind} holds {most}" + (" when empty" if empty else "")
            if not empty:
                largest = largest.replace("largest", "largest free", 1)
            return f"{who}needs {_size(held)} in one {kind} ({level.key}); {largest}"
    return None


def closest(room: Room, spec: GangSpec, needs: Sequence[Need]) -> Sequence[Node] | None:
    """The nodes of the domain of the gang's first required level that holds most of it: where a
    waiting head claims room (all of them, None, when it requires no domain)."""
    level = first_required(spec)
    if level is None:
        return None
    domains = _domains(room, level, None, needs, None)
    if not domains:
        return None
    total = sum(need.count for need in needs)
    return max(domains, key=lambda domain: (total - sum(room.copy().take_all(needs, domain[2])), -domain[0]))[2]


# -- what the domains have free, for metrics ---------------------------------------------------------


class DomainRoom(NamedTuple):
    """One domain's free room (what is not overcommitted, summed over its nodes), in milli-units."""

    level: str
    domain: str
    free: Mapping[str, int]


def free_by_domain(view: RoomView, levels: Iterable[str], *, most: int) -> list[DomainRoom]:
    """The free room of every domain of the `levels`, at most `most` domains a level (by value)."""
    found = []
    for level in levels:
        by_value: dict[str, dict[str, int]] = {}
        for node in view.nodes:
            value = node.labels.get(level)
            if value is None:
                continue
            total = by_value.setdefault(value, {})
            for name, amount in (view.free.get(node.name) or {}).items():
                total[name] = total.get(name, 0) + max(0, amount)
        found += [DomainRoom(level, value, by_value[value]) for value in sorted(by_value)[:most]]
    return found
