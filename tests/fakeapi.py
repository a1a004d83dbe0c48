"""An API server in memory, for the controller's tests: pods kept by name, each write the executor makes
(a merge, strategic-merge or JSON patch, a create, a delete, an eviction) carried out on them as the
apiserver would, every write counted, and any write made to fail on demand (`fail_write`: the n-th, or
those a predicate picks), as a server error does. `watch`, where given, is told each change as a pod
watch brings it (kind, pod), at once. Events are kept apart, as posted."""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable, Iterable
from typing import Any

from yuniplace.gang import pods as p
from yuniplace.kube import JSON_PATCH, NotFound, ServerError

Pod = dict[str, Any]


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def json_patch(document: Pod, operations: Iterable[dict[str, Any]]) -> Pod:
    """The document with the RFC 6902 operations the executor sends applied (add, remove, test)."""
    result = copy.deepcopy(document)
    for op in operations:
        *parents, last = [_unescape(t) for t in op["path"].split("/")[1:]]
        target: Any = result
        for token in parents:
            target = target[int(token)] if isinstance(target, list) else target[token]
        if op["op"] == "test":
            here = target[int(last)] if isinstance(target, list) else target.get(last)
            if here != op["value"]:
                raise ValueError(f"test of {op['path']} failed")
        elif op["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        elif isinstance(target, list):
            target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
    return result


def merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    """A JSON merge patch (None removes a key); lists are replaced, conditions too (enough here)."""
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


class FakeApi:
    """The cluster's pods, and what was written to them."""

    def __init__(self, pods: Iterable[Pod] = ()) -> None:
        self.pods: dict[str, Pod] = {p.name(pod): copy.deepcopy(pod) for pod in pods}
        self.watch: Callable[[str, Pod], None] | None = None
        self.events: list[dict[str, Any]] = []
        self.writes: list[str] = []  # "verb name", in the order they were made
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._versions = itertools.count(100)
        self._fails: Callable[[int, str], bool] = lambda _n, _write: False

    def fail_write(self, n: int | None = None, when: Callable[[str], bool] | None = None) -> None:
        """Make the n-th write from now (1 is the next) fail, or every write `when` picks ("verb name")."""
        start = len(self.writes) + len(self.failed)
        self._fails = lambda count, write: (n is not None and count == start + n) or (when is not None and when(write))

    def _write(self, verb: str, name: str) -> None:
        write = f"{verb} {name}"
        with self._lock:
            if self._fails(len(self.writes) + len(self.failed) + 1, write):
                self.failed.append(write)
                raise ServerError(500, "InternalError", f"{write} failed")
            self.writes.append(write)

    def _pod(self, path: str) -> Pod:
        name = path.split("/")[6]
        if name not in self.pods:
            raise NotFound(404, "NotFound", f"pods {name} not found")
        return self.pods[name]

    def _stored(self, pod: Pod, kind: str = "MODIFIED") -> Pod:
        pod["metadata"]["resourceVersion"] = str(next(self._versions))
        if self.watch is not None:
            self.watch(kind, copy.deepcopy(pod))
        return copy.deepcopy(pod)

    # -- the client's calls ------------------------------------------------------------------------------

    def create(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if "/events" in path:
            with self._lock:
                self.events.append(copy.deepcopy(body))
            return body
        name = body["metadata"]["name"]
        self._write("create", name)
        pod = copy.deepcopy(body)
        pod["metadata"].update(uid=f"uid-{name}", creationTimestamp=p.format_time(0))
        pod["status"] = {"phase": "Pending"}
        self.pods[name] = pod
        return self._stored(pod, "ADDED")

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        return copy.deepcopy(self._pod(path))

    def delete(self, path: str, _body: Any = None, **_: Any) -> dict[str, Any]:
        pod = self._pod(path)
        self._write("delete", p.name(pod))
        del self.pods[p.name(pod)]
        self._stored(pod, "DELETED")
        return {}

    def patch(self, path: str, body: Any, content_type: str | None = None, **_: Any) -> dict[str, Any]:
        pod = self._pod(path)
        if content_type == JSON_PATCH:
            self._write("ungate", p.name(pod))
            patched = json_patch(pod, body)
            pod.clear()
            pod.update(patched)
        else:
            verb = (
                "fail" if "phase" in body.get("status", {}) else "nominate" if path.endswith("/status") else "annotate"
            )
            self._write(verb, p.name(pod))
            merge(pod, body)
        return self._stored(pod)

    def request(self, method: str, path: str, *, body: Any = None, query: Any = None, retry: bool = True) -> None:
        pod = self._pod(path)
        if query:  # a dry run
            return
        self._write("evict", p.name(pod))
        pod["metadata"]["deletionTimestamp"] = p.format_time(0)
        self._stored(pod)
