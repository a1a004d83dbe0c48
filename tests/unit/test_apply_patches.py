"""The JSON patches a swap writes on a member pod when no nomination guards it."""

import copy
from typing import Any

import pytest

from yuniplace.controller.apply import _marker_ops, _prefer_node_ops
from yuniplace.gang import keys


def apply_patch(document: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A minimal JSON-patch `add` (RFC 6902), enough to check the paths the operations use."""
    result = copy.deepcopy(document)
    for op in ops:
        assert op["op"] == "add"
        parts = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        target = result
        for part in parts[:-1]:
            target = target[part]
        if parts[-1] == "-":
            target.append(op["value"])
        else:
            assert parts[-1] not in target, f"add would overwrite {op['path']}"
            target[parts[-1]] = op["value"]
    return result


TERM = {
    "weight": 100,
    "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-7"]}]},
}
USER_TERM = {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}


@pytest.mark.parametrize(
    "affinity",
    [
        None,
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [USER_TERM]}},
    ],
)
def test_preference_is_added_and_the_pods_own_affinity_kept(affinity: dict[str, Any] | None) -> None:
    pod: dict[str, Any] = {"metadata": {}, "spec": {} if affinity is None else {"affinity": copy.deepcopy(affinity)}}
    patched = apply_patch(pod, _prefer_node_ops(pod, "node-7"))
    preferred = patched["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[-1] == TERM
    if affinity and "preferredDuringSchedulingIgnoredDuringExecution" in affinity.get("nodeAffinity", {}):
        assert preferred[0] == USER_TERM
    for key, value in (affinity or {}).items():
        if key != "nodeAffinity":
            assert patched["spec"]["affinity"][key] == value


@pytest.mark.parametrize(
    "marker", [(keys.SWAP_PLACEHOLDER, "tg-app-executors-1a2b3-0"), (keys.SEAT, "node-7")], ids=["swap", "seat"]
)
def test_the_hand_off_is_recorded_with_or_without_annotations(marker: tuple[str, str]) -> None:
    for annotations in ({}, {"yunikorn.apache.org/task-group-name": "executors"}):
        pod: dict[str, Any] = {"metadata": {"annotations": dict(annotations)} if annotations else {}, "spec": {}}
        patched = apply_patch(pod, _marker_ops(pod, marker))
        assert patched["metadata"]["annotations"] == {**annotations, marker[0]: marker[1]}
