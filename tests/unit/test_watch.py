"""The list-then-watch loop against a scripted API: resourceVersion tracking, bookmarks, re-list on
410 Gone, reconnect after a broken stream, a collection whose API is not served (404), metadata only."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import urllib3

from yuniplace.kube import NotFound
from yuniplace.kube.client import lines_of
from yuniplace.kube.watch import METADATA_LIST, METADATA_WATCH, ListWatch


def pod(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


class FakeResponse:
    def __init__(self, events: list[dict[str, Any]], broken: bool = False) -> None:
        self._body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
        self._broken = broken

    def stream(self, *_: Any, **__: Any):
        # Split mid-line to prove lines are reassembled across chunks.
        yield self._body[:7]
        yield self._body[7:]
        if self._broken:
            raise urllib3.exceptions.ProtocolError("connection reset")

    def release_conn(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


class ScriptedClient:
    """Answers lists and watches from a script; records the queries it was sent."""

    def __init__(self, lists: list[dict[str, Any]], watches: list[FakeResponse], done: threading.Event) -> None:
        self.lists = lists
        self.watches = watches
        self.list_queries: list[dict[str, Any]] = []
        self.watch_queries: list[dict[str, Any]] = []
        self.done = done

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        self.list_queries.append(query)
        return self.lists.pop(0)

    def open_stream(self, path: str, *, query: dict[str, Any], timeout_s: float) -> FakeResponse:
        self.watch_queries.append(dict(query))
        if not self.watches:
            self.done.set()
            raise urllib3.exceptions.ProtocolError("script finished")
        return self.watches.pop(0)


def run_script(client: ScriptedClient) -> tuple[list[list[str]], list[tuple[str, str]]]:
    lists: list[list[str]] = []
    events: list[tuple[str, str]] = []
    watch = ListWatch(
        client,  # type: ignore[arg-type]
        "/api/v1/pods",
        on_list=lambda items: lists.append([i["metadata"]["name"] for i in items]),
        on_event=lambda kind, obj: events.append((kind, obj["metadata"]["name"])),
    )
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    assert client.done.wait(10)
    watch.stop()
    thread.join(10)
    return lists, events


def test_watch_resumes_from_the_last_resource_version_including_bookmarks() -> None:
    done = threading.Event()
    client = ScriptedClient(
        lists=[{"items": [pod("a", "5")], "metadata": {"resourceVersion": "10"}}],
        watches=[
            FakeResponse(
                [
                    {"type": "ADDED", "object": pod("b", "11")},
                    {"type": "BOOKMARK", "object": pod("", "15")},
                ]
            ),
            FakeResponse([{"type": "MODIFIED", "object": pod("b", "16")}]),
        ],
        done=done,
    )
    lists, events = run_script(client)
    assert lists == [["a"]]
    assert events == [("ADDED", "b"), ("MODIFIED", "b")]
    versions = [q["resourceVersion"] for q in client.watch_queries]
    assert versions[:3] == ["10", "15", "16"]
    assert all(q["allowWatchBookmarks"] == "true" for q in client.watch_queries)


def test_gone_relists_and_a_broken_stream_reconnects() -> None:
    done = threading.Event()
    client = ScriptedClient(
        lists=[
            {"items": [pod("a", "5")], "metadata": {"resourceVersion": "10"}},
            {"items": [pod("a", "5"), pod("c", "30")], "metadata": {"resourceVersion": "31"}},
        ],
        watches=[
            FakeResponse([{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]),
            FakeResponse([{"type": "ADDED", "object": pod("d", "32")}], broken=True),
            FakeResponse([{"type": "DELETED", "object": pod("d", "33")}]),
        ],
        done=done,
    )
    lists, events = run_script(client)
    assert lists == [["a"], ["a", "c"]], "410 Gone must re-list"
    assert events == [("ADDED", "d"), ("DELETED", "d")]
    versions = [q["resourceVersion"] for q in client.watch_queries]
    assert versions[:3] == ["10", "31", "32"], "after a broken stream the watch resumes where it was"


def two_pages() -> ScriptedClient:
    """A list of pods a and b in two pages, and no watch after it."""
    return ScriptedClient(
        lists=[
            {"items": [pod("a", "1")], "metadata": {"continue": "token", "resourceVersion": "9"}},
            {"items": [pod("b", "2")], "metadata": {"resourceVersion": "9"}},
        ],
        watches=[],
        done=threading.Event(),
    )


def test_paginated_list_is_delivered_whole() -> None:
    client = two_pages()
    lists, _ = run_script(client)
    assert lists == [["a", "b"]]
    assert client.list_queries[1]["continue"] == "token"


def test_listed_objects_are_trimmed_as_their_page_arrives() -> None:
    client = two_pages()
    trimmed: list[str] = []
    trimmed_before_page: list[list[str]] = []
    get = client.get

    def get_recording(path: str, **query: Any) -> dict[str, Any]:
        trimmed_before_page.append(list(trimmed))
        return get(path, **query)

    def trim(obj: dict[str, Any]) -> dict[str, Any]:
        trimmed.append(obj["metadata"]["name"])
        return {"metadata": {"name": obj["metadata"]["name"]}}

    client.get = get_recording  # type: ignore[method-assign]
    listed: list[list[dict[str, Any]]] = []
    watch = ListWatch(
        client,  # type: ignore[arg-type]
        "/api/v1/pods",
        on_list=listed.append,
        on_event=lambda kind, obj: None,
        trim=trim,
    )
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    assert client.done.wait(10)
    watch.stop()
    thread.join(10)
    assert trimmed_before_page == [[], ["a"]]  # the first page was trimmed before the second was fetched
    assert listed == [[{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]]


class ShutDownMidStream:
    """A stream whose reader is stopped after the first chunk; what follows stands for the raw bytes a
    read returns once the socket's TLS layer is gone."""

    def __init__(self, stopped: threading.Event) -> None:
        self._stopped = stopped

    def stream(self, *_: Any, **__: Any):
        yield b'{"type": "ADDED"}\n{"type": "MOD'
        self._stopped.set()
        yield b'\xa1\x17garbage\n{"x"\n'


