"""The Kubernetes boundary: the only package that imports the `kubernetes` client."""

from kubernetes.utils import parse_quantity

from yuniplace.kube.client import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    JsonObject,
    KubeClient,
    context_namespace,
)
from yuniplace.kube.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
)

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "JsonObject",
    "KubeClient",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "context_namespace",
    "parse_quantity",
]
