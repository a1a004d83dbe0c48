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
# On the originator: since when it has waited first in its admission queue (its timeout runs from then).
QUEUED_SINCE = "yuniplace.io/queued-since"
# On a real pod: the placeholder whose place it is taking, written with its nomination (step 1 of a
# swap), so a restarted controller resumes the swap with that placeholder and no other.
SWAP_PLACEHOLDER = "yuniplace.io/swap-placeholder"
# On the originator: Strict mode's retries (the count, and when the next attempt may begin).
ATTEMPTS = "yuniplace.io/attempts"
RETRY_AFTER = "yuniplace.io/retry-after"
# Gang options yuniplace adds to YuniKorn's dialect (Koordinator's annotations map onto them).
GANG_MODE = "yuniplace.io/gang-mode"
GANG_GROUP = "yuniplace.io/gang-group"

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

# Other gang dialects, each read as one task group built from the pod's own spec.
COSCHEDULING_NAME = "pod-group.scheduling.sigs.k8s.io/name"  # label
COSCHEDULING_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"  # label
KOORDINATOR_PREFIX = "gang.scheduling.koordinator.sh/"
KOORDINATOR_NAME = KOORDINATOR_PREFIX + "name"  # annotations, all of them
KOORDINATOR_MIN_AVAILABLE = KOORDINATOR_PREFIX + "min-available"
KOORDINATOR_WAITING_TIME = KOORDINATOR_PREFIX + "waiting-time"
KOORDINATOR_MODE = KOORDINATOR_PREFIX + "mode"
KOORDINATOR_GROUPS = KOORDINATOR_PREFIX + "groups"
# Written on each pod of a Koordinator gang that timed out: koord-scheduler then never schedules it.
KOORDINATOR_TIMEOUT = KOORDINATOR_PREFIX + "timeout"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # label naming a scheduler-plugins PodGroup
POD_GROUP_API = "/apis/scheduling.x-k8s.io/v1alpha1"
# Volcano: the annotation naming a pod's PodGroup (scheduling.volcano.sh/v1beta1), and the one its Job
# controller puts on every pod naming the pod's task (matched with the PodGroup's spec.minTaskMember).
VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"
VOLCANO_TASK = "volcano.sh/task-spec"
VOLCANO_API = "/apis/scheduling.volcano.sh/v1beta1"
