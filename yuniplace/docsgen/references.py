"""The reference pages, each made from the code that owns its facts: the keys from the modules that spell
them, the commands and flags from the argparse parsers, the chart's values from its values.yaml, the
events from the Reason table, the metrics from the registry, the queue settings from their table."""

from __future__ import annotations

import argparse
import inspect
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from yuniplace import cli
from yuniplace.gang import keys, podshape, topology, userinfo
from yuniplace.gang.dialects import registry
from yuniplace.queues import placement, settings_docs
from yuniplace.queues import volcano as volcano_queues
from yuniplace.runtime.events import REPORTING_CONTROLLER, Reason
from yuniplace.runtime.metrics import Metrics
from yuniplace.tools import rayobjects

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "charts" / "yuniplace" / "values.yaml"
REGENERATE = "scripts/venv-python -m yuniplace.docsgen --write"


def header(source: str) -> str:
    return f"<!-- Made by `{REGENERATE}` from {source}: edit that, not this page. -->\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_lines(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
        *("| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows),
    ]


# -- keys ------------------------------------------------------------------------------------------------

# The modules that spell keys yuniplace reads or writes, besides the dialects (asked through the registry).
KEY_OWNERS = (
    ("YuniKorn's keys and yuniplace's own", "yuniplace/gang/keys.py", keys.KEYS),
    ("Topology (Kueue's annotations)", "yuniplace/gang/topology.py", topology.KEYS),
    ("The recorded requester", "yuniplace/gang/userinfo.py", userinfo.KEYS),
    ("Operators' role labels", "yuniplace/gang/podshape.py", podshape.KEYS),
    ("Queue placement", "yuniplace/queues/placement.py", placement.KEYS),
    ("Volcano Queues", "yuniplace/queues/volcano.py", volcano_queues.KEYS),
    ("KubeRay objects (yuniplace validate)", "yuniplace/tools/rayobjects.py", rayobjects.KEYS),
)


def key_sections() -> list[tuple[str, tuple[keys.Key, ...]]]:
    sections = [(title, owned) for title, _, owned in KEY_OWNERS]
    sections[1:1] = [(f"{title} gangs", owned) for title, owned in registry.documented_keys()]
    return sections


def annotations_page() -> str:
    lines = [
        header("the modules that spell each key (`KEYS` beside them; the dialects' through their registry)"),
        "# Annotations and labels",
        "",
        "Every annotation, label and scheduling gate yuniplace reads or writes, as the module that spells it "
        "describes it. *Set by* says who writes it: you (or the tool that writes your manifests), an operator, or "
        "yuniplace itself, which you only read. Queue properties (`yuniplace.io/sharing` and the like) are in "
        "[Queue settings](queue-settings.md).",
    ]
    for title, owned in key_sections():
        lines += ["", f"## {title}", ""]
        rows = [(f"`{k.name}`", k.kind, k.on, k.set_by, k.meaning) for k in owned]
        lines += table_lines(("Key", "Kind", "On", "Set by", "Meaning"), rows)
    return "\n".join(lines) + "\n"


# -- commands ----------------------------------------------------------------------------------------------


# Code blocks keep their lines to this many characters, so a narrow page shows them whole.
CODE_COLUMNS = 78


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=CODE_COLUMNS)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _flag(action: argparse.Action) -> str:
    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        return names + " " + "|".join(f"`{choice}`" for choice in action.choices)
    if action.nargs != 0 and action.option_strings:
        return names + f" *{action.metavar or action.dest.upper()}*"
    return names


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS, []):
        return ""
    if isinstance(action.default, (list, tuple)):
        return ", ".join(f"`{value}`" for value in action.default)
    return f"`{action.default}`"


def _groups(parser: argparse.ArgumentParser) -> Iterator[tuple[str, list[argparse.Action]]]:
    for group in parser._action_groups:
        shown = [
            a
            for a in group._group_actions
            if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
        ]
        if shown:
            yield group.title or "", shown


def _command_lines(name: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = ["", f"## `{name}`", "", parser.description or "", "", "```", _usage(parser), "```"]
    for title, actions in _groups(parser):
        lines += ["", f"**{title[:1].upper() + title[1:]}**", ""]
        rows = [(_flag(a), _default(a), a.help or "") for a in actions]
        lines += table_lines(("Argument", "Default", "What"), rows)
    return lines


def commands_page() -> str:
    parser = cli.build_parser()
    lines = [
        header("the commands' argparse parsers (`yuniplace/cli.py` and the modules it registers)"),
        "# Commands and flags",
        "",
        f"`{cli.PROG}` has one subcommand per process or tool. The same commands run as a kubectl plugin, "
        f"`{cli.KUBECTL_PROG}` (see [kubectl yuniplace](kubectl-plugin.md)).",
        "",
        "```",
        _usage(parser),
        "```",
    ]
    for name, command in cli.commands_of(parser).items():
        lines += _command_lines(name, command)
    flags = cli.kubectl_flags()
    lines += ["", f"## `{cli.KUBECTL_PROG}`: kubectl's flags", "", inspect.cleandoc(cli.kubectl_main.__doc__ or ""), ""]
    lines += table_lines(("Flag", "What"), [(_flag(a), a.help or "") for _, actions in _groups(flags) for a in actions])
    return "\n".join(lines) + "\n"


# -- chart values ------------------------------------------------------------------------------------------


def chart_values() -> list[tuple[str, Any, str]]:
    """(dotted path, default, description) of every value values.yaml documents with a `# --` comment; a
    documented value is one row whatever it holds, an undocumented mapping is looked into, and an
    undocumented scalar is a row with no description (which the tests refuse)."""
    text = VALUES.read_text()
    defaults = yaml.safe_load(text)
    rows: list[tuple[str, Any, str]] = []
    path: list[tuple[int, str]] = []
    comment: list[str] = []
    collecting = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "# --" or stripped.startswith("# -- "):
            comment, collecting = [stripped[4:].strip()], True
            continue
        if stripped.startswith("#"):
            if collecting:
                comment.append(stripped[1:].strip())
            continue
        match = re.match(r"^(\s*)([A-Za-z0-9_]+):", line)
        if not match:
            collecting = False
            continue
        indent, key = len(match[1]), match[2]
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, key))
        dotted = ".".join(k for _, k in path)
        value = _lookup(defaults, [k for _, k in path])
        described = " ".join(comment) if collecting else ""
        comment, collecting = [], False
        leaf = described or not isinstance(value, dict) or not value
        if leaf and not any(dotted.startswith(r[0] + ".") for r in rows if r[2]):
            rows.append((dotted, value, described))
    return rows


