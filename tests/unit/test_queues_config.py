"""Queue configuration: YuniKorn's queues.yaml and Volcano's Queues read into the queue model, merged,
and applications placed by YuniKorn's placement rules."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import builders
from yuniplace.gang.fit import milli
from yuniplace.queues import rawyaml
from yuniplace.queues.config import (
    InvalidQueues,
    merge,
    place,
    read_configmap,
    read_queues_yaml,
    read_volcano_queues,
)
from yuniplace.queues.model import Ordering, PlacementRule, QueueConfig, QueueSpec, RuleKind, Submitters
from yuniplace.queues.quantity import BadQuantity, yunikorn_milli

DATA = Path(__file__).parent / "data"
GI = 2**30


def queues_yaml(text: str) -> QueueConfig:
    return read_queues_yaml(textwrap.dedent(text))


def problems(text: str) -> list[str]:
    with pytest.raises(InvalidQueues) as refused:
        queues_yaml(text)
    return [str(p) for p in refused.value.problems]


def volcano(name: str, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if "annotations" in spec:
        metadata["annotations"] = spec.pop("annotations")
    queue: dict[str, Any] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": metadata}
    if "status" in spec:
        queue["status"] = spec.pop("status")
    queue["spec"] = spec
    return queue


def volcano_problems(*queues: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidQueues) as refused:
        read_volcano_queues(list(queues))
    return [str(p) for p in refused.value.problems]


# --- YuniKorn's own samples -------------------------------------------------------------------------


def test_yunikorn_documentation_sample_with_guaranteed_and_max_loads_unchanged() -> None:
    config = read_queues_yaml((DATA / "yunikorn-queue-config-sample.yaml").read_text())
    assert list(config.queues) == ["root", "root.namespaces", "root.namespaces.level1"]
    namespaces, level1 = config.queues["root.namespaces"], config.queues["root.namespaces.level1"]
    # vcore is cores (10 cores: 10000 millicores); memory is bytes (1G: 10^9 bytes, in thousandths).
    assert namespaces.guaranteed == {"memory": 10**9 * 1000, "cpu": 10_000}
    assert namespaces.max == {"memory": 10 * 10**9 * 1000, "cpu": 100_000}
    assert level1.guaranteed == {"memory": 500 * 10**6 * 1000, "cpu": 5_000}
    assert level1.max == {"memory": 5 * 10**9 * 1000, "cpu": 50_000}
    assert (namespaces.max_applications, level1.max_applications) == (12, 8)
    assert namespaces.parent_queue and not level1.parent_queue and config.is_leaf("root.namespaces.level1")
    assert config.rules == ()  # YuniKorn's implicit provided rule applies when placing
    # No ACL anywhere: YuniKorn lets no one submit, and so does yuniplace, with a warning saying so.
    assert not level1.submitters.allow("any", "default")
    assert any("lets no one in" in w and "submitacl: '*'" in w for w in config.warnings)


def test_yunikorn_static_queues_sample_loads_unchanged() -> None:
    config = read_queues_yaml((DATA / "yunikorn-static-queues-sample.yaml").read_text())
    assert list(config.queues) == ["root", "root.advertisement", "root.search", "root.sandbox"]
    expected = {
        "root.advertisement": ({"memory": 500_000_000, "cpu": 50_000_000}, {"memory": 800_000_000, "cpu": 80_000_000}),
        "root.search": ({"memory": 400_000_000, "cpu": 40_000_000}, {"memory": 600_000_000, "cpu": 60_000_000}),
        "root.sandbox": ({"memory": 100_000_000, "cpu": 10_000_000}, {"memory": 100_000_000, "cpu": 10_000_000}),
    }
    for path, (guaranteed, maximum) in expected.items():
        queue = config.queues[path]
        assert (queue.guaranteed, queue.max) == (guaranteed, maximum)
        assert queue.submitters == Submitters()  # submitacl '*' on root reaches every queue below it
        assert (queue.sharing, queue.borrowing, queue.preemption, queue.reclaimable) == (True, True, True, True)
        assert (queue.ordering, queue.by_priority, queue.source) == (Ordering.FIFO, True, "queues.yaml")
    assert config.warnings == ()


def test_yunikorn_child_template_sample_loads_with_a_warning_that_templates_are_not_applied() -> None:
    config = read_queues_yaml((DATA / "yunikorn-child-template-sample.yaml").read_text())
    assert list(config.queues) == ["root", "root.parent", "root.notemplate"]
    assert config.rules == (PlacementRule(RuleKind.PROVIDED, create=True),)
    assert [w.split(": ")[1] for w in config.warnings] == ["root.parent", "root"]
    assert all("childtemplate" in w and "is not applied" in w for w in config.warnings)


# --- malformed queues.yaml: every problem, named by queue and field -----------------------------------


def test_malformed_queues_yaml_is_refused_with_every_problem_by_queue_and_field() -> None:
    found = problems(
        """
        partitions:
          - name: default
            placementrules:
              - name: provided
                parent: {name: fixed, value: nosuch}
            queues:
              - name: root
                submitacl: '*'
                queues:
                  - name: team-a
                    resources:
                      guaranteed: {vcore: 4, memory: 8Gi}
                      max: {vcore: lots, memory: 4Gi}
                  - name: Team-A
                  - name: team-b
                    resources: {guaranteed: {memory: 1.5Gi}}
        """
    )
    assert found == [
        'queues.yaml: root.team-a: resources.max.vcore: "lots" is not a quantity (examples: "2", "500m", "4k")',
        'queues.yaml: root: queues[1].name: "Team-A" is the name of another queue under root (queues[0]; names ignore case)',
        'queues.yaml: root.team-b: resources.guaranteed.memory: "1.5Gi" is not a whole number: YuniKorn takes no '
        'fractions or exponents (write "1536Mi")',
        'queues.yaml: root.team-a: resources.guaranteed.memory: "8Gi" is above resources.max.memory (4Gi)',
        # The rule's parent names a queue that is not configured, and the rule may not create it.
        'queues.yaml: placementrules[0]: "root.nosuch" names queues that do not exist, and create is false',
    ]


def test_the_hierarchy_of_guarantees_and_limits_is_checked_as_yunikorn_checks_it() -> None:
    found = problems(
        """
        partitions:
          - queues:
              - name: org
                resources: {guaranteed: {vcore: 10}, max: {vcore: 20, memory: 64Gi}}
                queues:
                  - name: a
                    resources: {guaranteed: {vcore: 6}, max: {memory: 128Gi}}
                  - name: b
                    queues:
                      - name: b1
                        resources: {guaranteed: {vcore: 5, nvidia.com/gpu: 2}}
                  - name: c
                    resources: {guaranteed: {vcore: 1}, max: {vcore: 500m}}
        """
    )
    assert found == [
        'queues.yaml: root.org.a: resources.max.memory: "128Gi" is above the max of its parent root.org (64Gi)',
        'queues.yaml: root.org.c: resources.guaranteed.vcore: "1" is above resources.max.vcore (500m)',
        # b has no guarantee of its own: b1's counts towards org's (6 + 5 + 1 > 10).
        'queues.yaml: root.org: resources.guaranteed.vcore: "10" is below the sum of the guarantees of its children (12)',
    ]


def test_names_values_and_shapes_yunikorn_refuses_are_refused() -> None:
    found = problems(
        """
        partitions:
          - name: default
            queues:
              - name: root
                resources: {max: {vcore: 100}}
                queues:
                  - name: b.c
                  - name: ""
                  - name: a b
                  - name: kid-of-leaf
                    parent: false
                    maxApplications: 3
                    queues: [{name: x}]
                  - name: cpu-named
                    resources: {max: {cpu: 2, memory: -1, "bad name!": 1, pods: 10m}}
                  - name: acl
                    submitacl: "a b c"
                  - name: props
                    properties:
                      yuniplace.io/shareing: "false"
                      application.sort.policy: random
                      yuniplace.io/node-selector: "pool"
        """
    )
    assert found == [
        'queues.yaml: root: queues[0].name: "b.c" must not contain a dot: dots separate the queues of a path',
        'queues.yaml: root: queues[1].name: "" must be set',
        'queues.yaml: root: queues[2].name: "a b" may only hold letters, digits and _ : # / @ -',
        'queues.yaml: root.kid-of-leaf: maxApplications: "maxApplications" is not a field YuniKorn knows here '
        "(YuniKorn's keys are lower case: maxapplications); known: name, parent, resources, maxapplications, "
        "properties, adminacl, submitacl, childtemplate, queues, limits",
        'queues.yaml: root.kid-of-leaf: parent: "false" contradicts its queues: a queue with children is a parent',
        'queues.yaml: root.cpu-named: resources.max.cpu: "2" is not YuniKorn\'s name for CPU: write vcore (in cores, '
        'or millicores with "m")',
        'queues.yaml: root.cpu-named: resources.max.memory: "-1" must not be negative',
        'queues.yaml: root.cpu-named: resources.max.bad name!: "bad name!" is not a resource name (cpu is vcore; '
        "memory, pods, nvidia.com/gpu…)",
        'queues.yaml: root.cpu-named: resources.max.pods: "10m" has the suffix "m", which only vcore takes (millicores)',
        'queues.yaml: root.acl: submitacl: "a b c" has more than one space: an ACL is "user1,user2 group1,group2" '
        "(users, a space, groups)",
        'queues.yaml: root.props: properties.yuniplace.io/shareing: "yuniplace.io/shareing" is not a yuniplace '
        "property (there are yuniplace.io/sharing, yuniplace.io/borrowing, yuniplace.io/node-selector, "
        "yuniplace.io/native-gangs)",
        'queues.yaml: root.props: properties.application.sort.policy: "random" must be fifo, fair or stateaware',
        'queues.yaml: root.props: properties.yuniplace.io/node-selector: "pool" must be label=value pairs separated '
        "by commas (pool=gpu,zone=a)",
        'queues.yaml: root: resources: {"max": {"vcore": "100"}} must not be set: the root queue\'s room is the cluster',
    ]


@pytest.mark.parametrize("loader", ["libyaml", "python"])
def test_yaml_that_cannot_be_read_is_refused_whole(loader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if loader == "python":  # where PyYAML comes without libyaml
        monkeypatch.setattr(rawyaml, "_LOADER", yaml.SafeLoader)
    else:
        assert rawyaml._LOADER is yaml.CSafeLoader
    # One line, where first (the C and Python parsers word the problem differently).
    [unclosed] = problems("partitions: [unclosed\n")
    assert unclosed.startswith("queues.yaml: is not valid YAML: line 2, column 1: ") and "\n" not in unclosed
    assert unclosed.endswith("(while parsing a flow sequence that starts at line 1, column 13)")
    assert problems("partitions: []\npartitions: []\n") == [
        'queues.yaml: line 2: mapping key "partitions" is already defined at line 1'
    ]
    assert problems("a: 1\n---\nb: 2\n") == [
        "queues.yaml: holds more than one YAML document; a configuration is one document"
    ]
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)
    )
    assert problems(bomb) == ["queues.yaml: has more than 200000 values (aliases counted each time they are used)"]
    assert problems("partitions: " + "[" * 5000) == ["queues.yaml: line 1: is nested more than 100 levels deep"]
    deep_blocks = "".join("  " * i + f"k{i}:\n" for i in range(150))
    assert problems(deep_blocks) == ["queues.yaml: line 101: is nested more than 100 levels deep"]
    assert problems("- just a list\n")[0].startswith('queues.yaml: ["just a list"] must be a mapping')
    assert problems("partitions: []\n") == [
        "queues.yaml: partitions: [] must list at least one partition (name: default)"
    ]


def test_too_many_queues_or_levels_are_refused_without_reading_on() -> None:
    many = "partitions:\n- queues:\n" + "".join(f"  - name: q{i}\n" for i in range(10_001))
    assert problems(many) == ["queues.yaml: root: queues[10000]: 10001 queues are more than the limit of 10000"]
    deep = "partitions:\n- queues:\n" + "".join(
        "  " * i + f"  - name: l{i}\n" + "  " * i + "    queues:\n" for i in range(33)
    )
    assert problems(deep)[0].endswith("queues[0]: 33 levels of queues are more than the limit of 32")


def test_a_blank_queues_yaml_is_no_configuration() -> None:
    assert read_queues_yaml("").empty and read_queues_yaml("# nothing yet\n").empty


def test_yaml_values_are_read_as_the_text_yunikorn_reads() -> None:
    # PyYAML alone would make 017 fifteen and `no` False; YuniKorn's Go decoder keeps the text.
    config = queues_yaml(
        """
        partitions:
          - queues:
              - name: "no"
                resources: {max: {vcore: 017, memory: 10 Gi}}
              - name: "on"
                parent: yes
        """
    )
    assert config.queues["root.no"].max == {"cpu": 17_000, "memory": 10 * GI * 1000}
    assert config.queues["root.on"].parent_queue
    assert config.queues["root"].parent_queue  # inserted above the two top-level queues


# --- quantities ------------------------------------------------------------------------------------

YUNIKORN_SUFFIXES = ["", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"]


@given(st.integers(min_value=0, max_value=10**7), st.sampled_from(YUNIKORN_SUFFIXES))
def test_yunikorn_quantities_are_kubernetes_quantities_where_both_read_them(number: int, suffix: str) -> None:
    text = f"{number}{suffix}"
    assert yunikorn_milli("vcore", f"{number}m") == milli(f"{number}m") == number
    # YuniKorn keeps amounts in an int64 of the base unit: bytes for memory, millicores for vcore (which
    # counts cores, as cpu does).
    for resource, base in (
        ("memory", milli(text) // 1000),
        ("nvidia.com/gpu", milli(text) // 1000),
        ("vcore", milli(text)),
    ):
        if base <= 2**63 - 1:
            assert yunikorn_milli(resource, text) == milli(text)
        else:
            with pytest.raises(BadQuantity, match="is too large"):
                yunikorn_milli(resource, text)


@given(st.from_regex(r"\A-?[0-9]{0,4}\.[0-9]{1,4}\Z|\A-[0-9]{1,6}\Z|\A[0-9]{1,4}[eE][0-9]\Z"))
def test_fractions_exponents_and_negatives_are_refused_as_yunikorn_refuses_them(text: str) -> None:
    with pytest.raises(BadQuantity):
        yunikorn_milli("memory", text)


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("vcore", "9223372036854775807m", 2**63 - 1),
        ("memory", "9223372036854775807", (2**63 - 1) * 1000),
        ("memory", " 5 Gi ", 5 * GI * 1000),  # blanks around and before the suffix, as YuniKorn allows
    ],
)
def test_yunikorn_quantity_bounds(resource: str, text: str, expected: int) -> None:
    assert yunikorn_milli(resource, text) == expected


@pytest.mark.parametrize(
    ("resource", "text", "message"),
    [
        ("vcore", "9223372036854775807", "is too large"),  # in millicores it overflows YuniKorn's int64
        ("memory", "8Ei", "is too large"),
        ("memory", "5K", 'unknown suffix "K"'),
        ("memory", "5ki", 'unknown suffix "ki"'),
        ("memory", "500m", 'the suffix "m", which only vcore takes'),
        ("memory", "", "is not a quantity"),
    ],
)
def test_yunikorn_quantities_it_refuses(resource: str, text: str, message: str) -> None:
    with pytest.raises(BadQuantity, match=message):
        yunikorn_milli(resource, text)


# --- any valid tree round-trips -------------------------------------------------------------------------

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789_-:#/@", min_size=1, max_size=12)


@st.composite
def queue_trees(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """A queue whose amounts satisfy YuniKorn's rules: children first, then a guarantee at least their
    sum and a max at least everything below."""
    children: list[dict[str, Any]] = []
    if depth < 3:
        for name in draw(st.lists(NAMES, max_size=3, unique_by=str.lower)):
            children.append({**draw(queue_trees(depth + 1)), "name": name})
    passed = {r: sum(c["_passed"].get(r, 0) for c in children) for r in ("cpu", "memory")}
    ceiling = {r: max([c["_ceiling"].get(r, 0) for c in children] + [passed[r]]) for r in ("cpu", "memory")}
    queue: dict[str, Any] = {"queues": children}
    guaranteed = {}
    if draw(st.booleans()):
        guaranteed = {r: passed[r] + draw(st.integers(0, 5000)) for r in ("cpu", "memory")}
    maximum = None
    if draw(st.booleans()):
        maximum = {r: max(ceiling[r], guaranteed.get(r, 0)) + draw(st.integers(0, 5000)) for r in ("cpu", "memory")}
    queue["_passed"] = guaranteed if any(guaranteed.values()) else passed
    queue["_ceiling"] = maximum or {r: max(ceiling[r], guaranteed.get(r, 0)) for r in ("cpu", "memory")}
    queue["_guaranteed"], queue["_max"] = guaranteed, maximum
    queue["parent"] = draw(st.booleans()) if not children else None
    return queue


def _render(queue: dict[str, Any]) -> dict[str, Any]:
    """A generated queue as queues.yaml writes it: cpu in millicores, memory in bytes (1000 milli-units each)."""
    written: dict[str, Any] = {"name": queue["name"]}
    resources = {}
    for kind in ("guaranteed", "max"):
        amounts = queue[f"_{kind}"]
        if amounts is not None and (kind == "max" or amounts):
            resources[kind] = {"vcore": f"{amounts['cpu']}m", "memory": str(amounts["memory"])}
    if resources:
        written["resources"] = resources
    if queue["parent"]:
        written["parent"] = True
    if queue["queues"]:
        written["queues"] = [_render(child) for child in queue["queues"]]
    return written


def _expected(queue: dict[str, Any], parent: str, out: dict[str, tuple[Any, ...]]) -> None:
    path = f"{parent}.{queue['name'].lower()}"
    guaranteed = (
        {"cpu": queue["_guaranteed"]["cpu"], "memory": queue["_guaranteed"]["memory"] * 1000}
        if queue["_guaranteed"]
        else {}
    )
    maximum = None if queue["_max"] is None else {"cpu": queue["_max"]["cpu"], "memory": queue["_max"]["memory"] * 1000}
    out[path] = (guaranteed, maximum, bool(queue["queues"]) or bool(queue["parent"]))
    for child in queue["queues"]:
        _expected(child, path, out)


@settings(max_examples=60, deadline=None)
@given(queue_trees())
def test_any_valid_queue_tree_round_trips(tree: dict[str, Any]) -> None:
    text = yaml.safe_dump(
        {
            "partitions": [
                {
                    "name": "default",
                    "queues": [{"name": "root", "submitacl": "*", "queues": [_render({**c}) for c in tree["queues"]]}],
                }
            ]
        }
    )
    config = read_queues_yaml(text)
    expected: dict[str, tuple[Any, ...]] = {}
    for child in tree["queues"]:
        _expected(child, "root", expected)
    assert {
        path: (q.guaranteed, q.max, q.parent_queue) for path, q in config.queues.items() if path != "root"
    } == expected


# --- properties, ACLs, partitions -------------------------------------------------------------------


def test_properties_map_to_switches_and_pass_down_as_in_yunikorn() -> None:
    config = queues_yaml(
        """
        partitions:
          - queues:
              - name: root
                submitacl: "*"
                properties: {application.sort.priority: disabled}
                queues:
                  - name: batch
                    properties:
                      preemption.policy: disabled
                      priority.policy: fence
                      yuniplace.io/node-selector: "pool=batch, zone=a"
                      yuniplace.io/sharing: "false"
                      some.vendor/flag: kept-by-yunikorn
                    queues:
                      - name: nightly
                        properties: {application.sort.priority: enabled, yuniplace.io/borrowing: "FALSE"}
                  - name: fenced
                    properties: {preemption.policy: fence}
                    queues: [{name: inner}]
                  - name: fair
                    properties: {application.sort.policy: fair, priority.offset: "5"}
        """
    )
    q = config.queues
    assert not q["root.batch"].by_priority  # root's application.sort.priority: disabled passes down
    assert q["root.batch.nightly"].by_priority  # YuniKorn's fifo honours priority by default
    assert (q["root.fair"].ordering, q["root.batch"].ordering) == (Ordering.FAIR, Ordering.FIFO)
    # preemption.policy disabled: its pods are never victims (YuniKorn), and it passes down; sharing and
    # the pool pass down like any property.
    assert (q["root.batch"].reclaimable, q["root.batch.nightly"].reclaimable) == (False, False)
    assert q["root.batch.nightly"].node_selector == {"pool": "batch", "zone": "a"}
    assert (q["root.batch.nightly"].sharing, q["root.batch.nightly"].borrowing) == (False, False)
    assert (q["root.batch"].preemption, q["root.fair"].preemption) == (True, True)
    # A fence keeps reclaim inside a subtree, which yuniplace cannot bound: nothing under it reclaims.
    assert (q["root.fenced"].preemption, q["root.fenced.inner"].preemption) == (False, False)
    assert q["root.fenced.inner"].reclaimable
    assert [w.split(": ", 3)[1:3] for w in config.warnings] == [
        ["root.fenced", "properties.preemption.policy"],
        ["root.fair", "properties.priority.offset"],
    ]


def test_partition_without_preemption_turns_reclaim_off_everywhere() -> None:
    config = queues_yaml(
        """
        partitions:
          - preemption: {enabled: false}
            queues: [{name: a, submitacl: "*"}]
        """
    )
    assert not config.queues["root.a"].preemption and not config.queues["root"].preemption


def test_acls_map_to_namespaces_and_service_accounts_and_reach_the_queues_below() -> None:
    config = queues_yaml(
        """
        partitions:
          - queues:
              - name: root
                adminacl: " system:serviceaccounts:ops"
                queues:
                  - name: ml
                    submitacl: "system:serviceaccount:ml:trainer,alice system:serviceaccounts:research,data-team"
                    queues: [{name: gpu}]
                  - name: open
                    submitacl: " system:serviceaccounts"
        """
    )
    gpu = config.queues["root.ml.gpu"].submitters
    assert gpu.allow("ml", "trainer") and not gpu.allow("ml", "default")
    assert gpu.allow("research", "anyone") and gpu.allow("ops", None)  # ACLs of the parents, admin ACL too
    assert not gpu.allow("web", "trainer")
    assert config.queues["root.open"].submitters == Submitters()  # every pod runs as a service account
    assert config.warnings == (
        'queues.yaml: root.ml: submitacl: "alice" is not a service account (system:serviceaccount:<namespace>:<name>): '
        "yuniplace knows an application by its namespace and service account, not by who submitted it; the entry is "
        "ignored",
        'queues.yaml: root.ml: submitacl: "data-team" is not system:serviceaccounts:<namespace>, '
        "system:serviceaccounts or system:authenticated: yuniplace cannot tell its members; the entry is ignored",
    )


def test_the_default_partition_is_used_and_the_others_checked() -> None:
    text = """
        partitions:
          - name: gpu-cluster
            queues: [{name: x, resources: {max: {vcore: many}}}]
          - name: DEFAULT
            queues: [{name: a, submitacl: "*"}]
        """
    assert problems(text) == [
        'queues.yaml: partitions[gpu-cluster] root.x: resources.max.vcore: "many" is not a quantity '
        '(examples: "2", "500m", "4k")'
    ]
    config = queues_yaml(text.replace("many", "4"))
    assert list(config.queues) == ["root", "root.a"]
    assert config.warnings[0].startswith('queues.yaml: partitions: "gpu-cluster" is checked but not used')
    only = queues_yaml("partitions: [{name: prod, queues: [{name: a, submitacl: '*'}]}]")
    assert list(only.queues) == ["root", "root.a"] and "is used as yuniplace's only partition" in only.warnings[0]
    assert problems("partitions: [{name: a, queues: []}, {name: b, queues: []}]") == [
        'queues.yaml: partitions: ["a", "b"] has no partition named default, the one yuniplace schedules'
    ]
    assert problems("partitions: [{queues: []}, {name: Default, queues: []}]") == [
        'queues.yaml: partitions[1].name: "default" is the name of another partition'
    ]
    assert problems("partitions: [{name: default}]") == [
        "queues.yaml: queues: must be set: a partition needs its queues, at least root"
    ]


def test_max_applications_follow_yunikorns_rules() -> None:
    found = problems(
        """
        partitions:
          - queues:
              - name: p
                maxapplications: 10
                queues:
                  - {name: big, maxapplications: 11}
                  - {name: unset}
                  - {name: fine, maxapplications: 10}
              - name: bad
                maxapplications: -1
        """
    )
    assert found == [
        'queues.yaml: root.bad: maxapplications: "-1" must be a whole number, 0 or more',
        'queues.yaml: root.p.big: maxapplications: "11" is more than its parent\'s (10)',
        'queues.yaml: root.p.unset: maxapplications: "0" must be set, 1 or more, as its parent\'s is (10)',
    ]


def test_node_sorting_and_quota_preemption_have_no_effect_and_say_so() -> None:
    config = queues_yaml(
        """
        partitions:
          - nodesortpolicy: {type: binpacking}
            preemption: {quotapreemptionenabled: true}
            queues: [{name: a, submitacl: "*"}]
        """
    )
    assert [w.split(": ")[1] for w in config.warnings] == ["preemption.quotapreemptionenabled", "nodesortpolicy"]
    assert problems("partitions: [{nodesortpolicy: fair, queues: []}]") == [
        'queues.yaml: nodesortpolicy: "fair" must be a mapping: nodesortpolicy: {type: fair}'
    ]


# --- placement rules as read ----------------------------------------------------------------------


def test_placement_rules_are_read_with_their_filters_and_parents() -> None:
    config = queues_yaml(
        """
        partitions:
          - placementrules:
              - name: Provided
                filter: {type: deny, groups: [system:serviceaccounts:sandbox]}
              - name: tag
                value: Namespace
                create: true
                parent: {name: tag, value: team}
              - name: fixed
                value: root.shared
            queues: [{name: shared, submitacl: "*"}]
        """
    )
    provided, tag, fixed = config.rules
    assert provided.kind is RuleKind.PROVIDED and provided.filter.deny
    assert not provided.filter.applies("sandbox", "default") and provided.filter.applies("ml", "default")
    assert (tag.kind, tag.value, tag.create) == (RuleKind.TAG, "namespace", True)
    assert tag.parent == PlacementRule(RuleKind.TAG, "team")
    assert (fixed.kind, fixed.value, fixed.create) == (RuleKind.FIXED, "root.shared", False)


def test_placement_rules_yuniplace_cannot_follow_are_refused() -> None:
    found = problems(
        """
        partitions:
          - placementrules:
              - {name: user, create: true}
              - {name: recovery}
              - {name: group}
              - {name: tag}
              - {name: fixed, value: root.a, parent: {name: provided}}
              - {name: provided, filter: {users: ["^system:serviceaccount:ml:.*$"]}}
              - {name: provided, filter: {type: maybe}}
              - name: tag
                value: namespace
                parent:
                  - name: tag
                    value: namespace.parentqueue
              - {name: fixed, value: root.a.leaf-parent, create: true, parent: null}
              - {name: provided, create: true, parent: {name: fixed, value: a}}
            queues: [{name: a, submitacl: "*"}]
        """
    )
    assert found == [
        'queues.yaml: placementrules[0].name: "user" places by the submitting user, whom yuniplace never learns (it '
        "knows an application's namespace and service account): use tag with value namespace, a tag on a label, or "
        "provided",
        'queues.yaml: placementrules[1].name: "recovery" is YuniKorn\'s internal rule and cannot be configured',
        'queues.yaml: placementrules[2].name: "group" is not a placement rule yuniplace knows (provided, tag, fixed)',
        'queues.yaml: placementrules[3].value: "" must name the tag: namespace, or a label of the application\'s pods',
        'queues.yaml: placementrules[4].parent: "root.a" cannot be set: a fixed rule that names a full path (root.…) '
        "has no parent rule",
        'queues.yaml: placementrules[5].filter.users: "^system:serviceaccount:ml:.*$" is a regular expression, which '
        "yuniplace does not take in a filter: list the service accounts (system:serviceaccount:<namespace>:<name>) or "
        "namespaces (system:serviceaccounts:<namespace>)",
        'queues.yaml: placementrules[6].filter.type: "maybe" must be allow or deny',
        # YuniKorn's documentation writes this parent as a list, which YuniKorn's own decoder refuses.
        'queues.yaml: placementrules[7].parent: [{"name": "tag", "value": "namespace.parentqueue"}] must be one rule '
        "(a mapping with name, create, value…), not a list",
        'queues.yaml: placementrules[8]: "root.a.leaf-parent" would put queues under root.a, which is a leaf queue',
        'queues.yaml: placementrules[9]: "root.a" puts queues under a leaf queue: a rule\'s parent must yield a parent '
        "queue",
    ]


# --- ConfigMaps ----------------------------------------------------------------------------------


def test_configmap_is_read_from_its_queues_yaml_key() -> None:
    text = (DATA / "yunikorn-static-queues-sample.yaml").read_text()
    config = read_configmap({"metadata": {"name": "yunikorn-configs"}, "data": {"queues.yaml": text}})
    assert (
        "root.sandbox" in config.queues
        and config.queues["root.sandbox"].source == "ConfigMap yunikorn-configs queues.yaml"
    )
    grouped = read_configmap({"metadata": {"name": "y"}, "data": {"service.policyGroup": "batch", "batch.yaml": text}})
    assert "root.search" in grouped.queues
    assert read_configmap({"metadata": {"name": "y"}, "data": {"queues.yaml": ""}}).empty


def test_configmap_without_the_key_is_an_error_naming_it() -> None:
    with pytest.raises(InvalidQueues) as refused:
        read_configmap({"metadata": {"name": "yunikorn-configs"}, "data": {"log.level": "debug"}})
    assert str(refused.value) == (
        "ConfigMap yunikorn-configs: data.queues.yaml: is missing: the queue configuration is read from this key"
    )
    with pytest.raises(InvalidQueues, match=r"data.batch.yaml: is missing: .* \(named by service.policyGroup\)"):
        read_configmap({"metadata": {"name": "y"}, "data": {"service.policyGroup": "batch", "queues.yaml": ""}})
    with pytest.raises(InvalidQueues, match='ConfigMap y queues.yaml: root.a: resources.max.vcore: "x" is not'):
        read_configmap(
            {
                "metadata": {"name": "y"},
                "data": {"queues.yaml": "partitions: [{queues: [{name: a, resources: {max: {vcore: x}}}]}]"},
            }
        )


# --- Volcano -------------------------------------------------------------------------------------


def test_volcano_queues_map_to_the_model() -> None:
    config = read_volcano_queues(
        [
            volcano("root", capability={"cpu": "1000"}),
            volcano("default", weight=1, reclaimable=True),
            volcano("team", capability={"cpu": "16", "memory": "64Gi"}, deserved={"cpu": "8"}, weight=4),
            volcano(
                "ml.gpu",
                parent="team",
                capability={"cpu": "8", "nvidia.com/gpu": 4},
                guarantee={"resource": {"cpu": "2", "memory": "8Gi"}},
                deserved={"cpu": 4},
                reclaimable=False,
                affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["gpu"]}},
                status={"state": "Closed"},
            ),
            volcano("lender", guarantee={"resource": {"cpu": "1"}}, annotations={"yuniplace.io/sharing": "true"}),
            volcano("old", state="Closing"),
        ]
    )
    q = config.queues
    assert list(q) == ["root", "root.default", "root.lender", "root.old", "root.team", "root.team.ml_dot_gpu"]
    assert q["root.team"].guaranteed == {"cpu": 8000} and q["root.team"].max == {"cpu": 16000, "memory": 64 * GI * 1000}
    assert q["root.team"].sharing and q["root.team"].open
    assert (
        "Volcano Queue team: spec.weight: 4 has no effect: yuniplace does not divide room between queues by weight"
        in (config.warnings)
    )
    gpu = q["root.team.ml_dot_gpu"]
    # deserved where it names the resource, else guarantee; a reservation is not lent.
    assert gpu.guaranteed == {"cpu": 4000, "memory": 8 * GI * 1000}
    assert gpu.max == {"cpu": 8000, "nvidia.com/gpu": 4000}
    assert (gpu.sharing, gpu.reclaimable, gpu.open) == (False, False, False)
    assert gpu.node_selector == {"volcano.sh/nodegroup-name": "gpu"}
    assert gpu.source == "Volcano Queue ml.gpu" and gpu.submitters == Submitters()
    assert q["root.lender"].sharing and not q["root.old"].open
    assert q["root.default"].max is None and q["root"].max is None
    assert config.names == {
        "default": "root.default",
        "team": "root.team",
        "ml.gpu": "root.team.ml_dot_gpu",
        "lender": "root.lender",
        "old": "root.old",
    }
    assert config.warnings == (
        "Volcano Queue root: spec: [\"capability\"] of the root Queue have no effect: the root's room is the cluster's",
        "Volcano Queue team: spec.weight: 4 has no effect: yuniplace does not divide room between queues by weight",
    )


def test_malformed_volcano_queues_are_refused_with_every_problem() -> None:
    found = volcano_problems(
        volcano("a", parent="nosuch"),
        volcano("b", parent="c"),
        volcano("c", parent="b"),
        volcano("d", capability={"cpu": "lots", "memory": "-1Gi"}),
        volcano("e", capability={"cpu": "2"}, deserved={"cpu": "4"}, guarantee={"resource": {"cpu": "6"}}),
        volcano("f", capability={"cpu": "4"}),
        volcano("g", parent="f", capability={"cpu": "8"}, deserved={"cpu": "6"}),
        volcano("f"),
        volcano("h", weight=0, annotations={"yuniplace.io/shareing": "x"}),
        volcano(
            "i",
            affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["a", "b"]}},
            reclaimable="no",
        ),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        volcano("Not_A_Name"),
        volcano("root"),
        volcano("root"),
    )
    assert found == [
        'Volcano Queue d: spec.capability.cpu: "lots" is not a quantity (examples: "4", "500m", "8Gi")',
        'Volcano Queue d: spec.capability.memory: "-1Gi" must not be negative',
        'Volcano Queue e: spec.guarantee.resource.cpu: "6" is above spec.deserved.cpu (4)',
        'Volcano Queue f: metadata.name: "f" is the name of another Queue',
        'Volcano Queue h: metadata.annotations.yuniplace.io/shareing: "x" is not a yuniplace setting (there are '
        "yuniplace.io/sharing, yuniplace.io/borrowing, yuniplace.io/node-selector, "
        "yuniplace.io/native-gangs)",
        "Volcano Queue h: spec.weight: 0 must be a whole number from 1 to 2147483647",
        'Volcano Queue i: spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution: ["a", "b"] '
        "must name one node group: a yuniplace pool is one node selector",
        'Volcano Queue i: spec.reclaimable: "no" must be true or false',
        'Volcano Queue x: kind: "v1 ConfigMap" must be scheduling.volcano.sh/v1beta1 Queue',
        'Volcano Queue Not_A_Name: metadata.name: "Not_A_Name" is not a Kubernetes object name',
        'Volcano Queue root: metadata.name: "root" is the name of another Queue',
        # The unknown parent, named by the Queue and the field.
        'Volcano Queue a: spec.parent: "nosuch" is not a Volcano Queue',
        'Volcano Queue b: spec.parent: "c" makes a cycle (b → c → b)',
        'Volcano Queue e: spec.deserved.cpu: "4" is above spec.capability.cpu (2)',
        'Volcano Queue g: spec.capability.cpu: "8" is above the capability of its parent Volcano Queue f (4)',
        'Volcano Queue f: spec.capability.cpu: "4" is below the sum of what its children are guaranteed (6)',
    ]


def test_volcano_parent_chains_deeper_than_the_limit_are_refused() -> None:
    chain = [volcano("q0")] + [volcano(f"q{i}", parent=f"q{i - 1}") for i in range(1, 40)]
    found = volcano_problems(*chain)
    assert found[0] == 'Volcano Queue q32: spec.parent: "q31" makes parents more than 32 levels deep'
    assert len(found) == 1


# --- merging -----------------------------------------------------------------------------------------

PLACED = """
partitions:
  - placementrules:
      - {name: provided, create: false}
      - name: tag
        value: namespace
        create: true
        parent: {name: fixed, value: teams}
    queues:
      - name: root
        submitacl: " system:serviceaccounts:ml,system:serviceaccounts:web,system:serviceaccounts:ops"
        queues:
          - name: teams
            parent: true
            properties: {yuniplace.io/node-selector: "pool=batch", preemption.policy: fence}
          - name: gpu
            submitacl: system:serviceaccount:research:trainer
            resources: {guaranteed: {nvidia.com/gpu: 4}}
          - name: default
