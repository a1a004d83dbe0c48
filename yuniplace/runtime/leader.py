"""Leader election over a coordination.k8s.io/v1 Lease, so two replicas never reconcile at once.

It follows client-go's rules: a lease is taken over only when its holder has not renewed it for a
whole lease duration *as observed on this replica's own clock* (never trusting the remote renewTime,
so clock skew between replicas cannot make two leaders), a leader that cannot renew within the
renew deadline stops leading, and a leader shutting down releases the lease so the standby takes
over at once instead of waiting the lease out.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3

from yuniplace.kube import AlreadyExists, ApiError, Conflict, KubeClient, NotFound

log = logging.getLogger(__name__)

_FAILURES = (ApiError, OSError, urllib3.exceptions.HTTPError)


@dataclass(frozen=True)
class LeaseTiming:
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


def _micro_time(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        timing: LeaseTiming = LeaseTiming(),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        labels: Mapping[str, str] | None = None,
        notes: Callable[[], Mapping[str, str]] = dict,
    ) -> None:
        self._client = client
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._name = name
        self._namespace = namespace
        self.identity = identity
        self._timing = timing
        self._clock = clock
        self._wall_clock = wall_clock
        # What we last saw of the lease, and when (on our clock): the basis for expiry.
        self._observed_record: tuple[str, str] | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None
        # Carried on the Lease by the leader with each write: labels that find it, and annotations that
        # say what it does now (`notes`: the optional APIs it reads), for `yuniplace status`.
        self._labels = dict(labels or {})
        self._notes = notes

    def _metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        labels = {**(metadata.get("labels") or {}), **self._labels}
        annotations = {**(metadata.get("annotations") or {}), **self._notes()}
        return {
            **metadata,
            **({"labels": labels} if labels else {}),
            **({"annotations": annotations} if annotations else {}),
        }

    def _spec(self, transitions: int, acquired: str | None = None) -> dict[str, Any]:
        now = _micro_time(self._wall_clock())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self._timing.lease_duration_s),
            "acquireTime": acquired or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True if we hold the lease afterwards."""
        # No retries inside: a call stuck retrying would outlast the renew deadline unnoticed.
        try:
            lease = self._client.request("GET", self._path, retry=False)
        except NotFound:
            try:
                self._lease = self._client.request(
                    "POST",
                    self._collection,
                    body={
                        "metadata": self._metadata({"name": self._name, "namespace": self._namespace}),
                        "spec": self._spec(0),
                    },
                    retry=False,
                )
            except AlreadyExists:
                return False
            self._observe(self._lease)
            return True
        spec = lease.get("spec", {})
        holder = spec.get("holderIdentity") or ""
        self._observe(lease)
        expired = self._clock() > self._observed_at + float(
            spec.get("leaseDurationSeconds") or self._timing.lease_duration_s
        )
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
        acquired = spec.get("acquireTime") if holder == self.identity else None
        lease["spec"] = self._spec(transitions, acquired)
        lease["metadata"] = self._metadata(lease.get("metadata") or {})
        try:
            self._lease = self._client.request(
                "PUT", self._path, body=lease, retry=False
            )  # resourceVersion guards the race
        except Conflict:
            return False
        self._observe(self._lease)
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec", {})
        record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
        if record != self._observed_record:
            self._observed_record = record
            self._observed_at = self._clock()

    def release(self) -> None:
        """Give the lease up (on shutdown) so a standby need not wait for it to expire."""
        if self._lease is None:
            return
        lease = dict(self._lease)
        lease["spec"] = {**lease.get("spec", {}), "holderIdentity": "", "leaseDurationSeconds": 1}
        try:
            self._client.request("PUT", self._path, body=lease, retry=False)
            log.info("released lease %s/%s", self._namespace, self._name)
        except _FAILURES as error:
            log.warning("could not release lease %s/%s: %s", self._namespace, self._name, error)

    def run(self, lead: Callable[[threading.Event], None], stop: threading.Event) -> bool:
        """Wait for the lease, then call `lead(lost)` in a thread and keep renewing. `lost` is set when
        renewing fails past the deadline or `stop` is set. Returns True if leadership was lost
        (the process should exit and start afresh, as client-go's users do), False on a clean stop."""
        while not stop.is_set():
            try:
                if self.try_acquire_or_renew():
                    break
            except _FAILURES as error:
                log.warning("could not take lease %s/%s: %s", self._namespace, self._name, error)
            stop.wait(self._timing.retry_period_s)
        if stop.is_set():
            return False
        log.info("became leader (%s) of lease %s/%s", self.identity, self._namespace, self._name)
        lost = threading.Event()
        leader = threading.Thread(target=lead, args=(lost,), name="leader")
        leader.start()
        last_renewed = self._clock()
        lost_leadership = False
        while not stop.wait(self._timing.retry_period_s):
            try:
                renewed = self.try_acquire_or_renew()
            except _FAILURES as error:
                log.warning("could not renew lease: %s", error)
                renewed = False
            holder = self._observed_record[0] if self._observed_record else ""
            if renewed:
                last_renewed = self._clock()
            elif holder not in ("", self.identity):
                log.error("lost lease %s/%s to %s", self._namespace, self._name, holder)
                lost_leadership = True
                break
            elif self._clock() - last_renewed > self._timing.renew_deadline_s:
                log.error(
                    "lost lease %s/%s: not renewed for %.0fs",
                    self._namespace,
                    self._name,
                    self._timing.renew_deadline_s,
                )
                lost_leadership = True
                break
        lost.set()
        leader.join()
        if not lost_leadership:
            self.release()
        return lost_leadership
