"""The docs site's generated pages say what the code says: each reference is made from the module that owns
its facts (python -m yuniplace.docsgen), and these tests fail, naming the command that makes them anew,
when a page on disk differs; and each owner describes every fact it holds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from yuniplace import docsgen
from yuniplace.controller.lifecycle import table as lifecycle
from yuniplace.docsgen import references, statediagram
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason

KEY_SHAPED = re.compile(r"^([a-z0-9-]+\.)+[a-z]+/[A-Za-z0-9._-]+$")
API_VERSION = re.compile(r"/v\d+((alpha|beta)\d+)?$")


@pytest.mark.parametrize("name", sorted(docsgen.PAGES))
def test_the_generated_page_says_what_the_code_says(name: str) -> None:
    path = docsgen.ROOT / name
    assert path.exists(), f"{name} is missing: run {docsgen.REGENERATE}"
    assert path.read_text() == docsgen.PAGES[name](), (
        f"{name} differs from what the code says: run {docsgen.REGENERATE}"
    )


def test_the_state_diagram_draws_every_move_of_the_table_and_no_other() -> None:
    drawn = statediagram.moves_drawn((docsgen.DOCS / "concepts" / "states.svg").read_text())
    allowed = {(a.value, b.value) for a, b in lifecycle.moves()}
    assert drawn == allowed
    for name in (s.value for s in AppState):
        assert f"<title>{name}</title>" in statediagram.svg()
    # Each arrow names the triggers that make its move.
    assert "<title>Reserving → Reserved: seated, placed</title>" in statediagram.svg()


def test_every_arrow_is_numbered_and_the_legend_says_what_makes_it() -> None:
    drawn = statediagram.svg()
    table = statediagram.transitions()
    moves = list(statediagram.table_moves(table))
    numbers = re.findall(r'<g class="move-number">.*?font-weight="bold" fill="#1b2a44">(\d+)</text></g>', drawn)
    assert sorted(map(int, numbers)) == list(range(1, len(moves) + 1))
    legend = drawn.split('<g class="legend">', 1)[1]
    entries = re.findall(
        r'<tspan font-weight="bold">(\d+)</tspan> (\w+) → (\w+): <tspan fill="#555">([^<]*)</tspan>', legend
    )
    assert {(source, target) for _, source, target, _ in entries} == set(moves)
    for _, source, target, made_by in entries:
        assert made_by == ", ".join(table.triggers[(source, target)])
    assert ("Reserving", "Reserved", "seated, placed") in {(s, t, m) for _, s, t, m in entries}


def test_the_diagram_follows_another_table() -> None:
    """Pointed at another table, the diagram draws that table's moves."""
    table = statediagram.Table(("A", "B", "C"), (("A", "B"), ("B", "A"), ("B", "C"), ("A", "C")), frozenset({"C"}))
    assert statediagram.moves_drawn(statediagram.svg(table)) == {("A", "B"), ("B", "A"), ("B", "C"), ("A", "C")}


def _key_constants(module: Any) -> Iterator[str]:
    for constant, value in vars(module).items():
        if not constant.isupper():
            continue
        values = value if isinstance(value, tuple) else (value,)
        for text in values:
            if isinstance(text, str) and KEY_SHAPED.match(text) and not API_VERSION.search(text):
                yield text


def test_every_key_an_owner_spells_is_in_the_reference() -> None:
    import importlib

    from yuniplace.gang.dialects import registry

    documented = {key.name for _, owned in references.key_sections() for key in owned}
    owners = [importlib.import_module(path[:-3].replace("/", ".")) for _, path, _ in references.KEY_OWNERS]
    owners += [importlib.import_module(type(dialect).__module__) for dialect in registry.DIALECTS]
    spelled = {text for module in owners for text in _key_constants(module)}
    assert spelled - documented == set(), "describe these keys in the KEYS of the module that spells them"
    for _, owned in references.key_sections():
        for key in owned:
            assert key.kind and key.on and key.set_by and key.meaning.strip(), key


def _leaves(values: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from _leaves(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1]


def test_every_chart_value_is_in_the_reference_with_a_description() -> None:
    rows = references.chart_values()
    assert all(text for _, _, text in rows), [path for path, _, text in rows if not text]
    paths = [path for path, _, _ in rows]
    leaves = list(_leaves(yaml.safe_load(references.VALUES.read_text())))
    missing = [leaf for leaf in leaves if not any(leaf == p or leaf.startswith(p + ".") for p in paths)]
    assert not missing, f"values.yaml: give these a `# --` comment: {missing}"


def test_every_event_reason_says_where_and_when_it_is_sent() -> None:
    for reason in Reason:
        assert reason.on and reason.when, reason


def test_every_metric_is_described() -> None:
    rows = references.metric_rows()
    assert len(rows) >= 30
    assert all(row[3] for row in rows), [row[0] for row in rows if not row[3]]
    assert ("`yuniplace_applications`", "gauge") == rows[0][:2]


SCREEN_LINES = 40


def test_the_readme_is_the_front_page_and_no_section_is_longer_than_a_screen() -> None:
    text = (docsgen.ROOT / "README.md").read_text()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    assert len(sections) >= 4, "the README keeps its sections: what it is, try it, beside the others, where to go"
    for section in sections:
        lines = section.strip().splitlines()
        assert len(lines) <= SCREEN_LINES, f"README section {lines[0]!r} is {len(lines)} lines: keep it within a screen"
    assert "](docs/" in text, "the README links into the site"
