"""Every setting of the queue model has an effect or a warning: the settings table
(yuniplace.queues.settings) lists each field with the modules that decide with it (admission, quota,
placement, pools, the report), and each is checked here against the code: every field of the model has
one entry and no entry names another, every reader listed reads the field, every parse function a
spelling names is called by its source's reader, and every setting a source writes as text under a key
has a parse. Settings sources carry and the model leaves out are listed here as "no effect" with the
warning their source gives. A queue a placement rule creates takes its settings by the same path as a
configured child queue that sets none of its own, and the docs' table of queue settings is the one
the settings table makes."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from functools import cache
from pathlib import Path

import pytest

from yuniplace.queues import settings_docs
from yuniplace.queues.config import read_queues_yaml
from yuniplace.queues.model import Limit, QueueSpec
from yuniplace.queues.placement import dynamic_queue
from yuniplace.queues.settings import KEYED, QUEUE_SETTINGS, SETTINGS, Setting, Source
from yuniplace.queues.volcano import read_volcano_queues

# Settings that sources carry and the model leaves out, with the warning that says so. Each is read
# from a source that sets it, and the warning must come out.
QUEUES_YAML = "partitions: [{queues: [{name: root, submitacl: '*', queues: [{name: a, properties: {%s}}]}]}]"
NO_EFFECT = {
    "priority.offset (YuniKorn)": (
        lambda: read_queues_yaml(QUEUES_YAML % "priority.offset: '5'").warnings,
        "has no effect: yuniplace never compares priorities across queues",
    ),
    "preemption.delay (YuniKorn)": (
        lambda: read_queues_yaml(QUEUES_YAML % "preemption.delay: 30s").warnings,
        "has no effect: a queue reclaims its guarantee as soon as admission needs it",
    ),
    "nodesortpolicy (YuniKorn)": (
        lambda: read_queues_yaml("partitions: [{nodesortpolicy: {type: binpacking}, queues: [{name: root}]}]").warnings,
        "has no effect: kube-scheduler chooses the nodes",
    ),
    "childtemplate (YuniKorn)": (
        lambda: (
            read_queues_yaml(
                "partitions: [{queues: [{name: root, submitacl: '*', childtemplate: {maxapplications: 3}}]}]"
            ).warnings
        ),
        "is not applied",
    ),
    "weight (Volcano)": (
        lambda: (
            read_volcano_queues(
                [
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "Queue",
                        "metadata": {"name": "a"},
                        "spec": {"weight": 3},
                    }
                ]
            ).warnings
        ),
        "has no effect: yuniplace does not divide room between queues by weight",
    ),
}


@cache
def _tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"{module} is not a module"
    with open(spec.origin) as source:
        return ast.parse(source.read())


def _attributes_read(module: str) -> set[str]:
    """The attribute names the module reads (`x.field`), which a constructor's keywords are not."""
    return {
        node.attr
        for node in ast.walk(_tree(module))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
    }


def _names_used(module: str) -> set[str]:
    """The names the module uses, bare (`parse(…)`) or as an attribute (`module.parse(…)`)."""
    return {node.id for node in ast.walk(_tree(module)) if isinstance(node, ast.Name)} | _attributes_read(module)


@pytest.mark.parametrize("model", [QueueSpec, Limit], ids=lambda model: model.__name__)
def test_every_field_of_the_model_has_one_entry_in_the_settings_table(model: type) -> None:
    fields = [field.name for field in dataclasses.fields(model)]
    entries = [setting.name for setting in SETTINGS if setting.model is model]
    assert sorted(entries) == sorted(fields), (
        f"{model.__name__}: a field without an entry ({sorted(set(fields) - set(entries))}), an entry of no field "
        f"({sorted(set(entries) - set(fields))}), or one listed twice: list it in yuniplace.queues.settings, act on "
        "it where admission decides, or drop it from the model and warn of it where it is read (NO_EFFECT)"
    )


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda setting: f"{setting.model.__name__}.{setting.name}")
def test_every_reader_the_table_lists_reads_the_setting(setting: Setting) -> None:
    assert setting.readers, f"{setting.name} has no reader: it would have no effect"
    for module in setting.readers:
        assert setting.name in _attributes_read(module), (
            f"{setting.model.__name__}.{setting.name} is not read in {module}"
        )


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda setting: f"{setting.model.__name__}.{setting.name}")
def test_every_spelling_is_parsed_where_its_source_is_read(setting: Setting) -> None:
    for source in Source:
        for spelling in setting.spellings(source):
            if source in KEYED and spelling.where.startswith(KEYED[source]):
                assert spelling.parse is not None, f"{spelling.where} is written as text: it needs a parse"
            elif spelling.parse is not None:
                assert spelling.parse.__name__ in _names_used(source.value), (
                    f"{spelling.where}: {source.value} does not call {spelling.parse.__name__}"
                )


@pytest.mark.parametrize("setting", list(NO_EFFECT))
def test_a_setting_without_effect_says_so_where_it_is_read(setting: str) -> None:
    warnings, expected = NO_EFFECT[setting]
    assert any(expected in warning for warning in warnings()), warnings()


def test_a_queue_a_rule_creates_takes_the_settings_a_configured_child_without_its_own_would() -> None:
    """Parent `team` sets every switch a queue passes down; `team.child` is configured and sets none;
    `team.made` is created by a placement rule. Both hold the same settings but their own."""
    config = read_queues_yaml(
        """
partitions:
  - queues:
      - name: root
        submitacl: "*"
        queues:
          - name: team
            parent: true
            submitacl: "system:serviceaccount:team:runner"
            properties:
              application.sort.policy: fair
              application.sort.priority: disabled
              preemption.policy: disabled
              yuniplace.io/sharing: "false"
              yuniplace.io/borrowing: "false"
              yuniplace.io/node-selector: pool=team
            queues:
              - name: child
"""
    )
    configured = config.queues["root.team.child"]
    made = dynamic_queue(config, "root.team.made")
    for setting in QUEUE_SETTINGS:
        if setting.inherits:
            assert getattr(made, setting.name) == getattr(configured, setting.name), setting.name
        elif setting.name not in ("path", "source"):
            assert getattr(made, setting.name) == setting.default, setting.name
    assert (made.ordering.value, made.by_priority, made.reclaimable, made.sharing) == ("fair", False, False, False)


def test_the_docs_table_of_queue_settings_is_the_settings_table() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "queue-settings.md").read_text()
    begin, end = page.find(settings_docs.BEGIN), page.find(settings_docs.END)
    assert 0 <= begin < end, "docs/reference/queue-settings.md has no table of queue settings between its markers"
    assert page[begin : end + len(settings_docs.END)] == settings_docs.markdown(), (
        "docs/reference/queue-settings.md's table of queue settings differs from yuniplace.queues.settings: "
        "write it anew with scripts/venv-python -m yuniplace.docsgen --write"
    )
