"""The gang's state diagram as SVG, drawn from the lifecycle's transitions table with a small
deterministic layout (no graphviz, no JavaScript), so the docs site shows it offline and a test holds it
to the table; and the table itself as a reference page.

`transitions()` is the one place that reads the table: each pair of states is drawn once, its arrow
numbered, and a legend under the boxes says, by number, what makes each move (the arrow's title says it
too, on hover).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from yuniplace.controller.lifecycle import table as lifecycle
from yuniplace.docsgen.references import header, table_lines
from yuniplace.gang.state import TERMINAL, AppState

NODE_W, NODE_H = 112, 40
COLUMN_GAP, ROW_GAP = 62, 56
MARGIN = 24
ARC_STEP = 26  # how high an arc above the row climbs per column it spans
FONT = "font-family:sans-serif;font-size:13px"
LABEL_R = 8  # radius of an arrow's number disc
LEGEND_FONT = "font-family:sans-serif;font-size:12px"
LEGEND_LINE = 17  # pixels between the legend's lines
LEGEND_COLUMNS = 2


@dataclass(frozen=True)
class Table:
    """States in their order (the first is where every gang begins), the moves between them, and the
    states nothing leaves."""

    states: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    terminal: frozenset[str]
    # What makes each move (its arrow's title says it).
    triggers: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


def transitions() -> Table:
    """The states and moves of `yuniplace/controller/lifecycle/table.py`, in the order of the states."""
    moves = lifecycle.moves()
    order = list(AppState)
    pairs = sorted(moves, key=lambda pair: (order.index(pair[0]), order.index(pair[1])))
    return Table(
        tuple(s.value for s in AppState),
        tuple((source.value, target.value) for source, target in pairs),
        frozenset(s.value for s in TERMINAL),
        {(source.value, target.value): tuple(t.value for t in moves[(source, target)]) for source, target in pairs},
    )


def _drawn(table: Table) -> list[tuple[str, str]]:
    """The moves to draw: every pair of states the table joins, once; staying put is no move."""
    return list(dict.fromkeys((source, target) for source, target in table.edges if source != target))


def rows(table: Table) -> tuple[list[str], list[str]]:
    """The two rows: the states a gang moves on from in more than one way (its progress, in listed
    order), and the outcomes below them (the rest), ordered so that a move between two outcomes joins
    neighbours (Resuming → Completed)."""
    outs = {name: [t for s, t in _drawn(table) if s == name] for name in table.states}
    progress = [name for name in table.states if len(outs[name]) >= 2]
    rest = [name for name in table.states if name not in progress]
    outcomes: list[str] = []
    for first in rest:
        name: str | None = first
        while name is not None and name not in outcomes:
            outcomes.append(name)
            name = next((t for t in outs[name] if t in rest and t not in outcomes), None)
    return progress, outcomes


def layout(table: Table) -> dict[str, tuple[float, float]]:
    """The centre of each state's box: progress in a row, outcomes in a row below, centred under it."""
    progress, outcomes = rows(table)
    step = NODE_W + COLUMN_GAP
    top = MARGIN + ARC_STEP * (len(progress) + 1)
    centres = {name: (MARGIN + NODE_W / 2 + index * step, top + NODE_H / 2) for index, name in enumerate(progress)}
    shift = max(0.0, (len(progress) - len(outcomes)) * step / 2)
    below = top + NODE_H * 1.5 + ROW_GAP * 2
    for index, name in enumerate(outcomes):
        centres[name] = (MARGIN + NODE_W / 2 + shift + index * step, below)
    return centres


@dataclass(frozen=True)
class Move:
    source: str
    target: str
    route: str  # "level": straight to the next box of its row; "arc": over the row; "down": to the row below


def _moves(table: Table, centres: Mapping[str, tuple[float, float]]) -> list[Move]:
    moves = []
    for source, target in _drawn(table):
        (x1, y1), (x2, y2) = centres[source], centres[target]
        between = any(min(x1, x2) < x < max(x1, x2) and y == y1 for x, y in centres.values())
        if y1 != y2:
            moves.append(Move(source, target, "down"))
        elif x2 > x1 and not between:
            moves.append(Move(source, target, "level"))
        else:
            moves.append(Move(source, target, "arc"))
    return moves


def _ports(moves: Sequence[Move], centres: Mapping[str, tuple[float, float]]) -> dict[tuple[int, str], float]:
    """Where each move meets each of its boxes, along the box's top or bottom side: spread evenly, in
    the order of the other end's x, so no two arrows share a point."""
    sides: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
    for index, move in enumerate(moves):
        if move.route == "level":
            continue
        for end, other, role in ((move.source, move.target, "from"), (move.target, move.source, "to")):
            side = "top" if move.route == "arc" or role == "to" else "bottom"
            sides.setdefault((end, side), []).append((centres[other][0], 0 if role == "to" else 1, index))
    ports = {}
    for (end, _side), users in sides.items():
        users.sort()
        for rank, (_x, role_order, index) in enumerate(users):
            role = "to" if role_order == 0 else "from"
            ports[(index, role)] = centres[end][0] - NODE_W / 2 + NODE_W * (rank + 1) / (len(users) + 1)
    return ports


