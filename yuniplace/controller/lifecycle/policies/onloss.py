"""What a started gang below its minimum does (gang/onloss.py): one rule per `OnLoss`, each with the
words its GangDegraded event says, whether it holds replacements back, and what it does (its action).
A new rule is one entry of `ON_LOSS`.

`restart` and `release` both evict the gang whole (its owner makes its pods again, and the gang is
admitted and started whole as a new attempt), each restart after a backoff that doubles; past its
restart limit the gang fails instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from yuniplace.controller.lifecycle.context import Context, Step
from yuniplace.controller.lifecycle.table import TRANSITIONS, Trigger
from yuniplace.controller.plan import Outcome
from yuniplace.controller.restarts import Restarts
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.losses import Losses
from yuniplace.gang.onloss import OnLoss
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason

MAX_RESTART_BACKOFF_S = 600.0


def degraded(ctx: Context, losses: Losses) -> bool:
    """Below its minimum for a loss; and, once so, until members that run bring it back: room held
    and members on their way make a starting gang whole, not one that lost members."""
    return losses.degraded or (ctx.app.record.degraded_since is not None and not losses.whole)


def _owner(ctx: Context) -> Mapping[str, Any] | None:
    return p.controller_of(ctx.originator)


class Rule:
    """A loss rule; `trigger`, what its eviction is (None: it never evicts), and `label`, its metric's."""

    trigger: ClassVar[Trigger | None] = None
    label: ClassVar[str] = ""

    def says(self, ctx: Context) -> str:
        """What follows, as the GangDegraded event says it."""
        raise NotImplementedError

    def acts(self, ctx: Context) -> bool:
        """Whether a loss makes the gang do something (restart or release it), not only be reported."""
        return self.trigger is not None and _owner(ctx) is not None

    def holds_back(self, ctx: Context) -> bool:
        """Whether the gang, short for a loss, takes no replacement in (its Job's new pod for one that
        failed or went), which would only join members about to be evicted."""
        return False

    def act(self, ctx: Context, since: float) -> Step | None:
        return None


class ReportOnly(Rule):
    def says(self, ctx: Context) -> str:
        return f"it keeps running as it is ({keys.ON_MEMBER_LOST}: none)"


class Restart(Rule):
    trigger = Trigger.RESTARTED
    label = "restarted"

    def says(self, ctx: Context) -> str:
        if _owner(ctx) is None:
            return f"{keys.ON_MEMBER_LOST} is restart, but its pods have no owner to make them again: not restarted"
        return f"restarting it whole ({keys.ON_MEMBER_LOST}: restart)"

    def holds_back(self, ctx: Context) -> bool:
        return _owner(ctx) is not None and degraded(ctx, ctx.losses)

    def act(self, ctx: Context, since: float) -> Step | None:
        if not ctx.app.live_members() or _owner(ctx) is None:
            return None  # evicted already, its pods on their way out; or nothing would make its pods again
        history, limit = ctx.around.restarts, ctx.spec.on_loss.restart_limit
        if history is not None and history.count < limit:
            backoff = ctx.settings.restart_backoff_s * 2 ** (history.count - 1)
            next_at = history.last_at + min(MAX_RESTART_BACKOFF_S, backoff)
            if ctx.now < next_at:
                ctx.requeue_within(next_at - ctx.now)
                return None
        return evict_whole(ctx, self, since)


class Release(Rule):
    trigger = Trigger.RELEASED
    label = "released"

    def says(self, ctx: Context) -> str:
        return (
            f"evicting it whole unless it is back at its minimum within {ctx.spec.on_loss.recovery_timeout_s}s "
            f"({keys.ON_MEMBER_LOST}: release)"
        )

    def act(self, ctx: Context, since: float) -> Step | None:
        if not ctx.app.live_members():
            return None  # evicted already: its pods are on their way out
        recovered_by = since + ctx.spec.on_loss.recovery_timeout_s
        if ctx.now < recovered_by:
            ctx.requeue_within(recovered_by - ctx.now)
            return None
        return evict_whole(ctx, self, since)


