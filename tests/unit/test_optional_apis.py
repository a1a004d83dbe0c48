"""The cluster's optional APIs followed as they come and go: discovery asked again, the feeds of an API
that appears started, those of one that goes stopped (only once it has stayed away), each change said
once; discovery that cannot be asked changes nothing. And what the controller records of them, as
`yuniplace status --apis` reads it back from its Lease."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any, cast

import pytest

from tests import builders
from yuniplace.controller.controller import Controller
from yuniplace.controller.nodepools import KARPENTER, KARPENTER_API
from yuniplace.controller.optionalapis import GONE_AFTER_S, ApiFollower, Change, OptionalApi, ServedApi
from yuniplace.controller.podgroups import NATIVE, pod_group_optional_api
from yuniplace.gang import keys
from yuniplace.gang.dialects import podgroup
from yuniplace.kube import KubeClient, NotFound, ServerError
from yuniplace.runtime.leader import LeaderElector
from yuniplace.tools import apistatus

PLUGIN = pod_group_optional_api(podgroup.DIALECT.pod_groups)
SCHEDULING = "/apis/scheduling.k8s.io"
WITHOUT_APIS = {f"{SCHEDULING}/v1": ["priorityclasses"]}


class Discovery:
    """API discovery of a cluster the test changes (`served`: group version -> resources), or that
    cannot be asked at all (`down`), or not about some group versions (`broken`)."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        self.served = served
        self.down = False
        self.broken: set[str] = set()

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        if self.down or path in self.broken:
            raise ServerError(503, "ServiceUnavailable", "the API server is restarting")
        documents = builders.discovery(self.served)
        if path not in documents:
            raise NotFound(404, "NotFound", f"{path} not found")
        return documents[path]


class Feed:
    """The watches of one API, as calls."""

    def __init__(self, api: OptionalApi) -> None:
        self.optional_api = api
        self.calls: list[tuple[str, Any]] = []

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        self.calls.append(("start", served))
        return [threading.Event()]

    def stop(self, *, forget: bool = True) -> None:
        self.calls.append(("stop", forget))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Following:
    """A follower of three APIs (Karpenter, scheduler-plugins PodGroups, the Workload API) over `cluster`,
    looked at by hand: what it announced and how often it said whoever waits must be decided again."""

    def __init__(self, cluster: Discovery) -> None:
        self.cluster = cluster
        self.clock = Clock()
        self.feeds = {api.key: Feed(api) for api in (KARPENTER, PLUGIN, NATIVE)}
        self.changes: list[Change] = []
        self.decided_again = 0
        self.follower = ApiFollower(
            cast(KubeClient, cluster),
            list(self.feeds.values()),
            on_change=self._changed,
            announce=self.changes.append,
            clock=self.clock,
        )

    def _changed(self) -> None:
        self.decided_again += 1

    def calls(self, key: str) -> list[tuple[str, Any]]:
        return self.feeds[key].calls


def karpenter(served: bool = True) -> dict[str, list[str]]:
    return {**WITHOUT_APIS, **({KARPENTER_API: ["nodepools", "nodeclaims", "nodepools/status"]} if served else {})}


def test_at_start_what_is_served_is_started_and_nothing_is_announced() -> None:
    following = Following(Discovery(karpenter()))
    synced = following.follower.look()
    assert len(synced) == 1
    read = ServedApi(KARPENTER_API, frozenset({"nodepools", "nodeclaims", "nodepools/status"}))
    assert following.calls("karpenter") == [("start", read)]
    assert following.calls("podgroups") == [] and following.calls("workload-api") == []
    assert following.changes == [] and following.decided_again == 0
    assert set(following.follower.read_now()) == {"karpenter"}


def test_an_api_that_appears_is_started_said_once_and_every_gang_is_decided_again() -> None:
    cluster = Discovery(WITHOUT_APIS)
    following = Following(cluster)
    following.follower.look()
    cluster.served = karpenter()
    following.follower.look()
    following.follower.look()  # nothing changed since: nothing more
    assert [call for call, _ in following.calls("karpenter")] == ["start"]
    [change] = following.changes
    assert not change.gone
    assert change.note == (
        "karpenter.sh/v1 is served: from now on, counting what Karpenter's NodePools can still make as room "
        "that can come"
    )
    assert following.decided_again == 1


