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
STATE = "yuniplace.io/state"
# On a real pod: the placeholder whose place it is taking, written with its nomination (step 1 of a
# swap), so a restarted controller resumes the swap with that placeholder and no other.
SWAP_PLACEHOLDER = "yuniplace.io/swap-placeholder"
