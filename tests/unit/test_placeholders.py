"""Placeholder names, label values and manifests."""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from yuniplace.gang import keys
from yuniplace.gang.placeholders import (
    DEFAULT_IMAGE,
    label_value,
    placeholder_name,
    placeholder_names,
    placeholder_pod,
)
from yuniplace.gang.taskgroups import TaskGroup

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

any_text = st.text(max_size=300)
# Inputs a user is likely to write, weighted towards the edge cases (case, separators, length).
id_text = st.one_of(
    any_text,
    st.text(alphabet="abcXYZ019-_./ ", max_size=120),
    st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,80}[a-z0-9])?\Z"),
)
index = st.integers(min_value=0, max_value=5000)


def digest(text: str) -> str:
    """label_value's hash of a text it had to rewrite."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def tag(app: str, group: str) -> str:
    """The hash part of a name: of the exact app id and group, with a separator no text contains."""
    return hashlib.sha256(f"{app}\0{group}".encode()).hexdigest()[:5]


# -- placeholder_name -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("app", "group", "index", "readable"),
    [
        ("spark-1", "spark-executor", 0, "tg-spark-1-spark-executor"),
        ("job", "task-group-example", 1, "tg-job-task-group-example"),
        ("a", "b", 999, "tg-a-b"),
        ("0", "0", 0, "tg-0-0"),
    ],
)
def test_short_valid_inputs_are_readable(app: str, group: str, index: int, readable: str) -> None:
    assert placeholder_name(app, group, index) == f"{readable}-{tag(app, group)}-{index}"


def test_longest_readable_name_is_cut_to_63_before_the_hash() -> None:
    app = "a" * 80
    name = placeholder_name(app, "g", 0)
    assert len(name) == 63 and name == "tg-" + "a" * (63 - len("tg-") - 6 - 2) + f"-{tag(app, 'g')}-0"


@pytest.mark.parametrize(
    ("app", "group", "index", "expected"),
    [
        ("spark-pi-0001", "spark-executor", 3, "tg-spark-pi-0001-spark-executor-ebf29-3"),
        # Lower-cased and cleaned; the hash is of the original app id and group.
        ("Spark_App.01", "exec", 3, "tg-spark-app-01-exec-fc9b2-3"),
        ("a" * 80, "spark-executor", 12, "tg-" + "a" * 51 + "-a0699-12"),
        ("app", "", 0, "tg-app-5211e-0"),
    ],
)
def test_names_are_stable_across_releases(app: str, group: str, index: int, expected: str) -> None:
    """A restarted controller must compute exactly the names it computed before."""
    assert placeholder_name(app, group, index) == expected
    assert expected.endswith(f"-{tag(app, group)}-{index}")


@settings(max_examples=200, deadline=None)
@given(app=id_text, group=id_text, n=index)
@example(app="Ünïcødé-App", group="Exec", n=0)
@example(app="x" * 1000, group="y" * 1000, n=5000)
@example(app="---", group="___", n=0)
@example(app="", group="", n=0)
@example(app="\u212a", group="İ", n=1)
def test_names_are_valid_labels_and_deterministic(app: str, group: str, n: int) -> None:
    name = placeholder_name(app, group, n)
    assert len(name) <= 63
    assert DNS1123_LABEL.match(name), name
    assert name.startswith("tg")
    assert name.endswith(f"-{tag(app, group)}-{n}")
    assert placeholder_name(app, group, n) == name


@settings(max_examples=200, deadline=None)
@given(
    app=st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z"),
    group=st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z"),
    n=index,
)
def test_short_valid_inputs_keep_the_readable_name(app: str, group: str, n: int) -> None:
    assert placeholder_name(app, group, n) == f"tg-{app}-{group}-{tag(app, group)}-{n}"


@settings(max_examples=300, deadline=None)
@given(first=st.tuples(id_text, id_text, index), second=st.tuples(id_text, id_text, index))
def test_distinct_inputs_give_distinct_names(first: tuple[str, str, int], second: tuple[str, str, int]) -> None:
    assume(first != second)
    assert placeholder_name(*first) != placeholder_name(*second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("a-b", "c", 0), ("a", "b-c", 0)),
        (("spark-1", "exec", 0), ("spark", "1-exec", 0)),
        (("App", "g", 0), ("app", "g", 0)),
        (("\u212a", "g", 0), ("k", "g", 0)),
        (("a/b", "c", 0), ("a", "b/c", 0)),
    ],
)
def test_names_of_different_applications_never_collide(
    first: tuple[str, str, int], second: tuple[str, str, int]
) -> None:
    assert placeholder_name(*first) != placeholder_name(*second)


def test_placeholder_names_of_a_group() -> None:
    group = TaskGroup("exec", 3, {"cpu": "1"})
    assert placeholder_names("app", group) == [f"tg-app-exec-{tag('app', 'exec')}-{i}" for i in range(3)]


# -- label_value ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["a", "App_1.2-x", "0", "x" * 63, "spark-7f3a9c"])
def test_valid_label_values_are_unchanged(text: str) -> None:
    assert label_value(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Spark App/01", "Spark-App-01-f3f7fe8e"),
        ("", "app-" + digest("")),
        ("---", "app-" + digest("---")),
        ("-abc-", "abc-" + digest("-abc-")),
        ("x" * 64, "x" * 54 + "-" + digest("x" * 64)),
        ("é", "app-" + digest("é")),
    ],
)
def test_invalid_label_values_get_a_prefix_and_a_hash(text: str, expected: str) -> None:
    assert label_value(text) == expected


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(any_text, id_text, st.text(alphabet="-_.", max_size=80)))
@example(text="a" * 10_000)
@example(text="a\n")
def test_label_value_is_always_a_valid_label_value(text: str) -> None:
    value = label_value(text)
    assert len(value) <= 63
    assert LABEL_VALUE.match(value) and "\n" not in value, value
    assert label_value(text) == value
    if text and len(text) <= 63 and LABEL_VALUE.match(text) and "\n" not in text:
        assert value == text
    else:
        assert value.endswith("-" + digest(text))


# -- placeholder_pod ------------------------------------------------------------------------------


def originator(priority_class: str | None = "high") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "driver", "image": "spark"}]}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "metadata": {"name": "driver", "namespace": "ns1", "uid": "uid-driver", "labels": {"x": "y"}},
        "spec": spec,
    }


FULL_GROUP = TaskGroup(
    name="exec",
    min_member=2,
    min_resource={"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
    node_selector={"pool": "gpu"},
    tolerations=({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},),
    affinity={
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": []}]}
        }
    },
    topology_spread_constraints=({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},),
    labels={"team": "ml"},
    annotations={"note": "hello"},
)


def test_placeholder_manifest_in_full() -> None:
    pod = placeholder_pod(app_id="Spark App", group=FULL_GROUP, index=1, originator=originator())
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    meta = pod["metadata"]
    assert meta["name"] == placeholder_name("Spark App", "exec", 1)
    assert meta["namespace"] == "ns1"
    assert meta["labels"] == {
        "team": "ml",
        keys.PLACEHOLDER: "true",
        keys.PLACEHOLDER_APP: label_value("Spark App"),
        keys.PLACEHOLDER_GROUP: "exec",
        # YuniKorn's labels, for tooling that selects its placeholders
        keys.APP_ID: label_value("Spark App"),
        keys.YUNIKORN_QUEUE: "ns1",
    }
    assert meta["annotations"] == {
        "note": "hello",
        keys.PLACEHOLDER_APP: "Spark App",
        keys.PLACEHOLDER_GROUP: "exec",
        # YuniKorn's placeholder flags (current and earlier) and the task group
        "internal.yunikorn.apache.org/placeholder": "true",
        "yunikorn.apache.org/placeholder": "true",
        keys.TASK_GROUP_NAME: "exec",
        # Autoscalers keep its node while the gang forms
        "karpenter.sh/do-not-disrupt": "true",
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "driver",
            "uid": "uid-driver",
            "blockOwnerDeletion": True,
            "controller": False,
        }
    ]
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["name"] == "pause"
    assert container["image"] == DEFAULT_IMAGE
    assert container["resources"]["requests"] == dict(FULL_GROUP.min_resource)
    assert container["resources"]["limits"] == dict(FULL_GROUP.min_resource)
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert spec["tolerations"] == list(FULL_GROUP.tolerations)
    assert spec["affinity"] == FULL_GROUP.affinity
    assert spec["topologySpreadConstraints"] == list(FULL_GROUP.topology_spread_constraints)
    assert spec["priorityClassName"] == "high"
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 0
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False


def test_placeholder_security_context_is_restricted() -> None:
    spec = placeholder_pod(app_id="a", group=FULL_GROUP, index=0, originator=originator())["spec"]
    pod_context = spec["securityContext"]
    assert pod_context["runAsNonRoot"] is True
    assert pod_context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert isinstance(pod_context["runAsUser"], int) and pod_context["runAsUser"] != 0
    container_context = spec["containers"][0]["securityContext"]
    assert container_context["allowPrivilegeEscalation"] is False
    assert container_context["capabilities"] == {"drop": ["ALL"]}
    assert container_context["readOnlyRootFilesystem"] is True
    assert container_context["runAsNonRoot"] is True


def test_placeholder_of_a_minimal_group_carries_no_empty_constraints() -> None:
    group = TaskGroup("g", 1, {"cpu": "1"})
    pod = placeholder_pod(
        app_id="app", group=group, index=0, originator=originator(priority_class=None), image="example/pause:1"
    )
    spec = pod["spec"]
    for absent in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "priorityClassName"):
        assert absent not in spec
    assert spec["containers"][0]["image"] == "example/pause:1"
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    assert pod["metadata"]["labels"] == {
        keys.PLACEHOLDER: "true",
        keys.PLACEHOLDER_APP: "app",
        keys.PLACEHOLDER_GROUP: "g",
        keys.APP_ID: "app",
        keys.YUNIKORN_QUEUE: "ns1",
    }


def test_placeholder_without_originator_spec() -> None:
    source = originator()
    del source["spec"]
    assert "priorityClassName" not in placeholder_pod(app_id="a", group=FULL_GROUP, index=0, originator=source)["spec"]


def test_our_labels_win_over_the_groups() -> None:
    group = TaskGroup(
        "g",
        1,
        {"cpu": "1"},
        labels={keys.PLACEHOLDER: "false", keys.PLACEHOLDER_GROUP: "other"},
        annotations={keys.PLACEHOLDER_APP: "evil"},
    )
    meta = placeholder_pod(app_id="app", group=group, index=0, originator=originator())["metadata"]
    assert meta["labels"][keys.PLACEHOLDER] == "true"
    assert meta["labels"][keys.PLACEHOLDER_GROUP] == "g"
    assert meta["annotations"][keys.PLACEHOLDER_APP] == "app"


def test_manifest_does_not_share_mutable_state_with_the_group() -> None:
    group = copy.deepcopy(FULL_GROUP)
    pod = placeholder_pod(app_id="a", group=group, index=0, originator=originator())
    pod["spec"]["nodeSelector"]["pool"] = "changed"
    pod["spec"]["tolerations"].append({"key": "x"})
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "9"
    assert group == FULL_GROUP
    again = placeholder_pod(app_id="a", group=group, index=0, originator=originator())
    assert again["spec"]["nodeSelector"] == {"pool": "gpu"}


@settings(max_examples=100, deadline=None)
@given(app=id_text.filter(bool), n=st.integers(min_value=0, max_value=999))
def test_manifest_names_and_labels_are_valid_for_any_app_id(app: str, n: int) -> None:
    pod = placeholder_pod(app_id=app, group=FULL_GROUP, index=n, originator=originator())
    meta = pod["metadata"]
    assert meta["name"] == placeholder_name(app, "exec", n)
    assert DNS1123_LABEL.match(meta["name"]) and len(meta["name"]) <= 63
    for value in meta["labels"].values():
        assert LABEL_VALUE.match(value) and len(value) <= 63
    assert meta["annotations"][keys.PLACEHOLDER_APP] == app


def test_placeholder_carries_the_queue_admission_placed_its_gang_in() -> None:
    group = TaskGroup("g", 1, {"cpu": "1"})
    placed = placeholder_pod(app_id="a", group=group, index=0, originator=originator(), queue_name="root.team-a")
    assert placed["metadata"]["labels"][keys.YUNIKORN_QUEUE] == "root.team-a"
    assert (
        placeholder_pod(app_id="a", group=group, index=0, originator=originator())["metadata"]["labels"][
            keys.YUNIKORN_QUEUE
        ]
        == "ns1"
    )  # without a queue configuration: the queue it names, else its namespace
