"""Whether to rewrite `schedulerName: yunikorn` to the default scheduler.

YuniKorn's documentation tells Spark users to set `spark.kubernetes.scheduler.name=yunikorn`. Where
YuniKorn runs, its pods are its own; where it does not, nothing would ever schedule them, so a drop-in
rewrites them and yuniplace gangs them instead. `auto` asks the cluster which case it is.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable

import urllib3

from yuniplace.kube import ApiError, KubeClient

log = logging.getLogger(__name__)

# The labels YuniKorn's Helm chart gives its scheduler's pods.
YUNIKORN_SCHEDULER_SELECTOR = "component=yunikorn-scheduler"
CACHE_S = 10.0


class Mode(enum.Enum):
    AUTO = "auto"  # rewrite while no YuniKorn scheduler runs in the cluster
    ALWAYS = "always"
    NEVER = "never"


class SchedulerNameRewrite:
    def __init__(self, mode: Mode, client: KubeClient | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.mode = mode
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._checked_at = -CACHE_S
        self._yunikorn_runs: bool | None = None

    def wanted(self) -> bool:
        if self.mode != Mode.AUTO:
            return self.mode == Mode.ALWAYS
        return self._yunikorn_running() is False

    def _yunikorn_running(self) -> bool | None:
        """Whether a YuniKorn scheduler pod runs, asked at most every CACHE_S; None when the cluster
        cannot be asked (then nothing is rewritten: YuniKorn's pods are never taken from it)."""
        with self._lock:
            if self._clock() - self._checked_at < CACHE_S:
                return self._yunikorn_runs
            self._checked_at = self._clock()
            if self._client is None:
                self._yunikorn_runs = None
                return None
            try:
                pods = self._client.request(
                    "GET", "/api/v1/pods", query={"labelSelector": YUNIKORN_SCHEDULER_SELECTOR}, retry=False
                )["items"]
            except (ApiError, OSError, urllib3.exceptions.HTTPError) as error:
                log.warning(
                    "cannot tell whether YuniKorn's scheduler runs (%s): schedulerName yunikorn is left as it is; "
                    "set the chart's webhook.rewriteSchedulerName to always or never to decide",
                    error,
                )
                self._yunikorn_runs = None
                return None
            self._yunikorn_runs = any((pod.get("status") or {}).get("phase") == "Running" for pod in pods)
            return self._yunikorn_runs
