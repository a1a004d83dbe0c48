"""Koordinator's gang annotations: a gang of `min-available` pods like the one annotated, named by its
`name` annotation, with Koordinator's waiting time (the placeholders' timeout), mode (Strict by
default) and gang group. Koordinator holds a gang's pods until its minimum exist, so no member starts
before all do."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from yuniplace.gang.dialects.base import Pod, PodGroup, annotations_of
from yuniplace.gang.dialects.stated import PodsLikeThese, StatedGang, gang_spec, most_members
from yuniplace.gang.keys import Key
from yuniplace.gang.podshape import whole_number
from yuniplace.gang.taskgroups import GangSpec, Limits, Mode, OnTimeout, Problem, gang_group

PREFIX = "gang.scheduling.koordinator.sh/"
NAME = PREFIX + "name"  # annotations, all of them
MIN_AVAILABLE = PREFIX + "min-available"
WAITING_TIME = PREFIX + "waiting-time"
MODE = PREFIX + "mode"
GROUPS = PREFIX + "groups"
# Written on each pod of a gang that timed out: koord-scheduler then never schedules it.
TIMEOUT = PREFIX + "timeout"
KEYS = (
    Key(NAME, "annotation", "gang member", "you", "marks a Koordinator gang pod and names its gang"),
    Key(MIN_AVAILABLE, "annotation", "gang member", "you", "the gang's minimum: pods that start together"),
    Key(WAITING_TIME, "annotation", "gang member", "you", "the gang's timeout, a Go duration (`300s`, `10m`)"),
    Key(MODE, "annotation", "gang member", "you", "`Strict` (the default) or `NonStrict`"),
    Key(
        GROUPS,
        "annotation",
        "gang member",
        "you",
        "a JSON list of gangs reserved all or nothing together; empty or `[]`: no gang group",
    ),
    Key(
        TIMEOUT,
        "annotation",
        "gang member",
        "yuniplace",
        "`true` on each pod of a gang that timed out: it stays gated and is never scheduled; delete and recreate it",
    ),
)

GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s))+$")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration_s(text: str, where: str, problems: list[Problem]) -> int | None:
    """Go's duration syntax ("90s", "10m", "1h30m"), as Koordinator's waiting-time is written."""
    if not GO_DURATION.match(text):
        problems.append(Problem(where, text, 'must be a duration such as "600s", "10m" or "1h30m"'))
        return None
    seconds = sum(float(amount) * SECONDS[unit] for amount, unit in DURATION_PART.findall(text))
    if seconds < 1:
        problems.append(Problem(where, text, "must be at least 1s"))
        return None
    return int(seconds)


class Koordinator(PodsLikeThese):
    title = "Koordinator"
    keys = KEYS

    def detects(self, pod: Pod) -> bool:
        return bool(annotations_of(pod).get(NAME))

    def gang_name(self, pod: Pod) -> str | None:
        return annotations_of(pod)[NAME]

    def named_by(self, pod: Pod) -> str:
        return f"annotation {NAME}"

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        notes = annotations_of(pod)
        # Out of its waiting time, Koordinator marks the gang's pods timed out and never schedules them.
        stated = StatedGang(counted_by=MIN_AVAILABLE, on_timeout=OnTimeout.MARK_TIMED_OUT)
        problems = stated.problems
        stated.min_member = whole_number(
            notes.get(MIN_AVAILABLE, "1"), MIN_AVAILABLE, problems, most=most_members(limits)
        )
        if WAITING_TIME in notes:
            stated.timeout_s = _duration_s(notes[WAITING_TIME], WAITING_TIME, problems)
        # Koordinator's default mode is Strict.
        written = notes.get(MODE, Mode.STRICT.value)
        stated.mode = next((m for m in Mode if m.value == written), Mode.STRICT)
        if written != stated.mode.value:
            problems.append(Problem(MODE, written, "must be Strict or NonStrict"))
        groups_text = notes.get(GROUPS)
        # Koordinator reads an empty value, or an empty list, as no gang group.
        if groups_text is not None and groups_text.strip() not in ("", "[]"):
            stated.group_with = gang_group(groups_text, GROUPS, problems)
        spec = gang_spec(pod, stated, self.title, limits, members)
        return dataclasses.replace(spec, starts_when_all_exist=self.title, timed_out_mark=TIMEOUT)


DIALECT = Koordinator()