def _path(
    move: Move, index: int, centres: Mapping[str, tuple[float, float]], ports: Mapping[tuple[int, str], float]
) -> str:
    (x1, y1), (x2, y2) = centres[move.source], centres[move.target]
    if move.route == "level":
        return f"M{x1 + NODE_W / 2:.0f},{y1:.0f} L{x2 - NODE_W / 2:.0f},{y2:.0f}"
    start, end = ports[(index, "from")], ports[(index, "to")]
    if move.route == "down":
        return f"M{start:.0f},{y1 + NODE_H / 2:.0f} L{end:.0f},{y2 - NODE_H / 2:.0f}"
    span = round(abs(x2 - x1) / (NODE_W + COLUMN_GAP))
    lift = ARC_STEP * (span + (0.5 if x2 < x1 else 0)) * 1.4
    top = y1 - NODE_H / 2
    return f"M{start:.0f},{top:.0f} C{start:.0f},{top - lift:.0f} {end:.0f},{top - lift:.0f} {end:.0f},{top:.0f}"


def _point(
    move: Move, index: int, centres: Mapping[str, tuple[float, float]], ports: Mapping[tuple[int, str], float], t: float
) -> tuple[float, float]:
    """The point a fraction t along a move's arrow, as `_path` draws it."""
    (x1, y1), (x2, y2) = centres[move.source], centres[move.target]
    if move.route == "level":
        (ax, ay), (bx, by) = (x1 + NODE_W / 2, y1), (x2 - NODE_W / 2, y2)
        return ax + (bx - ax) * t, ay + (by - ay) * t
    start, end = ports[(index, "from")], ports[(index, "to")]
    if move.route == "down":
        top, bottom = y1 + NODE_H / 2, y2 - NODE_H / 2
        return start + (end - start) * t, top + (bottom - top) * t
    span = round(abs(x2 - x1) / (NODE_W + COLUMN_GAP))
    lift = ARC_STEP * (span + (0.5 if x2 < x1 else 0)) * 1.4
    top = y1 - NODE_H / 2
    weights = ((1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3)
    xs, ys = (start, start, end, end), (top, top - lift, top - lift, top)
    return sum(w * x for w, x in zip(weights, xs, strict=True)), sum(w * y for w, y in zip(weights, ys, strict=True))


LABEL_TRIES = tuple(t / 20 for t in range(4, 17))  # 0.2 to 0.8 of the way along an arrow
SAMPLES = 48  # points per arrow when looking for where arrows cross


def _label_points(
    moves: Sequence[Move], centres: Mapping[str, tuple[float, float]], ports: Mapping[tuple[int, str], float]
) -> dict[int, tuple[float, float]]:
    """Where each arrow's number goes: clear of the numbers placed before it (short arrows first: they
    have the least choice), then as far from every other arrow as it can be (a number on a crossing
    would name either), then as near its arrow's middle."""
    lines = {
        index: [_point(move, index, centres, ports, i / SAMPLES) for i in range(SAMPLES + 1)]
        for index, move in enumerate(moves)
    }
    placed: dict[int, tuple[float, float]] = {}
    clearance = 2 * LABEL_R + 3

    def score(index: int, t: float) -> tuple[bool, float, float]:
        x, y = _point(moves[index], index, centres, ports, t)
        free = all(abs(x - px) >= clearance or abs(y - py) >= clearance for px, py in placed.values())
        nearest = min(
            (math.dist((x, y), point) for other, line in lines.items() if other != index for point in line),
            default=clearance,
        )
        return free, min(nearest, LABEL_R + 4), -abs(t - 0.5)

    for index, move in sorted(enumerate(moves), key=lambda item: ("level", "arc", "down").index(item[1].route)):
        best = max(LABEL_TRIES, key=lambda t: score(index, t))
        placed[index] = _point(move, index, centres, ports, best)
    return placed


LEGEND_CHAR_W = 6.4  # a 12px sans-serif character, on average, with room to spare


def _legend(table: Table, moves: Sequence[Move], top: float) -> tuple[list[str], float, float]:
    """The legend: one line per numbered arrow, in two columns, with what makes that move; its SVG,
    the width it needs and the height it takes."""
    lines = [
        (
            f"{move.source} → {move.target}: ",
            ", ".join(table.triggers.get((move.source, move.target), ())) or "-",
        )
        for move in moves
    ]
    rows = -(-len(lines) // LEGEND_COLUMNS)
    columns = [lines[i : i + rows] for i in range(0, len(lines), rows)]
    parts = ['<g class="legend">']
    x = float(MARGIN)
    for number, column in enumerate(columns):
        for row, (move, made_by) in enumerate(column):
            parts.append(
                f'<text x="{x:.0f}" y="{top + row * LEGEND_LINE:.0f}" style="{LEGEND_FONT}" fill="#1b2a44">'
                f'<tspan font-weight="bold">{number * rows + row + 1}</tspan> {escape(move)}'
                f'<tspan fill="#555">{escape(made_by)}</tspan></text>'
            )
        x += max(len(f"{rows * len(columns)} {a}{b}") for a, b in column) * LEGEND_CHAR_W + 2 * MARGIN
    parts.append("</g>")
    return parts, x - MARGIN, rows * LEGEND_LINE


def svg(table: Table | None = None) -> str:
    """The diagram: a box per state (terminal ones doubled), an arrow per move, numbered, and a legend
    saying what makes each numbered move. Each arrow also has a `<title>` naming it and its triggers
    ("Reserving → Reserved: seated, placed"), so it reads on hover and a test can list the moves drawn."""
    table = table or transitions()
    centres = layout(table)
    moves = _moves(table, centres)
    ports = _ports(moves, centres)
    legend_top = max(y for _, y in centres.values()) + NODE_H / 2 + MARGIN + LEGEND_LINE
    legend, legend_width, legend_height = _legend(table, moves, legend_top)
    width = max(max(x for x, _ in centres.values()) + NODE_W / 2 + MARGIN, legend_width)
    height = legend_top + legend_height
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="state-diagram" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="The states of a gang and its moves">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    for index, move in enumerate(moves):
        made_by = table.triggers.get((move.source, move.target), ())
        said = f": {', '.join(made_by)}" if made_by else ""
        parts.append(
            f'<g class="move"><title>{escape(move.source)} → {escape(move.target)}{escape(said)}</title>'
            f'<path d="{_path(move, index, centres, ports)}" fill="none" stroke="#555" stroke-width="1.3" '
            'marker-end="url(#arrow)"/></g>'
        )
    for index, (x, y) in sorted(_label_points(moves, centres, ports).items()):
        parts.append(
            f'<g class="move-number"><circle cx="{x:.0f}" cy="{y:.0f}" r="{LABEL_R}" fill="#ffffff" '
            f'stroke="#555" stroke-width="1"/><text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle" '
            f'style="{LEGEND_FONT}" font-weight="bold" fill="#1b2a44">{index + 1}</text></g>'
        )
    for name in table.states:
        x, y = centres[name]
        left, top = x - NODE_W / 2, y - NODE_H / 2
        parts.append(f'<g class="state"><title>{escape(name)}</title>')
        parts.append(
            f'<rect x="{left:.0f}" y="{top:.0f}" width="{NODE_W}" height="{NODE_H}" rx="8" fill="#eef3fb" '
            'stroke="#3f6ab0" stroke-width="1.5"/>'
        )
        if name in table.terminal:
            parts.append(
                f'<rect x="{left + 4:.0f}" y="{top + 4:.0f}" width="{NODE_W - 8}" height="{NODE_H - 8}" rx="6" '
                'fill="none" stroke="#3f6ab0" stroke-width="1"/>'
            )
        parts.append(
            f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle" style="{FONT}" fill="#1b2a44">'
            f"{escape(name)}</text>"
        )
        parts.append("</g>")
    parts += legend
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def moves_drawn(text: str) -> set[tuple[str, str]]:
    """The moves an SVG made by `svg` draws, read back from their titles."""
    found = set()
    for chunk in text.split('<g class="move"><title>')[1:]:
        source, _, target = chunk.split("</title>", 1)[0].split(": ", 1)[0].partition(" → ")
        found.add((source, target))
    return found


def table_moves(table: Table | None = None) -> set[tuple[str, str]]:
    """The moves the table allows between two different states."""
    return set(_drawn(table or transitions()))


def table_page() -> str:
    """The transitions table as a reference page: for each state, what can happen there, where it takes
    the gang and what it is counted as."""
    rows = [
        (
            f"`{source.value}`",
            f"{trigger.value}",
            "stays" if move.to == source else f"`{move.to.value}`",
            "" if move.outcome is None else move.outcome.value,
            trigger.meaning,
        )
        for source in AppState
        for (state, trigger), move in lifecycle.TRANSITIONS.items()
        if state == source
    ]
    lines = [
        header("the transitions table of `yuniplace/controller/lifecycle/table.py`"),
        "# A gang's transitions",
        "",
        "Every move a gang can make: in each state, what can happen there (the trigger), the state it takes "
        "the gang to, and what it is counted as (the outcome metrics count). Nothing leaves "
        f"{' and '.join(f'`{s.value}`' for s in AppState if s in TERMINAL)}. "
        "[A gang's life](../concepts/lifecycle.md) draws it.",
        "",
        *table_lines(("In", "When", "To", "Counted as", "What happened"), rows),
    ]
    return "\n".join(lines) + "\n"