def test_an_api_gone_is_stopped_once_it_has_stayed_away_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Discovery(karpenter())
    following = Following(cluster)
    following.follower.look()
    cluster.served = karpenter(served=False)
    following.follower.look()
    assert [call for call, _ in following.calls("karpenter")] == ["start"]  # not yet
    following.clock.now += GONE_AFTER_S
    with caplog.at_level(logging.WARNING):
        following.follower.look()
        following.follower.look()
    assert following.calls("karpenter")[1:] == [("stop", True)]
    [change] = following.changes
    assert change.gone
    assert change.note == "karpenter.sh/v1 is no longer served: admission counts only the nodes there are"
    assert [r.getMessage() for r in caplog.records] == [f"optional API: {change.note}"]
    assert following.follower.read_now() == {}


def test_an_api_missing_for_a_moment_is_no_api_gone() -> None:
    """An API server that has just restarted may list a CRD's group a moment late."""
    cluster = Discovery(karpenter())
    following = Following(cluster)
    following.follower.look()
    cluster.served = karpenter(served=False)
    following.follower.look()
    cluster.served = karpenter()
    following.clock.now += GONE_AFTER_S
    following.follower.look()
    cluster.served = karpenter(served=False)  # missing again: the wait starts anew
    following.clock.now += 1
    following.follower.look()
    assert [call for call, _ in following.calls("karpenter")] == ["start"]
    assert following.changes == []


def test_discovery_that_cannot_be_asked_changes_nothing() -> None:
    cluster = Discovery(karpenter())
    following = Following(cluster)
    following.follower.look()
    cluster.down = True
    for _ in range(3):
        following.clock.now += GONE_AFTER_S
        following.follower.look()
    cluster.down = False
    cluster.broken = {KARPENTER_API}  # the group listed, its resources unknown
    following.clock.now += GONE_AFTER_S
    following.follower.look()
    assert [call for call, _ in following.calls("karpenter")] == ["start"]
    assert following.changes == [] and set(following.follower.read_now()) == {"karpenter"}


def test_discovery_first_answering_late_is_the_state_of_things_not_a_change() -> None:
    """The API server unreachable as the controller starts: what it serves once it answers is read, and
    nothing is announced, as at any start."""
    cluster = Discovery(karpenter())
    cluster.down = True
    following = Following(cluster)
    assert following.follower.look() == []
    cluster.down = False
    assert len(following.follower.look()) == 1
    assert set(following.follower.read_now()) == {"karpenter"}
    assert following.changes == [] and following.decided_again == 0


def test_the_workload_api_served_in_a_newer_version_moves_to_it_keeping_what_was_read() -> None:
    """An upgrade that serves v1beta1 beside v1alpha3: the newer is read, the groups read so far kept
    until the new watch lists them (a gang must not find its group gone meanwhile)."""
    cluster = Discovery({**WITHOUT_APIS, f"{SCHEDULING}/v1alpha3": ["podgroups", "workloads"]})
    following = Following(cluster)
    following.follower.look()
    cluster.served[f"{SCHEDULING}/v1beta1"] = ["podgroups", "workloads", "podgroups/status"]
    following.follower.look()
    calls = following.calls("workload-api")
    assert [call for call, _ in calls] == ["start", "stop", "start"]
    assert calls[1] == ("stop", False) and calls[2][1].path == f"{SCHEDULING}/v1beta1"
    [change] = following.changes
    assert change.note.startswith("scheduling.k8s.io/v1beta1 is served (before: scheduling.k8s.io/v1alpha3)")


def test_a_crd_given_a_status_subresource_restarts_its_watches() -> None:
    cluster = Discovery({**WITHOUT_APIS, podgroup.API: ["podgroups"]})
    following = Following(cluster)
    following.follower.look()
    cluster.served[podgroup.API] = ["podgroups", "podgroups/status"]
    following.follower.look()
    calls = following.calls("podgroups")
    assert [call for call, _ in calls] == ["start", "stop", "start"]
    assert calls[2][1].resources == frozenset({"podgroups", "podgroups/status"})


def test_a_version_of_the_workload_api_yuniplace_does_not_read_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Discovery({**WITHOUT_APIS, f"{SCHEDULING}/v2": ["podgroups"]})
    following = Following(cluster)
    with caplog.at_level(logging.WARNING):
        following.follower.look()
        following.follower.look()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "scheduling.k8s.io/v2, a version yuniplace does not read" in said[0], said
    assert following.calls("workload-api") == []


