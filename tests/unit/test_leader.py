"""Leader election rules against an in-memory Lease API with optimistic concurrency and a fake clock."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from yuniplace.kube import AlreadyExists, Conflict, NotFound
from yuniplace.runtime.leader import LeaderElector, LeaseTiming

PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lock"


class LeaseApi:
    """Just enough of the API server for one Lease: create, get, and update guarded by resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.conflict_next_put = False

    def request(self, method: str, path: str, *, body: Any = None, retry: bool = True, **_: Any) -> dict[str, Any]:
        if method == "GET":
            if self.lease is None:
                raise NotFound(404, "NotFound", "no lease")
            return copy.deepcopy(self.lease)
        if method == "POST":
            if self.lease is not None:
                raise AlreadyExists(409, "AlreadyExists", "exists")
            return self._store(body)
        if method == "PUT":
            assert self.lease is not None
            if self.conflict_next_put:
                self.conflict_next_put = False
                raise Conflict(409, "Conflict", "modified concurrently")
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise Conflict(409, "Conflict", "stale")
            return self._store(body)
        raise AssertionError(method)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str:
        assert self.lease is not None
        return str(self.lease["spec"]["holderIdentity"])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> LeaseApi:
    return LeaseApi()


def elector(api: LeaseApi, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(
        api,
        namespace="ns",
        name="lock",
        identity=identity,  # type: ignore[arg-type]
        timing=LeaseTiming(15, 10, 2),
        clock=clock,
        wall_clock=clock,
    )


def test_first_comer_leads_and_the_other_waits(api: LeaseApi) -> None:
    clock = Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert api.holder == "a"
    clock.now += 14
    assert a.try_acquire_or_renew(), "the holder renews"
    assert not b.try_acquire_or_renew()


def test_a_lease_not_renewed_for_its_duration_is_taken_over(api: LeaseApi) -> None:
    clock = Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b starts observing a's record now
    clock.now += 15.5
    assert b.try_acquire_or_renew()
    assert api.holder == "b"
    assert api.lease is not None and api.lease["spec"]["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew(), "the old leader sees the new holder"


def test_expiry_is_measured_on_the_observers_clock_not_the_remote_renew_time(api: LeaseApi) -> None:
    """A renewTime far in the past (a skewed clock on the holder) does not make the lease look expired."""
    clock = Clock()
    skewed = Clock()
    skewed.now = 0.0
    holder = LeaderElector(
        api,
        namespace="ns",
        name="lock",
        identity="a",  # type: ignore[arg-type]
        timing=LeaseTiming(15, 10, 2),
        clock=clock,
        wall_clock=skewed,
    )
    assert holder.try_acquire_or_renew()
    assert not elector(api, "b", clock).try_acquire_or_renew()


def test_a_released_lease_is_taken_at_once(api: LeaseApi) -> None:
    clock = Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert api.holder == ""
    assert b.try_acquire_or_renew()


def test_after_a_takeover_the_others_see_a_fresh_holder(api: LeaseApi) -> None:
    clock = Clock()
    a, b, c = elector(api, "a", clock), elector(api, "b", clock), elector(api, "c", clock)
    assert a.try_acquire_or_renew()
    for other in (b, c):
        assert not other.try_acquire_or_renew()
    clock.now += 16
    assert b.try_acquire_or_renew()
    assert not c.try_acquire_or_renew(), "b's new record restarts c's expiry clock"
    assert api.holder == "b"


def test_losing_the_write_race_is_not_leading(api: LeaseApi) -> None:
    clock = Clock()
    a = elector(api, "a", clock)
    api.conflict_next_put = True  # another replica writes between a's read and a's write
    assert elector(api, "b", clock).try_acquire_or_renew()  # created, no PUT
    clock.now += 16
    assert not a.try_acquire_or_renew()
