"""Every setting of the queue model has an effect or a warning: each field is read by the code that
decides (admission, quota, placement, pools, the report), or is listed here as "no effect" with the
warning its source gives. A new field that is neither fails this test; so does a reader that stops
reading one. And a queue a placement rule creates takes its settings by the same path as a configured
child queue that sets none of its own."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from yuniplace.queues.config import read_queues_yaml
from yuniplace.queues.model import OWN_SETTINGS, Limit, QueueSpec
from yuniplace.queues.placement import dynamic_queue
from yuniplace.queues.volcano import read_volcano_queues

PACKAGE = Path(__file__).resolve().parents[2] / "yuniplace"
# The code that decides with the configuration (not the readers that build it).
DECIDERS = (
    "admission/snapshot.py",
    "admission/decision.py",
    "admission/line.py",
    "queues/quota.py",
    "queues/pools.py",
    "queues/placement.py",
    "queues/model.py",
    "queues/report.py",
    "queues/config.py",
)

# Each field and the modules of DECIDERS that act on it.
READ_BY = {
    QueueSpec: {
        "path": ("queues/quota.py", "queues/placement.py"),
        "guaranteed": ("queues/quota.py",),  # borrowing, lending, reclaim
        "max": ("queues/quota.py",),
        "node_selector": ("queues/pools.py", "admission/snapshot.py"),
        "sharing": ("queues/quota.py", "queues/pools.py"),
        "borrowing": ("queues/quota.py",),
        "preemption": ("queues/quota.py",),  # whether it reclaims
        "ordering": ("admission/line.py",),  # the line of its applications
        "by_priority": ("admission/line.py",),
        "submitters": ("queues/placement.py",),  # submitacl and adminacl
        "source": ("queues/config.py",),  # messages naming where a queue was configured
        "parent_queue": ("queues/model.py",),
        "reclaimable": ("queues/quota.py",),  # whether its gangs may be reclaim's victims
        "open": ("queues/placement.py",),
        "max_applications": ("queues/quota.py",),
        "limits": ("queues/quota.py",),
        "preempts_within": ("admission/decision.py",),
    },
    Limit: {
        "users": ("queues/quota.py",),
        "groups": ("queues/quota.py",),
        "max_applications": ("queues/quota.py",),
        "max_resources": ("queues/quota.py",),
        "name": ("queues/quota.py",),
    },
}

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


def _attributes_read(module: str) -> set[str]:
    """The attribute names the module reads (`x.field`), which a constructor's keywords are not."""
    tree = ast.parse((PACKAGE / module).read_text())
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)}


@pytest.mark.parametrize("model", list(READ_BY), ids=lambda model: model.__name__)
def test_every_field_of_the_model_is_read_by_the_code_that_decides(model: type) -> None:
    fields = {field.name for field in dataclasses.fields(model)}
    assert fields == set(READ_BY[model]), (
        f"{model.__name__}: a field without a reader ({sorted(fields - set(READ_BY[model]))}), or a reader of no field "
        f"({sorted(set(READ_BY[model]) - fields)}): act on it where admission decides, or drop it from the model "
        "and warn of it where it is read (NO_EFFECT)"
    )
    read = {module: _attributes_read(module) for module in DECIDERS}
    for name, modules in READ_BY[model].items():
        for module in modules:
            assert name in read[module], f"{model.__name__}.{name} is not read in {module}"


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
    for field in dataclasses.fields(QueueSpec):
        if field.name not in OWN_SETTINGS:
            assert getattr(made, field.name) == getattr(configured, field.name), field.name
    assert (made.ordering.value, made.by_priority, made.reclaimable, made.sharing) == ("fair", False, False, False)