"""


def test_merge_takes_both_sources_and_yunikorns_rules() -> None:
    config = merge(read_queues_yaml(PLACED), read_volcano_queues([volcano("train", capability={"cpu": "8"})]))
    assert list(config.queues) == ["root", "root.teams", "root.gpu", "root.default", "root.train"]
    assert config.queues["root.train"].source == "Volcano Queue train" and config.names == {"train": "root.train"}
    assert config.rules == read_queues_yaml(PLACED).rules
    assert merge(None, []).empty and merge(read_queues_yaml(""), QueueConfig()).empty
    alone = merge(None, [QueueSpec("root.x", guaranteed={"cpu": 1000})])
    assert list(alone.queues) == ["root", "root.x", "root.default"] and alone.rules == ()  # Volcano's default
    assert read_volcano_queues([]).empty  # no Queue is no configuration


def test_merge_refuses_a_queue_both_sources_configure() -> None:
    with pytest.raises(InvalidQueues) as refused:
        merge(
            read_queues_yaml(PLACED),
            read_volcano_queues([volcano("gpu"), volcano("teams"), volcano("x", parent="teams")]),
        )
    assert [str(p) for p in refused.value.problems] == [
        'Volcano Queue gpu: root.gpu: "gpu" is also configured in queues.yaml: each queue is configured in one place',
        'Volcano Queue teams: root.teams: "teams" is also configured in queues.yaml: each queue is configured in one place',
    ]
    with pytest.raises(
        InvalidQueues,
        match='Volcano Queue default: root.x.default: metadata.name: "default" is also the name of root.default in queues.yaml',
    ):
        merge(read_queues_yaml(PLACED), read_volcano_queues([volcano("x"), volcano("default", parent="x")]))


# --- placement ---------------------------------------------------------------------------------------


def placed(config: QueueConfig, provided: str | None, namespace: str, sa: str | None = "default", **more: Any) -> Any:
    return place(
        config, provided_queue=provided, namespace=namespace, labels=more.pop("labels", {}), service_account=sa, **more
    )


def test_provided_queue_that_exists_and_admits_the_application() -> None:
    config = read_queues_yaml(PLACED)
    placement = placed(config, "gpu", "research", "trainer")
    assert (placement.queue, placement.created, placement.reason) == ("root.gpu", False, "placed by rule 1 (provided)")
    assert placed(config, "root.GPU", "research", "trainer").queue == "root.gpu"  # paths ignore case


def test_namespace_tag_creates_a_queue_under_its_parent_with_its_pool() -> None:
    config = read_queues_yaml(PLACED)
    placement = placed(config, None, "web")
    assert placement.queue == "root.teams.web" and placement.created
    assert placement.reason == "placed by rule 2 (tag namespace under fixed teams), which creates root.teams.web"
    (leaf,) = placement.new_queues
    assert (leaf.path, leaf.guaranteed, leaf.max, leaf.parent_queue) == ("root.teams.web", {}, None, False)
    assert leaf.node_selector == {"pool": "batch"} and not leaf.preemption  # the pool and the fence of root.teams
    # Once created (and still there), the provided rule, which creates nothing, finds it.
    assert placed(config, "root.teams.web", "web").reason.startswith("placed by rule 2")
    assert (
        placed(config, "root.teams.web", "web", dynamic_queues=["root.teams.web"]).reason
        == "placed by rule 1 (provided)"
    )


def test_refusals_say_why_for_every_rule() -> None:
    config = read_queues_yaml(PLACED)
    # root.gpu takes research's trainer; root's ACL (and so every queue's) takes namespaces ml, web and ops.
    refused = placed(config, "gpu", "research", "intern")
    assert refused.refused and refused.reason == (
        "no placement rule placed the application: rule 1 (provided): root.gpu does not take applications of "
        "service account intern of namespace research (submitacl); rule 2 (tag namespace under fixed teams): "
        "root.teams, where root.teams.research would be created, does not take applications of service account "
        "intern of namespace research; root.default, where YuniKorn puts what no rule placed: root.default does not "
        "take applications of service account intern of namespace research (submitacl)"
    )
    parent = placed(config, "teams", "nowhere")
    assert parent.refused and "rule 1 (provided): root.teams is a parent queue" in parent.reason
    assert placed(config, "a b", "ml").reason == (
        "rule 1 (provided): 'a b' is not a queue name (letters, digits and _ : # / @ -, at most 64)"
    )
    # What a tenant writes in its label or annotation is bounded, and shown cut short.
    deep = "root." + "x." * 40 + "y"
    assert placed(config, deep, "ml").reason == f"rule 1 (provided): '{deep[:79]}…' is more than 32 queues deep"
    assert (
        placed(config, "y" * 300_000, "ml").reason
        == f"rule 1 (provided): '{'y' * 79}…' is not a queue name (letters, digits and _ : # / @ -, at most 64)"
    )
    many = placed(config, "root." + ".".join(["x" * 60] * 30), "nowhere")
    assert many.refused and len(many.reason) == 1024 and many.reason.endswith("…")
    fell_back = placed(config, "root.gpu.sub", "ml")
    assert fell_back.queue == "root.teams.ml"  # provided may not create; the namespace tag may


def test_without_rules_the_provided_queue_then_root_default_as_yunikorn() -> None:
    config = queues_yaml(
        """
        partitions:
          - queues:
              - name: root
                submitacl: "*"
                queues: [{name: a}, {name: default}]
        """
    )
    assert placed(config, "a", "x").queue == "root.a"
    fallback = placed(config, None, "x")
    assert fallback.queue == "root.default" and fallback.reason.startswith("placed by root.default")
    assert placed(config, "missing", "x").queue == "root.default"
    without_default = queues_yaml("partitions: [{queues: [{name: root, submitacl: '*', queues: [{name: a}]}]}]")
    refused = placed(without_default, "b", "x")
    assert refused.refused and refused.reason == (
        "no placement rule placed the application: rule 1 (provided): root.b does not exist and the rule does not "
        "create queues; root.default does not exist"
    )


def test_closed_volcano_queue_takes_nothing_new_and_volcano_names_place() -> None:
    config = merge(
        None,
        read_volcano_queues(
            [
                volcano("default"),
                volcano("team"),
                volcano("ml", parent="team"),
                volcano("old", status={"state": "Closed"}),
            ]
        ),
    )
    assert placed(config, "ml", "x").queue == "root.team.ml"  # a Volcano Queue is named by its name
    assert placed(config, None, "x").queue == "root.default"  # Volcano's default Queue takes the rest
    closed = placed(config, "old", "x")
    assert closed.queue == "root.default" and not closed.refused
    # Volcano creates its default Queue itself: here it exists without one too.
    implicit = merge(None, read_volcano_queues([volcano("old", status={"state": "Closing"})]))
    assert implicit.queues["root.default"].source == "Volcano's default Queue (implicit)"
    assert placed(implicit, "old", "x").queue == "root.default"
    # With a queues.yaml that has no root.default, nothing takes what names a closed queue.
    root_only = queues_yaml(
        """
        partitions:
          - name: default
            queues:
              - name: root
                submitacl: "*"
        """
    )
    refused = placed(merge(root_only, read_volcano_queues([volcano("old", status={"state": "Closing"})])), "old", "x")
    assert refused.refused and "rule 1 (provided): root.old is closed" in refused.reason


def test_tags_read_labels_and_the_namespaces_parent_queue() -> None:
    config = queues_yaml(
        """
        partitions:
          - placementrules:
              - name: tag
                value: namespace
                create: true
                parent: {name: tag, value: namespace.parentqueue}
              - {name: tag, value: Team, create: true}
            queues:
              - name: root
                submitacl: "*"
                queues: [{name: production, parent: true}, {name: leaf}]
        """
    )
    annotated = placed(
        config, None, "finance", namespace_annotations={"yunikorn.apache.org/parentqueue": "root.production"}
    )
    assert annotated.queue == "root.production.finance"
    by_label = placed(config, None, "finance", labels={"team": "Risk.Models"})
    assert by_label.queue == "root.risk_dot_models" and [q.path for q in by_label.new_queues] == [
        "root.risk_dot_models"
    ]
    under_leaf = placed(config, None, "finance", namespace_annotations={"yunikorn.apache.org/parentqueue": "leaf"})
    assert under_leaf.refused and under_leaf.reason == (
        "rule 1 (tag namespace under tag namespace.parentqueue): its parent rule yields root.leaf, a leaf queue, "
        "where no queue can be created"
    )


def test_filters_and_nested_creation() -> None:
    config = queues_yaml(
        """
        partitions:
          - placementrules:
              - name: provided
                create: true
                filter: {type: allow, users: ["system:serviceaccount:ci:runner"]}
              - {name: fixed, value: root.shared}
            queues:
              - name: root
                submitacl: "*"
                queues: [{name: shared}]
        """
    )
    ci = placed(config, "root.builds.nightly", "ci", "runner")
    assert ci.queue == "root.builds.nightly"
    assert [(q.path, q.parent_queue) for q in ci.new_queues] == [("root.builds", True), ("root.builds.nightly", False)]
    other = placed(config, "root.builds.nightly", "ci", "default")
    assert other.queue == "root.shared" and other.reason == "placed by rule 2 (fixed root.shared)"


def test_a_queue_may_limit_a_device_class_in_both_formats() -> None:
    """DRA devices are limited by their class's resource name, as a queue limits nvidia.com/gpu."""
    gpu = "deviceclass.resource.kubernetes.io/gpu.example.com"
    volcano_config = read_volcano_queues([volcano("ml", capability={"cpu": "8", gpu: "4"})])
    assert volcano_config.queues["root.ml"].max == {"cpu": 8000, gpu: 4000}
    yunikorn = read_queues_yaml(builders.queues_yaml(f"- name: ml\n  resources:\n    max:\n      {gpu}: 4\n"))
    assert yunikorn.queues["root.ml"].max == {gpu: 4000}
