"""A search for inputs that make one of yuniplace's own steps raise: reading a gang (parse), admission's
snapshot and decision, and planning its next step, over pods, task groups, queues and nodes of many
shapes. Whatever a user writes in annotations (task groups, policies, yuniplace's own record keys,
topology asks) and whatever shapes the API allows elsewhere, each step must answer: invalid input is
the user's fault and is said so (Application.problem, a TaskGroupsError), never an exception, which
yuniplace would take for a fault of its own and hold the gang on. The search runs in CI with a fixed,
small budget, derandomized (the `internal-steps` profile, tests/conftest.py); each input it once found
is kept below as an explicit example."""

from __future__ import annotations

import json
import logging
from typing import Any
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests import builders
from yuniplace.admission.cycle import Admission
from yuniplace.admission.decision import AdmissionRules
from yuniplace.admission.tickets import Faulted
from yuniplace.controller.lifecycle import make_plan
from yuniplace.controller.plan import Settings, Surroundings
from yuniplace.controller.queuesource import QueueSource
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import read_gang
from yuniplace.gang.dialects import coscheduling as coscheduling_dialect
from yuniplace.gang.dialects import koordinator as koordinator_dialect
from yuniplace.gang.placeholders import placeholder_pod
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import InvalidGang, Limits
from yuniplace.gang.topology import KUEUE_PREFERRED, KUEUE_REQUIRED, Domains, Pin
from yuniplace.runtime.store import PodStore

NOW = 1_800_000_000.0
NS = "team"
Pod = dict[str, Any]


def at(offset_s: float) -> str:
    return p.format_time(NOW + offset_s)


# -- what a user writes: annotations, free text ---------------------------------------------------------

