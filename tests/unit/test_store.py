"""The pod store: newest resourceVersion wins, deletions stick, only concerned pods are kept."""

from __future__ import annotations

from typing import Any

from tests import builders
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import volcano
from yuniplace.gang.dialects.registry import pod_group_dialect
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.store import PodStore

A = p.AppKey("ns", "app-a")
B = p.AppKey("ns", "app-b")


def make_pod(
    uid: str = "u1",
    rv: str | int | None = 1,
    *,
    app: str | None = "app-a",
    namespace: str = "ns",
    gated: bool = True,
    group: str | None = None,
    placeholder: bool = False,
    task_groups: bool = False,
    phase: str = "Pending",
) -> dict[str, Any]:
    """A pod of application `app` (or its placeholder), its managedFields those the store trims."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if placeholder:
        labels[keys.PLACEHOLDER] = "true"
        if app is not None:
            annotations[keys.PLACEHOLDER_APP] = app
    elif app is not None:
        labels[keys.APP_ID] = app
    annotations.update(builders.gang_annotations(group=group, task_groups="[]" if task_groups else None))
    made = builders.pod(
        f"pod-{uid}",
        namespace=namespace,
        uid=uid,
        rv=None if rv is None else str(rv),
        labels=labels,
        annotations=annotations,
        gates=[keys.GATE] if gated else [],
        phase=phase,
        containers=[{"name": "c", "image": "x"}],
    )
    made["metadata"]["managedFields"] = [{"manager": "x"}]
    return made


def version(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["resourceVersion"])


def test_upsert_stores_a_trimmed_copy_by_application() -> None:
    store = PodStore()
    assert store.upsert(make_pod()) == A
    (stored,) = store.app_pods(A)
    assert stored == p.trim(make_pod())
    assert "managedFields" not in stored["metadata"]
    assert store.keys() == [A]
    assert len(store) == 1


def test_newer_resource_version_wins() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=5))
    assert store.upsert(make_pod(rv=6, phase="Running")) == A
    (stored,) = store.app_pods(A)
    assert version(stored) == "6" and p.phase(stored) == "Running"


def test_older_resource_version_is_ignored() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=6, phase="Running"))
    assert store.upsert(make_pod(rv=5)) == A
    (stored,) = store.app_pods(A)
    assert version(stored) == "6" and p.phase(stored) == "Running"


def test_versions_compare_as_numbers_not_text() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=10))
    store.upsert(make_pod(rv=9))
    assert version(store.app_pods(A)[0]) == "10"


def test_an_older_event_cannot_move_a_pod_to_another_application() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=6, app="app-a"))
    store.upsert(make_pod(rv=5, app="app-b"))
    assert store.keys() == [A]


def test_a_deleted_pod_is_not_resurrected_by_a_late_event() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=5))
    assert store.delete(make_pod(rv=7)) == A
    assert store.app_pods(A) == []
    assert store.keys() == []
    assert store.upsert(make_pod(rv=6)) is None
    assert store.upsert(make_pod(rv=7)) is None
    assert store.upsert(make_pod(rv=5)) is None
    assert len(store) == 0


def test_a_deleted_pod_without_version_blocks_versionless_events() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=None))
    store.delete(make_pod(rv=None))
    assert store.upsert(make_pod(rv=None)) is None
    assert len(store) == 0


def test_a_new_pod_with_another_uid_is_not_blocked_by_a_deletion() -> None:
    store = PodStore()
    store.upsert(make_pod("u1", rv=5))
    store.delete(make_pod("u1", rv=7))
    assert store.upsert(make_pod("u2", rv=3)) == A
    assert [p.uid(pod) for pod in store.app_pods(A)] == ["u2"]


def test_delete_of_an_unknown_pod() -> None:
    store = PodStore()
    assert store.delete(make_pod()) is None
    assert store.upsert(make_pod(rv=1)) is None  # and the deletion still sticks


def test_unconcerned_pods_are_not_stored() -> None:
    store = PodStore()
    assert store.upsert(make_pod(gated=False)) is None  # an app id alone does not concern us
    assert store.upsert(make_pod("u2", app=None)) is None  # gated but of no application
    assert len(store) == 0
    assert store.keys() == []


def test_each_kind_of_concerned_pod_is_stored() -> None:
    store = PodStore()
    store.upsert(make_pod("gated"))
    store.upsert(make_pod("member", gated=False, group="exec"))
    store.upsert(make_pod("originator", gated=False, task_groups=True))
    store.upsert(make_pod("placeholder", gated=False, placeholder=True))
    assert sorted(p.uid(pod) for pod in store.app_pods(A)) == ["gated", "member", "originator", "placeholder"]
    assert [p.uid(pod) for pod in store.placeholders()] == ["placeholder"]


def test_a_pod_that_stops_concerning_us_is_dropped_and_its_app_reported() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=1))
    assert store.upsert(make_pod(rv=2, gated=False)) == A  # ungated by someone else: its app is reconciled
    assert store.app_pods(A) == []
    assert store.keys() == []
    assert store.upsert(make_pod(rv=3, gated=True)) == A  # not a deletion: it may come back


def test_a_pod_moving_between_applications() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=1, app="app-a"))
    store.upsert(make_pod("u2", rv=1, app="app-a"))
    assert store.upsert(make_pod(rv=2, app="app-b")) == B
    assert [p.uid(pod) for pod in store.app_pods(A)] == ["u2"]
    assert [p.uid(pod) for pod in store.app_pods(B)] == ["u1"]
    assert sorted(store.keys()) == [A, B]


def test_namespaces_separate_applications() -> None:
    store = PodStore()
    store.upsert(make_pod("u1", namespace="ns"))
    store.upsert(make_pod("u2", namespace="other"))
    assert sorted(store.keys()) == [p.AppKey("ns", "app-a"), p.AppKey("other", "app-a")]


def test_replace_returns_every_application_before_and_after() -> None:
    store = PodStore()
    store.upsert(make_pod("u1", app="app-a"))
    store.upsert(make_pod("u2", app="app-b"))
    touched = store.replace(
        [make_pod("u3", app="app-b"), make_pod("u4", app="app-c"), make_pod("u5", app="app-d", gated=False)]
    )
    assert touched == {A, B, p.AppKey("ns", "app-c")}
    assert sorted(store.keys()) == [B, p.AppKey("ns", "app-c")]
    assert [p.uid(pod) for pod in store.app_pods(B)] == ["u3"]
    assert store.app_pods(A) == []
    assert all("managedFields" not in pod["metadata"] for pod in store.app_pods(B))


def test_replace_is_the_whole_truth_including_deletions() -> None:
    store = PodStore()
    store.upsert(make_pod(rv=5))
    store.delete(make_pod(rv=6))
    assert store.replace([make_pod(rv=8)]) == {A}
    assert len(store) == 1
    assert store.replace([]) == {A}
    assert len(store) == 0
    assert store.replace([]) == set()


def test_non_numeric_resource_version_counts_as_zero() -> None:
    store = PodStore()
    store.upsert(make_pod(rv="abc"))
    assert store.upsert(make_pod(rv=1, phase="Running")) == A
    assert p.phase(store.app_pods(A)[0]) == "Running"
    store.upsert(make_pod(rv="xyz"))
    assert p.phase(store.app_pods(A)[0]) == "Running"


def test_the_store_holds_copies_not_the_callers_dicts() -> None:
    store = PodStore()
    pod = make_pod()
    store.upsert(pod)
    pod["status"]["phase"] = "Running"
    assert p.phase(store.app_pods(A)[0]) == "Pending"


# -- each application kept as it is read --------------------------------------------------------------


def member(uid: str, created: int, rv: int = 1, **fields: Any) -> dict[str, Any]:
    pod = make_pod(uid, rv, group="g", **fields)
    pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{created:02d}Z"
    return pod


def test_an_application_reads_the_same_as_its_pods_given_in_any_order() -> None:
    """Pods coming and changing in any order: the store's application is the one its pods make."""
    store = PodStore()
    pods = {uid: member(uid, created) for uid, created in (("c", 3), ("a", 1), ("b", 2), ("d", 3))}
    pods["o"] = member("o", 5, task_groups=True)
    pods["tg"] = member("tg", 0, placeholder=True)
    for pod in pods.values():
        store.upsert(pod)
    store.upsert(released := member("b", 2, rv=2, gated=False))
    pods["b"] = released
    store.delete(pods.pop("d"))
    read = store.application(A, None, Limits())
    expected = Application.of(A, list(pods.values()), None, Limits())
    assert [p.uid(m) for m in read.members] == [p.uid(m) for m in expected.members] == ["a", "b", "c", "o"]
    assert [p.uid(m) for m in read.placeholders] == ["tg"]
    assert [p.uid(m) for m in read.gated_members()] == [p.uid(m) for m in expected.gated_members()] == ["a", "c", "o"]
    assert read.originator is not None and p.uid(read.originator) == p.uid(expected.originator or {}) == "o"
    assert store.application(A, None, Limits()) is read  # nothing changed since: the same read


