"""A gang's life: the transitions table (table.py), the dispatcher that picks a phase and carries each
step through the table (dispatch.py), one module per phase, and the policies as tables of rules."""

from yuniplace.controller.lifecycle.context import IN_FLIGHT_RECHECK_S, LOSS_GRACE_S, RESYNC_S
from yuniplace.controller.lifecycle.dispatch import make_plan, plan_application

__all__ = ["IN_FLIGHT_RECHECK_S", "LOSS_GRACE_S", "RESYNC_S", "make_plan", "plan_application"]
