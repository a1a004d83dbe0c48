"""The application's record: the annotations yuniplace keeps on the originator (its state, when the
reservation began, its first allocation, Strict retries, when it became first in its queue, the
topology domains admission chose, the queue whose nodes it borrows, since when it is degraded), read
and validated in this one place.

The controller writes them, but anyone who may edit the pod may write them too, so they are input
like any other: a value that cannot be read is an InvalidGang naming the key, which fails this one
application by its style and never the controller's work for others.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from yuniplace.gang import keys
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import InvalidGang, Problem
from yuniplace.gang.topology import BadTopology, Domains, read_domains

# The controller writes times as RFC 3339 in UTC; nothing else is accepted.
TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$")
MAX_ATTEMPTS = 10_000
QUEUE_PATH = re.compile(r"^root(\.[^.\s]{1,64}){0,16}$")
NODE_POOL = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a NodePool's name: a DNS subdomain
MAX_NODE_POOLS = 32


@dataclass(frozen=True)
class Record:
    state: AppState = AppState.PENDING
    reservation_started: float | None = None
    first_allocated: float | None = None
    attempts: int = 0  # Strict (or refused) reservations given back so far
    retry_after: float | None = None  # when the next attempt may begin
    queued_since: float | None = None  # when it became first in its admission queue, while it waits there
    domains: Domains = field(default_factory=Domains)  # the topology domains admission chose, kept through it
    lender: str | None = None  # the queue whose pool's idle nodes its reservation borrows besides its own
    grows: tuple[str, ...] = ()  # the autoscaler's node pools whose nodes to come it counted on
    degraded_since: float | None = None  # when the started gang fell below its minimum, while it is
    degraded_reported: bool = False  # and whether that has been said (GangDegraded)
    # Whether the originator carries a state at all: a pod of the application that took over from an
    # originator gone (deleted, evicted) carries none, whatever became of the gang.
    kept: bool = False


def _time(notes: Mapping[str, str], key: str, problems: list[Problem]) -> float | None:
    text = notes.get(key)
    if text is None:
        return None
    if TIME.match(text):
        try:
            return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    problems.append(
        Problem(key, text, 'is not a time such as "2026-01-02T15:04:05Z" (yuniplace writes it; remove it to reset)')
    )
    return None


def _state(notes: Mapping[str, str], problems: list[Problem]) -> AppState:
    text = notes.get(keys.STATE)
    if text is None:
        return AppState.PENDING
    state = next((s for s in AppState if s.value == text), None)
    if state is None:
        problems.append(Problem(keys.STATE, text, f"is not a state ({', '.join(s.value for s in AppState)})"))
        return AppState.PENDING
    return state


def _attempts(notes: Mapping[str, str], problems: list[Problem]) -> int:
    text = notes.get(keys.ATTEMPTS)
    if text is None:
        return 0
    if re.fullmatch(r"[0-9]{1,5}", text) and int(text) <= MAX_ATTEMPTS:
        return int(text)
    problems.append(Problem(keys.ATTEMPTS, text, f"is not a whole number from 0 to {MAX_ATTEMPTS}"))
    return 0


def _domains(notes: Mapping[str, str], problems: list[Problem]) -> Domains:
    try:
        return read_domains(notes.get(keys.TOPOLOGY_DOMAIN))
    except BadTopology as bad:
        problems.append(Problem(bad.field, bad.value, bad.expected))
        return Domains()


def _queue(notes: Mapping[str, str], problems: list[Problem]) -> str | None:
    """A queue's path; which queues exist is the queue configuration's to say (a lender no longer
    configured lends nothing)."""
    text = notes.get(keys.BORROWED_FROM)
    if text is None:
        return None
    if QUEUE_PATH.match(text):
        return text
    problems.append(Problem(keys.BORROWED_FROM, text, "is not a queue such as root.team-a (yuniplace writes it)"))
    return None


def _node_pools(notes: Mapping[str, str], problems: list[Problem]) -> tuple[str, ...]:
    text = notes.get(keys.SCALE_UP)
    if text is None:
        return ()
    names = tuple(text.split(","))
    if len(names) <= MAX_NODE_POOLS and all(NODE_POOL.match(name) for name in names):
        return names
    problems.append(
        Problem(keys.SCALE_UP, text, "is not a list of node pool names such as gpu,batch (yuniplace writes it)")
    )
    return ()


def read_record(notes: Mapping[str, str]) -> Record:
    """The originator's record; InvalidGang names every key that cannot be read."""
    problems: list[Problem] = []
    record = Record(
        state=_state(notes, problems),
        reservation_started=_time(notes, keys.RESERVATION_STARTED, problems),
        first_allocated=_time(notes, keys.FIRST_ALLOCATED, problems),
        attempts=_attempts(notes, problems),
        retry_after=_time(notes, keys.RETRY_AFTER, problems),
        queued_since=_time(notes, keys.QUEUED_SINCE, problems),
        domains=_domains(notes, problems),
        lender=_queue(notes, problems),
        grows=_node_pools(notes, problems),
        degraded_since=_time(notes, keys.DEGRADED_SINCE, problems),
        degraded_reported=notes.get(keys.DEGRADED_REPORTED) == "true",
        kept=keys.STATE in notes,
    )
    if problems:
        raise InvalidGang(problems)
    return record


def state_of(notes: Mapping[str, str]) -> AppState:
    """The state alone, Pending when unreadable: what an application whose record is broken is
    taken to be in while it is failed or released for it."""
    return _state(notes, [])
