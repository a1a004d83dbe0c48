"""yuniplace's own faults, kept apart from its users': the stage of one application's reconcile a fault is
met in, and what its InternalError event tells the user. A fault of yuniplace's own (any error but the
InvalidGang of input it validates) never fails a gang, never releases it and never lets it fall back: the
gang is held as it is and tried again after a backoff (admission's Faulted ticket, the work queue's
retry), while every other application goes on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from yuniplace.admission.tickets import DECIDE, SNAPSHOT

READ, PLAN, APPLY, RECONCILE = "read", "plan", "apply", "reconcile"

# What yuniplace could not do, by stage, as the event says it.
WHAT = {
    SNAPSHOT: "read the gang for admission",
    DECIDE: "decide the gang's admission",
    READ: "read the gang",
    PLAN: "plan the gang's next step",
    APPLY: "carry out the gang's plan",
    RECONCILE: "reconcile the gang",
}


class InternalError(Exception):
    """A fault met at `stage` of one application's reconcile; `error` (also its __cause__) is the fault."""

    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.stage = stage
        self.error = error


class PartlyApplied(Exception):
    """A write of a plan failed (`error`, also its __cause__), which stopped the plan there: `done` says
    which of its writes were done and which not."""

    def __init__(self, done: str, error: BaseException) -> None:
        super().__init__(f"{done}: {type(error).__name__}: {error}")
        self.done = done
        self.error = error


class Moot(Exception):
    """A plan's write found its pod gone (`error`, also its __cause__; `done` as PartlyApplied's): the plan
    rested on a pod deleted since the store last heard of it, and nothing is at fault. The deletion's own
    event brings the gang's next look, which plans from what is left."""

    def __init__(self, done: str, error: BaseException) -> None:
        super().__init__(f"{done}: {error}")
        self.done = done
        self.error = error


@contextlib.contextmanager
def at(stage: str) -> Iterator[None]:
    """Whatever fails within is a fault met at `stage` (a fault already placed keeps its stage; a moot
    plan is none)."""
    try:
        yield
    except (InternalError, Moot):
        raise
    except Exception as error:
        raise InternalError(stage, error) from error


def stage_of(error: BaseException) -> str:
    return error.stage if isinstance(error, InternalError) else RECONCILE


def note(stage: str, error: BaseException | str, retry_in_s: float) -> str:
    """The InternalError event's note: which stage, which error (its type only: its message may name what
    the gang's namespace must not read; the trace is in the controller's log), what was done of a plan
    applied in part, and that the gang is held and tried again."""
    cause = error.error if isinstance(error, InternalError) else error
    done = f"; of its plan, {cause.done}" if isinstance(cause, PartlyApplied) else ""
    if isinstance(cause, PartlyApplied):
        cause = cause.error
    name = cause if isinstance(cause, str) else type(cause).__name__
    return (
        f"yuniplace could not {WHAT.get(stage, WHAT[RECONCILE])}: an error of yuniplace's own ({name}; the "
        f"controller's log has its trace), not a fault of the gang's task groups{done}. The gang is held as it is "
        f"(its gated pods stay gated; nothing is failed or released) and tried again in {retry_in_s:.0f}s, then "
        "less often while the fault lasts"
    )
