"""Annotation, label and gate names: YuniKorn's, so existing manifests work unchanged, and yuniplace's own."""

from __future__ import annotations

# Inputs, exactly as Apache YuniKorn documents them.
TASK_GROUPS = "yunikorn.apache.org/task-groups"
TASK_GROUP_NAME = "yunikorn.apache.org/task-group-name"
SCHEDULING_POLICY_PARAMETERS = "yunikorn.apache.org/schedulingPolicyParameters"
APP_ID = "yunikorn.apache.org/app-id"
# Application id sources, first found wins: (where, key).
APP_ID_SOURCES = (
    ("label", APP_ID),
    ("annotation", APP_ID),
    ("label", "applicationId"),
    ("label", "spark-app-selector"),
)

# yuniplace's own.
GATE = "yuniplace.io/gang"
PLACEHOLDER = "yuniplace.io/placeholder"
PLACEHOLDER_APP = "yuniplace.io/app-id"
PLACEHOLDER_GROUP = "yuniplace.io/task-group"
RESERVATION_STARTED = "yuniplace.io/reservation-started"
FIRST_ALLOCATED = "yuniplace.io/first-allocated"
STATE = "yuniplace.io/state"
# On the originator of a started gang: since when it has had fewer members up than its minimum (gang/losses.py),
# and "true" once that has been reported (after a grace in which a replacement may come).
DEGRADED_SINCE = "yuniplace.io/degraded-since"
DEGRADED_REPORTED = "yuniplace.io/degraded-reported"
# On the originator: since when it has waited first in its admission queue (its timeout runs from then).
QUEUED_SINCE = "yuniplace.io/queued-since"
# On a real pod: the placeholder whose place it is taking, written with its nomination (step 1 of a
# swap), so a restarted controller resumes the swap with that placeholder and no other.
SWAP_PLACEHOLDER = "yuniplace.io/swap-placeholder"
# On a real pod started directly (no placeholder): the node admission chose for it, written as it is
# steered there; its room counts as taken on that node until it is bound.
SEAT = "yuniplace.io/seat"
# On the originator: Strict mode's retries (the count, and when the next attempt may begin).
ATTEMPTS = "yuniplace.io/attempts"
RETRY_AFTER = "yuniplace.io/retry-after"
# Gang options yuniplace adds to YuniKorn's dialect (Koordinator's annotations map onto them).
GANG_MODE = "yuniplace.io/gang-mode"
GANG_GROUP = "yuniplace.io/gang-group"
# What a started gang that loses a member does (gang/onloss.py), asked on the pod that describes it.
ON_MEMBER_LOST = "yuniplace.io/on-member-lost"
RESTART_LIMIT = "yuniplace.io/restart-limit"
RECOVERY_TIMEOUT = "yuniplace.io/recovery-timeout-seconds"
READY_TIMEOUT = "yuniplace.io/ready-timeout-seconds"
# A gang's topology domains (gang/topology.py): asked on the pod that describes the gang (or as a key of
# one task group), and the domains admission chose, recorded on the originator.
TOPOLOGY = "yuniplace.io/topology"
TOPOLOGY_DOMAIN = "yuniplace.io/topology-domain"
# On the originator: the queue whose pool's idle nodes the gang's reservation borrows besides its own
# queue's, as admission chose it.
BORROWED_FROM = "yuniplace.io/borrowed-from"

# YuniKorn's own marks of a placeholder, put on yuniplace's too, so that tooling written for YuniKorn
# (dashboards, kubectl selectors) recognises them: its placeholder flag (current and earlier), the task
# group, and its application and queue labels.
YUNIKORN_PLACEHOLDER_FLAGS = ("internal.yunikorn.apache.org/placeholder", "yunikorn.apache.org/placeholder")
YUNIKORN_QUEUE = "yunikorn.apache.org/queue"

# ai-scheduler: the annotation by which a pod names its Pool (resource.aibee.cn/v1alpha1, cluster-scoped),
# which yuniplace reads as the queue the pod provides.
AI_SCHEDULER_POOL = "resource.aibee.cn/pool"
AI_SCHEDULER_API = "/apis/resource.aibee.cn/v1alpha1"

# The queue an application waits in for admission: first found, else the namespace.
QUEUE_SOURCES = (
    ("label", YUNIKORN_QUEUE),
    ("annotation", YUNIKORN_QUEUE),
    ("label", "queue"),
    ("annotation", AI_SCHEDULER_POOL),
)

# Volcano's scheduling API: its PodGroups describe Volcano gangs (gang/dialects/volcano.py) and its
# Queues are a queue source (queues/volcano.py). The keys of each gang dialect are its own module's,
# under gang/dialects/.
VOLCANO_API = "/apis/scheduling.volcano.sh/v1beta1"
