"""Whether a node takes new pods, as the control plane marks it: read the same way by admission, which
must not count such a node's room, and by the local clusters, which wait until their nodes take pods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The taints the control plane puts on a node that takes no new pods: a node not yet Ready (the API
# server adds this one to every new node, and kube-controller-manager lifts it once the node is Ready),
# a node that stopped reporting, a cordoned node.
STATE_TAINTS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/unschedulable"}
)


def takes_new_pods(node: Mapping[str, Any]) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    return not any(
        taint.get("key") in STATE_TAINTS and taint.get("effect") in ("NoSchedule", "NoExecute")
        for taint in spec.get("taints") or ()
    )


def is_ready(node: Mapping[str, Any]) -> bool:
    """The node's Ready condition is True (its kubelet, or kwok, reports in) and it takes new pods."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    return takes_new_pods(node) and any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# What the taints kube-controller-manager puts on a node that stopped reporting or says it is not Ready
# mean for the pods already on it: they no longer run as they should (and are evicted once their
# toleration of the taint runs out).
TROUBLE_TAINTS = {"node.kubernetes.io/not-ready": "is NotReady", "node.kubernetes.io/unreachable": "is unreachable"}


def trouble(taints: Iterable[Mapping[str, Any]]) -> str | None:
    """Why pods on a node with these taints are lost ("is NotReady"), or None while it is well."""
    return next((TROUBLE_TAINTS[t["key"]] for t in taints if t.get("key") in TROUBLE_TAINTS), None)