QUANTITIES = ["1", "0", "500m", "2Gi", "0.5", "1e3", "-1", "1Ei", "abc", "", "9223372036854775807", "1.5Gi"]
quantity = st.one_of(
    st.sampled_from(QUANTITIES), st.integers(-2, 10**19), st.floats(allow_nan=False), st.none(), st.booleans()
)
resource_name = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "vcore", "CPU", "bad name", ""])
group_name = st.sampled_from(["driver", "exec", "workers", "Bad_Name", "", "x" * 64])
min_member = st.one_of(st.integers(-2, 6), st.sampled_from([1000, 1001, 10**20, "2", 1.5, True, None]))
label_key = st.sampled_from(["zone", "rack", "kubernetes.io/hostname", "bad key!", ""])
short_text = st.text(max_size=8)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | short_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_text, inner, max_size=3),
    max_leaves=6,
)
toleration = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["gpu", "", "x/y"]),
        "operator": st.sampled_from(["Exists", "Equal", "Bogus"]),
        "value": short_text,
        "effect": st.sampled_from(["NoSchedule", "NoExecute", "", "Whatever"]),
        "tolerationSeconds": st.one_of(st.integers(-1, 100), short_text),
    },
)
requirement = st.fixed_dictionaries(
    {
        "key": label_key,
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]),
    },
    optional={"values": st.lists(st.sampled_from(["a", "b", "1", "x y", ""]), max_size=3)},
)
affinity = st.one_of(
    json_value,
    st.builds(
        lambda terms: {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        },
        st.lists(st.fixed_dictionaries({"matchExpressions": st.lists(requirement, max_size=2)}), max_size=2),
    ),
)
task_group = st.fixed_dictionaries(
    {"name": group_name, "minMember": min_member, "minResource": st.dictionaries(resource_name, quantity, max_size=3)},
    optional={
        "nodeSelector": st.one_of(st.dictionaries(label_key, st.sampled_from(["a", "b", ""]), max_size=2), json_value),
        "tolerations": st.one_of(st.lists(toleration, max_size=2), json_value),
        "affinity": affinity,
        "topologySpreadConstraints": st.one_of(st.lists(json_value, max_size=2), json_value),
        "labels": json_value,
        "annotations": json_value,
        keys.TOPOLOGY: st.sampled_from(["required=zone", "preferred=rack", "required=zone preferred=rack", "bogus"]),
    },
)
# Most gangs are well written (so that admission and planning see them), with hostile keys beside.
sound_group = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["driver", "exec", "workers"]),
        "minMember": st.integers(1, 4),
        "minResource": st.fixed_dictionaries(
            {"cpu": st.sampled_from(["1", "500m", "2"])}, optional={"memory": st.sampled_from(["1Gi", "512Mi"])}
        ),
    },
    optional={
        "nodeSelector": st.dictionaries(st.sampled_from(["zone", "pool"]), st.sampled_from(["a", "b"]), max_size=1),
        "tolerations": st.lists(toleration, max_size=1),
        "affinity": affinity,
        keys.TOPOLOGY: st.sampled_from(["required=zone", "preferred=rack", "required=zone preferred=rack"]),
    },
)
sound_groups = st.lists(sound_group, min_size=1, max_size=3, unique_by=lambda g: g["name"]).map(json.dumps)
task_groups = st.one_of(
    sound_groups,
    sound_groups,
    sound_groups,
    st.lists(st.one_of(task_group, json_value), min_size=1, max_size=3).map(json.dumps),
    st.sampled_from(["", "[", "[]", "{}", "null", "[1]"]),
)
policy = st.one_of(
    st.builds(
        "placeholderTimeoutInSeconds={} gangSchedulingStyle={}".format,
        st.sampled_from(["1", "60", "900"]),
        st.sampled_from(["Soft", "Hard"]),
    ),
    st.builds(
        "placeholderTimeoutInSeconds={} gangSchedulingStyle={}".format,
        st.sampled_from(["1", "60", "0", "-5", "x", "99999999999999999999"]),
        st.sampled_from(["Soft", "Hard", "hard", "Firm", ""]),
    ),
)
DOMAINS = [
    Domains(gang=(Pin("zone", ("a",), True),)).text(),
    Domains(gang=(Pin("zone", ("b",), True), Pin("rack", ("a", "b"), False))).text(),
    Domains(groups=(("exec", (Pin("rack", ("a",), True),)),)).text(),
]
time_value = st.one_of(st.sampled_from([-3600.0, -60.0, 0.0, 60.0]).map(at), st.sampled_from(["garbage", "", "0"]))
record_values: dict[str, st.SearchStrategy[str]] = {
    keys.STATE: st.sampled_from([*(s.value for s in AppState), "Bogus"]),
    keys.RESERVATION_STARTED: time_value,
    keys.FIRST_ALLOCATED: time_value,
    keys.QUEUED_SINCE: time_value,
    keys.RETRY_AFTER: time_value,
    keys.DEGRADED_SINCE: time_value,
    keys.DEGRADED_REPORTED: st.sampled_from(["true", "false", "x"]),
    keys.ATTEMPTS: st.sampled_from(["1", "3", "-1", "x", "99999999999999999999"]),
    keys.GANG_MODE: st.sampled_from(["Strict", "NonStrict", "strict", "Bogus"]),
    keys.GANG_GROUP: st.one_of(
        st.lists(st.sampled_from([f"{NS}/a", f"{NS}/b", "other/c", "bad", ""]), max_size=3).map(json.dumps),
        st.sampled_from(["[", "{}", "null"]),
    ),
    keys.ON_MEMBER_LOST: st.sampled_from(["none", "restart", "release", "bogus"]),
    keys.RESTART_LIMIT: st.sampled_from(["0", "3", "-1", "x"]),
    keys.RECOVERY_TIMEOUT: st.sampled_from(["0", "30", "-1", "x"]),
    keys.READY_TIMEOUT: st.sampled_from(["0", "30", "-1", "x"]),
    keys.TOPOLOGY: st.sampled_from(["required=zone", "preferred=rack", "required=zone preferred=rack", "bogus", ""]),
    keys.TOPOLOGY_DOMAIN: st.sampled_from(
        [
            *DOMAINS,
            '{"gang":[{"key":"zone","values":[],"required":true}]}',
            '{"gang":[{"key":"zone","values":["a","b"],"required":true}]}',
            '{"groups":{"nowhere":[{"key":"rack","values":["b"],"required":false}]}}',
            '{"gang":[{"key":"bad key!","values":["a"],"required":"yes"}]}',
            "bogus",
            "",
        ]
    ),
    keys.BORROWED_FROM: st.sampled_from(["root.a", "root.nowhere", ""]),
    keys.SCALE_UP: st.sampled_from(["pool-a", "", ","]),
    keys.SWAP_PLACEHOLDER: st.sampled_from(["tg-a-exec-0", ""]),
    keys.SEAT: st.sampled_from(["n0", "gone", ""]),
    KUEUE_REQUIRED: st.sampled_from(["zone", "bad key!", ""]),
    KUEUE_PREFERRED: st.sampled_from(["rack", ""]),
}
valid_time = st.sampled_from([-3600.0, -600.0, -60.0, 0.0, 60.0]).map(at)
plausible_record = st.fixed_dictionaries(
    {keys.STATE: st.sampled_from([s.value for s in AppState])},
    optional={
        keys.RESERVATION_STARTED: valid_time,
        keys.FIRST_ALLOCATED: valid_time,
        keys.QUEUED_SINCE: valid_time,
        keys.RETRY_AFTER: valid_time,
        keys.ATTEMPTS: st.sampled_from(["1", "3"]),
        keys.DEGRADED_SINCE: valid_time,
        keys.DEGRADED_REPORTED: st.just("true"),
        keys.TOPOLOGY_DOMAIN: st.sampled_from(DOMAINS),
        keys.BORROWED_FROM: st.sampled_from(["root.a", "root.b"]),
        keys.ON_MEMBER_LOST: st.sampled_from(["none", "restart", "release"]),
        keys.RESTART_LIMIT: st.sampled_from(["0", "3"]),
        keys.SCALE_UP: st.just("pool-a"),
        keys.GANG_GROUP: st.sampled_from([f'["{NS}/a", "{NS}/b"]', "[]"]),
    },
)
# No record (a gang not yet seen), one yuniplace could have written, or one a user made up.
record = st.one_of(st.just({}), plausible_record, plausible_record, st.fixed_dictionaries({}, optional=record_values))


