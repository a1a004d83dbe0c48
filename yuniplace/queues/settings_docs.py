"""The docs' table of queue settings, made from the settings table (queues.settings) so that it
says what the code does: `python -m yuniplace.queues.settings_docs` prints it, `python -m
yuniplace.docsgen --write` puts it in docs/reference/queue-settings.md, and a unit test holds the page
to it.
"""

from __future__ import annotations

from yuniplace.queues.model import QueueSpec
from yuniplace.queues.settings import SETTINGS, Setting, Source, Spelling

BEGIN = "<!-- queue settings: made by python -m yuniplace.queues.settings_docs -->"
END = "<!-- end of queue settings -->"
COLUMNS = (
    "Setting",
    "YuniKorn queues.yaml",
    "Volcano Queue",
    "ai-scheduler Pool",
    "Passes down (queues.yaml, created queues)",
    "Effect",
)


def markdown() -> str:
    """The table between its markers, as the docs' page holds it."""
    rows = [COLUMNS, tuple("---" for _ in COLUMNS)]
    rows += [_row(setting) for setting in SETTINGS]
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join([BEGIN, *lines, END])


def _row(setting: Setting) -> tuple[str, ...]:
    name = f"`{setting.name}`" if setting.model is QueueSpec else f"`limits`: `{setting.name}`"
    spelled = tuple(_spellings(setting.spellings(source)) for source in Source)
    return (name, *spelled, _passes(setting), setting.effect)


def _spellings(spellings: tuple[Spelling, ...]) -> str:
    if not spellings:
        return "—"
    return "; ".join(f"`{s.where}`" + (f" ({s.note})" if s.note else "") for s in spellings)


def _passes(setting: Setting) -> str:
    if not setting.inherits:
        return "no"
    return "yes, joined with a queue's own" if setting.join is not None else "yes, unless a queue sets its own"


if __name__ == "__main__":
    print(markdown())
