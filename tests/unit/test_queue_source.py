"""The queue configuration in force: applied as its sources change, refused whole with events naming each
problem (the last good one kept), and applications placed by it, queues created by placement included."""

from __future__ import annotations

import textwrap
from typing import Any

from tests import builders
from tests.unit.test_gang_admission import NS, gang
from tests.unit.test_queue_admission import World, in_queue, nodes, running
from yuniplace.admission.tickets import Granted, Refused, Waiting
from yuniplace.controller.queuesource import QueueSource
from yuniplace.devices.claims import class_resource
from yuniplace.devices.inventory import DeviceInventory
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.events import Reason

TWO_TEAMS = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: false
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              max: {vcore: 4}
          - name: b
"""


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, Reason, str, str | None]] = []

    def record_on(
        self,
        obj: Any,
        api_version: str,
        object_kind: str,
        reason: Reason,
        note: str,
        *,
        kind: str | None = None,
        namespace: str = "default",
    ) -> None:
        self.events.append((object_kind, obj["metadata"]["name"], reason, note, kind))


def configmap(text: str, name: str = "yunikorn-configs") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "yunikorn"}, "data": {"queues.yaml": textwrap.dedent(text)}}


def source() -> tuple[QueueSource, Recorder, list[int]]:
    recorder = Recorder()
    changes: list[int] = []
    queues = QueueSource(("yunikorn", "yunikorn-configs"), recorder=recorder, on_change=lambda: changes.append(1))  # type: ignore[arg-type]
    return queues, recorder, changes


def application(pod: dict[str, Any]) -> Application:
    key = p.app_key(pod)
    assert key is not None
    return Application.of(key, [pod], None, Limits())


def test_a_configmap_is_applied_and_confirmed_by_an_event() -> None:
    queues, recorder, changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    assert set(queues.config().queues) == {"root", "root.a", "root.b"}
    assert changes == [1]
    [(kind, name, reason, note, _type)] = recorder.events
    assert (kind, name, reason) == ("ConfigMap", "yunikorn-configs", Reason.QUEUES_APPLIED)
    assert "3 queues (2 taking applications), 1 placement rule" in note


def test_an_unchanged_configmap_says_nothing_again() -> None:
    queues, recorder, changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    queues.configmap_changed(configmap(TWO_TEAMS))  # a resync
    assert len(recorder.events) == 1 and changes == [1]


def test_a_bad_edit_is_refused_naming_each_problem_and_the_last_good_configuration_stays() -> None:
    queues, recorder, changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    good = queues.config()
    queues.configmap_changed(
        configmap(
            """
            partitions:
              - name: default
                queues:
                  - name: root
                    queues:
                      - name: a
                        resources:
                          guaranteed: {vcore: 8}
                          max: {vcore: 4}
                      - name: b
                        resources:
                          max: {memory: lots}
            """
        )
    )
    assert queues.config() is good
    assert changes == [1]
    kind, name, reason, note, _type = recorder.events[-1]
    assert (kind, name, reason) == ("ConfigMap", "yunikorn-configs", Reason.QUEUES_REFUSED)
    assert note.startswith("refused, its previous queues stay in force: ")
    assert "root.a" in note and "root.b: resources.max.memory" in note and '"lots"' in note


def test_a_deleted_configmap_takes_its_queues_away() -> None:
    queues, _recorder, changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    queues.configmap_changed(None)
    assert queues.config().empty
    assert changes == [1, 1]


def test_settings_without_effect_make_the_confirmation_a_warning() -> None:
    queues, recorder, _changes = source()
    queues.configmap_changed(
        configmap(
            """
            partitions:
              - name: default
                nodesortpolicy: {type: binpacking}
                queues:
                  - name: root
                    submitacl: "*"
            """
        )
    )
    _kind, _name, reason, note, event_type = recorder.events[-1]
    assert reason == Reason.QUEUES_APPLIED and event_type == "Warning"
    assert "without effect" in note and "nodesortpolicy" in note


def test_volcano_queues_are_merged_and_a_bad_one_is_refused_on_itself() -> None:
    queues, recorder, _changes = source()
    volcano = {"metadata": {"name": "ml"}, "spec": {"capability": {"cpu": "8"}}}
    queues.volcano_queues_changed([volcano])
    assert queues.config().queues["root.ml"].max == {"cpu": 8000}
    queues.volcano_queues_changed([volcano, {"metadata": {"name": "bad"}, "spec": {"capability": {"cpu": "x"}}}])
    assert queues.config().queues["root.ml"].max == {"cpu": 8000} and "root.bad" not in queues.config().queues
    kind, name, reason, note, _type = recorder.events[-1]
    assert (kind, name, reason) == ("Queue", "bad", Reason.QUEUES_REFUSED)
    assert "capability.cpu" in note


def test_a_queue_path_in_both_sources_is_refused_and_neither_changes() -> None:
    queues, recorder, _changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    queues.volcano_queues_changed([{"metadata": {"name": "a"}, "spec": {"capability": {"cpu": "8"}}}])
    assert queues.config().queues["root.a"].max == {"cpu": 4000}
    assert (
        recorder.events[-1][2] == Reason.QUEUES_REFUSED
        and "each queue is configured in one place" in recorder.events[-1][3]
    )


def test_without_a_configuration_an_application_waits_in_the_queue_it_names() -> None:
    placing = QueueSource().placing()
    assert placing.config.empty
    assert placing.place(application(gang("x", 1, created=1, queue="etl"))) == "etl"
    assert placing.place(application(gang("y", 1, created=1))) == NS


def test_placement_refusal_says_why_no_queue_takes_the_application() -> None:
    queues, _recorder, _changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    refused = queues.placing().place(application(gang("x", 1, created=1, queue="nowhere")))
    assert isinstance(refused, Refused) and refused.reason == Reason.GANG_REFUSED
    assert "no queue takes it" in refused.message and "root.nowhere does not exist" in refused.message


def test_queues_created_by_placement_exist_while_applications_are_placed_in_them() -> None:
    queues, _recorder, _changes = source()
    queues.configmap_changed(
        configmap(
            """
            partitions:
              - name: default
                placementrules:
                  - name: tag
                    value: namespace
                    create: true
                    parent: {name: fixed, value: root.tenants}
                queues:
                  - name: root
                    submitacl: "*"
                    queues:
                      - name: tenants
                        parent: true
                        resources:
                          max: {vcore: 2}
            """
        )
    )
    placing = queues.placing()
    assert placing.place(application(gang("x", 1, created=1))) == f"root.tenants.{NS}"
    assert f"root.tenants.{NS}" in placing.config.queues and f"root.tenants.{NS}" not in queues.config().queues
    assert placing.config.queues[f"root.tenants.{NS}"].source.startswith("created by rule 1")
    placing.done()
    assert QueueSource().placing().config.empty


def test_the_namespace_parent_queue_annotation_is_read_for_the_tag_rule() -> None:
    queues, _recorder, changes = source()
    queues.configmap_changed(
        configmap(
            """
            partitions:
              - name: default
                placementrules:
                  - name: tag
                    value: namespace
                    create: true
                    parent: {name: tag, value: namespace.parentqueue}
                queues:
                  - name: root
                    submitacl: "*"
                    queues:
                      - name: dev
                        parent: true
            """
        )
    )
    pod = gang("x", 1, created=1)
    assert isinstance(queues.placing().place(application(pod)), Refused)
    queues.namespaces_changed(
        [{"metadata": {"name": NS, "annotations": {"yunikorn.apache.org/parentqueue": "root.dev"}}}]
    )
    assert changes == [1, 1]
    assert queues.placing().place(application(pod)) == f"root.dev.{NS}"


def test_admission_follows_a_live_raise_of_max() -> None:
    queues, _recorder, _changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    world = World(
        nodes(4),
        [in_queue(gang("first", 4, created=1, state="Reserving"), "a"), in_queue(gang("second", 2, created=2), "a")],
        queues,
    )
    waiting = world.ticket("second")
    assert isinstance(waiting, Waiting) and "queue root.a is at its max cpu: 4 of 4 used" in waiting.message
    queues.configmap_changed(configmap(TWO_TEAMS.replace("vcore: 4", "vcore: 8")))
    world.admission.capacity_changed()
    assert isinstance(world.ticket("second"), Granted)


# --- ai-scheduler's Pools ----------------------------------------------------------------------------

DEMO = {"pool": "demo"}
MASTER = {"kubernetes.io/role": "master"}


def pool(name: str, labels: dict[str, str], **switches: Any) -> dict[str, Any]:
    """A Pool as a list of Pools has it (without its kind)."""
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"nodeSelector": {"matchLabels": labels}, **switches},
    }


EVERYTHING_OFF = {"disablePreemption": True, "disableBorrowing": True, "disableSharing": True}


def test_pools_are_applied_on_each_with_an_event_and_their_guarantees_follow_the_nodes() -> None:
    queues, recorder, changes = source()
    cluster = nodes(2, labels=DEMO, prefix="d") + nodes(1, labels=MASTER, prefix="m")
    queues.nodes_changed(cluster)
    queues.pools_changed([pool("demo", DEMO), pool("masters", MASTER, **EVERYTHING_OFF)])
    config = queues.config()
    assert config.queues["root.demo"].guaranteed["cpu"] == 8000 and "root.default" in config.queues
    assert [(kind, name, reason) for kind, name, reason, _note, _type in recorder.events] == [
        ("Pool", "demo", Reason.QUEUES_APPLIED),
        ("Pool", "masters", Reason.QUEUES_APPLIED),
    ]
    assert "4 queues (3 taking applications)" in recorder.events[0][3] and changes == [1]

    queues.pools_changed([pool("demo", DEMO), pool("masters", MASTER, **EVERYTHING_OFF)])  # a relist
    heartbeat = {**cluster[0], "status": {**cluster[0]["status"], "conditions": [{"type": "Ready"}]}}
    queues._node_event("MODIFIED", heartbeat)
    assert len(recorder.events) == 2 and changes == [1]

    queues._node_event("ADDED", nodes(1, cpu="16", labels=DEMO, prefix="big")[0])  # quietly: no Pool was edited
    assert queues.config().queues["root.demo"].guaranteed["cpu"] == 24000
    assert len(recorder.events) == 2 and changes == [1, 1]
    queues._node_event("DELETED", cluster[0])
    assert queues.config().queues["root.demo"].guaranteed["cpu"] == 20000


def test_a_pools_guarantee_follows_the_devices_drivers_publish_on_its_nodes() -> None:
    queues, _recorder, changes = source()
    devices = DeviceInventory()
    queues.count_devices(devices)
    devices.classes_listed([builders.device_class("gpu", "gpu.example.com")])
    cluster = nodes(2, labels=DEMO, prefix="d")
    queues.nodes_changed(cluster)
    queues.pools_changed([pool("demo", DEMO)])
    gpus = class_resource("gpu")
    assert gpus not in queues.config().queues["root.demo"].guaranteed and changes == [1]

    name = cluster[0]["metadata"]["name"]
    devices.slice_event("ADDED", builders.resource_slice("s", name, "gpu.example.com", ["g0", "g1"]))
    assert queues.config().queues["root.demo"].guaranteed[gpus] == 2000 and changes == [1, 1]
    devices.slice_event("DELETED", builders.resource_slice("s", name, "gpu.example.com", []))
    assert gpus not in queues.config().queues["root.demo"].guaranteed and changes == [1, 1, 1]


def test_devices_that_cannot_be_counted_leave_the_pools_guaranteed_their_nodes_without_them() -> None:
    queues, _recorder, _changes = source()
    devices = DeviceInventory()
    queues.count_devices(devices)

    def fails() -> dict[str, dict[str, int]]:
        raise RuntimeError("a fault of yuniplace's own")

    queues._node_devices = fails
    queues.nodes_changed(nodes(2, labels=DEMO, prefix="d"))
    queues.pools_changed([pool("demo", DEMO)])
    assert queues.config().queues["root.demo"].guaranteed["cpu"] == 8000


def test_a_bad_pool_edit_is_refused_on_it_and_the_last_good_pools_stay_and_follow_the_nodes() -> None:
    queues, recorder, _changes = source()
    queues.nodes_changed(nodes(2, labels=DEMO, prefix="d"))
    queues.pools_changed([pool("demo", DEMO), pool("masters", MASTER, **EVERYTHING_OFF)])
    queues._pool_event("MODIFIED", pool("demo", DEMO, disableSharing="yes"))
    assert queues.config().queues["root.demo"].sharing and queues.refused is not None
    kind, name, reason, note, _type = recorder.events[-1]
    assert (kind, name, reason) == ("Pool", "demo", Reason.QUEUES_REFUSED)
    assert note.startswith("refused, the Pools as they were before stay in force: ")
    assert 'ai-scheduler Pool demo: spec.disableSharing: "yes" must be true or false' in note
    events = len(recorder.events)
    queues._node_event("ADDED", nodes(1, labels=DEMO, prefix="new")[0])
    assert queues.config().queues["root.demo"].guaranteed["cpu"] == 12000 and len(recorder.events) == events

    queues._pool_event("MODIFIED", pool("demo", DEMO, disableSharing=True))
    assert not queues.config().queues["root.demo"].sharing and queues.refused is None
    assert recorder.events[-1][:3] == ("Pool", "demo", Reason.QUEUES_APPLIED)
    queues._pool_event("DELETED", pool("masters", MASTER))
    assert "root.masters" not in queues.config().queues


def test_a_pool_named_by_a_configmap_queue_too_is_refused_on_the_pool() -> None:
    queues, recorder, _changes = source()
    queues.configmap_changed(configmap(TWO_TEAMS))
    queues.pools_changed([pool("a", DEMO)])
    assert "root.default" not in queues.config().queues
    kind, name, reason, note, _type = recorder.events[-1]
    assert (kind, name, reason) == ("Pool", "a", Reason.QUEUES_REFUSED) and "configured in one place" in note


def annotated(pod: dict[str, Any], pool_name: str) -> dict[str, Any]:
    pod["metadata"]["annotations"][keys.AI_SCHEDULER_POOL] = pool_name
    return pod


def pools_and_nodes() -> tuple[QueueSource, list[dict[str, Any]]]:
    """demo's 2 nodes, masters' 1 and one of no Pool, 4 cores each; ai-scheduler's two example Pools."""
    queues, _recorder, _changes = source()
    cluster = nodes(2, labels=DEMO, prefix="d") + nodes(1, labels=MASTER, prefix="m") + nodes(1, prefix="c")
    queues.nodes_changed(cluster)
    queues.pools_changed([pool("demo", DEMO), pool("masters", MASTER, **EVERYTHING_OFF)])
    return queues, cluster