# -- what the API shows: pods, nodes ---------------------------------------------------------------------

requests = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "example.com/gpu", "deviceclass.resource.kubernetes.io/gpu"]),
    st.sampled_from(["1", "500m", "0", "1Gi", "3"]),
    max_size=3,
)


# -- DRA: device classes, slices, claims and templates, sound or not ------------------------------------

DRIVER = "gpu.example.com"
DEVICE_CLASSES = [
    builders.device_class("gpu", DRIVER),
    builders.device_class("a100", DRIVER, selectors=[f'device.attributes["{DRIVER}"].model == "a100"']),
    builders.device_class(
        "fast", DRIVER, selectors=[f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("8Gi"))']
    ),
    builders.device_class("unknown", DRIVER, selectors=['ip("1.2.3.4").family() == 4']),
    builders.device_class("strict", DRIVER, selectors=[f'device.attributes["{DRIVER}"].missing == 1']),
    builders.device_class("ext", DRIVER, extended_resource="example.com/gpu"),
]
REQUESTS = [
    builders.device_request("gpu", 1),
    builders.device_request("a100", 2),
    builders.device_request("fast", 1, selectors=[f'device.attributes["{DRIVER}"].model.startsWith("a")']),
    builders.device_request("gpu", mode="All"),
    builders.device_request("unknown", 1),
    builders.device_request("strict", 1),
    builders.device_request("nosuch", 1),
    {"name": "alt", "firstAvailable": [{"name": "a", "deviceClassName": "gpu", "count": 2}]},
    {"name": "junk", "exactly": {"deviceClassName": "gpu", "count": "two"}},
    {"name": "bare"},
]
device = st.fixed_dictionaries(
    {"name": st.sampled_from(["g0", "g1", "g2"])},
    optional={
        "attributes": st.fixed_dictionaries(
            {}, optional={"model": st.sampled_from([{"string": "a100"}, {"string": "h100"}, {"int": 3}, {}])}
        ),
        "capacity": st.fixed_dictionaries(
            {}, optional={"memory": st.sampled_from([{"value": "16Gi"}, {"value": "x"}])}
        ),
    },
)


@st.composite
def dra_objects(draw: st.DrawFn) -> dict[str, list[Pod]]:
    """DeviceClasses, each node's ResourceSlices, the templates and a claim members may share."""
    slices = []
    for index, node in enumerate(draw(st.lists(st.sampled_from(["n0", "n1", "gone"]), max_size=3))):
        published = builders.resource_slice(
            f"s{index}", node, DRIVER, [], pool=draw(st.sampled_from(["p0", node])), generation=draw(st.integers(0, 2))
        )
        published["spec"]["devices"] = draw(st.lists(device, max_size=3))
        if draw(st.integers(0, 5)) == 0:
            del published["spec"]["nodeName"]
            published["spec"]["allNodes"] = True
        slices.append(published)
    templates = []
    for name in draw(st.lists(st.sampled_from(["t0", "t1", "t2"]), max_size=3, unique=True)):
        template = builders.claim_template(name, *draw(st.lists(st.sampled_from(REQUESTS), min_size=1, max_size=2)))
        template["metadata"]["namespace"] = NS
        templates.append(template)
    claims = []
    if draw(st.booleans()):
        shared = builders.resource_claim("shared", draw(st.sampled_from(REQUESTS)))
        shared["metadata"]["namespace"] = NS
        if draw(st.booleans()):
            results = [{"request": "devices", "driver": DRIVER, "pool": "n0", "device": "g0"}]
            shared["status"] = {"allocation": {"devices": {"results": results}}}
        claims.append(shared)
    classes = draw(st.lists(st.sampled_from(DEVICE_CLASSES), max_size=4, unique_by=lambda c: c["metadata"]["name"]))
    return {"classes": classes, "slices": slices, "templates": templates, "claims": claims}


