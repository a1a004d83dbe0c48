"""Who asked for each gang workload, recorded so that queue limits per user and per group count every
application against its submitter.

The webhook writes the requester the API server authenticated (the AdmissionReview's `userInfo`) in
YuniKorn's annotation `yunikorn.apache.org/user.info` (gang/userinfo.py) on a gang pod when it is
created. Pods a controller creates are requested by the controller (job-controller,
replicaset-controller, ...), not by the person behind them, so, as YuniKorn's admission controller does,
the record is also written on the pod template of a workload (Deployment, ReplicaSet, StatefulSet,
DaemonSet, Job, CronJob) when the workload is created, and a pod keeps the record it carries when its
requester is trusted: one of Kubernetes' own controllers, which copy it from the template, or a user or
group the administrator names.

Nobody else may write the record. A record an untrusted requester brings is refused, as YuniKorn refuses
it, unless it says exactly what the webhook would write for that requester (nothing is forged then, and
a manifest exported with its own record can be created again); an edit by an untrusted requester that
changes a record already vetted is refused too. Refusing rather than silently overwriting tells the user
and the administrator that the annotation was not honoured, where an overwrite would leave a tool that
means to set it charging everything to itself without a word. The one change that is repaired instead:
a record removed from a workload's pod template (server-side apply of the original manifest does that)
is put back as it was, which cannot forge anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yuniplace.gang import userinfo
from yuniplace.gang.userinfo import ANNOTATION, UserInfo

# Kubernetes' own controllers: each runs under a service account of kube-system when kube-controller-
# manager uses --use-service-account-credentials (kubeadm's default), or as the controller manager itself.
SYSTEM_USERS = ("^system:serviceaccount:kube-system:", "^system:kube-controller-manager$")

# Where each workload kind keeps its pods' template: (API group, kind) -> JSON path.
TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """An administrator's pattern, refused when empty: an empty pattern would trust every requester."""
    if not pattern:
        raise ValueError("an empty pattern would match every name")
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(f"{pattern!r} is not a regular expression: {error}") from None