ON_LOSS: Mapping[OnLoss, Rule] = {OnLoss.NONE: ReportOnly(), OnLoss.RESTART: Restart(), OnLoss.RELEASE: Release()}


def rule_of(ctx: Context) -> Rule:
    return ON_LOSS[ctx.spec.on_loss.on_loss]


def act(ctx: Context, step: Step) -> Step | None:
    """What follows a loss reported now: the gang's rule, counted from when it fell below its minimum."""
    since = ctx.app.record.degraded_since
    assert since is not None, "a loss is reported only once its grace has passed"
    return rule_of(ctx).act(ctx, since)


def evict_whole(ctx: Context, rule: Rule, since: float) -> Step:
    """Evict every pod of the gang still there, together, for its owner to make them again (and keep
    its count of restarts), or, past its restart limit, fail it."""
    plan, policy, losses = ctx.plan, ctx.spec.on_loss, ctx.losses
    remaining = ctx.app.live_members()
    owner = _owner(ctx)
    count = 0 if ctx.around.restarts is None else ctx.around.restarts.count
    plan.evict = remaining
    ctx.delete_placeholders()
    if p.is_terminal(ctx.originator):  # it stays (a Job keeps its failed pod): its loss is over (see end_attempt)
        for key in (keys.DEGRADED_SINCE, keys.DEGRADED_REPORTED):
            plan.annotate[key] = None
    pods = "its pod" if len(remaining) == 1 else f"its {len(remaining)} pods"
    lost = f"{losses.minimum - losses.up - losses.done} of its minimum {losses.minimum} members lost"
    kept = ctx.around.restarts or Restarts((), 0, ctx.now)
    owners = tuple(sorted({*kept.owners, *ctx.app.owners}))
    if owner is not None and count >= policy.restart_limit:
        plan.restarts = replace(kept, owners=owners, count=count, last_at=ctx.now, failed=True)
        ctx.event(
            ctx.originator,
            Reason.APPLICATION_FAILED,
            f"{lost} after {count} restart(s), its limit ({keys.RESTART_LIMIT}: {policy.restart_limit}): the "
            f"application fails; evicting {pods}, and every new pod of it fails at once",
        )
        return Step(Trigger.RESTARTS_EXHAUSTED)
    made_again = "" if owner is None else f" for {owner.get('kind')} {owner.get('name')} to make them again"
    if owner is not None:
        plan.restarts = replace(kept, owners=owners, count=count + 1, last_at=ctx.now)
    attempt = "" if owner is None else f" (restart {count + 1} of at most {policy.restart_limit})"
    if rule.trigger == Trigger.RESTARTED:
        ctx.event(ctx.originator, Reason.GANG_RESTARTING, f"{lost}: evicting {pods} together{made_again}{attempt}")
        return Step(Trigger.RESTARTED)
    ctx.event(
        ctx.originator,
        Reason.GANG_RELEASED,
        f"{lost} for {ctx.now - since:.0f}s, past its recovery timeout ({policy.recovery_timeout_s}s): "
        f"evicting {pods} to give its room back{made_again}{attempt}",
    )
    return Step(Trigger.RELEASED)


def end_attempt(ctx: Context, step: Step) -> Step | None:
    """A gang evicted whole for its owner to make it again, whose originator has ended and stays (a Job
    keeps its failed pod): that pod's record is over, so that the next attempt's pods are a gang of their
    own, with a record on their own originator."""
    return Step(Trigger.ATTEMPT_OVER) if p.is_terminal(ctx.originator) else None


# What each loss rule's eviction is counted as (the loss_actions metric's label).
LOSS_ACTIONS: Mapping[Outcome, str] = {
    **{
        outcome: rule.label
        for rule in ON_LOSS.values()
        if rule.trigger is not None and (outcome := TRANSITIONS[(AppState.RUNNING, rule.trigger)].outcome) is not None
    },
    Outcome.RESTARTS_EXHAUSTED: "failed",
}
