"""What every gang dialect answers, so the rest of yuniplace asks the dialect instead of naming it.

A dialect is one way users write a gang: YuniKorn's task groups, Coscheduling's labels, Koordinator's
annotations, a PodGroup object (scheduler-plugins' or Volcano's), or Kubernetes' own Workload API.
`GangDialect` covers what every dialect says; `PodGroupApi` what a dialect whose gangs are described by
PodGroup objects says besides (where they are served, how their status is written back). Adding a
dialect is one module implementing these and one line in `registry.DIALECTS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from yuniplace.gang import keys
from yuniplace.gang.keys import Key
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, Limits, Problem

Pod = Mapping[str, Any]
PodGroup = Mapping[str, Any]


def annotations_of(pod: Pod) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("annotations") or {}


def labels_of(pod: Pod) -> Mapping[str, str]:
    return pod.get("metadata", {}).get("labels") or {}


def is_gated(pod: Pod) -> bool:
    """Whether yuniplace's scheduling gate holds the pod (a dialect may read a gang differently once
    yuniplace holds it)."""
    return any(g.get("name") == keys.GATE for g in pod.get("spec", {}).get("schedulingGates") or [])


@dataclass(frozen=True)
class GangProgress:
    """Where a gang stands, as a PodGroup's status reports it; counted from its members (pods of the
    gang, placeholders left out) by the controller, told in each scheduler's terms by its dialect."""

    state: AppState
    min_members: int  # the gang's minimum as yuniplace reads it (1 while it cannot be read)
    scheduled: int
    running: int
    succeeded: int
    failed: int
    bound_have_ended: bool  # every scheduled member has ended
    some_member_lives: bool  # some member has not ended
    started: str | None  # when its reservation began (RFC 3339), if it has
    now: str  # the moment the status is written (RFC 3339)

    def counts(self, names: Sequence[str]) -> dict[str, int]:
        every = {
            "scheduled": self.scheduled,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }
        return {name: every[name] for name in names}


def differs(status: Mapping[str, Any], shown: Mapping[str, Any], counts: Sequence[str]) -> bool:
    """Whether `status` says anything `shown` does not; counts left out read as 0, as both PodGroup
    schedulers leave them out."""
    return any(shown.get(k, 0 if k in counts else None) != v for k, v in status.items())


class PodGroupApi(Protocol):
    """The API of the PodGroup objects that describe a dialect's gangs, one PodGroup per gang, named as
    the gang's application."""

    @property
    def path(self) -> str:
        """The API group and version, as served: "/apis/scheduling.x-k8s.io/v1alpha1"."""

    @property
    def named_by(self) -> str:
        """What of a member names its PodGroup, for messages: "label scheduling.x-k8s.io/pod-group"."""

    @property
    def kind(self) -> str:
        """How messages name one of its objects: "PodGroup", "Volcano PodGroup"."""

    @property
    def gangs(self) -> str:
        """How the log names the gangs it describes, when the API is not installed: "PodGroup gangs"."""

    @property
    def watch_name(self) -> str:
        """The name of its watch, in logs and metrics."""

    def status(self, pod_group: PodGroup, progress: GangProgress) -> dict[str, Any] | None:
        """The PodGroup's status in its own scheduler's terms, when it differs from what it shows."""

    def queue(self, pod_group: PodGroup) -> str | None:
        """The queue the PodGroup puts its gang in, matched with a queue of that scheduler; None when
        the dialect has no queues of its own."""

    def missing_tasks(self, pod_group: PodGroup, members: Sequence[Pod]) -> list[str]:
        """Parts of the gang the PodGroup sizes by pods that do not exist yet: until they do, the gang
        cannot be read."""


class GangDialect(Protocol):
    """One way of writing a gang, as yuniplace reads it."""

    @property
    def title(self) -> str:
        """How messages name the dialect: "Coscheduling"."""

    @property
    def keys(self) -> tuple[Key, ...]:
        """The labels and annotations of its own that it reads or writes, described for the reference of
        keys (YuniKorn's are keys.py's, read all over yuniplace)."""

    @property
    def pod_groups(self) -> PodGroupApi | None:
        """The API whose PodGroups describe its gangs, if its gangs are described by PodGroups."""

    @property
    def started_by_kube_scheduler(self) -> bool:
        """Whether kube-scheduler starts its gangs all or nothing by itself: yuniplace then never gates,
        placeholds or swaps their pods, and only sees them (they count in queues and in the room
        admission gives out)."""

    @property
    def spec_fields(self) -> tuple[str, ...]:
        """The pod spec fields it reads besides those every pod keeps, so a watched pod trimmed of the
        rest still says all the dialect reads."""

    def detects(self, pod: Pod) -> bool:
        """Whether the pod's gang is written in this dialect."""

    def gang_name(self, pod: Pod) -> str | None:
        """The application the pod's gang is, as the dialect names it; None leaves it to the
        application id sources every pod may carry."""

    def named_by(self, pod: Pod) -> str:
        """What of the pod names its gang, for messages: "label scheduling.x-k8s.io/pod-group"."""

    def task_group(self, pod: Pod) -> str | None:
        """The task group a member belongs to."""

    def describes_gang(self, pod: Pod) -> bool:
        """Whether the pod carries its gang's description (any pod of a dialect that describes the
        whole gang on each pod; only the pods carrying the task groups in YuniKorn's)."""

    def readable(self, pod_group: PodGroup | None, members: Sequence[Pod]) -> bool:
        """Whether the gang can be read from what exists: a PodGroup not seen yet, or a part of the gang
        with no pod yet to size it by, leaves it waiting."""

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        """The gang the pod describes (`pod_group`: the PodGroup it names; `members`: the application's
        pods); InvalidGang names the user's own fields, so the message points at what they wrote."""

    def own_problems(self, pod: Pod, limits: Limits) -> list[Problem]:
        """What is wrong in what a member says itself, checked without its PodGroup (the webhook reads
        nothing from the API, and a PodGroup may be created after its pods)."""
