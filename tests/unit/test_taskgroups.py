"""Task groups and scheduling-policy parameters: parsing, validation and error messages."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from yuniplace.gang import keys
from yuniplace.gang.taskgroups import (
    MAX_ERRORS_SHOWN,
    MAX_SHOWN_NAME,
    MAX_SHOWN_VALUE,
    GangSpec,
    InvalidGang,
    Limits,
    Mode,
    Policy,
    Problem,
    Style,
    TaskGroup,
    check_member,
    parse_gang,
    parse_policy,
    style_of,
)

TG = keys.TASK_GROUPS
SPP = keys.SCHEDULING_POLICY_PARAMETERS
QUANTITY_TYPE = 'must be a quantity such as "500m" or "2Gi"'
QUANTITY_INVALID = 'is not a valid quantity (examples: "500m", "2", "4Gi", "1e3")'
POSITIVE = "must be a positive quantity"
MIN_RESOURCE_SHAPE = 'must be a non-empty object of resource quantities, e.g. {"cpu": "1", "memory": "2Gi"}'
DNS_LABEL = "must be a DNS-1123 label (lower-case letters, digits, '-'; at most 63)"
MIN_MEMBER_RANGE = "must be an integer from 1 to 1000"
TIMEOUT_RANGE = "must be a whole number of seconds from 1 to 604800"
POLICY_TOKEN = "is not placeholderTimeoutInSeconds=N or gangSchedulingStyle=Soft|Hard"

DROP = object()  # marks a key to leave out of a group


# -- helpers --------------------------------------------------------------------------------------


def group(**fields: Any) -> dict[str, Any]:
    """A valid task group, with `fields` replacing (or, with DROP, removing) its keys."""
    base: dict[str, Any] = {"name": "g", "minMember": 1, "minResource": {"cpu": "1"}}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not DROP}


def notes(groups: Any, policy: str | None = None) -> dict[str, str]:
    result = {TG: groups if isinstance(groups, str) else json.dumps(groups)}
    if policy is not None:
        result[SPP] = policy
    return result


def problems_of(annotations: dict[str, str], limits: Limits = Limits()) -> list[Problem]:
    with pytest.raises(InvalidGang) as info:
        parse_gang(annotations, limits)
    return info.value.problems


def messages_of(annotations: dict[str, str], limits: Limits = Limits()) -> list[str]:
    return [str(problem) for problem in problems_of(annotations, limits)]


def only_message(annotations: dict[str, str], limits: Limits = Limits()) -> str:
    with pytest.raises(InvalidGang) as info:
        parse_gang(annotations, limits)
    assert len(info.value.problems) == 1, info.value.problems
    assert str(info.value) == str(info.value.problems[0])
    return str(info.value)


# -- valid input ----------------------------------------------------------------------------------


SPARK_TASK_GROUPS = """[{
    "name": "spark-driver",
    "minMember": 1,
    "minResource": {"cpu": "1", "memory": "2Gi"},
    "nodeSelector": {},
    "tolerations": [],
    "affinity": {},
    "topologySpreadConstraints": []
  },
  {
    "name": "spark-executor",
    "minMember": 10,
    "minResource": {"cpu": "1", "memory": "2Gi"}
  }]"""

BATCH_JOB_TASK_GROUPS = """[{
    "name": "task-group-example",
    "minMember": 2,
    "minResource": {"cpu": "100m", "memory": "50M"},
    "nodeSelector": {},
    "tolerations": [],
    "affinity": {},
    "topologySpreadConstraints": []
}]"""


def test_spark_driver_and_executor_groups() -> None:
    spec = parse_gang({TG: SPARK_TASK_GROUPS})
    assert [g.name for g in spec.groups] == ["spark-driver", "spark-executor"]
    assert [g.min_member for g in spec.groups] == [1, 10]
    assert spec.min_members == 11
    assert spec.groups[0].min_resource == {"cpu": "1", "memory": "2Gi"}
    assert spec.groups[0].node_selector == {}
    assert spec.groups[0].tolerations == ()
    assert spec.groups[0].affinity == {}
    assert spec.policy == Policy(900, Style.SOFT)
    assert spec.warnings == ()
    assert spec.group("spark-executor") is spec.groups[1]
    assert spec.group("nope") is None


def test_yunikorn_batch_job_example() -> None:
    spec = parse_gang({TG: BATCH_JOB_TASK_GROUPS, SPP: "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard"})
    assert spec.groups == (
        TaskGroup(name="task-group-example", min_member=2, min_resource={"cpu": "100m", "memory": "50M"}),
    )
    assert spec.min_members == 2
    assert spec.policy == Policy(60, Style.HARD)


def test_all_optional_fields_are_kept() -> None:
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    spread = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
    spec = parse_gang(
        notes(
            [
                group(
                    minResource={"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1, "ephemeral-storage": "1e3"},
                    nodeSelector={"pool": "gpu"},
                    tolerations=[toleration],
                    affinity=affinity,
                    topologySpreadConstraints=[spread],
                    labels={"team": "ml"},
                    annotations={"note": "x"},
                )
            ]
        )
    )
    (g,) = spec.groups
    assert g.min_resource == {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1", "ephemeral-storage": "1e3"}
    assert g.node_selector == {"pool": "gpu"}
    assert g.tolerations == (toleration,)
    assert g.affinity == affinity
    assert g.topology_spread_constraints == (spread,)
    assert g.labels == {"team": "ml"}
    assert g.annotations == {"note": "x"}


def test_null_optional_fields_mean_absent() -> None:
    spec = parse_gang(
        notes(
            [
                group(
                    nodeSelector=None,
                    tolerations=None,
                    affinity=None,
                    topologySpreadConstraints=None,
                    labels=None,
                    annotations=None,
                )
            ]
        )
    )
    (g,) = spec.groups
    assert (g.node_selector, g.tolerations, g.affinity, g.topology_spread_constraints, g.labels, g.annotations) == (
        {},
        (),
        {},
        (),
        {},
        {},
    )


def test_keys_match_case_insensitively() -> None:
    spec = parse_gang(
        notes(
            [
                {
                    "NAME": "g",
                    "MinMember": 3,
                    "minresource": {"cpu": "2"},
                    "NodeSelector": {"a": "b"},
                    "TOLERATIONS": [{"key": "k"}],
                }
            ]
        )
    )
    (g,) = spec.groups
    assert (g.name, g.min_member, g.min_resource, g.node_selector, g.tolerations) == (
        "g",
        3,
        {"cpu": "2"},
        {"a": "b"},
        ({"key": "k"},),
    )
    assert spec.warnings == ()


def test_unknown_keys_warn_and_are_ignored() -> None:
    spec = parse_gang(notes([group(priority=5, minMembers=4)]))
    assert spec.groups == (TaskGroup("g", 1, {"cpu": "1"}),)
    assert spec.warnings == (
        "task-groups[0].priority is not a task-group field and is ignored",
        "task-groups[0].minMembers is not a task-group field and is ignored",
    )


@pytest.mark.parametrize(
    "quantity",
    ["1", "100m", "0.5", "1.5Gi", "50M", "2Gi", "4Ki", "1e3", "1E3", "1k", "+1", 2, 0.25, "1Ti", "1Pi", "1n"],
)
def test_valid_quantities_are_kept_as_written(quantity: Any) -> None:
    spec = parse_gang(notes([group(minResource={"memory": quantity})]))
    assert spec.groups[0].min_resource == {"memory": str(quantity)}


@pytest.mark.parametrize(
    "name", ["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi", "example.com/Foo_bar.baz", "a.b.c/x"]
)
def test_valid_resource_names(name: str) -> None:
    assert list(parse_gang(notes([group(minResource={name: "1"})])).groups[0].min_resource) == [name]


@pytest.mark.parametrize("name", ["a", "0", "a-b", "0ab-9z", "x" * 63])
def test_valid_group_names(name: str) -> None:
    assert parse_gang(notes([group(name=name)])).groups[0].name == name


def test_min_member_limits_are_inclusive() -> None:
    assert parse_gang(notes([group(minMember=1000)])).min_members == 1000
    five = [group(name=f"g{i}", minMember=1000) for i in range(5)]
    assert parse_gang(notes(five)).min_members == 5000


def test_annotation_at_exactly_the_byte_limit_is_read() -> None:
    text = json.dumps([group()])
    padded = text[:-1] + " " * (100 - len(text)) + "]"
    assert len(padded.encode()) == 100
    assert parse_gang({TG: padded}, Limits(max_annotation_bytes=100)).min_members == 1


# -- invalid input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[{",
            'yunikorn.apache.org/task-groups: "[{" is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 3 (char 2))',
        ),
        ("", 'yunikorn.apache.org/task-groups: "" is not valid JSON (Expecting value: line 1 column 1 (char 0))'),
        (
            "name: g",
            'yunikorn.apache.org/task-groups: "name: g" is not valid JSON (Expecting value: line 1 column 1 (char 0))',
        ),
        (
            "[1,]",
            'yunikorn.apache.org/task-groups: "[1,]" is not valid JSON (Expecting value: line 1 column 4 (char 3))',
        ),
    ],
)
def test_malformed_json(text: str, expected: str) -> None:
    assert only_message({TG: text}) == expected


def test_missing_annotation_is_invalid_json() -> None:
    assert "yunikorn.apache.org/task-groups" in only_message({})


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("[]", "[]"),
        ("{}", "{}"),
        ('{"name": "g"}', '{"name": "g"}'),
        ("null", "null"),
        ("5", "5"),
        ('"[]"', '"[]"'),
        ("true", "true"),
    ],
)
def test_not_a_non_empty_array(text: str, shown: str) -> None:
    assert (
        only_message({TG: text})
        == f"yunikorn.apache.org/task-groups: {shown} must be a non-empty JSON array of task groups"
    )


@pytest.mark.parametrize(("element", "shown"), [(5, "5"), ("g", '"g"'), (None, "null"), ([], "[]"), (True, "true")])
def test_element_not_an_object(element: Any, shown: str) -> None:
    assert (
        only_message(notes([element]))
        == f"task-groups[0]: {shown} must be an object with name, minMember and minResource"
    )


def test_each_bad_element_is_named_by_its_index() -> None:
    assert messages_of(notes([group(name="a"), 7, group(name="b"), "x"])) == [
        "task-groups[1]: 7 must be an object with name, minMember and minResource",
        'task-groups[3]: "x" must be an object with name, minMember and minResource',
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (DROP, "task-groups[0].name: null must be a non-empty string"),
        (None, "task-groups[0].name: null must be a non-empty string"),
        ("", 'task-groups[0].name: "" must be a non-empty string'),
        (5, "task-groups[0].name: 5 must be a non-empty string"),
        (True, "task-groups[0].name: true must be a non-empty string"),
        (["g"], 'task-groups[0].name: ["g"] must be a non-empty string'),
        ({"n": "g"}, 'task-groups[0].name: {"n": "g"} must be a non-empty string'),
        ("Spark-Driver", f'task-groups[0].name: "Spark-Driver" {DNS_LABEL}'),
        ("spark_driver", f'task-groups[0].name: "spark_driver" {DNS_LABEL}'),
        ("-driver", f'task-groups[0].name: "-driver" {DNS_LABEL}'),
        ("driver-", f'task-groups[0].name: "driver-" {DNS_LABEL}'),
        ("spark.driver", f'task-groups[0].name: "spark.driver" {DNS_LABEL}'),
        ("dr iver", f'task-groups[0].name: "dr iver" {DNS_LABEL}'),
        ("x" * 64, f'task-groups[0].name: "{"x" * 58}… {DNS_LABEL}'),
        ("drivér", f'task-groups[0].name: "driv\\u00e9r" {DNS_LABEL}'),
    ],
)
def test_bad_names(value: Any, expected: str) -> None:
    assert only_message(notes([group(name=value)])) == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (DROP, "null"),
        (None, "null"),
        (0, "0"),
        (-1, "-1"),
        (-(2**70), str(-(2**70))),
        (1001, "1001"),
        (10**30, str(10**30)),
        (1.0, "1.0"),
        (2.5, "2.5"),
        (True, "true"),
        (False, "false"),
        ("2", '"2"'),
        ([2], "[2]"),
        ({"n": 2}, '{"n": 2}'),
    ],
)
def test_bad_min_member(value: Any, shown: str) -> None:
    assert only_message(notes([group(minMember=value)])) == f"task-groups[g].minMember: {shown} {MIN_MEMBER_RANGE}"


def test_min_member_above_a_custom_group_cap() -> None:
    message = only_message(notes([group(minMember=11)]), Limits(max_members_per_group=10))
    assert message == "task-groups[g].minMember: 11 must be an integer from 1 to 10"


def test_total_above_the_per_app_cap() -> None:
    six = [group(name=f"g{i}", minMember=1000) for i in range(6)]
    assert (
        only_message(notes(six)) == "task-groups[*].minMember: 6000 in total exceeds the per-application limit of 5000"
    )


def test_total_above_a_custom_app_cap() -> None:
    two = [group(name="a", minMember=3), group(name="b", minMember=3)]
    assert only_message(notes(two), Limits(max_members_per_app=5)) == (
        "task-groups[*].minMember: 6 in total exceeds the per-application limit of 5"
    )
    assert parse_gang(notes(two), Limits(max_members_per_app=6)).min_members == 6


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (DROP, "null"),
        (None, "null"),
        ({}, "{}"),
        ([], "[]"),
        ("1", '"1"'),
        (5, "5"),
        ([{"cpu": "1"}], '[{"cpu": "1"}]'),
    ],
)
def test_bad_min_resource_shape(value: Any, shown: str) -> None:
    assert (
        only_message(notes([group(minResource=value)])) == f"task-groups[g].minResource: {shown} {MIN_RESOURCE_SHAPE}"
    )


@pytest.mark.parametrize(
    ("value", "shown", "expected"),
    [
        ("abc", '"abc"', QUANTITY_INVALID),
        ("", '""', QUANTITY_INVALID),
        ("1.5.5", '"1.5.5"', QUANTITY_INVALID),
        ("2GB", '"2GB"', QUANTITY_INVALID),
        ("2gi", '"2gi"', QUANTITY_INVALID),
        ("1ki", '"1ki"', QUANTITY_INVALID),
        ("nan", '"nan"', QUANTITY_INVALID),
        ("-1", '"-1"', POSITIVE),
        ("-500m", '"-500m"', POSITIVE),
        ("0", '"0"', POSITIVE),
        ("0Gi", '"0Gi"', POSITIVE),
        ("-0", '"-0"', POSITIVE),
        ("NaN", '"NaN"', QUANTITY_INVALID),
        ("sNaN", '"sNaN"', QUANTITY_INVALID),
        ("Infinity", '"Infinity"', QUANTITY_INVALID),
        ("-Infinity", '"-Infinity"', QUANTITY_INVALID),
        ("inf", '"inf"', QUANTITY_INVALID),
        (0, "0", POSITIVE),
        (-2, "-2", POSITIVE),
        (0.0, "0.0", POSITIVE),
        (float("inf"), "Infinity", QUANTITY_INVALID),
        (float("nan"), "NaN", QUANTITY_INVALID),
        (True, "true", QUANTITY_TYPE),
        (False, "false", QUANTITY_TYPE),
        (None, "null", QUANTITY_TYPE),
        ({"amount": 1}, '{"amount": 1}', QUANTITY_TYPE),
        ([1], "[1]", QUANTITY_TYPE),
    ],
)
def test_bad_quantities(value: Any, shown: str, expected: str) -> None:
    assert (
        only_message(notes([group(minResource={"cpu": value})]))
        == f"task-groups[g].minResource.cpu: {shown} {expected}"
    )


def test_non_finite_json_literals_are_bad_quantities() -> None:
    text = '[{"name": "g", "minMember": 1, "minResource": {"cpu": NaN, "memory": Infinity, "x": -Infinity}}]'
    assert messages_of({TG: text}) == [
        f"task-groups[g].minResource.cpu: NaN {QUANTITY_INVALID}",
        f"task-groups[g].minResource.memory: Infinity {QUANTITY_INVALID}",
        f"task-groups[g].minResource.x: -Infinity {QUANTITY_INVALID}",
    ]


@pytest.mark.parametrize(
    ("quantity", "min_member"),
    [
        ("9223372036854775807", 2),
        ("9223372036854775807", 1),  # stored in milli-units, so even one is too many
        ("4611686018427388", 2),  # 4611686018427388 * 1000 * 2 > 2**63 - 1
        ("8Ei", 1),
        ("1e30", 1),
        (10**19, 1),
    ],
)
def test_quantities_whose_group_total_overflows_int64(quantity: Any, min_member: int) -> None:
    message = only_message(notes([group(minMember=min_member, minResource={"memory": quantity})]))
    assert (
        message
        == f"task-groups[g].minResource.memory: {json.dumps(quantity)} times minMember {min_member} overflows a 64-bit quantity"
    )


def test_largest_group_total_that_fits_int64() -> None:
    spec = parse_gang(notes([group(minMember=2, minResource={"memory": "4611686018427387"})]))
    assert spec.groups[0].min_resource == {"memory": "4611686018427387"}


def test_overflow_check_still_runs_when_min_member_is_invalid() -> None:
    assert messages_of(notes([group(minMember=0, minResource={"memory": "9223372036854775807"})])) == [
        f"task-groups[g].minMember: 0 {MIN_MEMBER_RANGE}",
        'task-groups[g].minResource.memory: "9223372036854775807" times minMember 0 overflows a 64-bit quantity',
    ]


@pytest.mark.parametrize(
    "name", ["CPU!", "-cpu", "cpu-", "a/b/c", "", "Example.com/gpu", "/gpu", "nvidia.com/", "g p u", "x" * 254]
)
def test_invalid_resource_names(name: str) -> None:
    shown = json.dumps(name)
    if len(shown) > MAX_SHOWN_VALUE:
        shown = shown[: MAX_SHOWN_VALUE - 1] + "…"
    in_path = name if len(name) <= MAX_SHOWN_NAME else name[: MAX_SHOWN_NAME - 1] + "…"
    assert (
        only_message(notes([group(minResource={name: "1"})]))
        == f"task-groups[g].minResource.{in_path}: {shown} is not a valid resource name"
    )


@pytest.mark.parametrize(
    ("field", "value", "shown", "expected"),
    [
        ("nodeSelector", [], "[]", "must be an object of string values"),
        ("nodeSelector", "pool=gpu", '"pool=gpu"', "must be an object of string values"),
        ("nodeSelector", {"pool": 1}, '{"pool": 1}', "must be an object of string values"),
        ("nodeSelector", {"pool": None}, '{"pool": null}', "must be an object of string values"),
        ("labels", {"team": True}, '{"team": true}', "must be an object of string values"),
        ("labels", ["a"], '["a"]', "must be an object of string values"),
        ("annotations", {"a": {"b": "c"}}, '{"a": {"b": "c"}}', "must be an object of string values"),
        ("annotations", 3, "3", "must be an object of string values"),
        ("tolerations", {}, "{}", "must be a list of objects"),
        ("tolerations", {"key": "k"}, '{"key": "k"}', "must be a list of objects"),
        ("tolerations", ["k"], '["k"]', "must be a list of objects"),
        ("tolerations", [{"key": "k"}, 1], '[{"key": "k"}, 1]', "must be a list of objects"),
        ("topologySpreadConstraints", "x", '"x"', "must be a list of objects"),
        ("topologySpreadConstraints", [[]], "[[]]", "must be a list of objects"),
        ("affinity", "x", '"x"', "must be an object (a pod affinity spec)"),
        ("affinity", [{"nodeAffinity": {}}], '[{"nodeAffinity": {}}]', "must be an object (a pod affinity spec)"),
        ("affinity", 5, "5", "must be an object (a pod affinity spec)"),
        ("affinity", True, "true", "must be an object (a pod affinity spec)"),
    ],
)
def test_wrong_types_of_optional_fields(field: str, value: Any, shown: str, expected: str) -> None:
    assert only_message(notes([group(**{field: value})])) == f"task-groups[g].{field}: {shown} {expected}"


@pytest.mark.parametrize(("value", "shown"), [([], "[]"), (False, "false"), (0, "0"), ("", '""')])
def test_falsy_non_object_affinity_is_reported(value: Any, shown: str) -> None:
    assert (
        only_message(notes([group(affinity=value)]))
        == f"task-groups[g].affinity: {shown} must be an object (a pod affinity spec)"
    )


def test_duplicate_group_names() -> None:
    assert only_message(notes([group(name="exec"), group(name="exec", minMember=2)])) == (
        'task-groups[exec].name: "exec" is used by more than one task group'
    )


def test_duplicate_reported_once_per_extra_copy() -> None:
    assert messages_of(notes([group(), group(), group()])) == [
        'task-groups[g].name: "g" is used by more than one task group',
        'task-groups[g].name: "g" is used by more than one task group',
    ]


def test_every_problem_is_reported_not_only_the_first() -> None:
    bad = [
        group(name="Bad_Name", minMember=0, minResource={"cpu": "abc", "memory": "-1"}, tolerations="x"),
        group(name="ok", minResource={"GPU!": 1}),
    ]
    assert messages_of(notes(bad, "gangSchedulingStyle=Medium")) == [
        'yunikorn.apache.org/schedulingPolicyParameters.gangSchedulingStyle: "Medium" must be Soft or Hard',
        f'task-groups[0].name: "Bad_Name" {DNS_LABEL}',
        f"task-groups[Bad_Name].minMember: 0 {MIN_MEMBER_RANGE}",
        f'task-groups[Bad_Name].minResource.cpu: "abc" {QUANTITY_INVALID}',
        f'task-groups[Bad_Name].minResource.memory: "-1" {POSITIVE}',
        'task-groups[Bad_Name].tolerations: "x" must be a list of objects',
        'task-groups[ok].minResource.GPU!: "GPU!" is not a valid resource name',
    ]


def test_message_shows_the_first_problems_and_counts_the_rest() -> None:
    bad = [group(name=f"g{i}", minMember=0) for i in range(MAX_ERRORS_SHOWN + 3)]
    with pytest.raises(InvalidGang) as info:
        parse_gang(notes(bad))
    assert len(info.value.problems) == MAX_ERRORS_SHOWN + 3
    shown = "; ".join(f"task-groups[g{i}].minMember: 0 {MIN_MEMBER_RANGE}" for i in range(MAX_ERRORS_SHOWN))
    assert str(info.value) == shown + "; and 3 more"


def test_invalid_gang_is_a_value_error() -> None:
    assert issubclass(InvalidGang, ValueError)


@pytest.mark.parametrize("extra", [1, 1000])
def test_oversized_annotation(extra: int) -> None:
    limit = Limits().max_annotation_bytes
    text = json.dumps([group()]) + " " * limit
    size = len(text[: limit + extra].encode())
    assert only_message({TG: text[: limit + extra]}) == (
        f'yunikorn.apache.org/task-groups: "{size} bytes" is larger than the {limit}-byte limit'
    )


def test_annotation_size_is_counted_in_bytes_not_characters() -> None:
    text = json.dumps([group(annotations={"note": "é" * 60})], ensure_ascii=False)
    assert len(text) <= 200 < len(text.encode())
    message = only_message({TG: text}, Limits(max_annotation_bytes=200))
    assert message == f'yunikorn.apache.org/task-groups: "{len(text.encode())} bytes" is larger than the 200-byte limit'


def test_oversized_annotation_also_reports_policy_problems() -> None:
    messages = messages_of({TG: " " * 200, SPP: "gangSchedulingStyle=Medium"}, Limits(max_annotation_bytes=100))
    assert messages == [
        'yunikorn.apache.org/task-groups: "200 bytes" is larger than the 100-byte limit',
        'yunikorn.apache.org/schedulingPolicyParameters.gangSchedulingStyle: "Medium" must be Soft or Hard',
    ]


def test_long_values_are_shortened_in_messages() -> None:
    text = "x" * 500
    message = only_message({TG: text})
    assert message.startswith(
        'yunikorn.apache.org/task-groups: "' + "x" * (MAX_SHOWN_VALUE - 2) + "… is not valid JSON ("
    )
    assert len(message) < 200


def test_deeply_nested_json_is_invalid_gang() -> None:
    with pytest.raises(InvalidGang):
        parse_gang({TG: "[" * 20_000 + "]" * 20_000})


@pytest.mark.parametrize("quantity", ["1e999999", "1e999997"])
def test_quantity_with_huge_exponent_is_invalid_gang(quantity: str) -> None:
    message = only_message(notes([group(minResource={"memory": quantity})]))
    assert message.startswith(f'task-groups[g].minResource.memory: "{quantity}"')


@pytest.mark.parametrize("quantity", [" 1", "1 ", "1_000", "1e3m", "1E3Gi"])
def test_quantities_kubernetes_rejects_are_reported(quantity: str) -> None:
    message = only_message(notes([group(minResource={"cpu": quantity})]))
    assert message == f"task-groups[g].minResource.cpu: {json.dumps(quantity)} {QUANTITY_INVALID}"


@pytest.mark.parametrize(
    "bad",
    [group(name="x" * 5000, minMember=0), group(minResource={"y" * 5000: "1"})],
    ids=["long-group-name", "long-resource-name"],
)
def test_every_problem_stays_short_whatever_the_names(bad: dict[str, Any]) -> None:
    for problem in problems_of(notes([bad])):
        assert len(str(problem)) <= 400


# -- scheduling policy parameters ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, Policy(900, Style.SOFT)),
        ("", Policy(900, Style.SOFT)),
        ("   ", Policy(900, Style.SOFT)),
        ("placeholderTimeoutInSeconds=60", Policy(60, Style.SOFT)),
        ("gangSchedulingStyle=Hard", Policy(900, Style.HARD)),
        ("gangSchedulingStyle=Soft", Policy(900, Style.SOFT)),
        ("gangSchedulingStyle=hard", Policy(900, Style.HARD)),
        ("gangSchedulingStyle=HARD", Policy(900, Style.HARD)),
        ("gangSchedulingStyle=sOfT", Policy(900, Style.SOFT)),
        ("placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard", Policy(60, Style.HARD)),
        ("gangSchedulingStyle=Hard placeholderTimeoutInSeconds=30", Policy(30, Style.HARD)),
        ("  placeholderTimeoutInSeconds=30\n\tgangSchedulingStyle=Hard  ", Policy(30, Style.HARD)),
        ("placeholderTimeoutInSeconds=1", Policy(1, Style.SOFT)),
        ("placeholderTimeoutInSeconds=604800", Policy(604800, Style.SOFT)),
        ("placeholderTimeoutInSeconds=007", Policy(7, Style.SOFT)),
        ("placeholderTimeoutInSeconds=10 placeholderTimeoutInSeconds=20", Policy(20, Style.SOFT)),
    ],
)
def test_valid_policies(text: str | None, expected: Policy) -> None:
    assert parse_policy(text) == expected


def test_policy_default_timeout_comes_from_limits() -> None:
    assert parse_policy(None, Limits(default_timeout_s=42)) == Policy(42, Style.SOFT)


def test_policy_default_style_comes_from_limits() -> None:
    hard = Limits(default_style=Style.HARD)
    assert parse_policy(None, hard) == Policy(900, Style.HARD)
    assert parse_policy("gangSchedulingStyle=Soft", hard).style == Style.SOFT
    assert parse_gang(notes([group()]), hard).policy.style == Style.HARD
    assert style_of({}, hard) == Style.HARD
    assert style_of({SPP: "gangSchedulingStyle=soft junk"}, hard) == Style.SOFT


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5", "", "60s", "604801", "+60", "1e3", "99999999999999999999"])
def test_bad_timeouts(value: str) -> None:
    with pytest.raises(InvalidGang) as info:
        parse_policy(f"placeholderTimeoutInSeconds={value}")
    assert (
        str(info.value)
        == f"yunikorn.apache.org/schedulingPolicyParameters.placeholderTimeoutInSeconds: {json.dumps(value)} {TIMEOUT_RANGE}"
    )


def test_timeout_cap_comes_from_limits() -> None:
    with pytest.raises(InvalidGang, match="from 1 to 100$"):
        parse_policy("placeholderTimeoutInSeconds=101", Limits(max_timeout_s=100))
    assert parse_policy("placeholderTimeoutInSeconds=100", Limits(max_timeout_s=100)).timeout_s == 100


@pytest.mark.parametrize("value", ["Medium", "", "Hardest", "S", "0"])
def test_bad_styles(value: str) -> None:
    with pytest.raises(InvalidGang) as info:
        parse_policy(f"gangSchedulingStyle={value}")
    assert (
        str(info.value)
        == f"yunikorn.apache.org/schedulingPolicyParameters.gangSchedulingStyle: {json.dumps(value)} must be Soft or Hard"
    )


@pytest.mark.parametrize(
    "token",
    [
        "foo=bar",
        "placeholderTimeoutInSeconds",
        "gangSchedulingStyle",
        "Hard",
        "=60",
        "placeholdertimeoutinseconds=60",
        "timeout=60",
    ],
)
def test_unknown_policy_tokens(token: str) -> None:
    with pytest.raises(InvalidGang) as info:
        parse_policy(f"gangSchedulingStyle=Hard {token}")
    assert str(info.value) == f"yunikorn.apache.org/schedulingPolicyParameters: {json.dumps(token)} {POLICY_TOKEN}"


def test_policy_reports_every_problem() -> None:
    with pytest.raises(InvalidGang) as info:
        parse_policy("placeholderTimeoutInSeconds=0 gangSchedulingStyle=x junk")
    assert [p.field for p in info.value.problems] == [
        f"{SPP}.placeholderTimeoutInSeconds",
        f"{SPP}.gangSchedulingStyle",
        SPP,
    ]
    assert [p.value for p in info.value.problems] == ["0", "x", "junk"]


def test_policy_problems_make_parse_gang_fail() -> None:
    assert messages_of(notes([group()], "placeholderTimeoutInSeconds=abc")) == [
        f'yunikorn.apache.org/schedulingPolicyParameters.placeholderTimeoutInSeconds: "abc" {TIMEOUT_RANGE}'
    ]


def test_policy_problems_are_listed_with_task_group_problems() -> None:
    assert messages_of({TG: "nope", SPP: "x"}) == [
        'yunikorn.apache.org/task-groups: "nope" is not valid JSON (Expecting value: line 1 column 1 (char 0))',
        f'yunikorn.apache.org/schedulingPolicyParameters: "x" {POLICY_TOKEN}',
    ]


@pytest.mark.parametrize("value", ["²", "9" * 5000], ids=["superscript-two", "5000-digits"])
def test_non_ascii_or_huge_digit_timeouts_are_invalid_gang(value: str) -> None:
    with pytest.raises(InvalidGang, match="placeholderTimeoutInSeconds"):
        parse_policy(f"placeholderTimeoutInSeconds={value}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, Style.SOFT),
        ("gangSchedulingStyle=Hard", Style.HARD),
        ("gangSchedulingStyle=hard placeholderTimeoutInSeconds=abc", Style.HARD),
        ("junk gangSchedulingStyle=Hard", Style.HARD),
        ("gangSchedulingStyle=Medium", Style.SOFT),
        ("placeholderTimeoutInSeconds=0", Style.SOFT),
    ],
)
def test_style_of_survives_other_problems(text: str | None, expected: Style) -> None:
    annotations = {TG: "not json"}
    if text is not None:
        annotations[SPP] = text
    assert style_of(annotations) == expected


# -- members --------------------------------------------------------------------------------------


def test_check_member_accepts_a_known_group() -> None:
    spec = parse_gang({TG: SPARK_TASK_GROUPS})
    check_member(spec, "spark-driver")
    check_member(spec, "spark-executor")


@pytest.mark.parametrize("name", ["spark-exec", "", "SPARK-DRIVER", "spark-driver "])
def test_check_member_rejects_an_unknown_group(name: str) -> None:
    spec = parse_gang({TG: SPARK_TASK_GROUPS})
    with pytest.raises(InvalidGang) as info:
        check_member(spec, name)
    assert info.value.problems == [
        Problem(
            keys.TASK_GROUP_NAME, name, "is not a task group of this application (groups: spark-driver, spark-executor)"
        )
    ]
    assert str(info.value) == (
        f"yunikorn.apache.org/task-group-name: {json.dumps(name)} is not a task group of this application "
        "(groups: spark-driver, spark-executor)"
    )


def test_problem_str_format() -> None:
    assert str(Problem("f", "v", "is bad")) == 'f: "v" is bad'
    assert str(Problem("f", 3, "is bad")) == "f: 3 is bad"
    assert str(Problem("f", None, "is bad")) == "f: null is bad"
    assert str(Problem("f", "x" * 100, "is bad")) == 'f: "' + "x" * 58 + "… is bad"


def test_gang_spec_min_members_of_no_groups() -> None:
    assert GangSpec((), Policy(1, Style.SOFT)).min_members == 0


# -- properties -----------------------------------------------------------------------------------

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
real_keys = st.sampled_from(
    [
        "name",
        "minMember",
        "minResource",
        "nodeSelector",
        "tolerations",
        "affinity",
        "topologySpreadConstraints",
        "labels",
        "annotations",
        "NAME",
        "minmember",
        "MinResource",
    ]
)
quantity_like = st.one_of(
    json_values,
    st.sampled_from(
        ["1", "100m", "2Gi", "-1", "0", "NaN", "Infinity", "abc", "1e3", "9223372036854775807", "", "1Ei", "5M"]
    ),
    st.integers(min_value=-5, max_value=10**20),
)
group_like = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["g", "exec", "Bad_Name", ""]), json_values),
        "minMember": st.one_of(st.integers(min_value=-3, max_value=6000), json_values),
        "minResource": st.one_of(
            st.dictionaries(
                st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "Bad!", ""]), quantity_like, max_size=3
            ),
            json_values,
        ),
    },
).flatmap(lambda base: st.dictionaries(real_keys, json_values, max_size=3).map(lambda extra: {**extra, **base}))
task_groups_json = st.one_of(
    json_values.map(lambda v: json.dumps(v)),
    st.lists(st.one_of(group_like, json_values), max_size=4).map(json.dumps),
)
policy_text = st.one_of(
    st.none(),
    st.text(max_size=30),
    st.lists(
        st.one_of(
            st.builds(
                "placeholderTimeoutInSeconds={}".format, st.text(alphabet=st.characters(max_codepoint=127), max_size=8)
            ),
            st.builds("gangSchedulingStyle={}".format, st.sampled_from(["Hard", "soft", "x", ""])),
            st.text(alphabet=st.characters(max_codepoint=127, blacklist_categories=("Zs", "Cc")), max_size=10),
        ),
        max_size=3,
    ).map(" ".join),
)


def _parse_any(text: str, policy: str | None) -> GangSpec | InvalidGang:
    annotations = {TG: text}
    if policy is not None:
        annotations[SPP] = policy
    try:
        return parse_gang(annotations)
    except InvalidGang as error:
        return error


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_parses_or_raises_invalid_gang(text: str) -> None:
    result = _parse_any(text, None)
    assert isinstance(result, (GangSpec, InvalidGang))


@settings(max_examples=200, deadline=None)
@given(text=task_groups_json, policy=policy_text)
@example(text='[{"name": "g", "minMember": 1, "minResource": {"cpu": "1"}}]', policy=None)
def test_any_json_parses_or_raises_invalid_gang(text: str, policy: str | None) -> None:
    result = _parse_any(text, policy)
    assert isinstance(result, (GangSpec, InvalidGang))


def _shown_value(problem: Problem) -> str:
    text = str(problem)
    prefix, suffix = f"{problem.field}: ", f" {problem.expected}"
    assert text.startswith(prefix) and text.endswith(suffix)
    return text[len(prefix) : len(text) - len(suffix)]


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(task_groups_json, st.text(max_size=100)), policy=policy_text)
def test_error_messages_are_non_empty_and_short(text: str, policy: str | None) -> None:
    result = _parse_any(text, policy)
    if not isinstance(result, InvalidGang):
        return
    assert result.problems
    message = str(result)
    assert message.strip()
    for problem in result.problems:
        rendered = str(problem)
        assert problem.field and problem.expected
        assert len(_shown_value(problem)) <= MAX_SHOWN_VALUE
        assert len(rendered) <= 400, rendered
    if len(result.problems) > MAX_ERRORS_SHOWN:
        assert message.endswith(f"; and {len(result.problems) - MAX_ERRORS_SHOWN} more")
    assert message.startswith(str(result.problems[0]))


dns_label = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
valid_quantity = st.one_of(
    st.integers(min_value=1, max_value=10**6),
    st.integers(min_value=1, max_value=10**6).map(lambda n: f"{n}m"),
    st.integers(min_value=1, max_value=10**6).map(lambda n: f"{n}Mi"),
    st.integers(min_value=1, max_value=1024).map(lambda n: f"{n}Gi"),
    st.integers(min_value=1, max_value=10**6).map(str),
    st.decimals(min_value="0.001", max_value="1000", places=3).map(str),
)
resource_name = st.sampled_from(
    ["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "example.com/foo", "hugepages-2Mi"]
)
valid_group = st.builds(
    lambda name, count, resources, name_key, member_key, resource_key: {
        name_key: name,
        member_key: count,
        resource_key: resources,
    },
    dns_label,
    st.integers(min_value=1, max_value=1000),
    st.dictionaries(resource_name, valid_quantity, min_size=1, max_size=4),
    st.sampled_from(["name", "Name", "NAME"]),
    st.sampled_from(["minMember", "minmember", "MINMEMBER"]),
    st.sampled_from(["minResource", "minresource", "MinResource"]),
)


def _value(group: dict[str, Any], key: str) -> Any:
    return next(v for k, v in group.items() if k.lower() == key.lower())


@settings(max_examples=200, deadline=None)
@given(groups=st.lists(valid_group, min_size=1, max_size=5, unique_by=lambda g: _value(g, "name")))
def test_valid_groups_round_trip(groups: list[dict[str, Any]]) -> None:
    spec = parse_gang({TG: json.dumps(groups)})
    assert [g.name for g in spec.groups] == [_value(g, "name") for g in groups]
    assert [g.min_member for g in spec.groups] == [_value(g, "minMember") for g in groups]
    assert [dict(g.min_resource) for g in spec.groups] == [
        {k: str(v) for k, v in _value(g, "minResource").items()} for g in groups
    ]
    assert spec.min_members == sum(_value(g, "minMember") for g in groups)
    assert spec.policy == Policy(900, Style.SOFT)
    assert spec.warnings == ()


@settings(max_examples=200, deadline=None)
@given(text=policy_text)
def test_any_policy_text_parses_or_raises_invalid_gang(text: str | None) -> None:
    try:
        policy = parse_policy(text)
    except InvalidGang as error:
        assert error.problems and str(error)
    else:
        assert 1 <= policy.timeout_s <= Limits().max_timeout_s
    assert style_of({SPP: text} if text is not None else {}) in (Style.SOFT, Style.HARD)


def test_gang_mode_and_group_are_read_from_yuniplace_annotations() -> None:
    notes = {
        keys.TASK_GROUPS: json.dumps([{"name": "w", "minMember": 2, "minResource": {"cpu": "1"}}]),
        keys.GANG_MODE: "strict",
        keys.GANG_GROUP: '["a/x", "b/y", "a/x"]',
    }
    spec = parse_gang(notes)
    assert spec.mode == Mode.STRICT
    assert spec.gang_group == ("a/x", "b/y")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (keys.GANG_MODE, "Eager", 'yuniplace.io/gang-mode: "Eager" must be Strict or NonStrict'),
        (keys.GANG_GROUP, '"a/x"', 'yuniplace.io/gang-group: "a/x" must be a JSON array'),
        (keys.GANG_GROUP, "[]", "must be a JSON array"),
        (keys.GANG_GROUP, '["A/x"]', 'yuniplace.io/gang-group: "A/x" is not "namespace/app-id"'),
        (keys.GANG_GROUP, json.dumps([f"ns/a{i}" for i in range(65)]), "more than the limit of 64"),
    ],
)
def test_bad_gang_mode_or_group_names_the_annotation(key: str, value: str, message: str) -> None:
    notes = {keys.TASK_GROUPS: json.dumps([{"name": "w", "minMember": 2, "minResource": {"cpu": "1"}}]), key: value}
    with pytest.raises(InvalidGang, match=re.escape(message)):
        parse_gang(notes)
