"""List-then-watch of one collection, owned here rather than by the client library.

The client's `Watch.stream` resumes from a stale resourceVersion and breaks on 410; this loop does
what an informer does: list (paginated, plain dicts), watch from the list's resourceVersion with
bookmarks, track the resourceVersion of every event, re-list on 410 Gone, reconnect with backoff,
and always release the connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import urllib3

from yuniplace.kube.client import JsonObject, KubeClient, lines_of
from yuniplace.kube.errors import ApiError, Gone, NotFound

log = logging.getLogger(__name__)

LIST_PAGE_SIZE = 500
WATCH_TIMEOUT_S = 300
READ_TIMEOUT_S = WATCH_TIMEOUT_S + 30
MAX_BACKOFF_S = 10.0
# Each object's metadata alone (kube-controller-manager's metadata informers ask the same): for a
# collection whose objects are large and of which only names and changes matter.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

OnList = Callable[[list[JsonObject]], None]
"""Receives the complete collection after every (re-)list: the store is replaced, not merged."""
OnEvent = Callable[[str, JsonObject], None]
"""Receives ADDED / MODIFIED / DELETED with the object."""


class Decoding(Protocol):
    """How a collection's watch events and list pages are decoded: whole, or typed to the fields read."""

    def event(self, line: bytes) -> JsonObject: ...

    def page(self, body: bytes) -> JsonObject: ...


class WholeJson:
    """Every field of every object, as json.loads reads it."""

    @staticmethod
    def event(line: bytes) -> JsonObject:
        return cast(JsonObject, json.loads(line))

    @staticmethod
    def page(body: bytes) -> JsonObject:
        return cast(JsonObject, json.loads(body))


WHOLE_JSON = WholeJson()


class ListWatch:
    """Feeds a collection's state to callbacks until `stop()`; run it in a thread of its own."""

    def __init__(
        self,
        client: KubeClient,
        path: str,
        *,
        on_list: OnList,
        on_event: OnEvent,
        selectors: Mapping[str, str] | None = None,
        name: str = "",
        trim: Callable[[JsonObject], JsonObject] | None = None,
        decoding: Decoding = WHOLE_JSON,
        metadata_only: bool = False,
        on_missing: Callable[[], None] = lambda: None,
        on_reconnected: Callable[[], None] = lambda: None,
    ) -> None:
        self._client = client
        self._path = path
        self._on_list = on_list
        self._on_event = on_event
        self._selectors = dict(selectors or {})
        self._name = name or path
        # Applied to each listed object as its page arrives: a list of tens of thousands of objects
        # then never sits in memory whole at full size (its peak would stay as the process's size).
        self._trim = trim
        self._decoding = decoding
        self._metadata_only = metadata_only
        # Called when the collection is not served (404: its API gone, a CRD deleted), so that whoever
        # follows the cluster's APIs looks again at once, instead of this loop warning until it is stopped.
        self._on_missing = on_missing
        # Called when the watch is open again after it failed (the API server restarted, say).
        self._on_reconnected = on_reconnected
        self._interrupted = False
        self._stopped = threading.Event()
        self._response: urllib3.BaseHTTPResponse | None = None
        self._resource_version: str | None = None
        self.synced = threading.Event()
        """Set once the first list has been delivered."""

    def stop(self) -> None:
        self._stopped.set()
        response = self._response
        if response is not None:
            # Ends a read blocked in the watch thread; OSError: that thread closed the connection first.
            with contextlib.suppress(OSError):
                response.shutdown()

    def _list(self) -> str:
        items: list[JsonObject] = []
        query: dict[str, Any] = {"limit": LIST_PAGE_SIZE, **self._selectors}
        while True:
            if self._metadata_only:
                page = self._client.get(self._path, decode=self._decoding.page, accept=METADATA_LIST, **query)
            else:
                page = self._client.get(self._path, decode=self._decoding.page, **query)
            page_items = page.get("items") or []  # null in an empty list of metadata
            items.extend(page_items if self._trim is None else map(self._trim, page_items))
            metadata = page.get("metadata", {})
            if not metadata.get("continue"):
                break
            query["continue"] = metadata["continue"]
        self._on_list(items)
        self.synced.set()
        return str(metadata.get("resourceVersion", ""))

    def _watch(self, resource_version: str) -> None:
        """Follow the watch until the server ends it, keeping `_resource_version` at the last one seen
        (also when the stream breaks, so a reconnect resumes exactly there)."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": WATCH_TIMEOUT_S,
            **self._selectors,
        }
        accept = {"accept": METADATA_WATCH} if self._metadata_only else {}
        response = self._client.open_stream(self._path, query=query, timeout_s=READ_TIMEOUT_S, **accept)
        self._response = response
        if self._interrupted:
            self._interrupted = False
            self._on_reconnected()
        try:
            for line in lines_of(response, self._stopped):
                event = self._decoding.event(line)
                kind, obj = event.get("type"), event.get("object", {})
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone(410, str(obj.get("reason", "Expired")), str(obj.get("message", "")))
                    raise ApiError(int(obj.get("code", 500)), str(obj.get("reason", "")), str(obj.get("message", "")))
                self._resource_version = obj.get("metadata", {}).get("resourceVersion", self._resource_version)
                if kind != "BOOKMARK":
                    self._on_event(str(kind), obj)
                if self._stopped.is_set():
                    break
        finally:
            self._response = None
            response.release_conn()

    def run(self) -> None:
        failures = 0
        missing = False
        while not self._stopped.is_set():
            try:
                if self._resource_version is None:
                    self._resource_version = self._list()
                self._watch(self._resource_version)
                failures, missing = 0, False
            except Gone:
                log.info("watch of %s expired; re-listing", self._name)
                self._resource_version = None
            except (ApiError, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
                if self._stopped.is_set():
                    break
                failures += 1
                self._interrupted = True
                delay = min(MAX_BACKOFF_S, 0.2 * 2**failures) * random.uniform(0.5, 1.0)
                if isinstance(error, NotFound):
                    # Its API went: said once (the follower of the cluster's APIs stops this watch).
                    if not missing:
                        log.info("%s is not served (%s); trying again until told to stop", self._name, error)
                        self._on_missing()
                    missing = True
                else:
                    # One break, mended by the next attempt, is routine (a server that closed the stream, an
                    # API server restarting): told at INFO; one that persists is a warning.
                    said = log.warning if failures > 1 else log.info
                    said("watch of %s failed (%s); reconnecting in %.1fs", self._name, error, delay)
                self._stopped.wait(delay)