def test_a_crd_of_a_group_read_makes_discovery_be_asked_at_once() -> None:
    following = Following(Discovery(WITHOUT_APIS))
    follower = following.follower
    follower._crd_changed("ADDED", {"metadata": {"name": "certificates.cert-manager.io"}})
    assert not follower._wake.is_set()
    follower._crd_changed("ADDED", {"metadata": {"name": "nodepools.karpenter.sh"}})
    assert follower._wake.is_set() and min(follower._looks) == following.clock.now


def test_the_record_says_what_is_read_and_since_when() -> None:
    following = Following(Discovery({**karpenter(), podgroup.API: ["podgroups", "podgroups/status"]}))
    following.follower.look()
    record = json.loads(following.follower.record())
    assert set(record) == {"karpenter", "podgroups"}
    assert record["podgroups"]["api"] == "scheduling.x-k8s.io/v1alpha1"
    assert record["karpenter"]["since"].endswith("Z")


def test_status_lists_every_optional_api_the_controller_follows() -> None:
    """`yuniplace status --apis` knows each API a controller with admission reads, and nothing else."""
    client = cast(KubeClient, Discovery(WITHOUT_APIS))
    controller = Controller(client, admission=True)
    try:
        followed = {feed.optional_api.key for feed in controller.apis._feeds}
    finally:
        controller.recorder.close()
    assert followed == {api.key for api in apistatus.KNOWN_APIS}


def test_status_shows_since_when_each_controller_reads_each_api() -> None:
    record = apistatus._record(
        {
            "metadata": {
                "namespace": "yuniplace-system",
                "name": "yp-yuniplace",
                "annotations": {
                    keys.OPTIONAL_APIS: json.dumps(
                        {"karpenter": {"api": "karpenter.sh/v1", "since": "2026-01-01T10:00:00Z"}}
                    )
                },
            },
            "spec": {"holderIdentity": "yp-0"},
        }
    )
    served = {"karpenter": "karpenter.sh/v1", "podgroups": "scheduling.x-k8s.io/v1alpha1"}
    now = 1767261900.0  # 2026-01-01T10:05:00Z
    text = apistatus.table(served, [record], now)
    lines = text.splitlines()
    assert lines[0] == "Controller yuniplace-system/yp-yuniplace (led by yp-0)"
    karpenter_row = next(line for line in lines if line.startswith("Karpenter"))
    assert karpenter_row.split()[-4:] == ["karpenter.sh/v1", "2026-01-01T10:00:00Z", "(5m", "ago)"]
    podgroups_row = next(line for line in lines if line.startswith("PodGroups"))
    assert podgroups_row.endswith("not read yet"), podgroups_row
    volcano_row = next(line for line in lines if line.startswith("Volcano PodGroups"))
    assert volcano_row.split()[-3:] == ["-", "not", "read"]


def test_a_record_that_cannot_be_read_is_said_not_guessed() -> None:
    lease = {"metadata": {"namespace": "ns", "name": "yp", "annotations": {keys.OPTIONAL_APIS: "[1, 2]"}}}
    record = apistatus._record(lease)
    assert record.reads == {} and record.problem is not None and "cannot be read" in record.problem
    assert "no replica leads now" in apistatus.table({}, [record], 0.0)


class Leases:
    """The Lease API of one Lease, as calls."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None

    def request(self, method: str, path: str, *, body: Any = None, retry: bool = True) -> dict[str, Any]:
        if method == "GET":
            if self.lease is None:
                raise NotFound(404, "NotFound", path)
            return json.loads(json.dumps(self.lease))  # type: ignore[no-any-return]
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
        return self.lease


def test_the_leader_carries_its_record_on_the_lease_it_writes() -> None:
    leases = Leases()
    notes = {keys.OPTIONAL_APIS: "{}"}
    elector = LeaderElector(
        cast(KubeClient, leases),
        namespace="ns",
        name="yp",
        identity="a",
        labels={keys.CONTROLLER_LEASE: "true"},
        notes=lambda: dict(notes),
    )
    assert elector.try_acquire_or_renew()
    assert leases.lease is not None
    assert leases.lease["metadata"]["labels"] == {keys.CONTROLLER_LEASE: "true"}
    assert leases.lease["metadata"]["annotations"] == {keys.OPTIONAL_APIS: "{}"}
    notes[keys.OPTIONAL_APIS] = '{"karpenter": {}}'
    leases.lease["metadata"]["annotations"]["someone.else/note"] = "kept"
    assert elector.try_acquire_or_renew()
    assert leases.lease["metadata"]["annotations"] == {
        keys.OPTIONAL_APIS: '{"karpenter": {}}',
        "someone.else/note": "kept",
    }
