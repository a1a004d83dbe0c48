"""Whether to rewrite a pod's `schedulerName` naming another batch scheduler to the default scheduler.

YuniKorn's documentation tells Spark users to set `spark.kubernetes.scheduler.name=yunikorn`, and
operators' batch-scheduler integrations name the scheduler they write for (KubeRay's `yunikorn` mode
names YuniKorn, its `scheduler-plugins` mode scheduler-plugins' second scheduler). Where that scheduler
runs, its pods are its own; where it does not, nothing would ever schedule them, so a drop-in rewrites
them and yuniplace gangs them instead. The schedulers taken over are the webhook's to configure
(`--rewritten-scheduler`); `auto` asks the cluster, scheduler by scheduler, whether one runs.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

import urllib3

from yuniplace.kube import ApiError, KubeClient
from yuniplace.webhook.admission import REWRITTEN_SCHEDULERS, SCHEDULER_PLUGINS_SCHEDULER, YUNIKORN_SCHEDULER

log = logging.getLogger(__name__)

# How a scheduler's own pods are found where it runs: label selectors, each with the prefix the pods'
# names must have where the label is not the scheduler's alone. YuniKorn's Helm chart labels its
# scheduler component=yunikorn-scheduler; scheduler-plugins' chart labels its scheduler only
# `component: scheduler`, in a Deployment named after the scheduler; any other scheduler is found by the
# labels a Helm chart's scaffold (Helm 2's, Helm 3's) and a kube-scheduler-style deployment give a pod of
# its name.
KNOWN_FINDERS = {
    YUNIKORN_SCHEDULER: (("component=yunikorn-scheduler", ""),),
    SCHEDULER_PLUGINS_SCHEDULER: (("component=scheduler", f"{SCHEDULER_PLUGINS_SCHEDULER}-"),),
}


def finders(scheduler: str) -> tuple[tuple[str, str], ...]:
    """(label selector, name prefix) pairs finding the pods of a scheduler of this name, where it runs."""
    named = tuple((f"{label}={scheduler}", "") for label in ("app", "app.kubernetes.io/name", "component"))
    return KNOWN_FINDERS.get(scheduler, named)


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
        self._finders = finders(scheduler)
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
                self._runs = any(_finds_running(client, selector, prefix) for selector, prefix in self._finders)
            except (ApiError, OSError, urllib3.exceptions.HTTPError) as error:
                log.warning(
                    "cannot tell whether %s's scheduler runs (%s): schedulerName %s is left as it is; "
                    "set the chart's webhook.rewriteSchedulerName to always or never to decide",
                    self.scheduler,
                    error,
                    self.scheduler,
                )
            return self._runs


def _finds_running(client: KubeClient, selector: str, prefix: str) -> bool:
    """Whether a Running pod matches `selector`, its name starting with `prefix`."""
    pods = client.request("GET", "/api/v1/pods", query={"labelSelector": selector}, retry=False)["items"]
    return any(
        (pod.get("status") or {}).get("phase") == "Running"
        and str((pod.get("metadata") or {}).get("name", "")).startswith(prefix)
        for pod in pods
    )


def rewrites(
    mode: Mode, client: KubeClient | None, schedulers: Iterable[str] = REWRITTEN_SCHEDULERS
) -> dict[str, SchedulerNameRewrite]:
    """One decision per scheduler whose pods may be rewritten."""
    return {name: SchedulerNameRewrite(mode, client, scheduler=name) for name in schedulers}


def decider(decisions: Mapping[str, SchedulerNameRewrite]) -> Callable[[str], bool]:
    """Whether to rewrite pods naming a scheduler, by its name: only the schedulers taken over are ever
    asked about (which may cost an API call); pods of any other keep their scheduler."""

    def wanted(name: str) -> bool:
        decision = decisions.get(name)
        return decision is not None and decision.wanted()

    return wanted