def test_the_member_carrying_the_state_stays_the_originator() -> None:
    store = PodStore()
    younger = member("y", 9, task_groups=True)
    younger["metadata"]["annotations"][keys.STATE] = "Reserving"
    store.upsert(younger)
    store.upsert(member("x", 1, task_groups=True))  # older, but the state is on the other
    originator = store.application(A, None, Limits()).originator
    assert originator is not None and p.uid(originator) == "y"


def test_the_pod_group_dialect_follows_the_applications_pods_as_they_come_and_go() -> None:
    """The store keeps the answer as pods change; it must match the registry's over the same pods."""

    def volcano_member(uid: str) -> dict[str, Any]:
        return builders.pod(
            f"tf-job-{uid}", namespace="ns", uid=uid, rv="1", annotations={volcano.GROUP_NAME: "tf-job"}
        )

    store = PodStore()
    key = p.AppKey("ns", "tf-job")
    plain = make_pod("u0", app="tf-job")  # a YuniKorn-style member first: its dialect has no PodGroups
    members = [plain, volcano_member("u1"), volcano_member("u2")]
    for pod_ in members:
        store.upsert(pod_)
    assert store.pod_group_dialect(key) is pod_group_dialect(members) is volcano.DIALECT
    store.delete(members[1])
    assert store.pod_group_dialect(key) is volcano.DIALECT
    store.delete(members[2])
    assert store.pod_group_dialect(key) is pod_group_dialect([plain]) is None
