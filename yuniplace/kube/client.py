"""The one door to the Kubernetes API: plain-dict requests over the client's TLS pool, typed errors,
and retries at the boundary.

The official client's model classes cost 9-40x a json.loads per object, so requests go straight
through the urllib3 pool the client configures from a kubeconfig (TLS, client certificates, bearer
tokens and their refresh) and bodies stay plain dicts.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlencode

import urllib3
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from yuniplace.kube.errors import (
    ApiError,
    ServerError,
    TooManyRequests,
    error_from_response,
)

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
Decode = Callable[[bytes], Any]
"""Turns a response body into the object the caller reads: json.loads, or a typed decoder."""
CallObserver = Callable[[str, str, str], None]
"""Told (verb, resource, outcome) for every API call: resource as RBAC names it ("pods",
"pods/status", "events", "leases"), outcome the status code or "error" (no answer)."""

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

REQUEST_TIMEOUT_S = 30.0
RETRY_DEADLINE_S = 60.0
CONNECTION_POOL_SIZE = 96

_RETRYABLE = (TooManyRequests, ServerError, urllib3.exceptions.HTTPError, ConnectionError)


def _wait_for_retry(state: RetryCallState) -> float:
    """Honour the server's Retry-After on 429; otherwise back off exponentially with jitter."""
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    if isinstance(error, ApiError) and error.retry_after_s is not None:
        return min(error.retry_after_s, 10.0)
    return float(wait_exponential_jitter(initial=0.1, max=5.0)(state))


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome is not None else None
    log.warning("API call failed, retrying (attempt %d): %s", state.attempt_number, error)


IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def context_namespace(path: str | None = None, context: str | None = None) -> str:
    """The namespace kubectl would use without -n: the one the kubeconfig's context names (its current
    context unless `context` is given; $KUBECONFIG's files, merged, when no `path`), else `default`; in
    a pod without a kubeconfig, the pod's own namespace."""
    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=path)
    except (kube_config.ConfigException, OSError):
        if path is not None:
            raise
        try:
            with open(IN_CLUSTER_NAMESPACE) as file:
                return file.read().strip() or "default"
        except OSError:
            return "default"
    chosen = current if context is None else next((c for c in contexts if c.get("name") == context), None)
    if chosen is None:
        raise kube_config.ConfigException(f"no context {context!r} in the kubeconfig")
    return str((chosen.get("context") or {}).get("namespace") or "default")


