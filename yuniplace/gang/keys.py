"""Annotation, label and gate names: YuniKorn's, so existing manifests work unchanged, and yuniplace's own."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    """A label or annotation yuniplace reads or writes, as the reference of keys documents it (made by
    `python -m yuniplace.docsgen`): the module that spells a key describes it beside it."""

    name: str
    kind: str  # "annotation", "label", "label or annotation", "scheduling gate", "task-group key"
    on: str  # the object that carries it
    set_by: str  # who writes it: "you" (the user, or the tool writing the manifest), "yuniplace", ...
    meaning: str


YOU, YUNIPLACE = "you", "yuniplace"
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
# On a placeholder holding a member's DRA claims (their devices): that member's uid, which is swapped
# into it and no other.
CLAIMS_OF = "yuniplace.io/claims-of"
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
# On a namespace: `kube-scheduler` leaves its native gangs (the Workload API) to kube-scheduler alone; the
# chart's webhook configuration selects namespaces by it.
NATIVE_GANGS = "yuniplace.io/native-gangs"
# On the originator: the queue whose pool's idle nodes the gang's reservation borrows besides its own
# queue's, as admission chose it.
BORROWED_FROM = "yuniplace.io/borrowed-from"
# On the originator: the autoscaler's node pools (Karpenter NodePools) whose nodes yet to come its
# reservation counted on, as admission chose them; kept across its attempts, since such a gang never
# falls back to normal scheduling (see lifecycle/policies/timeout.py).
SCALE_UP = "yuniplace.io/scale-up"
# On the controller's Lease, written by the replica that leads with each renewal: the label that finds it
# (`yuniplace status --apis` lists the Leases so labelled), and the optional APIs it reads and since when.
CONTROLLER_LEASE = "yuniplace.io/controller"
OPTIONAL_APIS = "yuniplace.io/optional-apis"

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

# Cluster autoscalers' marks of a pod whose node they must not take away: a placeholder holds room a gang
# is still forming on, so neither Karpenter's consolidation nor cluster-autoscaler's scale-down removes it.
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CLUSTER_AUTOSCALER_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"

# Volcano's scheduling API: its PodGroups describe Volcano gangs (gang/dialects/volcano.py) and its
# Queues are a queue source (queues/volcano.py). The keys of each gang dialect are its own module's,
# under gang/dialects/.
VOLCANO_API = "/apis/scheduling.volcano.sh/v1beta1"

# Every key above, described for the reference of keys (python -m yuniplace.docsgen); the dialects, topology,
# the recorded requester and the queue sources describe theirs in their own modules.
KEYS = (
    Key(
        TASK_GROUPS,
        "annotation",
        "originator",
        YOU,
        "the gang: a JSON array of task groups `{name, minMember, "
        "minResource, nodeSelector, tolerations, affinity, topologySpreadConstraints, labels, annotations}`, "
        "keys matched case-insensitively as YuniKorn's decoder does",
    ),
    Key(
        TASK_GROUP_NAME,
        "annotation",
        "gang member",
        YOU,
        "the task group the pod belongs to; it must name a group of its application",
    ),
    Key(
        SCHEDULING_POLICY_PARAMETERS,
        "annotation",
        "originator (or a native gang's PodGroup)",
        YOU,
        "`placeholderTimeoutInSeconds=N` (1-604800, default 900) and `gangSchedulingStyle=Soft|Hard` "
        "(default Soft), space separated",
    ),
    Key(
        APP_ID,
        "label or annotation",
        "gang member",
        YOU,
        "the application id, first found of this label, this "
        "annotation, the label `applicationId` and the label `spark-app-selector`; applications are namespaced",
    ),
    Key("applicationId", "label", "gang member", YOU, "the application id, after `yunikorn.apache.org/app-id`"),
    Key("spark-app-selector", "label", "gang member", "Spark", "the application id Spark sets, after `applicationId`"),
    Key(
        YUNIKORN_QUEUE,
        "label or annotation",
        "gang member (and yuniplace's placeholders)",
        YOU,
        "the queue the application waits in for admission, first found of this label, this annotation, the "
        "label `queue` and the annotation `resource.aibee.cn/pool`; else the namespace",
    ),
    Key("queue", "label", "gang member", YOU, "the queue, after `yunikorn.apache.org/queue`"),
    Key(
        AI_SCHEDULER_POOL,
        "annotation",
        "gang member",
        YOU,
        "the ai-scheduler Pool (queue `root.<name>`) the pod names, after the queue keys above",
    ),
    Key(
        GATE,
        "scheduling gate",
        "gang member",
        "yuniplace's webhook",
        "holds a gang member back from kube-scheduler until its gang is reserved, started or has fallen back",
    ),
    Key(PLACEHOLDER, "label", "placeholder", YUNIPLACE, "`true` on every placeholder pod"),
    Key(
        PLACEHOLDER_APP,
        "label and annotation",
        "placeholder",
        YUNIPLACE,
        "the application a placeholder reserves room for",
    ),
    Key(
        PLACEHOLDER_GROUP,
        "label and annotation",
        "placeholder",
        YUNIPLACE,
        "the task group a placeholder reserves room for",
    ),
    Key(
        YUNIKORN_PLACEHOLDER_FLAGS[0],
        "annotation",
        "placeholder",
        YUNIPLACE,
        "YuniKorn's own placeholder mark, put on yuniplace's placeholders for tooling written for YuniKorn",
    ),
    Key(
        YUNIKORN_PLACEHOLDER_FLAGS[1],
        "annotation",
        "placeholder",
        YUNIPLACE,
        "YuniKorn's earlier placeholder mark, likewise",
    ),
    Key(
        STATE,
        "annotation",
        "originator",
        YUNIPLACE,
        "the application's state (Pending, Reserving, Reserved, "
        "Running, Resuming, Failed, Completed), so a restarted controller continues where the last one stopped",
    ),
    Key(RESERVATION_STARTED, "annotation", "originator", YUNIPLACE, "when the reservation began"),
    Key(
        FIRST_ALLOCATED,
        "annotation",
        "originator",
        YUNIPLACE,
        "when the first placeholder was placed: the timeout counts from it, never moved",
    ),
    Key(
        QUEUED_SINCE,
        "annotation",
        "originator",
        YUNIPLACE,
        "since when the application has waited first in its admission queue: its timeout runs from then",
    ),
    Key(
        SWAP_PLACEHOLDER,
        "annotation",
        "gang member",
        YUNIPLACE,
        "the placeholder whose place the member is "
        "taking, written with its nomination, so a restarted controller resumes that swap",
    ),
    Key(
        CLAIMS_OF,
        "annotation",
        "placeholder",
        YUNIPLACE,
        "the uid of the gang member whose DRA ResourceClaims the placeholder holds (their devices stay "
        "allocated from the placeholder to that member, which is swapped into it and no other)",
    ),
    Key(
        SEAT,
        "annotation",
        "gang member",
        YUNIPLACE,
        "the node admission chose for a member started directly "
        "(no placeholder); its room counts as taken there until it is bound",
    ),
    Key(
        ATTEMPTS,
        "annotation",
        "originator",
        YUNIPLACE,
        "how many times the reservation was given back and "
        "tried again (Strict mode, a Retry timeout rule, refused placeholders)",
    ),
    Key(RETRY_AFTER, "annotation", "originator", YUNIPLACE, "when the next attempt may begin"),
    Key(
        GANG_MODE,
        "annotation",
        "originator",
        YOU,
        "`Strict` (give a partial reservation back as soon as a "
        "placeholder is unschedulable, and try again) or `NonStrict` (hold it until the timeout; the default)",
    ),
    Key(
        GANG_GROUP,
        "annotation",
        "originator",
        YOU,
        "a JSON list of applications (`namespace/app-id`) reserved all or nothing together",
    ),
    Key(
        ON_MEMBER_LOST,
        "annotation",
        "pod that describes the gang",
        YOU,
        "what a started gang that loses a "
        "member does: `none` (report it), `restart` (evict it whole for its owner to make it again) or "
        "`release` (evict it whole once past its recovery timeout)",
    ),
    Key(
        RESTART_LIMIT,
        "annotation",
        "pod that describes the gang",
        YOU,
        "restarts (or releases) after which a further loss fails the gang (0-1000, default 3)",
    ),
    Key(
        RECOVERY_TIMEOUT,
        "annotation",
        "pod that describes the gang",
        YOU,
        "seconds a `release` gang may stay below its minimum (1-604800, default 60)",
    ),
    Key(
        READY_TIMEOUT,
        "annotation",
        "pod that describes the gang",
        YOU,
        "seconds a bound member may go without being Ready before it counts as lost (1-604800, default 300)",
    ),
    Key(
        DEGRADED_SINCE,
        "annotation",
        "originator",
        YUNIPLACE,
        "since when a started gang has had fewer members up than its minimum",
    ),
    Key(
        DEGRADED_REPORTED, "annotation", "originator", YUNIPLACE, "`true` once that has been reported (`GangDegraded`)"
    ),
    Key(
        TOPOLOGY,
        "annotation, or task-group key",
        "pod that describes the gang",
        YOU,
        "`required=<label key>` "
        "and/or `preferred=<label key>`, space separated, coarsest level first: the topology domains the gang "
        "(or, as a key of one task group, that group) must or should share",
    ),
    Key(
        TOPOLOGY_DOMAIN,
        "annotation",
        "originator",
        YUNIPLACE,
        "the topology domains admission chose, so a restarted controller creates what is missing in the same domain",
    ),
    Key(
        BORROWED_FROM,
        "annotation",
        "originator",
        YUNIPLACE,
        "the queue whose pool's idle nodes the gang borrows besides its own queue's",
    ),
    Key(
        SCALE_UP,
        "annotation",
        "originator",
        YUNIPLACE,
        "the autoscaler's node pools (Karpenter NodePools) whose nodes yet to come the gang's reservation "
        "counted on, comma separated; such a gang waits for its next attempt rather than fall back (Soft)",
    ),
    Key(
        KARPENTER_DO_NOT_DISRUPT,
        "annotation",
        "placeholder",
        YUNIPLACE,
        '`"true"`: Karpenter never consolidates away the node of a placeholder (room a gang is forming on)',
    ),
    Key(
        CLUSTER_AUTOSCALER_SAFE_TO_EVICT,
        "annotation",
        "placeholder",
        YUNIPLACE,
        '`"false"`: cluster-autoscaler never scales down the node of a placeholder',
    ),
    Key(
        NATIVE_GANGS,
        "label",
        "namespace",
        YOU,
        "`kube-scheduler`: the webhook never gates this namespace's "
        "native gangs (the Workload API), which stay kube-scheduler's alone and are only counted",
    ),
    Key(
        CONTROLLER_LEASE,
        "label",
        "the controller's Lease",
        YUNIPLACE,
        '`"true"`: the Lease of a yuniplace controller, which `yuniplace status --apis` reads',
    ),
    Key(
        OPTIONAL_APIS,
        "annotation",
        "the controller's Lease",
        YUNIPLACE,
        "the optional APIs the leading replica reads and since when (JSON: "
        '`{"karpenter": {"api": "karpenter.sh/v1", "since": "..."}}`), written with each renewal',
    ),
)
