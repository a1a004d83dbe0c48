"""A gang's pods are evicted together, those not on a node yet first."""

from typing import Any

from yuniplace.controller.apply import Executor


class Api:
    """Answers evictions (dry runs and real ones) and reads, and keeps which pods were evicted."""

    def __init__(self) -> None:
        self.evicted: list[str] = []

    def request(self, method: str, path: str, *, body: Any = None, query: Any = None, retry: bool = True) -> None:
        if not query:  # not a dry run
            self.evicted.append(path.split("/")[-2])

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        return {"metadata": {"name": path.split("/")[-1], "namespace": "ns", "uid": path}}


class Store:
    def upsert(self, _pod: Any) -> None: ...

    def delete(self, _pod: Any) -> None: ...


def pod(name: str, node: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": {"nodeName": node} if node else {}}


def test_a_member_not_on_a_node_yet_is_evicted_before_the_room_of_the_others_is_freed() -> None:
    api = Api()
    executor = Executor(api, Store(), None, None, None)  # type: ignore[arg-type]  # evictions use neither
    try:
        assert executor._evict_all([pod("a", "n1"), pod("replacement", None), pod("b", "n2")]) is None
    finally:
        executor.close()
    assert api.evicted == ["replacement", "a", "b"]
