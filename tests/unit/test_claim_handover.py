"""The swap of a member whose placeholder holds its DRA claims (apply.py): the member joins each claim's
reservedFor before the placeholder is deleted, and a claim the API will not hand over (not allocated,
being deleted) keeps the swap waiting: placeholder kept, member still gated."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from yuniplace.controller.apply import Executor, Refusals
from yuniplace.controller.plan import Plan, Swap
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.kube import Forbidden, Invalid, NotFound

KEY = p.AppKey("ns", "train")


def pod(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "10",
            "annotations": annotations,
        },
        "spec": {"schedulingGates": [{"name": keys.GATE}], "containers": [{"name": "main"}]},
        "status": {"phase": "Pending"},
    }


class Api:
    """Records the executor's writes in order; refuses to hand over the claims named in `refused`."""

    def __init__(self, refused: dict[str, Exception] | None = None) -> None:
        self.writes: list[str] = []
        self.bodies: dict[str, Any] = {}
        self._refused = refused or {}
        self._lock = threading.Lock()

    def patch(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        parts = path.split("/")
        if "resourceclaims" in parts:
            claim = parts[parts.index("resourceclaims") + 1]
            with self._lock:
                self.writes.append(f"hand over {claim}")
                self.bodies[claim] = body
            if claim in self._refused:
                raise self._refused[claim]
            return {}
        name = parts[6]
        with self._lock:
            self.writes.append(f"{'nominate' if path.endswith('/status') else 'release'} {name}")
        return pod(name)

    def delete(self, path: str, _body: Any = None, **_: Any) -> dict[str, Any]:
        with self._lock:
            self.writes.append("delete " + path.split("/")[6])
        return {}


class Store:
    def upsert(self, _pod: Any) -> None: ...

    def delete(self, _pod: Any) -> None: ...


class Landings:
    def expect(self, *_: Any) -> None: ...

    def hold(self, *_: Any) -> None: ...

    def release(self, *_: Any) -> None: ...


class Metrics:
    class _Counter:
        def __init__(self) -> None:
            self.value = 0.0

        def labels(self, *_: Any) -> Metrics._Counter:
            return self

        def inc(self, amount: float = 1) -> None:
            self.value += amount

    def __init__(self) -> None:
        self.placeholders_deleted = self._Counter()
        self.claims_handed_over = self._Counter()


def swap(api: Api, *, contended: bool) -> tuple[list[str], Refusals, Metrics]:
    metrics = Metrics()
    executor = Executor(api, Store(), None, metrics, Landings(), contended=lambda _key: contended)  # type: ignore[arg-type]
    swaps = [
        Swap(pod("m0"), pod("ph0"), "n1", "workers", claims=("m0-gpus", "channel")),
        Swap(pod("m1"), pod("ph1"), "n2", "workers", claims=("m1-gpus",)),
    ]
    try:
        refused = executor.apply(Plan(KEY, AppState.RESERVED, swaps=swaps))
    finally:
        executor.close()
    return api.writes, refused, metrics


@pytest.mark.parametrize("contended", [True, False], ids=["nominated", "steered"])
def test_each_claim_is_handed_to_its_member_before_its_placeholder_goes(contended: bool) -> None:
    api = Api()
    writes, refused, metrics = swap(api, contended=contended)
    assert not refused.claims_kept and metrics.claims_handed_over.value == 3
    for member, placeholder, claims in (("m0", "ph0", ("m0-gpus", "channel")), ("m1", "ph1", ("m1-gpus",))):
        for claim in claims:
            assert (
                writes.index(f"hand over {claim}")
                < writes.index(f"delete {placeholder}")
                < writes.index(f"release {member}")
            )
            assert api.bodies[claim] == {
                "status": {"reservedFor": [{"resource": "pods", "name": member, "uid": f"uid-{member}"}]}
            }


@pytest.mark.parametrize("contended", [True, False], ids=["nominated", "steered"])
@pytest.mark.parametrize(
    "refusal",
    [Invalid(422, "Invalid", "may not be specified when `allocated` is not set"), NotFound(404, "NotFound", "gone")],
    ids=["not allocated", "gone"],
)
def test_a_claim_not_handed_over_keeps_its_swap_waiting_and_the_others_go(contended: bool, refusal: Exception) -> None:
    api = Api(refused={"channel": refusal})
    writes, refused, _ = swap(api, contended=contended)
    assert refused.claims_kept and refused.claims_forbidden is None
    assert "delete ph0" not in writes and "release m0" not in writes
    assert "delete ph1" in writes and "release m1" in writes


def test_a_hand_over_the_api_forbids_says_which_permission_to_grant() -> None:
    api = Api(refused={"m1-gpus": Forbidden(403, "Forbidden", 'requires resource="resourceclaims/binding"')})
    writes, refused, _ = swap(api, contended=True)
    assert refused.claims_kept and refused.claims_forbidden is not None
    assert refused.claims_forbidden.startswith("the API forbids yuniplace to hand DRA claim m1-gpus to member m1")
    assert "resourceclaims/binding" in refused.claims_forbidden
    assert "release m1" not in writes and "release m0" in writes