@st.composite
def with_claims(draw: st.DrawFn, pod: Pod) -> Pod:
    """The pod using claims of templates (made for it, or not yet) and the shared claim, or none."""
    templates = draw(st.lists(st.sampled_from(["t0", "t1", "t2", "missing"]), max_size=2))
    shared = ["shared"] if draw(st.booleans()) else []
    if not templates and not shared:
        return pod
    builders.using_claims(pod, templates=templates, claims=shared)
    if draw(st.booleans()):
        made = [{"name": f"t{i}", "resourceClaimName": f"{p.name(pod)}-t{i}"} for i in range(len(templates))]
        pod.setdefault("status", {})["resourceClaimStatuses"] = made
    return pod


koordinator = st.fixed_dictionaries(
    {koordinator_dialect.NAME: st.just("k"), koordinator_dialect.MIN_AVAILABLE: st.sampled_from(["1", "3", "x", "-1"])},
    optional={
        koordinator_dialect.WAITING_TIME: st.sampled_from(["30s", "10m", "x", "-1s", ""]),
        koordinator_dialect.MODE: st.sampled_from(["Strict", "NonStrict", "bogus"]),
        koordinator_dialect.GROUPS: st.sampled_from(['["team/k"]', "[", "[]", '["other/k"]']),
    },
)


@st.composite
def member(draw: st.DrawFn, app: str, index: int, originator: bool, dialect: str = "yunikorn") -> Pod:
    """A pod of application `app` written in `dialect`: YuniKorn's originator carries the task groups, and
    any originator a record."""
    notes: dict[str, str] = {}
    labels: dict[str, str] = {}
    if dialect == "coscheduling":
        labels = {
            coscheduling_dialect.NAME: app,
            coscheduling_dialect.MIN_AVAILABLE: draw(st.sampled_from(["1", "3", "x"])),
        }
        notes.update(draw(record) if originator else {})
    elif dialect == "koordinator":
        notes.update(draw(koordinator))
        notes.update(draw(record) if originator else {})
    elif draw(st.booleans()) or originator:
        notes[keys.TASK_GROUP_NAME] = draw(st.sampled_from(["driver", "exec", "workers", "workers", "Bad_Name"]))
    if originator and dialect == "yunikorn":
        notes[keys.TASK_GROUPS] = draw(task_groups)
        notes.update(draw(record))
        if draw(st.booleans()):
            notes[keys.SCHEDULING_POLICY_PARAMETERS] = draw(policy)
    node = draw(st.sampled_from([None, None, "n0", "n1", "gone"]))
    phase = draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"] if node else ["Pending", "Failed"]))
    pod = builders.member(
        f"{app}-{index}",
        app=app,
        group=None,
        labels=labels,
        annotations=notes,
        namespace=NS,
        uid=f"uid-{app}-{index}",
        rv="1",
        created=at(-600 + index),
        requests=draw(requests),
        node=node,
        gates=[keys.GATE] if not node and draw(st.booleans()) else [],
        phase=phase,
        priority=draw(st.integers(-10, 10)),
    )
    if draw(st.booleans()):
        pod["metadata"]["labels"][keys.YUNIKORN_QUEUE] = draw(st.sampled_from(["root.a", "root.b", "root.none", "a"]))
    if draw(st.integers(0, 9)) == 0:
        pod["metadata"]["deletionTimestamp"] = at(-1)
    if node and phase == "Running":
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at(-300)}]
    return draw(with_claims(pod)) if draw(st.booleans()) else pod