class KubeClient:
    """Speaks JSON to one API server. Thread-safe: the underlying urllib3 pool is."""

    def __init__(self, api_client: ApiClient, *, observer: CallObserver | None = None) -> None:
        self._api_client = api_client
        self._configuration: Configuration = api_client.configuration
        self._pool: urllib3.PoolManager = api_client.rest_client.pool_manager
        self._host: str = str(self._configuration.host).rstrip("/")
        self._observer = observer

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | None = None,
        *,
        context: str | None = None,
        observer: CallObserver | None = None,
    ) -> KubeClient:
        """Load a kubeconfig file, or the in-cluster service account when no file is given and none
        is found through $KUBECONFIG / ~/.kube/config."""
        configuration = Configuration()
        try:
            kube_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
        except kube_config.ConfigException:
            if path is not None:
                raise
            kube_config.load_incluster_config(client_configuration=configuration)
        configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
        return cls(ApiClient(configuration), observer=observer)

    # -- requests ---------------------------------------------------------------------------------

    def _headers(self, content_type: str | None, accept: str | None = None) -> dict[str, str]:
        headers = {"Accept": accept or "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        # auth_settings() calls the token refresh hook, so rotated service-account tokens are picked up.
        self._api_client.update_params_for_auth(headers, [], ["BearerToken"])
        return headers

    def _url(self, path: str, query: Mapping[str, Any] | None) -> str:
        url = self._host + path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        return url

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str | None,
        timeout_s: float,
        accept: str | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request; a non-2xx answer is read, released and raised as its typed error."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        if data is not None and content_type is None:
            content_type = "application/json"
        verb = method.lower()
        try:
            response = self._pool.request(
                method,
                self._url(path, query),
                body=data,
                headers=self._headers(content_type, accept),
                preload_content=False,
                timeout=urllib3.Timeout(connect=10.0, read=timeout_s),
                retries=False,
            )
        except urllib3.exceptions.HTTPError:
            self._observe(verb, path, "error")
            raise
        self._observe(verb, path, str(response.status))
        if response.status >= 300:
            payload = response.read()
            response.release_conn()
            raise error_from_response(response.status, payload, response.headers.get("Retry-After"))
        return response

    def _observe(self, verb: str, path: str, outcome: str) -> None:
        if self._observer is not None:
            self._observer(verb, resource_of(path), outcome)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
        retry: bool = True,
        decode: Decode = json.loads,
        accept: str | None = None,
    ) -> JsonObject:
        """One API call returning the decoded JSON body (`decode`: a typed decoder that keeps only what
        the caller reads). Throttling, server errors and broken connections are retried for up to
        RETRY_DEADLINE_S; every other error is raised typed. `accept`: another representation than the
        whole object (PartialObjectMetadata: its metadata alone)."""

        def once() -> JsonObject:
            response = self._send(
                method, path, query=query, body=body, content_type=content_type, timeout_s=timeout_s, accept=accept
            )
            try:
                payload = response.read()
            finally:
                response.release_conn()
            return decode(payload) if payload else {}

        if not retry:
            return once()
        retrying = Retrying(
            retry=retry_if_exception_type(_RETRYABLE),
            wait=_wait_for_retry,
            stop=stop_after_delay(RETRY_DEADLINE_S),
            before_sleep=_log_retry,
            reraise=True,
        )
        return retrying(once)

    def open_stream(
        self,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
        accept: str | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """Open a streaming GET (a watch). No retry: the caller owns reconnection, reads the body with
        `lines_of` and releases the connection; `shutdown()` on it from another thread ends a read (set the
        event given to `lines_of` first)."""
        return self._send("GET", path, query=query, body=None, content_type=None, timeout_s=timeout_s, accept=accept)

    # -- verbs ------------------------------------------------------------------------------------

    def get(
        self, path: str, *, decode: Decode = json.loads, accept: str | None = None, retry: bool = True, **query: Any
    ) -> JsonObject:
        return self.request("GET", path, query=query, decode=decode, accept=accept, retry=retry)

    def create(self, path: str, body: JsonObject, *, decode: Decode = json.loads, **query: Any) -> JsonObject:
        return self.request("POST", path, body=body, query=query, decode=decode)

    def patch(
        self, path: str, body: Any, *, content_type: str = MERGE_PATCH, decode: Decode = json.loads, **query: Any
    ) -> JsonObject:
        return self.request("PATCH", path, body=body, content_type=content_type, query=query, decode=decode)

    def delete(self, path: str, body: JsonObject | None = None, **query: Any) -> JsonObject:
        return self.request("DELETE", path, body=body, query=query)

    @property
    def host(self) -> str:
        return self._host


def lines_of(response: urllib3.BaseHTTPResponse, stopped: threading.Event | None = None) -> Iterator[bytes]:
    """The lines of a newline-delimited JSON body (a watch), as they arrive, for the caller to decode.

    Nothing read once `stopped` is set is yielded: the `shutdown()` that ends a read from another thread
    also drops the TLS layer of the socket (the ssl module clears it), so a read still under way may
    return the raw, encrypted bytes as if they were the body."""
    buffer = b""
    for chunk in response.stream(65536, decode_content=True):
        if stopped is not None and stopped.is_set():
            return
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line


def resource_of(path: str) -> str:
    """The resource (and subresource) a request path addresses, as RBAC rules name it:
    /api/v1/namespaces/ns/pods/p/status -> pods/status; /apis/events.k8s.io/v1/namespaces/ns/events -> events."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]  # drop api/v1 or apis/<group>/<version>
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    if not rest:
        return ""
    return f"{rest[0]}/{rest[2]}" if len(rest) >= 3 else rest[0]
