"""The cluster's optional APIs followed as they come and go: Karpenter's, each PodGroup dialect's,
Volcano's Queues, ai-scheduler's Pools, the Workload API and DRA. A platform team installs them in any
order, weeks apart, and restarts the API server to switch a built-in one on; yuniplace reads each from
the moment it is served, and stops reading it when it goes, without a restart.

How a change is seen, two ways:
- a watch of CustomResourceDefinitions (their metadata only): a CRD of a group yuniplace reads added,
  changed or deleted makes it ask discovery at once, and again SETTLE_S later, since discovery lags a
  CRD's Established condition a moment;
- discovery asked again every PERIOD_S (30 s, as kube-controller-manager's garbage collector and
  resource-quota controller do), for what no CRD announces: a built-in API switched on or off by an API
  server restart with its feature gate. The CRD watch broken and open again (an API server restarted)
  asks at once too, and so does a watch that finds its collection gone (404).

Discovery is the one judge of what is served. An API that appears has its watches started; one that goes
has them stopped and what they read forgotten. Each change is logged once and announced (the controller
posts it as an event), and whoever waits is decided again (`on_change`). An error asking discovery
changes nothing: an API server restarting is no API gone.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3

from yuniplace.kube import ApiError, KubeClient
from yuniplace.kube.discovery import Discovered, discover, group_of
from yuniplace.kube.watch import ListWatch

log = logging.getLogger(__name__)

PERIOD_S = 30.0
SETTLE_S = (0.0, 1.0, 3.0, 10.0)  # after a CRD of a group read changed: discovery is asked at these delays
RETRY_S = 2.0  # discovery that could not be asked is asked again this soon
# An API is gone once discovery has not listed it for this long (two looks apart): an API server that has
# just restarted may list its CRDs' groups a moment late, and that is no CRD deleted.
GONE_AFTER_S = 5.0
CRD_RESOURCE = "customresourcedefinitions"
CRDS = f"/apis/apiextensions.k8s.io/v1/{CRD_RESOURCE}"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True)
class ServedApi:
    """One optional API as the cluster serves it: the group version read, and its resources that are
    read there (with their subresources: "podgroups/status"). A change of either restarts its watches."""

    path: str  # "/apis/karpenter.sh/v1"
    resources: frozenset[str]

    @property
    def version(self) -> str:
        """As kubectl names it: "karpenter.sh/v1"."""
        return self.path.removeprefix("/apis/")


@dataclass(frozen=True)
class OptionalApi:
    """An API yuniplace reads where the cluster serves it, and what it does with it."""

    key: str  # names it in the controller's record (`record`), and in `yuniplace status --apis`
    title: str  # what is read: "Karpenter NodePools and NodeClaims"
    reads: str  # what yuniplace does with it (from now on): "counting what Karpenter's NodePools can still make"
    without: str  # what follows when it is not served: "admission counts only the nodes there are"
    # Where it may be served, the version preferred first, with the resources it must list there.
    candidates: tuple[tuple[str, frozenset[str]], ...]
    # Versions of its group that are not it ("v1" of scheduling.k8s.io: PriorityClasses); any other version
    # served that yuniplace does not read is said (None: the group holds nothing else of note).
    other_versions: frozenset[str] | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(path for path, _ in self.candidates)

    def served_as(self, found: Discovered) -> ServedApi | Unknown | None:
        """The newest candidate `found` serves whole; None when none is; UNKNOWN when discovery could not
        say whether one preferred to the one served is."""
        for path, needed in self.candidates:
            names = found.names(path)
            if names is None:
                return UNKNOWN
            if needed <= names:
                return ServedApi(path, frozenset(n for n in names if n.split("/")[0] in needed))
        return None

    def unread_versions(self, found: Discovered) -> tuple[str, ...]:
        """Versions of its group the cluster serves that yuniplace does not read (a newer API, say)."""
        if self.other_versions is None or found.versions is None:
            return ()
        group = group_of(self.candidates[0][0])
        read = {path.rsplit("/", 1)[1] for path in self.paths} | self.other_versions
        return tuple(v for v in found.versions.get(group, ()) if v not in read)


class Unknown:
    """Discovery could not say: whatever the API's state was stays."""


UNKNOWN = Unknown()


