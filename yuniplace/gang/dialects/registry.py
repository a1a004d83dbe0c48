"""The gang dialects yuniplace reads, in the order they win when a pod speaks several, and the lookups
the rest of yuniplace asks them through. The only module that imports the dialects themselves.

A pod of a native pod group is kube-scheduler's gang whatever else it carries: reserving it a second
time would count its room twice. Otherwise YuniKorn's task groups win, the language yuniplace speaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from yuniplace.gang.dialects import coscheduling, koordinator, native, podgroup, volcano, yunikorn
from yuniplace.gang.dialects.base import GangDialect, Pod, PodGroupApi
from yuniplace.gang.keys import Key

DIALECTS: tuple[GangDialect, ...] = (
    native.DIALECT,
    yunikorn.DIALECT,
    koordinator.DIALECT,
    coscheduling.DIALECT,
    podgroup.DIALECT,
    volcano.DIALECT,
)


def dialect_of(pod: Pod) -> GangDialect | None:
    """The dialect the pod's gang is written in, if it has one."""
    return next((dialect for dialect in DIALECTS if dialect.detects(pod)), None)


def ignored_dialect(pod: Pod) -> GangDialect | None:
    """The gang a pod of a gang kube-scheduler starts itself also describes in another dialect, which
    yuniplace then ignores; None for every other pod."""
    speaks = (dialect for dialect in DIALECTS if dialect.detects(pod))
    first = next(speaks, None)
    return next(speaks, None) if first is not None and first.started_by_kube_scheduler else None


def started_by_kube_scheduler(pods: Sequence[Pod]) -> bool:
    """Whether an application's pods form a gang kube-scheduler starts itself: its pods share the pod
    group that makes them one application, so its first pod tells (a pod naming another is another
    application)."""
    dialect = dialect_of(pods[0]) if pods else None
    return dialect is not None and dialect.started_by_kube_scheduler


def pod_group_dialect(pods: Iterable[Pod]) -> GangDialect | None:
    """The dialect whose PodGroup describes the gang of an application's pods (its first member's whose
    dialect has PodGroups), if any: a scheduler-plugins and a Volcano PodGroup may share a name, and
    only the one its pods name is theirs."""
    return next((d for pod in pods if (d := dialect_of(pod)) is not None and d.pod_groups is not None), None)


def pod_group_api(pods: Iterable[Pod]) -> PodGroupApi | None:
    """The API of the PodGroup that describes the gang of an application's pods, if any."""
    dialect = pod_group_dialect(pods)
    return None if dialect is None else dialect.pod_groups


def pod_group_apis() -> tuple[PodGroupApi, ...]:
    """Every API whose PodGroups describe gangs, each watched where it is served."""
    return tuple(api for dialect in DIALECTS if (api := dialect.pod_groups) is not None)


def documented_keys() -> tuple[tuple[str, tuple[Key, ...]], ...]:
    """Each dialect's own keys, by its title, in precedence order (for the reference of keys)."""
    return tuple((dialect.title, dialect.keys) for dialect in DIALECTS if dialect.keys)
