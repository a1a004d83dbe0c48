"""Who created each gang pod and workload, recorded by the webhook in YuniKorn's annotation, and never
forged: AdmissionReview v1 requests as the apiserver sends them, with the requester it authenticated."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from tests import builders
from yuniplace.cli import build_parser
from yuniplace.gang import keys, userinfo
from yuniplace.gang.dialects import coscheduling, podgroup
from yuniplace.gang.userinfo import ANNOTATION, UserInfo
from yuniplace.webhook import identity
from yuniplace.webhook.admission import mutate, validate
from yuniplace.webhook.identity import Trust

GROUPS = builders.task_groups(builders.task_group("workers", 2, {"cpu": "1", "memory": "1Gi"}))
GANG = {keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"}
ALICE = ("alice", ["devs", "system:authenticated"])
BOB = ("bob", ["system:authenticated"])
JOB_CONTROLLER = (
    "system:serviceaccount:kube-system:job-controller",
    ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
)
DEPLOYMENT_CONTROLLER = ("system:serviceaccount:kube-system:deployment-controller", JOB_CONTROLLER[1])
SPARK_DRIVER = (
    "system:serviceaccount:spark:spark",
    ["system:serviceaccounts", "system:serviceaccounts:spark", "system:authenticated"],
)


def record(who: tuple[str, list[str]]) -> str:
    return userinfo.encode(*who)


def review(
    obj: dict[str, Any],
    who: tuple[str, list[str]] | None,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return builders.admission_review(obj, operation=operation, user=who, old=old)


def pod(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"kind": "Pod", **builders.pod(annotations={**GANG, **(annotations or {})}, **spec)}


def template(annotations: dict[str, str] | None = None, gang: bool = True, **spec: Any) -> dict[str, Any]:
    notes = {**(GANG if gang else {}), **(annotations or {})}
    return {"metadata": {"labels": {"app": "w"}, "annotations": notes}, "spec": {"containers": [{"name": "c"}], **spec}}


def workload(kind: str, pod_template: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": pod_template}
    if kind == "CronJob":
        spec = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": pod_template}}}
    return {"kind": kind, "metadata": {"name": "w", "namespace": "ns"}, "spec": spec}


def apply(document: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The object as the apiserver stores it after the webhook's JSON patch (add and replace)."""
    response = answer["response"]
    assert response["allowed"], response
    result = copy.deepcopy(document)
    for op in json.loads(base64.b64decode(response["patch"])) if "patch" in response else []:
        assert op["op"] in ("add", "replace"), op
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        target = result
        for part in parents:
            target = target[part]
        if last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]
    return result


def recorded(obj: dict[str, Any]) -> UserInfo | None:
    return userinfo.of_object(obj)


