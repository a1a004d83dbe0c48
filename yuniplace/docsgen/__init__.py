"""The docs site's generated pages: references made from the code that owns each fact, and the state
diagram made from the transitions table. `python -m yuniplace.docsgen --write` writes them under docs/;
`--check` (and the unit tests) fail when one differs from what the code says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from yuniplace.docsgen import references, statediagram

DOCS = references.ROOT / "docs"
REGENERATE = references.REGENERATE

# Each generated file under docs/, and what makes it.
PAGES: dict[str, Callable[[], str]] = {
    "reference/annotations.md": references.annotations_page,
    "reference/commands.md": references.commands_page,
    "reference/chart-values.md": references.chart_values_page,
    "reference/events.md": references.events_page,
    "reference/metrics.md": references.metrics_page,
    "reference/queue-settings.md": references.queue_settings_page,
    "concepts/states.svg": lambda: statediagram.svg(),
}


def stale(docs: Path = DOCS) -> list[str]:
    """The generated files that differ from what the code makes now (or are missing)."""
    return [name for name, make in PAGES.items() if not (docs / name).exists() or (docs / name).read_text() != make()]


def write(docs: Path = DOCS) -> list[str]:
    """Write every generated file that changed; returns their names."""
    changed = stale(docs)
    for name in changed:
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(PAGES[name]())
    return changed