class Feed(Protocol):
    """The watches of one optional API, and what they feed."""

    @property
    def optional_api(self) -> OptionalApi: ...

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        """Watch it as served; return the events set once each watch has read its first list.
        `missing`: called by a watch that finds its collection gone."""

    def stop(self, *, forget: bool = True) -> None:
        """Stop watching, and forget what was read: the API went. Without `forget`, what was read stays
        until the watches started next list it again (the API is served in another version, say)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Read:
    served: ServedApi
    since: str  # when this replica began reading it (RFC 3339)


@dataclass
class Change:
    """One API come, gone or served in another version, as logged and announced."""

    api: OptionalApi
    before: ServedApi | None
    after: ServedApi | None
    note: str = field(init=False)

    def __post_init__(self) -> None:
        if self.after is None:
            assert self.before is not None
            self.note = f"{self.before.version} is no longer served: {self.api.without}"
        elif self.before is None:
            self.note = f"{self.after.version} is served: from now on, {self.api.reads}"
        else:
            self.note = f"{self.after.version} is served (before: {self.before.version}): from now on, {self.api.reads}"

    @property
    def gone(self) -> bool:
        return self.after is None


class ApiFollower:
    """Starts and stops the feeds of the optional APIs as discovery finds them served."""

    def __init__(
        self,
        client: KubeClient,
        feeds: Sequence[Feed],
        *,
        on_change: Callable[[], None] = lambda: None,
        announce: Callable[[Change], None] = lambda change: None,
        clock: Callable[[], float] = time.monotonic,
        period_s: float = PERIOD_S,
    ) -> None:
        self._client = client
        self._feeds = list(feeds)
        self._on_change = on_change
        self._announce = announce
        self._clock = clock
        self._period_s = period_s
        self._lock = threading.Lock()
        self._read: dict[str, _Read] = {}  # by key: the APIs read now
        self._unread: dict[str, tuple[str, ...]] = {}  # by key: versions served that are not read, as last said
        self._missing: dict[str, float] = {}  # by key: since when (clock) an API read is not listed
        self._looks: list[float] = []  # when (clock) discovery is to be asked before the next period
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._groups = {group_of(path) for feed in self._feeds for path in feed.optional_api.paths}
        self._crds: ListWatch | None = None
        self._known = False  # discovery has answered once: what changes after is said

    # -- what is read ------------------------------------------------------------------------------

    def read_now(self) -> dict[str, ServedApi]:
        """The APIs read now, by key."""
        with self._lock:
            return {key: read.served for key, read in self._read.items()}

    def record(self) -> str:
        """What is read now and since when, as the controller records it on its Lease (keys.OPTIONAL_APIS),
        for `yuniplace status --apis`: {key: {"api": "karpenter.sh/v1", "since": RFC 3339}}."""
        with self._lock:
            shown = {key: {"api": read.served.version, "since": read.since} for key, read in sorted(self._read.items())}
        return json.dumps(shown, separators=(",", ":"))

    # -- following ---------------------------------------------------------------------------------

    def start(self) -> list[threading.Event]:
        """Ask discovery once and start the feeds of what is served (their first lists are what the
        controller waits for before it is ready), then follow changes in a thread of its own."""
        synced = self.look()
        self._watch_crds()
        threading.Thread(target=self._run, name="optional-apis", daemon=True).start()
        return synced

    def soon(self) -> None:
        """Ask discovery at once, and again as it settles (a CRD changed, a watch found its API gone)."""
        now = self._clock()
        with self._lock:
            self._looks = sorted({*self._looks, *(now + delay for delay in SETTLE_S)})
        self._wake.set()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._crds is not None:
            self._crds.stop()
        for feed in self._feeds:
            if feed.optional_api.key in self._read:
                feed.stop(forget=False)  # shutting down: nothing went

    def _run(self) -> None:
        next_period = self._clock() + self._period_s
        while not self._stopped.is_set():
            with self._lock:
                due = min([next_period, *self._looks])
            self._wake.wait(max(0.0, due - self._clock()))
            self._wake.clear()
            if self._stopped.is_set():
                return
            now = self._clock()
            with self._lock:
                if now < min([next_period, *self._looks]):
                    continue  # woken early: its looks are scheduled
                self._looks = [at for at in self._looks if at > now]
            if now >= next_period:
                next_period = now + self._period_s
            self.look()

    def look(self) -> list[threading.Event]:
        """Ask discovery, start what came and stop what went; return the first-list events of the feeds
        started. What discovery first says (at start, or once it could first be asked) is logged as the
        state of things; every change after is said, and every gang decided again."""
        feeds = self._feeds
        try:
            found = discover(self._client, [path for feed in feeds for path in feed.optional_api.paths])
        except (ApiError, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
            log.warning("cannot ask the API server which optional APIs it serves (%s); asking again", error)
            with self._lock:
                self._looks.append(self._clock() + RETRY_S)
            return []
        initial, self._known = not self._known, True
        synced: list[threading.Event] = []
        changes: list[Change] = []
        for feed in feeds:
            if self._stopped.is_set():
                return []
            api = feed.optional_api
            self._say_unread(api, found)
            served = api.served_as(found)
            if isinstance(served, Unknown):
                continue
            with self._lock:
                read = self._read.get(api.key)
            before = None if read is None else read.served
            if served is None and before is not None and not self._missing_long_enough(api.key):
                continue
            self._missing.pop(api.key, None)
            if served == before:
                continue
            if before is not None:
                feed.stop(forget=served is None)
            if served is None:
                with self._lock:
                    self._read.pop(api.key, None)
            else:
                synced += feed.start(served, self.soon)
                with self._lock:
                    self._read[api.key] = _Read(served, _now())
            if not initial:
                changes.append(Change(api, before, served))
        if initial:
            self._log_state(found)
        for change in changes:
            (log.warning if change.gone else log.info)("optional API: %s", change.note)
            self._announce(change)
        if changes:
            self._on_change()
        return synced

    def _missing_long_enough(self, key: str) -> bool:
        """Whether an API read, not listed now, has not been listed for GONE_AFTER_S; if not yet, look
        again when it will have been."""
        now = self._clock()
        since = self._missing.setdefault(key, now)
        if now - since >= GONE_AFTER_S:
            return True
        with self._lock:
            self._looks.append(since + GONE_AFTER_S)
        return False

    def _log_state(self, found: Discovered) -> None:
        """What is read and what is not, as discovery first said it."""
        read = self.read_now()
        for feed in self._feeds:
            api = feed.optional_api
            if api.key in read:
                log.info("optional API %s: %s", read[api.key].version, api.reads)
            elif not isinstance(api.served_as(found), Unknown):
                log.info("optional API %s is not served: %s", api.paths[0].removeprefix("/apis/"), api.without)

    def _say_unread(self, api: OptionalApi, found: Discovered) -> None:
        unread = api.unread_versions(found)
        with self._lock:
            said = self._unread.get(api.key, ())
            self._unread[api.key] = unread
        if unread and unread != said:
            group = group_of(api.paths[0])
            log.warning(
                "the cluster serves %s as %s, a version yuniplace does not read (it reads %s): %s",
                api.title,
                ", ".join(f"{group}/{v}" for v in unread),
                ", ".join(p.removeprefix("/apis/") for p in api.paths),
                api.without,
            )

    def _may_watch_crds(self) -> bool:
        """Whether this controller may watch CRDs, asked as kubectl auth can-i asks (the chart grants it
        unless its install is confined to one namespace, admission off); an answer that cannot be had is
        taken as yes, and the watch tries on its own."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {"group": "apiextensions.k8s.io", "resource": CRD_RESOURCE, "verb": "watch"}
            },
        }
        try:
            answer = self._client.create(ACCESS_REVIEWS, review)
        except (ApiError, urllib3.exceptions.HTTPError, OSError, ValueError):
            return True
        return bool((answer.get("status") or {}).get("allowed"))

    def _watch_crds(self) -> None:
        """Watch CRDs (metadata only) where allowed; without, the period alone sees them come and go."""
        if not self._may_watch_crds():
            log.info(
                "this controller may not watch CustomResourceDefinitions: an optional API installed or removed "
                "is seen within %.0f s, when discovery is asked again",
                self._period_s,
            )
            return
        self._crds = ListWatch(
            self._client,
            CRDS,
            on_list=self._crds_listed,
            on_event=self._crd_changed,
            name="customresourcedefinitions",
            metadata_only=True,
            on_reconnected=self.soon,
        )
        threading.Thread(target=self._crds.run, name="watch-crds", daemon=True).start()

    def _crds_listed(self, _crds: list[dict[str, Any]]) -> None:
        """Listed again (the watch expired, or the API server came back): anything may have changed."""
        if self._crds is not None and self._crds.synced.is_set():
            self.soon()

    def _crd_changed(self, _kind: str, crd: dict[str, Any]) -> None:
        """A CRD's name is <plural>.<group>: one of a group read makes discovery be asked now."""
        name = str((crd.get("metadata") or {}).get("name") or "")
        if name.partition(".")[2] in self._groups:
            self.soon()
