"""Placeholders that hold DRA claims: a member whose pod uses ResourceClaims gets a placeholder naming its
own claims, is swapped into that placeholder and no other, with the claims handed over first; a
placeholder holding nothing makes way for one holding a member's claims before that member starts."""

from __future__ import annotations

from typing import Any

from tests import builders
from tests.planning import (
    GROUPS,
    NOW,
    driver,
    executor,
    materialize,
    ph_name,
    placeholder,
    plan_of,
)
from yuniplace.admission.tickets import Granted
from yuniplace.controller.lifecycle.holders import plan_holders
from yuniplace.gang import keys
from yuniplace.gang.placeholders import placeholder_pod
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import TaskGroup

Pod = dict[str, Any]
ONE = {"cpu": "1", "memory": "1Gi"}
GPUS = {**ONE, "deviceclass.resource.kubernetes.io/gpu": "2"}


def with_claims(pod: Pod, made: bool = True) -> Pod:
    """The member using a claim of template `two`, made for it (named in its status) when `made`."""
    builders.using_claims(pod, templates=["two"])
    if made:
        pod["status"]["resourceClaimStatuses"] = [{"name": "t0", "resourceClaimName": f"{pod['metadata']['name']}-t0"}]
    return pod


def holder(group: str, index: int, member: Pod, *, node: str | None = None) -> Pod:
    """A placeholder made to hold `member`'s claims, as the cluster shows it."""
    manifest = placeholder_pod(
        app_id="spark-1", group=TaskGroup(group, 2, ONE), index=index, originator=driver(), holding=member
    )
    return materialize(manifest, created=NOW - 50, node=node, scheduled_at=None if node is None else NOW - 40)


# -- which placeholder holds whose claims ---------------------------------------------------------------


def test_each_member_using_claims_gets_a_placeholder_holding_them_and_the_rest_hold_nothing() -> None:
    members = [with_claims(executor(0)), with_claims(executor(1))]
    holders = plan_holders({0: None, 1: None, 2: None}, members, 3)
    assert holders.create == {0: members[0], 1: members[1], 2: None}
    assert holders.delete == [] and not holders.claims_coming


def test_a_member_whose_claims_are_being_made_keeps_a_place_rather_than_a_plain_placeholder() -> None:
    holders = plan_holders({0: None, 1: None}, [with_claims(executor(0), made=False)], 2)
    assert holders.create == {1: None} and holders.claims_coming


def test_a_placeholder_holding_nothing_makes_way_for_a_member_that_came_and_one_whose_member_went_goes() -> None:
    came = with_claims(executor(0))
    plain = placeholder("exec", 0, node="n1")
    orphan = holder("exec", 1, with_claims(executor(9)), node="n2")
    holders = plan_holders({0: plain, 1: orphan}, [came], 2)
    assert holders.delete == [orphan, plain] and holders.create == {}


def test_a_placeholder_already_holding_its_members_claims_stays() -> None:
    member = with_claims(executor(0))
    held = holder("exec", 0, member, node="n1")
    holders = plan_holders({0: held, 1: None}, [member], 2)
    assert holders.delete == [] and holders.create == {1: None}


# -- plans ---------------------------------------------------------------------------------------------


def gang(*, state: AppState = AppState.PENDING, **driver_fields: Any) -> list[Pod]:
    groups = [GROUPS[0], {"name": "exec", "minMember": 2, "minResource": GPUS}]
    return [
        driver(task_groups=groups, state=state, **driver_fields),
        with_claims(executor(0)),
        with_claims(executor(1)),
    ]


def test_an_admitted_gang_makes_placeholders_holding_its_members_claims() -> None:
    plan = plan_of(gang(), ticket=Granted())
    made = {pod["metadata"]["name"]: pod for pod in plan.create}
    for index in (0, 1):
        spec = made[ph_name("exec", index)]["spec"]
        assert spec["resourceClaims"] == [{"name": "t0", "resourceClaimName": f"exec-{index}-t0"}]
        assert made[ph_name("exec", index)]["metadata"]["annotations"][keys.CLAIMS_OF] == f"uid-exec-{index}"
        # Devices are held through the claims, never asked as a resource of the placeholder's own.
        assert spec["containers"][0]["resources"]["requests"] == ONE
    assert "resourceClaims" not in made[ph_name("driver", 0)]["spec"]


def test_each_member_is_swapped_into_the_placeholder_holding_its_claims_which_are_handed_over() -> None:
    pods = gang(state=AppState.RESERVED, started=NOW - 60, first_allocated=NOW - 50)
    exec_0, exec_1 = pods[1], pods[2]
    placed = [
        placeholder("driver", 0, node="n0", min_member=1),
        holder("exec", 0, exec_1, node="n1"),  # made for exec-1, whatever its index
        holder("exec", 1, exec_0, node="n2"),
    ]
    plan = plan_of(pods + placed)
    swaps = {swap.member["metadata"]["name"]: swap for swap in plan.swaps}
    assert swaps["exec-0"].node == "n2" and swaps["exec-0"].claims == ("exec-0-t0",)
    assert swaps["exec-1"].node == "n1" and swaps["exec-1"].claims == ("exec-1-t0",)
    assert swaps["driver"].claims == ()


def test_a_reserved_gang_whose_member_came_with_claims_not_held_reserves_them_before_any_member_starts() -> None:
    pods = gang(state=AppState.RESERVED, started=NOW - 60, first_allocated=NOW - 50)
    placed = [
        placeholder("driver", 0, node="n0", min_member=1),
        placeholder("exec", 0, node="n1"),  # made before the executors existed: holds nothing
        holder("exec", 1, pods[2], node="n2"),
    ]
    plan = plan_of(pods + placed)
    assert plan.swaps == [] and plan.state == AppState.RESERVING
    assert [pod["metadata"]["name"] for pod in plan.delete] == [ph_name("exec", 0)]


def test_a_late_member_of_a_started_gang_waits_for_a_placeholder_holding_its_claims() -> None:
    running = driver(
        task_groups=[GROUPS[0], {"name": "exec", "minMember": 2, "minResource": GPUS}],
        state=AppState.RUNNING,
        started=NOW - 100,
        first_allocated=NOW - 90,
        gated=False,
        node="n0",
        phase="Running",
    )
    late = with_claims(executor(0))
    plain = [placeholder("exec", 0, node="n1"), placeholder("exec", 1, node="n2")]
    plan = plan_of([running, late, *plain])
    assert plan.swaps == [] and plan.ungate == []
    assert [pod["metadata"]["name"] for pod in plan.delete] == [ph_name("exec", 0)]
    # Once it is gone, one holding the late member's claims is made in its place.
    plan = plan_of([running, late, plain[1]])
    [made] = plan.create
    assert made["metadata"]["name"] == ph_name("exec", 0)
    assert made["metadata"]["annotations"][keys.CLAIMS_OF] == "uid-exec-0"
