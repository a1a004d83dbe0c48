"""The webhook's HTTPS server: /mutate and /validate, AdmissionReview v1 in and out.

The serving certificate is re-read when its files change (cert-manager and the chart both rotate it
by replacing the Secret's files), so rotation needs no restart.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from yuniplace import boundedjson
from yuniplace.gang.pods import DEFAULT_SCHEDULERS
from yuniplace.gang.taskgroups import Limits
from yuniplace.webhook import admission
from yuniplace.webhook.identity import DEFAULT_TRUST, Trust
from yuniplace.webhook.rewrite import SchedulerNameRewrite, decider

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024
# A pod's own nesting (affinity terms inside a task group inside an annotation is a string, not
# nesting) stays far below this.
MAX_BODY_DEPTH = 64
Decide = Callable[[Mapping[str, Any]], dict[str, Any]]


class ReloadingContext:
    """An SSL context rebuilt whenever the certificate or key file changes."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self._files = (cert_file, key_file)
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._context: ssl.SSLContext | None = None
        self.current()

    def current(self) -> ssl.SSLContext:
        stamp = (os.stat(self._files[0]).st_mtime, os.stat(self._files[1]).st_mtime)
        with self._lock:
            if stamp != self._stamp or self._context is None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.minimum_version = ssl.TLSVersion.TLSv1_2
                context.load_cert_chain(*self._files)
                if self._context is not None:
                    log.info("webhook certificate reloaded from %s", self._files[0])
                self._context, self._stamp = context, stamp
            return self._context


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], tls: ReloadingContext, routes: Mapping[str, Decide]) -> None:
        self.tls = tls
        self.routes = routes
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("webhook connection from %s failed", client_address, exc_info=True)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        # Each answer is sent at once, not held by Nagle's algorithm until the API server acknowledges
        # the segment before it, which its kernel delays by up to 40 ms on a connection kept open: every
        # pod's review waited that long.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The handshake happens in the handler's thread (do_handshake_on_connect), not here, so a
        # slow or silent client cannot stall every other admission request.
        return self.tls.current().wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # a review under way is read, and its answer sent, within this
    # A kept connection waits this long for its next review: longer than the API server keeps an idle
    # one (Go's default, 90 s), so it is the API server that closes it. Closed here first, the API server
    # could send a review down it in the same moment, and fail that pod's admission ("broken pipe").
    idle_timeout = 120
    wbufsize = -1  # an answer's head and body leave in one write (the handler flushes after each request)
    # Connections kept open between reviews (every answer says its length): the API server sends each
    # pod's review over one it already has, instead of a new TCP connection and TLS handshake per pod.
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.do_handshake()

    def handle_one_request(self) -> None:
        self.connection.settimeout(self.idle_timeout)
        super().handle_one_request()

    def parse_request(self) -> bool:
        self.connection.settimeout(self.timeout)  # the request line came: the rest is read within `timeout`
        return super().parse_request()

    def do_POST(self) -> None:
        """Every request gets an HTTP answer: 400 for anything malformed, so a client (or a prober)
        learns what was wrong instead of a dropped connection."""
        decide = self.server.routes.get(self.path.split("?", 1)[0])
        if decide is None:
            self.close_connection = True  # its body is left unread: the connection cannot carry another request
            self._reply(404, {"error": f"no webhook at {self.path}"})
            return
        length_header = self.headers.get("Content-Length") or ""
        if not (length_header.isascii() and length_header.isdigit()) or not 0 < int(length_header) <= MAX_BODY_BYTES:
            self.close_connection = True
            self._reply(
                400,
                {"error": f"a Content-Length from 1 to {MAX_BODY_BYTES} bytes is required, not {length_header[:20]!r}"},
            )
            return
        try:
            review = boundedjson.loads(self.rfile.read(int(length_header)), max_depth=MAX_BODY_DEPTH)
            if not isinstance(review, dict):
                raise ValueError("the body is not a JSON object")
            answer = decide(review)
        except (ValueError, AttributeError, TypeError, KeyError) as error:
            log.warning("webhook %s: malformed AdmissionReview: %r", self.path, error, exc_info=True)
            self._reply(400, {"error": f"malformed AdmissionReview: {error}"})
            return
        except Exception:
            log.exception("webhook %s failed", self.path)
            self._reply(500, {"error": "the webhook failed to decide; see its log"})
            return
        self._reply(200, answer)

    def _reply(self, code: int, body: Mapping[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        log.debug("webhook %s", format % args)


NATIVE_GANGS_PATH = "/mutate-native-gangs"


def serve(
    address: str,
    cert_file: str,
    key_file: str,
    *,
    rewrites: Mapping[str, SchedulerNameRewrite],
    limits: Limits = Limits(),
    schedulers: frozenset[str] = DEFAULT_SCHEDULERS,
    trust: Trust = DEFAULT_TRUST,
    admitted: Callable[[Mapping[str, Any]], bool] = lambda _pod: False,
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; `address` is HOST:PORT (port 0 picks a free one). `rewrites`:
    whether to rewrite each scheduler name taken over to the default scheduler (none other is).
    `admitted`: whether a native gang pod's gang is admitted already (the controller knows, where the
    webhook serves in its process)."""
    host, _, port = address.rpartition(":")
    rewrite = decider(rewrites)
    routes: dict[str, Decide] = {
        "/mutate": lambda review: admission.mutate(
            review,
            rewrite_scheduler_name=rewrite,
            schedulers=schedulers,
            trust=trust,
            limits=limits,
        ),
        # The same for pods of Kubernetes' own pod groups, which are held only where the webhook for
        # them is registered (the chart's leaves out namespaces that opt out).
        NATIVE_GANGS_PATH: lambda review: admission.mutate(
            review,
            rewrite_scheduler_name=rewrite,
            schedulers=schedulers,
            trust=trust,
            hold_native=True,
            admitted=admitted,
            limits=limits,
        ),
        "/validate": lambda review: admission.validate(review, limits, schedulers, trust),
    }
    server = _Server((host or "0.0.0.0", int(port)), ReloadingContext(cert_file, key_file), routes)
    threading.Thread(target=server.serve_forever, name="webhook", daemon=True).start()
    return server
