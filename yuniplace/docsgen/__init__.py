"""The docs site's generated pages: references made from the code that owns each fact, the state diagram
made from the transitions table, and the README, the site's front page with its links into the site.
`python -m yuniplace.docsgen --write` writes them; `--check` (and the unit tests) fail when one differs
from what the code says."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from yuniplace.docsgen import references, statediagram

ROOT = references.ROOT
DOCS = ROOT / "docs"
REGENERATE = references.REGENERATE
FRONT_PAGE = "docs/index.md"


def readme() -> str:
    """The README: the site's front page (docs/index.md), its links pointing into docs/."""
    text = (ROOT / FRONT_PAGE).read_text()
    text = re.sub(r"\]\((?!https?:|#|/)([^)]+)\)", r"](docs/\1)", text)
    return references.header(f"`{FRONT_PAGE}`, the docs site's front page") + "\n" + text


# Each generated file, from the repository's root, and what makes it.
PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/annotations.md": references.annotations_page,
    "docs/reference/commands.md": references.commands_page,
    "docs/reference/chart-values.md": references.chart_values_page,
    "docs/reference/events.md": references.events_page,
    "docs/reference/metrics.md": references.metrics_page,
    "docs/reference/queue-settings.md": references.queue_settings_page,
    "docs/concepts/states.svg": lambda: statediagram.svg(),
    "docs/reference/transitions.md": statediagram.table_page,
    "README.md": readme,
}


def stale(root: Path = ROOT) -> list[str]:
    """The generated files that differ from what the code makes now (or are missing)."""
    return [name for name, make in PAGES.items() if not (root / name).exists() or (root / name).read_text() != make()]


def write(root: Path = ROOT) -> list[str]:
    """Write every generated file that changed; returns their names."""
    changed = stale(root)
    for name in changed:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(PAGES[name]())
    return changed