def _lookup(values: Any, path: Sequence[str]) -> Any:
    for key in path:
        values = values[key]
    return values


def _show(value: Any) -> str:
    if value == "":
        return '`""`'
    return "`" + json.dumps(value, separators=(", ", ": ")) + "`"


def chart_values_page() -> str:
    rows = [(f"`{path}`", _show(value), text) for path, value, text in chart_values()]
    lines = [
        header("`charts/yuniplace/values.yaml` (its `# --` comments)"),
        "# Chart values",
        "",
        "Every value of the Helm chart `charts/yuniplace`, with its default and what it does, as its "
        "`values.yaml` documents it. Set them with `--set` or a values file; the flag a value maps to is named "
        "in backquotes (see [Commands and flags](commands.md)).",
        "",
        *table_lines(("Value", "Default", "What"), rows),
    ]
    return "\n".join(lines) + "\n"


# -- events -----------------------------------------------------------------------------------------------


def events_page() -> str:
    rows = [(f"`{r.value}`", "/".join(r.kinds), r.action, r.on, r.when) for r in Reason]
    lines = [
        header("the `Reason` table of `yuniplace/runtime/events.py`"),
        "# Events",
        "",
        "Posted with `events.k8s.io/v1` on the real pods (the originator carries the application's story), and "
        "on the queue configuration, so `kubectl describe pod` and `kubectl get events -w` tell it. Reporting "
        f"controller: `{REPORTING_CONTROLLER}`. Where a reason has two types, the first is its usual one.",
        "",
        # The site keeps each reason whole (docs/stylesheets/extra.css): a reason is one word.
        '<div class="whole-names" markdown>',
        "",
        *table_lines(("Reason", "Type", "Action", "On", "When"), rows),
        "",
        "</div>",
    ]
    return "\n".join(lines) + "\n"


# -- metrics ----------------------------------------------------------------------------------------------


def metric_rows() -> list[tuple[str, str, str, str]]:
    """(name, type, labels, help) of every metric the controller serves, from a fresh registry (with the
    node gauges a controller running admission adds); labels name the values a fresh one already has."""
    metrics = Metrics(CollectorRegistry())
    metrics.count_nodes(lambda: 0, lambda: 0)
    rows = []
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        collector = metrics.registry._names_to_collectors.get(name) or metrics.registry._names_to_collectors.get(
            family.name
        )
        labels = list(getattr(collector, "_labelnames", ()))
        seen: dict[str, list[str]] = {label: [] for label in labels}
        for sample in family.samples:
            for label, value in sample.labels.items():
                if label in seen and value not in seen[label]:
                    seen[label].append(value)
        shown = ", ".join(f"`{label}`" + (f" ({', '.join(seen[label])})" if seen[label] else "") for label in labels)
        rows.append((f"`{name}`", family.type, shown, family.documentation))
    return rows


def metrics_page() -> str:
    lines = [
        header("the Prometheus registry of `yuniplace/runtime/metrics.py`"),
        "# Metrics",
        "",
        "Served on `/metrics` (port 8080 in the chart; a ServiceMonitor is optional). Labels show, in brackets, "
        "the values a controller reports from its start; cpu is in cores, memory in bytes, pods as a count.",
        "",
        *table_lines(("Metric", "Type", "Labels", "What"), metric_rows()),
    ]
    return "\n".join(lines) + "\n"


# -- queue settings ----------------------------------------------------------------------------------------


def queue_settings_page() -> str:
    lines = [
        header("the settings table of `yuniplace/queues/settings.py`"),
        "# Queue settings",
        "",
        "Each queue setting, where each format spells it, whether it passes to the queues below, and what it "
        "does, as `yuniplace/queues/settings.py` lists them (the one place that does). See "
        "[Queues](../concepts/queues.md) for how admission uses them.",
        "",
        settings_docs.markdown(),
        "",
        "Adding a queue setting is one entry in that table and its rule: the field in `QueueSpec` (or `Limit`) "
        "in `yuniplace/queues/model.py` with its default; its entry in `yuniplace/queues/settings.py` (its "
        "spellings and their parse, whether it passes down, the modules that act on it, its effect); and the "
        "code in those modules that acts on it. A spelling in YuniKorn's `properties` or among a Volcano "
        "Queue's `yuniplace.io/` annotations is then read, checked and passed down without another edit; one "
        "elsewhere is read where its format's reader builds the queue. A unit test "
        "(`tests/unit/test_queue_model_effects.py`) fails for a field without an entry, a module listed that "
        "does not read its field, a parse its format's reader does not call, or this table out of date; a "
        "setting a format carries without effect is warned of where it is read.",
    ]
    return "\n".join(lines) + "\n"