@st.composite
def placeholders(draw: st.DrawFn, app: str, originator: Pod) -> list[Pod]:
    """Some of the placeholders yuniplace would have made for the gang `originator` describes (none for
    one it cannot read), each pending, bound, ended or being deleted."""
    try:
        spec = read_gang(originator)
    except InvalidGang:
        return []
    made = []
    for group in spec.groups:
        for index in range(draw(st.integers(0, min(group.min_member, 3)))):
            pod = placeholder_pod(app_id=app, group=group, index=index, originator=originator)
            pod["metadata"].update(uid=f"uid-{p.name(pod)}", resourceVersion="1", creationTimestamp=at(-500))
            node = draw(st.sampled_from([None, "n0", "n1", "gone"]))
            pod["status"] = {"phase": draw(st.sampled_from(["Running", "Failed"])) if node else "Pending"}
            if node:
                pod["spec"]["nodeName"] = node
                pod["status"]["conditions"] = [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": at(-400)}
                ]
            if draw(st.integers(0, 9)) == 0:
                pod["metadata"]["deletionTimestamp"] = at(-1)
            made.append(pod)
    return made


@st.composite
def cluster(draw: st.DrawFn) -> tuple[list[Pod], list[Pod], str | None, dict[str, list[Pod]]]:
    """Two applications' pods, two nodes, a queues.yaml (None: no queues), and the DRA objects."""
    pods: list[Pod] = []
    for app in ("a", "b"):
        count = draw(st.integers(1, 4))
        dialect = "yunikorn" if app == "a" else draw(st.sampled_from(["yunikorn", "coscheduling", "koordinator"]))
        members = [draw(member(app, index, index == 0, dialect)) for index in range(count)]
        pods += members + draw(placeholders(app, members[0]))
    nodes = [
        builders.node(
            name,
            draw(st.sampled_from(["0", "1", "4", "64"])),
            memory=draw(st.sampled_from(["0", "1Gi", "64Gi"])),
            pods=draw(st.sampled_from(["0", "110"])),
            labels=draw(st.dictionaries(st.sampled_from(["zone", "rack", "pool"]), st.sampled_from(["a", "b"]))),
            unschedulable=draw(st.booleans()),
        )
        for name in ("n0", "n1")
    ]
    queue = st.builds(
        "- name: {}\n  resources:\n    max: {{vcore: {}, memory: {}}}\n    guaranteed: {{vcore: {}}}{}".format,
        st.sampled_from(["a", "b"]),
        st.sampled_from(["2", "4", "1000", "0", "x"]),
        st.sampled_from(["64Gi", "1Gi", "0", "bad"]),
        st.sampled_from(["0", "1", "2"]),
        st.sampled_from(
            [
                "",
                "\n  properties:\n    preemption.policy: fence",
                "\n  properties:\n    application.sort.policy: fair",
                "\n  properties:\n    application.sort.priority: disabled",
            ]
        ),
    )
    queues = draw(st.none() | st.lists(queue, max_size=2, unique_by=lambda q: q.split("\n")[0]))
    return pods, nodes, None if queues is None else builders.queues_yaml(*queues), draw(dra_objects())


def every_step(pods: list[Pod], nodes: list[Pod], queues: str | None, dra: dict[str, list[Pod]] | None = None) -> None:
    """Read each application, decide admission once over the cluster (its DRA devices counted), and plan
    each: nothing raises, and admission meets no fault of its own."""
    store = PodStore(clock=lambda: NOW)
    store.replace(pods)
    for key in store.keys():  # noqa: SIM118 - a store, not a dict
        store.application(key, None, Limits())  # parse: raises nothing, input problems included
    source = QueueSource()
    if queues is not None:
        source.configmap_changed({"metadata": {"name": "queues", "namespace": NS}, "data": {"queues.yaml": queues}})
    admission = Admission(store, Limits(), lambda _key: None, source, lambda _key: None, AdmissionRules(), lambda: NOW)
    admission.room.nodes_listed(nodes)
    admission.room.pods_listed(pods)
    devices = admission.devices
    devices.served = dra is not None
    devices.classes_listed((dra or {}).get("classes", []))
    devices.slices_listed((dra or {}).get("slices", []))
    devices.templates_listed((dra or {}).get("templates", []))
    devices.claims_listed((dra or {}).get("claims", []))
    with (
        mock.patch.object(logging.getLogger("yuniplace.admission.snapshot"), "exception", raised),
        mock.patch.object(logging.getLogger("yuniplace.admission.decision"), "exception", raised),
    ):
        admission.decide_now()  # snapshot, then decision
    for key in store.keys():  # noqa: SIM118 - a store, not a dict
        app = store.application(key, None, Limits())
        attempt = "" if app.originator is None else p.uid(app.originator)
        standing = admission.standing(key, pending=app.state == AppState.PENDING, attempt=attempt)
        assert not isinstance(standing.ticket, Faulted), f"admission failed on {key}: {standing.ticket}"
        around = Surroundings(ticket=standing.ticket, pool=standing.pool, queue=standing.queue)
        for now in (NOW, NOW + 3600):
            make_plan(app, now, Settings(), around)  # plan


