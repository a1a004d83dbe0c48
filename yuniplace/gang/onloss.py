"""What to do when a started gang loses a member: the policy a gang asks on the pod that describes it,
over the controller's defaults.

A distributed job that lost a member usually hangs, holding its room, so reporting it is not always
enough. Volcano restarts or ends a whole job by its `policies`; Kueue evicts and requeues a workload
whose pods are not all Ready in time, or that stays below its count past a recovery timeout. yuniplace
offers both: `restart` evicts the rest of the gang at once so that its owner (a Job, an operator)
makes it again and it starts whole once more; `release` gives it a recovery timeout to mend first, then
evicts it whole so its room goes back to the queue. A limit on such restarts keeps a gang that keeps
failing from cycling forever: past it, the gang fails.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class OnLoss(enum.Enum):
    NONE = "none"  # report only
    RESTART = "restart"  # evict the rest at once, for its owner to make it again
    RELEASE = "release"  # evict it whole once it has not mended within the recovery timeout


@dataclass(frozen=True)
class LossPolicy:
    on_loss: OnLoss = OnLoss.NONE
    restart_limit: int = 3  # restarts (or releases) after which a further loss fails the gang
    recovery_timeout_s: int = 60  # how long a `release` gang may stay below its minimum
    ready_timeout_s: int = 300  # how long a member may run without being Ready before it counts as lost
