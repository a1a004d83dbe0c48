"""Asking for topology domains, and keeping pods in the domains chosen: yuniplace's form on the pod and on
a task group, Kueue's annotations as they are, every bad value refused with the key that carries it (by
the webhook, `yuniplace validate` and the controller alike), the record a restarted controller reads,
and the node affinity that keeps a placeholder or a member in its domain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from tests import builders
from yuniplace.admission.domains import free_by_domain
from yuniplace.admission.room import RoomView
from yuniplace.cli import main
from yuniplace.controller.apply import _pin_ops
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.fit import Node
from yuniplace.gang.record import read_record
from yuniplace.gang.taskgroups import InvalidGang
from yuniplace.gang.topology import (
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    BadTopology,
    Domains,
    Level,
    Pin,
    Topology,
    noun,
    parse,
    pinned,
    read_domains,
)
from yuniplace.runtime.metrics import Metrics
from yuniplace.webhook.admission import problems_of

RACK = "topology.k8s.aws/network-node-layer-3"
BLOCK = "topology.k8s.aws/network-node-layer-2"
WORKERS = builders.task_group("workers", 4, {"cpu": "1"})


def originator(annotations: dict[str, str] | None = None, groups: list[dict[str, Any]] | None = None) -> p.Pod:
    return builders.member(
        "driver",
        app="train",
        group="workers",
        task_groups=groups or [WORKERS],
        annotations=annotations,
        requests={"cpu": "1"},
        gates=[keys.GATE],
    )


def gang_of(pod: p.Pod) -> Application:
    return Application.of(p.AppKey("ns", "train"), [pod])


# -- yuniplace's form ---------------------------------------------------------------------------------


def test_levels_are_read_from_the_coarsest_to_the_finest() -> None:
    asked = parse(f"required={BLOCK} preferred={RACK}", keys.TOPOLOGY)
    assert asked == Topology((Level(BLOCK, True), Level(RACK, False)))
    assert asked.required and str(asked) == f"required={BLOCK} preferred={RACK}"
    assert not parse(f"preferred={RACK}", keys.TOPOLOGY).required


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "must name at least one level"),
        ("   ", "must name at least one level"),
        (f"rack={RACK}", "is not required=<node label key> or preferred=<node label key>"),
        (RACK, "is not required=<node label key> or preferred=<node label key>"),
        ("required=", "is not a node label key"),
        ("required=Not_A/valid/key", "is not a node label key"),
        ("required=-rack", "is not a node label key"),
        (f"required={RACK} preferred={RACK}", "is named at more than one level"),
        (f"preferred={BLOCK} required={RACK}", "requires a level after one it only prefers"),
        ("required=a required=b required=c required=d preferred=e", "more than the limit of 4"),
        ("required=" + "a" * 64, "is not a node label key"),
    ],
)
def test_a_bad_ask_is_refused_with_what_is_expected(text: str, expected: str) -> None:
    with pytest.raises(BadTopology) as error:
        parse(text, keys.TOPOLOGY)
    assert error.value.field == keys.TOPOLOGY and expected in error.value.expected


def test_an_ask_that_is_not_text_is_refused() -> None:
    with pytest.raises(BadTopology, match="must be a string"):
        parse(["required", RACK], "task-groups[workers].yuniplace.io/topology")


def test_the_noun_of_a_level_comes_from_its_label() -> None:
    assert noun("cloud.google.com/gce-topology-block") == "block"
    assert noun("cloud.google.com/gce-topology-subblock") == "subblock"
    assert noun("topology.kubernetes.io/zone") == "zone"
    assert noun("example.com/rack") == "rack"
    assert noun(RACK) == "domain"


# -- on the gang's pods ---------------------------------------------------------------------------------


def test_the_gang_and_each_task_group_may_ask_for_domains() -> None:
    groups = [
        builders.task_group("launcher", 1, {"cpu": "1"}),
        builders.task_group("workers", 8, {"cpu": "1"}, **{keys.TOPOLOGY: f"required={RACK}"}),
    ]
    spec = gang_of(originator({keys.TOPOLOGY: f"required={BLOCK}"}, groups)).spec
    assert spec is not None and spec.topology == Topology((Level(BLOCK, True),))
    launcher, workers = spec.groups
    assert launcher.topology is None and workers.topology == Topology((Level(RACK, True),))
    assert spec.topology_required and not spec.warnings


def test_a_task_groups_own_key_is_matched_as_yunikorn_matches_keys_and_is_no_unknown_key() -> None:
    group = builders.task_group("workers", 2, {"cpu": "1"}, **{"YuniPlace.io/Topology": f"preferred={RACK}"})
    spec = gang_of(originator(groups=[group])).spec
    assert spec is not None and spec.groups[0].topology == Topology((Level(RACK, False),))
    assert not spec.warnings


@pytest.mark.parametrize(("key", "required"), [(KUEUE_REQUIRED, True), (KUEUE_PREFERRED, False)])
def test_kueues_annotations_are_read_as_they_are(key: str, required: bool) -> None:
    spec = gang_of(originator({key: RACK})).spec
    assert spec is not None and spec.topology == Topology((Level(RACK, required),))


def test_kueues_two_annotations_together_are_refused_as_kueue_refuses_them() -> None:
    app = gang_of(originator({KUEUE_REQUIRED: RACK, KUEUE_PREFERRED: BLOCK}))
    assert app.spec is None and app.problem is not None
    assert f"{KUEUE_PREFERRED}" in str(app.problem) and "Kueue takes one or the other" in str(app.problem)


def test_yuniplaces_form_wins_over_kueues_with_a_warning() -> None:
    spec = gang_of(originator({keys.TOPOLOGY: f"required={BLOCK}", KUEUE_PREFERRED: RACK})).spec
    assert spec is not None and spec.topology == Topology((Level(BLOCK, True),))
    assert spec.warnings == (f"{KUEUE_PREFERRED} is ignored: {keys.TOPOLOGY} says where the gang goes",)


def test_kueues_annotation_is_read_alongside_another_dialect() -> None:
    pod = builders.pod(
        "w-0",
        labels={
            "pod-group.scheduling.sigs.k8s.io/name": "train",
            "pod-group.scheduling.sigs.k8s.io/min-available": "3",
        },
        annotations={KUEUE_REQUIRED: RACK},
        requests={"cpu": "1"},
    )
    spec = Application.of(p.AppKey("ns", "train"), [pod]).spec
    assert spec is not None and spec.topology == Topology((Level(RACK, True),)) and spec.min_members == 3


def test_every_problem_is_named_together_with_the_gangs_own() -> None:
    group = builders.task_group("workers", 0, {"cpu": "1"}, **{keys.TOPOLOGY: "required="})
    app = gang_of(originator({keys.TOPOLOGY: "nearby"}, [group]))
    assert isinstance(app.problem, InvalidGang)
    fields = [problem.field for problem in app.problem.problems]
    assert fields == [
        "task-groups[workers].minMember",
        f"task-groups[workers].{keys.TOPOLOGY}",
        keys.TOPOLOGY,
    ]


@pytest.mark.parametrize(
    "annotations",
    [
        {keys.TOPOLOGY: "required=Bad Key"},
        {KUEUE_REQUIRED: "not a key!"},
        {KUEUE_REQUIRED: RACK, KUEUE_PREFERRED: RACK},
    ],
)
def test_the_webhook_denies_a_bad_ask_on_the_originator_and_on_a_member(annotations: dict[str, str]) -> None:
    assert problems_of(originator(annotations)) is not None
    member = builders.member("executor-1", app="train", group="workers", annotations=annotations, gates=[keys.GATE])
    assert problems_of(member) is not None
    assert problems_of(builders.member("executor-2", app="train", group="workers", gates=[keys.GATE])) is None


def test_the_webhook_denies_a_bad_ask_on_a_pod_group_member() -> None:
    pod = builders.pod(
        "w-0",
        labels={"scheduling.x-k8s.io/pod-group": "train"},
        annotations={keys.TOPOLOGY: "preferred=rack required=block"},
        requests={"cpu": "1"},
    )
    problem = problems_of(pod)
    assert problem is not None and "requires a level after one it only prefers" in problem


def test_validate_reports_a_bad_ask_in_a_job_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "template": {
                "metadata": {
                    "labels": {"applicationId": "train"},
                    "annotations": {
                        keys.TASK_GROUP_NAME: "workers",
                        keys.TASK_GROUPS: json.dumps([WORKERS]),
                        KUEUE_REQUIRED: "rack number 3",
                    },
                },
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            }
        },
    }
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    assert main(["validate", str(manifest)]) == 1
    out = capsys.readouterr().out
    assert f'{KUEUE_REQUIRED}: "rack number 3" is not a node label key' in out


# -- the record and the pins ----------------------------------------------------------------------------


def test_the_chosen_domains_round_trip_through_the_record() -> None:
    chosen = Domains(
        (Pin(BLOCK, ("b-1",), True),),
        (("workers", (Pin(RACK, ("r-3", "r-4"), False),)),),
    )
    record = read_record({keys.TOPOLOGY_DOMAIN: chosen.text()})
    assert record.domains == chosen
    assert str(chosen) == f"{BLOCK}=b-1; workers: {RACK}=r-3,r-4"
    assert chosen.of("workers") == (Pin(BLOCK, ("b-1",), True), Pin(RACK, ("r-3", "r-4"), False))
    assert chosen.of("launcher") == (Pin(BLOCK, ("b-1",), True),)
    assert chosen.of_member("workers") == chosen.of_member(None) == (Pin(BLOCK, ("b-1",), True),)
    assert read_domains(None) == Domains() and not Domains()


@pytest.mark.parametrize(
    "text",
    [
        "nope",
        "[]",
        '{"gang": [{"key": "rack"}]}',
        '{"gang": [{"key": "Bad Key", "values": ["r"], "required": true}]}',
        '{"gang": [{"key": "rack", "values": [], "required": true}]}',
        '{"gang": [{"key": "rack", "values": ["not a value"], "required": true}]}',
        '{"gang": [{"key": "rack", "values": ["r"], "required": "yes"}]}',
        '{"groups": {"w": "rack"}}',
        '{"other": 1}',
    ],
)
def test_a_record_that_cannot_be_read_names_its_key(text: str) -> None:
    with pytest.raises(InvalidGang) as error:
        read_record({keys.TOPOLOGY_DOMAIN: text})
    assert error.value.problems[0].field.startswith(keys.TOPOLOGY_DOMAIN)


def test_pinning_narrows_every_required_term_and_keeps_the_rest() -> None:
    pins = [Pin(RACK, ("r-3",), True)]
    assert pinned(None, pins) == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": RACK, "operator": "In", "values": ["r-3"]}]}]
            }
        }
    }
    own = {
        "podAntiAffinity": {"x": 1},
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
        },
    }
    result = pinned(own, pins)
    terms = result["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"] == [
        {"key": "gpu", "operator": "Exists"},
        {"key": RACK, "operator": "In", "values": ["r-3"]},
    ]
    assert (
        terms[1]["matchFields"]
        == own["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][1]["matchFields"]
    )
    assert terms[1]["matchExpressions"] == [{"key": RACK, "operator": "In", "values": ["r-3"]}]
    assert result["podAntiAffinity"] == {"x": 1}
    assert result["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [{"weight": 1}]
    assert own["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ] == [{"key": "gpu", "operator": "Exists"}]  # the pod's own affinity is left as it was


def _patched(pod: p.Pod, ops: list[dict[str, Any]]) -> p.Pod:
    """The pod after JSON-patch `add` operations, as the API applies them."""
    result = json.loads(json.dumps(pod))
    for op in ops:
        assert op["op"] == "add"
        *parents, last = op["path"].strip("/").split("/")
        target = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
    return result


@pytest.mark.parametrize(
    "affinity",
    [
        None,
        {"podAffinity": {"x": 1}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                    ]
                }
            }
        },
    ],
)
def test_a_members_patch_keeps_it_in_its_domain_as_pinning_does(affinity: dict[str, Any] | None) -> None:
    pins = [Pin(BLOCK, ("b-1",), True), Pin(RACK, ("r-3",), True)]
    member = builders.pod("m", gates=[keys.GATE], **({"affinity": affinity} if affinity is not None else {}))
    assert _patched(member, _pin_ops(member, pins))["spec"]["affinity"] == pinned(affinity, pins)


def test_free_room_is_reported_by_level_and_domain_within_bounds() -> None:
    nodes = [
        Node(f"n{i}", {RACK: f"r{i % 3}", BLOCK: "b0"}, (), {"cpu": 4000, "memory": 8 * 2**30 * 1000, "pods": 110_000})
        for i in range(6)
    ]
    nodes.append(Node("unlabelled", {}, (), {"cpu": 4000, "pods": 110_000}))
    free = {node.name: node.free({"cpu": 1000 if node.name == "n0" else 0}) for node in nodes}
    free["n3"] = {**free["n3"], "cpu": -500}  # overcommitted: no free room, never less
    view = RoomView(nodes, free, {})
    rooms = free_by_domain(view, [RACK, BLOCK], most=2)
    assert [(room.level, room.domain) for room in rooms] == [(RACK, "r0"), (RACK, "r1"), (BLOCK, "b0")]
    assert rooms[0].free["cpu"] == 3000 and rooms[1].free["cpu"] == 8000 and rooms[2].free["cpu"] == 19_000
    metrics = Metrics(CollectorRegistry())
    metrics.report_domains(rooms)
    assert (
        metrics.registry.get_sample_value(
            "yuniplace_topology_domain_free", {"level": RACK, "domain": "r1", "resource": "cpu"}
        )
        == 8
    )
    metrics.report_domains([])
    assert (
        metrics.registry.get_sample_value(
            "yuniplace_topology_domain_free", {"level": RACK, "domain": "r1", "resource": "cpu"}
        )
        is None
    )
    metrics.placed_in(Domains((Pin(BLOCK, ("b0",), True), Pin(RACK, ("r0", "r1"), False))))
    placed = {"level": RACK, "placement": "spread"}
    assert metrics.registry.get_sample_value("yuniplace_topology_gangs_placed_total", placed) == 1