def _compiled(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(compile_pattern(pattern) for pattern in patterns)


def _matches(patterns: Sequence[re.Pattern[str]], name: str) -> bool:
    """Searched anywhere in the name, as YuniKorn's regular expressions are (anchor them with ^ and $).
    Only names the API server could have issued are matched (at most userinfo.MAX_NAME characters),
    which bounds the work; the patterns themselves are the administrator's, never a request's, so a
    pattern that backtracks badly is the administrator's to avoid."""
    return 0 < len(name) <= userinfo.MAX_NAME and any(pattern.search(name) for pattern in patterns)


@dataclass(frozen=True)
class Trust:
    """Who may carry a record of their choosing: YuniKorn's `admissionController.accessControl`
    settings `trustControllers`, `systemUsers`, `externalUsers` and `externalGroups`."""

    controllers: bool = True
    system_users: tuple[re.Pattern[str], ...] = field(default_factory=lambda: _compiled(SYSTEM_USERS))
    external_users: tuple[re.Pattern[str], ...] = ()
    external_groups: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(
        cls,
        *,
        controllers: bool = True,
        system_users: Iterable[str] = SYSTEM_USERS,
        external_users: Iterable[str] = (),
        external_groups: Iterable[str] = (),
    ) -> Trust:
        return cls(controllers, _compiled(system_users), _compiled(external_users), _compiled(external_groups))

    def is_controller(self, requester: UserInfo) -> bool:
        return _matches(self.system_users, requester.user)

    def trusts(self, requester: UserInfo) -> bool:
        return (
            (self.controllers and self.is_controller(requester))
            or _matches(self.external_users, requester.user)
            or any(_matches(self.external_groups, group) for group in requester.groups)
        )


DEFAULT_TRUST = Trust()


def requester(request: Mapping[str, Any]) -> UserInfo | None:
    """Who sent the request, as the API server authenticated them; None when the request does not say
    (the API server always does: only a hand-made review lacks it)."""
    info = request.get("userInfo")
    if not isinstance(info, Mapping):
        return None
    user, groups = info.get("username"), info.get("groups")
    if not isinstance(user, str) or not user:
        return None
    return UserInfo(user, tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else ())


@dataclass(frozen=True)
class Record:
    """What the webhook writes for a requester, and what it had to leave out to stay readable."""

    value: str
    left_out: int = 0


def record_for(who: UserInfo) -> Record | None:
    """The record of `who` as gang/userinfo.py reads it back: groups it could not read (too long, too
    many, too much text) are left out, in the order the API server gave them; None when the user's own
    name is longer than a record may hold."""
    if len(who.user) > userinfo.MAX_NAME:
        return None
    groups = [g for g in who.groups if 0 < len(g) <= userinfo.MAX_NAME][: userinfo.MAX_GROUPS]
    while len(userinfo.encode(who.user, groups)) > userinfo.MAX_TEXT:
        groups.pop()
    return Record(userinfo.encode(who.user, groups), len(who.groups) - len(groups))


@dataclass(frozen=True)
class Verdict:
    """The webhook's answer about a record: JSON patch operations to apply, or why the request is refused."""

    patch: tuple[dict[str, Any], ...] = ()
    denial: str | None = None
    warnings: tuple[str, ...] = ()


ALLOWED = Verdict()


def _value(metadata: Mapping[str, Any]) -> str | None:
    annotations = metadata.get("annotations")
    if not isinstance(annotations, Mapping) or ANNOTATION not in annotations:
        return None
    value = annotations[ANNOTATION]
    return value if isinstance(value, str) else ""


# The annotation's key as a JSON pointer token (RFC 6901: "/" is written "~1").
_POINTER_KEY = ANNOTATION.replace("~", "~0").replace("/", "~1")


def _shown(name: str) -> str:
    """A requester's name as a message quotes it: whole, unless it is longer than any name a record holds."""
    return name if len(name) <= userinfo.MAX_NAME else name[: userinfo.MAX_NAME] + "…"


def _put(metadata: Mapping[str, Any], pointer: str, value: str) -> dict[str, Any]:
    """A JSON patch operation setting the annotation in `metadata` (at JSON pointer `pointer`), creating
    the annotations when there are none."""
    if not isinstance(metadata.get("annotations"), Mapping):
        return {"op": "add", "path": f"{pointer}/annotations", "value": {ANNOTATION: value}}
    return {"op": "add", "path": f"{pointer}/annotations/{_POINTER_KEY}", "value": value}


def _record(metadata: Mapping[str, Any], pointer: str, who: UserInfo, subject: str) -> Verdict:
    record = record_for(who)
    if record is None:
        return Verdict(
            denial=f"yuniplace: {subject}: a user name of {len(who.user)} characters cannot be recorded in "
            f"{ANNOTATION} (at most {userinfo.MAX_NAME})"
        )
    warnings: tuple[str, ...] = ()
    if record.left_out:
        warnings = (
            f"yuniplace: {record.left_out} of the groups of {_shown(who.user)} are not recorded in {ANNOTATION} "
            f"(it holds at most {userinfo.MAX_GROUPS} groups of at most {userinfo.MAX_NAME} characters): "
            "limits of those groups do not count this workload",
        )
    return Verdict(patch=(_put(metadata, pointer, record.value),), warnings=warnings)


def check(
    metadata: Mapping[str, Any],
    pointer: str,
    *,
    vetted: Mapping[str, Any] | None,
    who: UserInfo | None,
    trust: Trust,
    subject: str,
    add: bool,
    restore: bool,
) -> Verdict:
    """The record of one pod, or one pod template, whose metadata is `metadata` (at JSON pointer
    `pointer` in the object; `subject` names it in messages), requested by `who`.

    `vetted`: on an update, the old metadata when the webhook already judged the old object's record
    (it was a gang's then), else None: an object the webhook has not seen before is judged as at its
    creation. `add`: write the requester's record where there is none (not where a pod can no longer be
    patched, nor on a ReplicaSet a controller creates, whose template must stay its Deployment's).
    `restore`: put a removed record back instead of refusing the removal (pod templates)."""
    value = _value(metadata)
    before = _value(vetted) if vetted is not None else None
    if vetted is not None and value == before:
        return ALLOWED
    if who is not None and trust.trusts(who):
        if value is None:
            return _record(metadata, pointer, who, subject) if add and vetted is None else ALLOWED
        if userinfo.parse(value) is None:
            return Verdict(
                denial=f"yuniplace: {subject}: {ANNOTATION} must be JSON "
                '{"user": NAME, "groups": [NAME, ...]}, names of 1 to '
                f"{userinfo.MAX_NAME} characters, at most {userinfo.MAX_GROUPS} groups and "
                f"{userinfo.MAX_TEXT} characters in all"
            )
        return ALLOWED
    asker = _shown(who.user) if who is not None else "a requester the review does not name"
    if vetted is not None:
        if value is None and before is not None and restore:
            return Verdict(patch=(_put(metadata, pointer, before),))
        return Verdict(
            denial=f"yuniplace: {subject}: {ANNOTATION} records who created it and may not be changed or "
            f"removed by {asker}, who is not a trusted requester (the chart's webhook.accessControl)"
        )
    if value is None:
        return _record(metadata, pointer, who, subject) if add and who is not None else ALLOWED
    own = record_for(who) if who is not None else None
    if own is not None and userinfo.parse(value) == userinfo.parse(own.value):
        return ALLOWED
    return Verdict(
        denial=f"yuniplace: {subject}: only the webhook and trusted requesters (the chart's "
        f"webhook.accessControl) may write {ANNOTATION}, and {asker} is not one: remove the annotation, "
        "and the webhook records who you are itself"
    )