def test_a_pools_own_gang_takes_back_its_nodes_from_a_gang_that_borrowed_them() -> None:
    queues, cluster = pools_and_nodes()
    pods = [
        *running("borrower", 6, "nowhere", on=["c0", "d0", "d1"], created=1),  # an unknown pool: the default pool
        annotated(gang("train", 8, created=2), "demo"),
    ]
    world = World(cluster, pods, queues)
    assert queues.placing().place(application(pods[-1])) == "root.demo"
    waiting = world.ticket("train")
    assert (
        isinstance(waiting, Waiting) and "taking back room its queue root.demo lent to root.default" in waiting.message
    )
    assert world.admission.standing(p.AppKey(NS, "borrower"), pending=False).reclaim is not None


def test_no_gang_of_another_pool_goes_to_masters_nor_is_held_back_by_its_idle_room() -> None:
    queues, cluster = pools_and_nodes()
    # 12 cores outside masters' node: the default pool's node and the 8 it borrows of demo's, though
    # masters' 4 stay idle and are nobody's to lend.
    fits = World(cluster, [gang("fits", 12, created=1)], queues).ticket("fits")
    assert isinstance(fits, Granted) and fits.lender == "root.demo" and fits.warning is None
    beyond = World(cluster, [annotated(gang("beyond", 13, created=1), "nowhere")], queues).ticket("beyond")
    assert isinstance(beyond, Granted) and beyond.warning and "more than all matching nodes hold" in beyond.warning
