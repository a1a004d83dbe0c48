"""How often each gang was restarted (or released) for a lost member, kept where it outlives both the
gang's pods and the controller.

A restart evicts the pods that carry a gang's record (the originator's annotations), and its owner makes
new ones that know nothing of it; a restarted controller knows nothing either. So the count that
bounds restarts lives in one ConfigMap of the controller's own namespace, one key per gang (its
namespace and a digest of its id: an application id may hold any character, a ConfigMap key may not),
written by a merge patch of that key alone, so no write ever rewrites another gang's. A count belongs
to the owners it was counted for, every controller of the gang's pods (a gang may be made by several
Jobs, a parameter server's and its workers', and any of them may make the pod that carries the next
attempt's record); a Job of the same name submitted again starts from nothing. It is forgotten once the
gang has gone MEMORY_S without a restart, as a container's restart backoff resets once it has run a
while.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from yuniplace.gang import pods as p
from yuniplace.kube import KubeClient
from yuniplace.kube.errors import ApiError, Conflict, NotFound

log = logging.getLogger(__name__)

MEMORY_S = 3600.0
DATA_KEY_PREFIX = "restarts."


@dataclass(frozen=True)
class Restarts:
    """A gang's restarts so far: for which owners (its pods' controllers' uids), how many, the last when, and
    whether the limit was reached (its later attempts fail at once); and how many of its attempts timed
    out under Hard style, the last when (an owner that makes failed pods again, as KubeRay does, makes
    a new attempt each time, and the same limit bounds them)."""

    owners: tuple[str, ...]
    count: int
    last_at: float
    failed: bool = False
    timeouts: int = 0
    timed_out_at: float = 0.0

    @property
    def latest(self) -> float:
        """When it was last counted: a restart, or an attempt out of time."""
        return max(self.last_at, self.timed_out_at)

    def said(self) -> str:
        """What its count is, in an event's words."""
        parts = [f"{self.count} restart(s) for lost members"] if self.count else []
        parts += [f"{self.timeouts} attempt(s) out of time (Hard style)"] if self.timeouts else []
        return " and ".join(parts) or "no restart"


def _data_key(key: p.AppKey) -> str:
    digest = hashlib.sha256(key.app_id.encode()).hexdigest()[:20]
    return f"{DATA_KEY_PREFIX}{key.namespace}.{digest}"


def _read(value: str) -> tuple[p.AppKey, Restarts] | None:
    """An entry as written, or None for one that cannot be read (anyone who may edit the ConfigMap may
    write it: such an entry counts nothing)."""
    try:
        raw = json.loads(value)
        owners = raw["owners"] if "owners" in raw else [raw["owner"]]  # "owner" alone: an older version's
        if not isinstance(owners, list):
            return None
        return p.AppKey(str(raw["namespace"]), str(raw["app"])), Restarts(
            tuple(str(owner) for owner in owners),
            int(raw["count"]),
            float(raw["last_at"]),
            bool(raw.get("failed", False)),
            int(raw.get("timeouts", 0)),
            float(raw.get("timed_out_at", 0.0)),
        )
    except (ValueError, TypeError, KeyError):
        return None


class RestartLedger:
    def __init__(self, client: KubeClient | None, namespace: str, name: str, clock: Callable[[], float]) -> None:
        self._client = client
        self._path = f"/api/v1/namespaces/{namespace}/configmaps"
        self._name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[p.AppKey, Restarts] = {}

    @property
    def where(self) -> str:
        return f"{self._path.split('/')[4]}/{self._name}"

    def load(self) -> None:
        """Read the counts kept (a new leader does, before it reconciles); forget those gone stale. A
        ConfigMap that cannot be read leaves the counts to begin afresh, which the log says."""
        if self._client is None:
            return
        try:
            data: Mapping[str, Any] = self._client.get(f"{self._path}/{self._name}").get("data") or {}
        except NotFound:
            return
        except ApiError as error:
            log.warning("cannot read the restart counts in %s (%s): counting restarts afresh", self.where, error)
            return
        stale: list[str] = []
        entries: dict[p.AppKey, Restarts] = {}
        for name, value in data.items():
            read = _read(value) if isinstance(value, str) else None
            if read is None or self._clock() - read[1].latest > MEMORY_S:
                stale.append(name)
            else:
                entries[read[0]] = read[1]
        with self._lock:
            self._entries = entries
        if stale:
            self._write(dict.fromkeys(stale))

    def get(self, key: p.AppKey, owner: str) -> Restarts | None:
        """The gang's restarts, if counted for this owner (the one of the pod that carries its record
        now), unless forgotten."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or owner not in entry.owners or self._clock() - entry.latest > MEMORY_S:
            return None
        return entry

    def record(self, key: p.AppKey, restarts: Restarts) -> None:
        """Keep a gang's new count: in memory at once, and in the ConfigMap (a write that fails is
        logged; the count in memory stands until this controller stops)."""
        with self._lock:
            self._entries[key] = restarts
        # "owner" too, which a controller of the version before reads.
        owner = restarts.owners[0] if restarts.owners else ""
        value = json.dumps({"namespace": key.namespace, "app": key.app_id, "owner": owner, **asdict(restarts)})
        self._write({_data_key(key): value})

    def _write(self, data: dict[str, str | None]) -> None:
        if self._client is None:
            return
        path = f"{self._path}/{self._name}"
        try:
            try:
                self._client.patch(path, {"data": data})
            except NotFound:
                kept = {name: value for name, value in data.items() if value is not None}
                body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": self._name}, "data": kept}
                try:
                    self._client.create(self._path, body)
                except Conflict:  # another worker's write created it meanwhile
                    self._client.patch(path, {"data": data})
        except ApiError as error:
            log.warning("cannot keep restart counts in %s (%s); they are kept in memory only", self.where, error)