def template_of(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    return dict(spec["template"])


def refusal(answer: dict[str, Any]) -> str:
    response = answer["response"]
    assert response["allowed"] is False, response
    assert response["status"]["code"] == 403 and response["status"]["reason"] == "Forbidden"
    return str(response["status"]["message"])


def unchanged(answer: dict[str, Any]) -> bool:
    return bool(answer["response"]["allowed"]) and "patch" not in answer["response"]


def record_kept(answer: dict[str, Any]) -> bool:
    """Allowed, the pod's annotations untouched (its gate may be added)."""
    response = answer["response"]
    ops = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return bool(response["allowed"]) and all("annotations" not in op["path"] for op in ops)


# -- pods ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("annotations", [GANG, None], ids=["annotations", "labels only"])
def test_a_pod_a_user_creates_is_recorded_as_that_user(annotations: dict[str, str] | None) -> None:
    subject = pod()
    if annotations is None:  # a Coscheduling gang: labels, and no annotations at all
        subject["metadata"] = {
            "name": "p",
            "labels": {coscheduling.NAME: "mpi", coscheduling.MIN_AVAILABLE: "2"},
        }
        subject["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    stored = apply(subject, mutate(review(subject, ALICE)))
    assert recorded(stored) == UserInfo("alice", ("devs", "system:authenticated"))
    assert stored["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert validate(review(stored, ALICE, "UPDATE", old=stored))["response"]["allowed"]


def test_a_pod_the_job_controller_creates_keeps_its_templates_record() -> None:
    subject = pod({ANNOTATION: record(ALICE)})
    answer = mutate(review(subject, JOB_CONTROLLER))
    assert recorded(apply(subject, answer)) == UserInfo("alice", ("devs", "system:authenticated"))


def test_a_pod_a_controller_creates_without_a_record_is_recorded_as_the_controller() -> None:
    """A template that predates the webhook: the controller is who asked."""
    stored = apply(pod(), mutate(review(pod(), JOB_CONTROLLER)))
    assert recorded(stored) == UserInfo(JOB_CONTROLLER[0], tuple(JOB_CONTROLLER[1]))


@pytest.mark.parametrize(
    "forged",
    [
        record(BOB[:1] + (["admins"],)),  # bob, claiming a group he is not in
        record(ALICE),
        "alice",  # not JSON
        "x" * (1024 * 1024),  # huge
        "[" * 10_000,  # deep
        "",
    ],
)
def test_a_record_a_user_brings_is_refused(forged: str) -> None:
    message = refusal(mutate(review(pod({ANNOTATION: forged}), BOB)))
    assert ANNOTATION in message and "bob" in message and "pod p" in message
    assert len(message) < 1000  # the value is never echoed


def test_a_users_own_record_is_accepted_as_it_is() -> None:
    """A manifest exported with its creator's record can be created again by the same user."""
    assert record_kept(mutate(review(pod({ANNOTATION: record(ALICE)}), ALICE)))
    spaced = json.dumps({"user": "alice", "groups": ["devs", "system:authenticated"]}, indent=2)
    assert record_kept(mutate(review(pod({ANNOTATION: spaced}), ALICE)))


def test_spark_executors_are_recorded_as_the_drivers_service_account() -> None:
    """The driver's service account is no controller: its executors carry who asked, and a record copied
    from the driver (or made up by code running as it) is refused."""
    executor = pod()
    executor["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "driver", "uid": "d"}]
    assert recorded(apply(executor, mutate(review(executor, SPARK_DRIVER)))) == UserInfo(
        SPARK_DRIVER[0], tuple(SPARK_DRIVER[1])
    )
    executor["metadata"]["annotations"][ANNOTATION] = record(ALICE)
    assert "system:serviceaccount:spark:spark" in refusal(mutate(review(executor, SPARK_DRIVER)))


def test_trusted_external_users_and_groups_may_write_any_readable_record() -> None:
    trust = Trust.of(external_users=["^spark-operator$"], external_groups=["^submitters$"])
    for who in (("spark-operator", []), ("carol", ["submitters"])):
        assert record_kept(mutate(review(pod({ANNOTATION: record(ALICE)}), who), trust=trust)), who
        # Without one, the requester is recorded.
        assert recorded(apply(pod(), mutate(review(pod(), who), trust=trust))) == UserInfo(who[0], tuple(who[1]))
        # A record nobody could read is refused, trusted or not.
        assert "must be JSON" in refusal(mutate(review(pod({ANNOTATION: "alice"}), who), trust=trust))
    # Patterns are searched, as YuniKorn's are: anchored ones match only the whole name.
    assert "is not one" in refusal(
        mutate(review(pod({ANNOTATION: record(ALICE)}), ("my-spark-operator", [])), trust=trust)
    )


def test_controllers_are_not_trusted_when_told_not_to_be() -> None:
    trust = Trust.of(controllers=False)
    assert "is not one" in refusal(mutate(review(pod({ANNOTATION: record(ALICE)}), JOB_CONTROLLER), trust=trust))


def test_the_controller_manager_itself_is_a_controller() -> None:
    """kube-controller-manager without per-controller service accounts asks as itself."""
    manager = ("system:kube-controller-manager", ["system:authenticated"])
    assert record_kept(mutate(review(pod({ANNOTATION: record(ALICE)}), manager)))


def test_pods_it_does_not_handle_are_not_recorded() -> None:
    plain = pod()
    plain["metadata"]["annotations"] = {ANNOTATION: "anything"}
    placeholder = pod()
    placeholder["metadata"]["labels"] = {keys.PLACEHOLDER: "true"}
    for_yunikorn = pod({ANNOTATION: "YuniKorn's to judge"}, schedulerName="yunikorn")
    for subject in (plain, placeholder, for_yunikorn):
        assert unchanged(mutate(review(subject, BOB))), subject
    # Handed to the default scheduler, a pod for YuniKorn is ours, and recorded.
    stored = apply(
        pod(schedulerName="yunikorn"), mutate(review(pod(schedulerName="yunikorn"), BOB), rewrite_scheduler_name=True)
    )
    assert recorded(stored) == UserInfo("bob", ("system:authenticated",))


def test_a_review_that_names_no_requester_records_nothing_and_accepts_no_record() -> None:
    assert [op["path"] for op in json.loads(base64.b64decode(mutate(review(pod(), None))["response"]["patch"]))] == [
        "/spec/schedulingGates"
    ]
    assert "does not name" in refusal(mutate(review(pod({ANNOTATION: record(ALICE)}), None)))


@pytest.mark.parametrize(
    ("user_info", "expected"),
    [
        ({"username": "alice", "groups": "devs"}, UserInfo("alice")),
        ({"username": "alice", "groups": ["devs", 7, None]}, UserInfo("alice", ("devs",))),
        ({"username": "alice"}, UserInfo("alice")),
        ({"username": 7, "groups": ["devs"]}, None),
        ({"username": ""}, None),
        ("alice", None),
    ],
)
def test_the_requester_is_read_as_hostile_input(user_info: Any, expected: UserInfo | None) -> None:
    assert identity.requester({"userInfo": user_info}) == expected


def test_a_user_with_more_groups_than_a_record_holds_is_recorded_with_the_first_and_told() -> None:
    many = ("dana", [f"group-{i}" for i in range(200)] + ["g" * 300])
    answer = mutate(review(pod(), many))
    stored = apply(pod(), answer)
    who = recorded(stored)
    assert who is not None and who.user == "dana"
    assert who.groups == tuple(f"group-{i}" for i in range(userinfo.MAX_GROUPS))
    [warning] = [w for w in answer["response"]["warnings"] if ANNOTATION in w]
    assert f"{201 - userinfo.MAX_GROUPS} of the groups of dana" in warning
    # Long names fill the record's text before its group count: it still reads back.
    wide = ("erin", ["g" * 250 + str(i) for i in range(userinfo.MAX_GROUPS)])
    stored = apply(pod(), mutate(review(pod(), wide)))
    assert recorded(stored) is not None
    assert len(stored["metadata"]["annotations"][ANNOTATION]) <= userinfo.MAX_TEXT


def test_a_user_name_too_long_to_record_is_refused() -> None:
    assert "cannot be recorded" in refusal(mutate(review(pod(), ("u" * 300, []))))


# -- pod updates (the validating webhook) ---------------------------------------------------------------


def edited(value: str | None) -> dict[str, Any]:
    subject = pod({ANNOTATION: value} if value is not None else {})
    subject["spec"]["schedulingGates"] = [{"name": keys.GATE}]
    return subject


@pytest.mark.parametrize(
    "value", [record(BOB), "x" * 100_000, "not json", None], ids=["bob", "huge", "garbage", "removed"]
)
def test_a_user_may_not_change_or_remove_a_pods_record(value: str | None) -> None:
    answer = validate(review(edited(value), BOB, "UPDATE", old=edited(record(ALICE))))
    assert "may not be changed or removed by bob" in refusal(answer)


def test_a_user_may_not_add_a_record_to_a_pod_that_has_none() -> None:
    assert "bob" in refusal(validate(review(edited(record(ALICE)), BOB, "UPDATE", old=edited(None))))


def test_other_edits_of_a_recorded_pod_pass() -> None:
    new = edited(record(ALICE))
    new["metadata"]["labels"] = {"team": "a"}
    assert validate(review(new, BOB, "UPDATE", old=edited(record(ALICE))))["response"]["allowed"]
    # A record that predates the webhook, unreadable, is left as it was by unrelated edits too.
    assert validate(review(edited("legacy"), BOB, "UPDATE", old=edited("legacy")))["response"]["allowed"]


def test_trusted_requesters_may_change_a_pods_record() -> None:
    trust = Trust.of(external_users=["^admin$"])
    update = review(edited(record(BOB)), ("admin", []), "UPDATE", old=edited(record(ALICE)))
    assert validate(update, trust=trust)["response"]["allowed"]


def test_a_pod_that_becomes_a_gang_pod_has_its_record_judged_as_at_creation() -> None:
    """Its record was never seen by the webhook: one written while it was no gang pod is a forgery."""
    before = edited(record(ALICE))
    before["metadata"]["annotations"] = {ANNOTATION: record(ALICE)}
    assert "is not one" in refusal(validate(review(edited(record(ALICE)), BOB, "UPDATE", old=before)))
    assert validate(review(edited(record(BOB)), BOB, "UPDATE", old=before))["response"]["allowed"]


# -- workloads ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"])
def test_a_gang_workload_records_its_creator_on_its_pod_template(kind: str) -> None:
    created = workload(kind, template())
    stored = apply(created, mutate(review(created, ALICE)))
    assert recorded(template_of(stored)) == UserInfo("alice", ("devs", "system:authenticated"))
    assert stored["metadata"] == created["metadata"]  # the workload's own annotations are not the record's place


def test_a_template_without_annotations_gets_them() -> None:
    gang = template()
    gang["metadata"] = {"labels": {podgroup.LABEL: "pg"}}
    created = workload("Job", gang)
    stored = apply(created, mutate(review(created, ALICE)))
    assert recorded(template_of(stored)) == UserInfo("alice", ("devs", "system:authenticated"))


def test_a_job_from_a_cron_job_keeps_its_record() -> None:
    created = workload("Job", template({ANNOTATION: record(ALICE)}))
    cron_job_controller = ("system:serviceaccount:kube-system:cronjob-controller", JOB_CONTROLLER[1])
    assert unchanged(mutate(review(created, cron_job_controller)))


def test_a_replica_set_a_deployment_makes_is_left_exactly_as_its_deployment_says() -> None:
    """Anything added would make the Deployment controller create another, endlessly."""
    assert unchanged(mutate(review(workload("ReplicaSet", template()), DEPLOYMENT_CONTROLLER)))
    recorded_template = template({ANNOTATION: record(ALICE)})
    assert unchanged(mutate(review(workload("ReplicaSet", recorded_template), DEPLOYMENT_CONTROLLER)))


def test_a_record_a_user_brings_on_a_workload_is_refused() -> None:
    created = workload("Deployment", template({ANNOTATION: record(ALICE)}))
    assert "Deployment w: its pod template" in refusal(mutate(review(created, BOB)))


def test_workloads_it_does_not_handle_are_untouched() -> None:
    assert unchanged(mutate(review(workload("Job", template(gang=False)), ALICE)))
    assert unchanged(mutate(review(workload("Job", template({ANNOTATION: "any"}, gang=False)), BOB)))
    yunikorns = workload("Job", template(schedulerName="yunikorn"))
    assert unchanged(mutate(review(yunikorns, ALICE)))
    assert recorded(template_of(apply(yunikorns, mutate(review(yunikorns, ALICE), rewrite_scheduler_name=True))))
    assert unchanged(mutate(review(workload("Job", template()), ALICE, "DELETE")))


@pytest.mark.parametrize("kind", ["Deployment", "CronJob"])
def test_a_workload_update_keeps_its_record(kind: str) -> None:
    old = workload(kind, template({ANNOTATION: record(ALICE)}))

    def update(value: str | None, who: tuple[str, list[str]] = BOB) -> dict[str, Any]:
        new = workload(kind, template({ANNOTATION: value} if value is not None else {}, image="v2"))
        return mutate(review(new, who, "UPDATE", old=old))

    assert unchanged(update(record(ALICE)))
    # Removed (server-side apply of the original manifest does it): put back as it was.
    restored = apply(workload(kind, template(image="v2")), update(None))
    assert recorded(template_of(restored)) == UserInfo("alice", ("devs", "system:authenticated"))
    for value in (record(BOB), "garbage", "x" * 100_000):
        assert "may not be changed or removed by bob" in refusal(update(value))
    # Not even to the requester's own record: it names who created the workload.
    assert "bob" in refusal(update(record(BOB)))


def test_a_workload_update_may_not_add_a_record_its_creator_did_not_get() -> None:
    old = workload("Deployment", template())
    new = workload("Deployment", template({ANNOTATION: record(ALICE)}))
    assert "bob" in refusal(mutate(review(new, BOB, "UPDATE", old=old)))
    # Without one, it stays without one: the record names the creator, and this is not the creation.
    assert unchanged(mutate(review(workload("Deployment", template(image="v2")), BOB, "UPDATE", old=old)))


def test_a_workload_that_becomes_a_gang_workload_is_recorded_as_at_creation() -> None:
    old = workload("Deployment", template(gang=False))
    stored = apply(
        workload("Deployment", template()), mutate(review(workload("Deployment", template()), BOB, "UPDATE", old=old))
    )
    assert recorded(template_of(stored)) == UserInfo("bob", ("system:authenticated",))
    # A record slipped in while it was none is a forgery now.
    forged_old = workload("Deployment", template({ANNOTATION: record(ALICE)}, gang=False))
    forged_new = workload("Deployment", template({ANNOTATION: record(ALICE)}))
    assert "bob" in refusal(mutate(review(forged_new, BOB, "UPDATE", old=forged_old)))


def test_a_trusted_requester_may_update_a_workloads_record() -> None:
    trust = Trust.of(external_groups=["^system:masters$"])
    old = workload("Job", template({ANNOTATION: record(ALICE)}))
    new = workload("Job", template({ANNOTATION: record(BOB)}))
    assert unchanged(mutate(review(new, ("root", ["system:masters"]), "UPDATE", old=old), trust=trust))


# -- configuration -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["", "(unclosed"])
def test_patterns_that_cannot_be_used_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError):
        Trust.of(external_users=[pattern])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["webhook", "--webhook-address=:0", f"--external-users={pattern}"])


def test_names_longer_than_a_record_holds_are_never_trusted() -> None:
    trust = Trust.of(external_users=["^admin"])
    assert trust.trusts(UserInfo("admin"))
    assert not trust.trusts(UserInfo("admin" + "x" * userinfo.MAX_NAME))


def test_the_flags_give_the_trust() -> None:
    args = build_parser().parse_args(
        [
            "webhook",
            "--webhook-address=:0",
            "--no-trust-controllers",
            "--system-users=^system:serviceaccount:controllers:",
            "--external-users=^carol$",
            "--external-users=^dave$",
            "--external-groups=^submitters$",
        ]
    )
    assert args.trust_controllers is False
    assert args.system_users == ["^system:serviceaccount:controllers:"]
    assert args.external_users == ["^carol$", "^dave$"] and args.external_groups == ["^submitters$"]
    defaults = build_parser().parse_args(["webhook", "--webhook-address=:0"])
    assert defaults.trust_controllers is True and defaults.system_users is None
