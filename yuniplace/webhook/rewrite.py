"""Whether to rewrite `schedulerName: yunikorn` (or `ai-scheduler`) to the default scheduler.

YuniKorn's documentation tells Spark users to set `spark.kubernetes.scheduler.name=yunikorn`. Where
YuniKorn runs, its pods are its own; where it does not, nothing would ever schedule them, so a drop-in
rewrites them and yuniplace gangs them instead. Users of ai-scheduler, another batch scheduler, bring
pods naming it the same way. `auto` asks the cluster which case it is, scheduler by scheduler.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable

import urllib3

from yuniplace.kube import ApiError, KubeClient
from yuniplace.webhook.admission import AI_SCHEDULER, REWRITTEN_SCHEDULERS, YUNIKORN_SCHEDULER

log = logging.getLogger(__name__)

# The labels that mark a scheduler's own pods, any one of them: the one YuniKorn's Helm chart gives its
# scheduler; ai-scheduler's documentation names none, so the labels a Helm chart's scaffold (Helm 2's,
# Helm 3's) and a kube-scheduler-style deployment give a scheduler of that name.
RUNNING_SELECTORS = {
    YUNIKORN_SCHEDULER: ("component=yunikorn-scheduler",),
    AI_SCHEDULER: ("app=ai-scheduler", "app.kubernetes.io/name=ai-scheduler", "component=ai-scheduler"),
}
CACHE_S = 10.0


class Mode(enum.Enum):
    AUTO = "auto"  # rewrite while the scheduler the pod names does not run in the cluster
    ALWAYS = "always"
    NEVER = "never"


class SchedulerNameRewrite:
    """The decision for the pods naming one scheduler (YuniKorn's unless told)."""

    def __init__(
        self,
        mode: Mode,
        client: KubeClient | None,
        clock: Callable[[], float] = time.monotonic,
        scheduler: str = YUNIKORN_SCHEDULER,
    ) -> None:
        self.mode = mode
        self.scheduler = scheduler
        self._selectors = RUNNING_SELECTORS[scheduler]
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._checked_at = -CACHE_S
        self._runs: bool | None = None

    def wanted(self) -> bool:
        if self.mode != Mode.AUTO:
            return self.mode == Mode.ALWAYS
        return self._running() is False

    def _running(self) -> bool | None:
        """Whether a pod of the scheduler runs (one of its selectors finds a Running pod), asked at most
        every CACHE_S; None when the cluster cannot be asked (then nothing is rewritten: a scheduler's
        pods are never taken from it)."""
        with self._lock:
            if self._clock() - self._checked_at < CACHE_S:
                return self._runs
            self._checked_at = self._clock()
            self._runs = None
            client = self._client
            if client is None:
                return None
            try:
                self._runs = any(_finds_running(client, selector) for selector in self._selectors)
            except (ApiError, OSError, urllib3.exceptions.HTTPError) as error:
                log.warning(
                    "cannot tell whether %s's scheduler runs (%s): schedulerName %s is left as it is; "
                    "set the chart's webhook.rewriteSchedulerName to always or never to decide",
                    self.scheduler,
                    error,
                    self.scheduler,
                )
            return self._runs


def _finds_running(client: KubeClient, selector: str) -> bool:
    pods = client.request("GET", "/api/v1/pods", query={"labelSelector": selector}, retry=False)["items"]
    return any((pod.get("status") or {}).get("phase") == "Running" for pod in pods)


def rewrites(mode: Mode, client: KubeClient | None) -> dict[str, SchedulerNameRewrite]:
    """One decision per scheduler whose pods may be rewritten."""
    return {name: SchedulerNameRewrite(mode, client, scheduler=name) for name in REWRITTEN_SCHEDULERS}