def test_nothing_read_after_the_stop_is_yielded() -> None:
    stopped = threading.Event()
    assert list(lines_of(ShutDownMidStream(stopped), stopped)) == [b'{"type": "ADDED"}']  # type: ignore[arg-type]


class GoneThenBack:
    """A collection whose API is not served for two lists (404), then is: a list of metadata, then a
    watch that ends the script."""

    def __init__(self, done: threading.Event) -> None:
        self.answers: list[Any] = [
            NotFound(404, "NotFound", "the server could not find the requested resource"),
            NotFound(404, "NotFound", "the server could not find the requested resource"),
            {"items": None, "metadata": {"resourceVersion": "7"}},  # an empty list of metadata says null
        ]
        self.accepts: list[str | None] = []
        self.done = done

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        self.accepts.append(query.get("accept"))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    def open_stream(self, path: str, *, query: dict[str, Any], timeout_s: float, accept: str) -> FakeResponse:
        self.accepts.append(accept)
        self.done.set()
        return FakeResponse([])


def test_a_collection_not_served_is_said_once_and_a_watch_open_again_is_told(caplog: Any) -> None:
    done = threading.Event()
    client = GoneThenBack(done)
    missing: list[bool] = []
    reconnected: list[bool] = []
    lists: list[list[Any]] = []
    watch = ListWatch(
        client,  # type: ignore[arg-type]
        "/apis/karpenter.sh/v1/nodepools",
        on_list=lists.append,
        on_event=lambda kind, obj: None,
        name="nodepools",
        metadata_only=True,
        on_missing=lambda: missing.append(True),
        on_reconnected=lambda: reconnected.append(True),
    )
    thread = threading.Thread(target=watch.run, daemon=True)
    with caplog.at_level(logging.INFO):
        thread.start()
        assert done.wait(10)
        watch.stop()
        thread.join(10)
    assert missing == [True], "two 404s in a row are one API gone"
    assert reconnected == [True] and lists == [[]]
    assert client.accepts[:4] == [METADATA_LIST] * 3 + [METADATA_WATCH]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "an API gone is no watch failing"


def test_one_break_mended_at_once_is_routine_and_breaks_in_a_row_are_warned(caplog: Any) -> None:
    done = threading.Event()
    client = ScriptedClient(
        lists=[{"items": [], "metadata": {"resourceVersion": "1"}}],
        watches=[FakeResponse([], broken=True), FakeResponse([], broken=True)],
        done=done,
    )
    with caplog.at_level(logging.INFO):
        run_script(client)
    said = [(r.levelno, r.getMessage().split(" (")[0]) for r in caplog.records if "failed" in r.getMessage()]
    assert said[:2] == [
        (logging.INFO, "watch of /api/v1/pods failed"),
        (logging.WARNING, "watch of /api/v1/pods failed"),
    ]