# -- what the search found, kept ------------------------------------------------------------------------

NODES = [builders.node(name, "0", memory="0", pods="0") for name in ("n0", "n1")]


def found_pod(name: str, *, labels: dict[str, str], annotations: dict[str, str], **fields: Any) -> Pod:
    app = name.rpartition("-")[0]
    return builders.pod(
        name,
        namespace=NS,
        uid=f"uid-{name}",
        rv="1",
        created=at(-600),
        labels={keys.APP_ID: app, **labels},
        annotations=annotations,
        gates=[],
        phase="Pending",
        **fields,
    )


# A Coscheduling gang of 3 whose record says it runs, though no member is bound, past its timeout: the
# running phase found members missing and gave its reservation back, a move the table has not from
# Running (an AssertionError: the gang would have been held as if yuniplace had failed).
RUNNING_BEFORE_IT_STARTED = (
    [
        found_pod(
            "b-0",
            labels={coscheduling_dialect.NAME: "b", coscheduling_dialect.MIN_AVAILABLE: "3"},
            annotations={keys.STATE: "Running", keys.RESERVATION_STARTED: at(-3600)},
            requests={"cpu": "1"},
        )
    ],
    NODES,
    None,
)


# A gang whose record says it runs, none of its members seated, one of its placeholders left: the running
# phase found its placeholders short of its groups and went back to reserving, a move the table has not
# from Running.
SOUND = [builders.task_group("driver", 1, {"cpu": "1"}), builders.task_group("workers", 1, {"cpu": "1"})]
RUNNING_WITH_A_PLACEHOLDER_LEFT = (
    [
        originator := found_pod(
            "a-0",
            labels={},
            annotations={
                keys.TASK_GROUP_NAME: "driver",
                keys.TASK_GROUPS: builders.task_groups(*SOUND),
                keys.STATE: "Running",
            },
        ),
        {
            **(
                left := placeholder_pod(
                    app_id="a", group=read_gang(originator).groups[1], index=0, originator=originator
                )
            ),
            "metadata": {
                **left["metadata"],
                "uid": "uid-tg-a-0",
                "resourceVersion": "1",
                "creationTimestamp": at(-500),
            },
            "status": {"phase": "Pending"},
        },
    ],
    NODES,
    None,
)


# A gang of two sharing one claim, on nodes that could never hold it: admission asked whether only its
# devices were short, set them aside, and the shared claim's need, left asking nothing and taking no pod
# slot, made the room's count raise (an empty min()). Admission then held the gang for a fault of its own.
SHARED = builders.resource_claim("shared", builders.device_request("gpu", 1))
SHARED["metadata"]["namespace"] = NS
SHARED_CLAIM_NEVER_FITS = (
    [
        builders.using_claims(
            found_pod(
                f"a-{index}",
                labels={},
                annotations={
                    keys.TASK_GROUP_NAME: "workers",
                    keys.TASK_GROUPS: builders.task_groups(builders.task_group("workers", 2, {"cpu": "1"})),
                },
                requests={"cpu": "1"},
            ),
            claims=["shared"],
        )
        for index in range(2)
    ],
    NODES,
    None,
    {"classes": [DEVICE_CLASSES[0]], "slices": [], "templates": [], "claims": [SHARED]},
)


def raised(message: str, *args: Any, **_: Any) -> None:
    """Admission catches its faults, to hold a gang on them: here each is raised, for the search to see."""
    raise AssertionError(message % args)


@settings(settings.get_profile("internal-steps"))
@given(cluster())
@example(RUNNING_BEFORE_IT_STARTED)
@example(RUNNING_WITH_A_PLACEHOLDER_LEFT)
@example(SHARED_CLAIM_NEVER_FITS)
def test_no_input_makes_an_internal_step_raise(
    world: tuple[list[Pod], list[Pod], str | None] | tuple[list[Pod], list[Pod], str | None, dict[str, list[Pod]]],
) -> None:
    every_step(*world)
