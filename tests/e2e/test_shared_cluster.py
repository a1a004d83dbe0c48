"""A shared cluster on the real control plane: one tenant doing its worst (unreadable annotations, a gang
that never fits, a quota refusing its placeholders, a gang group naming another namespace, floods of
placeholders and applications) while another tenant's gang that fits is admitted; and the webhook and
events giving nothing away. Every tenant is a namespace of its own, one controller manages them all.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    events_for,
    free_port,
    gang_job,
    gang_pod,
    is_failed_and_ungated,
    is_running,
    make_pod,
    placeholders,
    posted,
)
from tests.e2e.test_chart import (
    CHART,
    WebhookProcess,
    helm,
    refusal,
    secret_data,
    set_flags,
)
from yuniplace.gang import keys
from yuniplace.localcluster import wait_until

HARD = "gangSchedulingStyle=Hard"
ADMITTED_WITHIN_S = 30.0  # a deadline for waiting, not a measurement: the figures are printed


def occupy(cluster: Cluster, namespace: str, place: Placement, name: str, cpu: str) -> None:
    """An ordinary pod taking `cpu` of the test's nodes, running before the gangs arrive."""
    cluster.create_pod(namespace, place.pin(make_pod(name, cpu=cpu, memory="128Mi")))
    cluster.wait_pod(namespace, name, is_running)


def all_running(cluster: Cluster, namespace: str, names: list[str], timeout_s: float = ADMITTED_WITHIN_S) -> float:
    """Wait until every pod runs; return how long that took."""
    started = time.monotonic()
    for name in names:
        cluster.wait_pod(namespace, name, is_running, timeout_s=max(1.0, timeout_s - (time.monotonic() - started)))
    return time.monotonic() - started


def test_unreadable_annotations_fail_only_their_own_application(
    cluster: Cluster,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    record_property: Callable[[str, object], None],
) -> None:
    """Tenant A's gangs wait for room; A then writes `retry-after: soon` on one and a deeply nested
    gang group on another (kubectl annotate needs no webhook's blessing). Both fail alone, by their
    style; tenant B's gang is admitted as soon as A's room is free."""
    a, b = tenant("a"), tenant("b")
    place = pool(1, cpu="8", memory="32Gi")
    cluster_wide()
    occupy(cluster, a, place, "busy", "6")
    soon = gang_job(cluster, a, place, "soon", 3, policy=f"placeholderTimeoutInSeconds=600 {HARD}")
    nested = gang_job(cluster, a, place, "nested", 3, policy=f"placeholderTimeoutInSeconds=600 {HARD}")
    wait_until(lambda: events_for(cluster, a, "GangWaiting"), 30)
    cluster.kubectl("annotate", "pod", "-n", a, soon[0], f"{keys.RETRY_AFTER}=soon")
    cluster.client.patch(
        f"/api/v1/namespaces/{a}/pods/{nested[0]}",
        {"metadata": {"annotations": {keys.GANG_GROUP: "[" * 20_000 + "]" * 20_000}}},
    )
    cluster.client.delete(f"/api/v1/namespaces/{a}/pods/busy")
    started = time.monotonic()
    fine = gang_job(cluster, b, place, "fine", 3, policy="placeholderTimeoutInSeconds=600")
    took = all_running(cluster, b, fine)
    for name in soon + nested:
        cluster.wait_pod(a, name, is_failed_and_ungated)
    for originator in (soon[0], nested[0]):  # each posted after its gang's pods are failed: it may trail them
        posted(cluster, a, "TaskGroupsError", on=originator)
    errors = {e["involvedObject"]["name"]: e["message"] for e in events_for(cluster, a, "TaskGroupsError")}
    assert keys.RETRY_AFTER in errors[soon[0]] and '"soon"' in errors[soon[0]], errors
    assert keys.GANG_GROUP in errors[nested[0]], errors
    wait_until(lambda: not placeholders(cluster, a) and not placeholders(cluster, b), 30)
    record_property(
        "figure",
        f"unreadable annotations: tenant B's gang ran {took:.1f} s after it was created "
        f"({time.monotonic() - started:.1f} s in all); {soon[0]}: {errors[soon[0]]}",
    )


def test_a_gang_that_never_fits_gives_up_its_claim_and_times_out(
    cluster: Cluster,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    record_property: Callable[[str, object], None],
) -> None:
    """31.5 of 32 CPUs free; tenant A's gang needs all 32. As its queue's head it claims the free room,
    but only for --head-claim; then tenant B's gang is admitted. A's own timeout runs while it is
    first in its queue, so it ends (Hard: fails) instead of waiting forever."""
    a, b = tenant("a"), tenant("b")
    place = pool(4, cpu="8", memory="32Gi")
    cluster_wide("--head-claim=5")
    occupy(cluster, a, place, "busy", "500m")
    whole = gang_job(cluster, a, place, "whole", 32, policy=f"placeholderTimeoutInSeconds=45 {HARD}")
    claimed = wait_until(lambda: events_for(cluster, a, "GangWaiting"), 30)
    assert "first in queue" in claimed[0]["message"], claimed
    created = time.monotonic()
    fits = gang_job(cluster, b, place, "fits", 4, policy="placeholderTimeoutInSeconds=600")
    took = all_running(cluster, b, fits)
    for name in whole:
        cluster.wait_pod(a, name, is_failed_and_ungated, timeout_s=60)
    timeouts = posted(cluster, a, "PlaceholderTimeOut")  # posted after the pods are failed: it may trail them
    assert timeouts and "becoming first in its queue" in timeouts[0]["message"], timeouts
    assert any("no longer holds room" in e["message"] for e in events_for(cluster, a, "GangWaiting"))
    assert not placeholders(cluster, a)
    record_property(
        "figure",
        f"head claim: tenant B's gang of 4 ran {took:.1f} s after it was created beside a head claiming "
        f"31.5 CPUs ({time.monotonic() - created:.1f} s until A timed out); A: {timeouts[0]['message']}",
    )


def test_placeholders_refused_by_a_quota_release_their_room_at_once(
    cluster: Cluster,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    record_property: Callable[[str, object], None],
) -> None:
    """Tenant A's quota leaves room for its 4 real pods, not for their placeholders. Admission grants
    A's gang (4 of the 8 CPUs); the API refuses every placeholder. A hears why, and the room it was
    counted for is free at once: tenant B's gang of 6 needs it."""
    a, b = tenant("a"), tenant("b")
    place = pool(2, cpu="4", memory="16Gi")
    cluster.client.create(
        f"/api/v1/namespaces/{a}/resourcequotas",
        {"metadata": {"name": "team-quota"}, "spec": {"hard": {"requests.cpu": "4", "limits.cpu": "4"}}},
    )
    # The gang's pods exist before the controller starts: placeholders created as the first pod
    # appears would otherwise take the quota from the pods that follow it.
    refused = gang_job(cluster, a, place, "refused", 4, policy=f"placeholderTimeoutInSeconds=40 {HARD}")
    # (Started directly, the gang would need no placeholders, and the quota leaves room for its pods.)
    cluster_wide("--strict-backoff=2", "--placeholders=always")
    events = wait_until(lambda: events_for(cluster, a, "PlaceholdersRefused"), 30)
    assert "exceeded quota: team-quota" in events[0]["message"], events
    created = time.monotonic()
    needs_the_room = gang_job(cluster, b, place, "needs-the-room", 6, policy="placeholderTimeoutInSeconds=600")
    took = all_running(cluster, b, needs_the_room)
    for name in refused:  # A keeps trying until its timeout, then fails by its style: nothing left gated
        cluster.wait_pod(a, name, is_failed_and_ungated, timeout_s=90)
    assert not placeholders(cluster, a)
    record_property(
        "figure",
        f"refused placeholders: tenant B's gang ran {took:.1f} s after it was created "
        f"({time.monotonic() - created:.1f} s until A failed); A: {events[0]['message']}",
    )


def test_a_gang_group_cannot_drag_another_namespaces_application_in(
    cluster: Cluster,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    record_property: Callable[[str, object], None],
) -> None:
    """Tenant A names tenant B's application in its gang group; B never named A. Together they would
    not fit the free room, so binding them would keep B waiting on A. B runs; A waits for consent."""
    a, b = tenant("a"), tenant("b")
    place = pool(2, cpu="4", memory="16Gi")
    cluster_wide()
    occupy(cluster, b, place, "busy", "4")
    group = {keys.GANG_GROUP: json.dumps([f"{a}/namer", f"{b}/victim"])}
    namer = gang_job(cluster, a, place, "namer", 5, policy="placeholderTimeoutInSeconds=600", annotations=group)
    wait_until(lambda: events_for(cluster, a, "GangWaiting"), 30)
    victim = gang_job(cluster, b, place, "victim", 2, policy="placeholderTimeoutInSeconds=600")
    took = all_running(cluster, b, victim)
    # A is looked at again once B's gang exists: its note may trail B's run.
    waiting = posted(cluster, a, "GangWaiting", saying=lambda note: f"{b}/victim" in note and "name this one" in note)
    assert not placeholders(cluster, a) and all(not is_running(cluster.get_pod(a, n) or {}) for n in namer)
    assert not any(a in e["message"] for e in events_for(cluster, b, "GangWaiting"))
    record_property(
        "figure",
        f"unconsented gang group: tenant B's gang ran {took:.1f} s after it was created; A: {waiting[-1]['message']}",
    )


def test_one_namespace_cannot_flood_the_cluster(
    cluster: Cluster,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    record_property: Callable[[str, object], None],
) -> None:
    """One pod asking for 1 000 placeholders (more than all nodes hold, which admission would let
    through for an autoscaler's sake) is refused by the namespace's placeholder limit; a namespace's
    waiting applications beyond its limit are refused too. Neither creates a placeholder."""
    a, b = tenant("a"), tenant("b")
    place = pool(1, cpu="8", memory="32Gi")
    cluster_wide("--max-placeholders-per-namespace=20", "--max-waiting-per-namespace=2")
    with NamespaceRecorder(cluster.client, a) as recorded:
        huge = gang_pod(
            "huge-0",
            "huge",
            "workers",
            cpu="100m",
            policy="placeholderTimeoutInSeconds=604800",
            task_groups=[place.group("workers", 1000, cpu="100m", memory="64Mi")],
        )
        cluster.create_pod(a, place.pin(huge))
        too_many = wait_until(lambda: events_for(cluster, a, "GangRefused"), 30)
        assert (
            "1000 placeholders" in too_many[0]["message"]
            and "--max-placeholders-per-namespace" in too_many[0]["message"]
        )
        cluster.wait_pod(a, "huge-0", is_running)  # Soft: scheduled normally, alone
        fine = gang_job(cluster, b, place, "fine", 2, policy="placeholderTimeoutInSeconds=600")
        all_running(cluster, b, fine)

        occupy(cluster, a, place, "busy", "5500m")  # 0.4 CPU left: no gang fits
        queued = [
            gang_job(cluster, a, place, f"queued-{i}", 2, policy=f"placeholderTimeoutInSeconds=600 {HARD}")
            for i in range(4)
        ]

        def refused_apps() -> set[str]:
            """Applications told they are over the limit (each of their failed pods hears it too)."""
            return {
                e["involvedObject"]["name"].rsplit("-", 1)[0]
                for e in events_for(cluster, a, "GangRefused")
                if "--max-waiting-per-namespace" in e["message"]
            }

        wait_until(lambda: len(refused_apps()) >= 2, 30)
        refused = [names for names in queued if names[0].rsplit("-", 1)[0] in refused_apps()]
        assert [names[0] for names in refused] == ["queued-2-0", "queued-3-0"], refused_apps()
        for names in refused:
            for name in names:
                cluster.wait_pod(a, name, is_failed_and_ungated)
        assert not refused_apps() - {"queued-2", "queued-3"}
        assert not recorded.placeholder_uids, f"placeholders were created: {sorted(recorded.placeholder_uids)[:5]}"
        refusals = [e["message"] for e in events_for(cluster, a, "GangRefused") if "--max-waiting" in e["message"]]
    record_property(
        "figure",
        f"flood: 0 placeholders created for a gang of 1000; {too_many[0]['message']}; "
        f"2 of 4 queued applications refused: {refusals[0]}",
    )


def test_waiting_events_never_name_another_namespaces_application(
    cluster: Cluster,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """Tenants A and B share a queue; A's gang is its head. B's GangWaiting says it waits behind
    another namespace's application, not which."""
    a, b = tenant("a"), tenant("b")
    place = pool(1, cpu="8", memory="32Gi")
    cluster_wide()
    occupy(cluster, a, place, "busy", "6")
    shared = {"yunikorn.apache.org/queue": "shared"}
    gang_job(cluster, a, place, "secret-project", 4, policy="placeholderTimeoutInSeconds=600", annotations=shared)
    wait_until(lambda: events_for(cluster, a, "GangWaiting"), 30)
    gang_job(cluster, b, place, "mine", 4, policy="placeholderTimeoutInSeconds=600", annotations=shared)
    waiting = wait_until(lambda: events_for(cluster, b, "GangWaiting"), 30)
    message = waiting[0]["message"]
    assert "position 2 in queue shared" in message and "another namespace" in message, message
    assert "secret-project" not in message and a not in message, message


# -- the webhook ---------------------------------------------------------------------------------------


@pytest.fixture
def webhook(
    cluster: Cluster, namespace: str, tenant: Callable[[str], str], tmp_path: Path
) -> Iterator[tuple[str, int]]:
    """The chart's webhooks, served from outside the cluster for one tenant namespace; (namespace, port)."""
    apps = tenant("apps")
    release = f"yp-{uuid.uuid4().hex[:6]}"
    port = free_port()
    helm(
        cluster,
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        *set_flags(
            {
                "replicaCount": "0",
                "webhook.url": f"https://127.0.0.1:{port}",
                "webhook.tls.extraIPs": "{127.0.0.1}",
                "webhook.namespaceSelector.matchExpressions[0].key": "kubernetes.io/metadata.name",
                "webhook.namespaceSelector.matchExpressions[0].operator": "In",
                "webhook.namespaceSelector.matchExpressions[0].values": f"{{{apps}}}",
            }
        ),
    )
    tls = secret_data(cluster, namespace, f"{release}-yuniplace-webhook-tls")
    (tmp_path / "tls.crt").write_bytes(tls["tls.crt"])
    (tmp_path / "tls.key").write_bytes(tls["tls.key"])
    process = WebhookProcess(tmp_path / "tls.crt", tmp_path / "tls.key", port, tmp_path / "webhook.log")
    try:
        wait_until(process.ready, 30)
        yield apps, port
    finally:
        process.stop()
        helm(cluster, "uninstall", release, "--namespace", namespace, "--wait", check=False)


def test_the_webhook_gates_pods_labelled_with_any_other_placeholder_value_and_validates_edits(
    cluster: Cluster, webhook: tuple[str, int]
) -> None:
    apps, _ = webhook
    pretender = gang_pod(
        "pretender",
        "app",
        "workers",
        gated=False,
        task_groups=[{"name": "workers", "minMember": 1, "minResource": {"cpu": "100m", "memory": "64Mi"}}],
    )
    pretender["metadata"]["labels"][keys.PLACEHOLDER] = "no"
    created = cluster.create_pod(apps, pretender)
    assert [g["name"] for g in created["spec"].get("schedulingGates", [])] == [keys.GATE]
    invalid = gang_pod(
        "invalid-pretender", "app", "workers", gated=False, task_groups=[{"name": "workers", "minMember": 0}]
    )
    invalid["metadata"]["labels"][keys.PLACEHOLDER] = "false"
    assert "invalid gang annotations" in refusal(cluster, apps, invalid)
    # An edit that makes the annotations unusable is refused; one that keeps them usable is not.
    with pytest.raises(AssertionError, match=keys.RETRY_AFTER):
        cluster.kubectl("annotate", "pod", "-n", apps, "pretender", f"{keys.RETRY_AFTER}=soon")
    cluster.kubectl("label", "pod", "-n", apps, "pretender", "team=ml")


def raw_post(port: int, headers: dict[str, str], body: bytes) -> tuple[int, str]:
    """A POST with exactly these headers, as a broken or hostile client would send it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        connection.putrequest("POST", "/validate", skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_the_webhook_answers_reviews_one_after_another_over_one_connection(webhook: tuple[str, int]) -> None:
    """The API server sends every pod's review to the webhook: over a connection it keeps, not a new TCP
    connection and TLS handshake each. The connection stays open after an answer (and after a
    malformed review whose body was read), and carries the next."""
    namespace, port = webhook
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": namespace}, "spec": {}}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "r", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE"},
    }
    review["request"] |= {"namespace": namespace, "object": pod}
    bodies = [json.dumps(review).encode(), b"[]", json.dumps(review).encode()]
    try:
        sockets, answers = [], []
        for body in bodies:
            connection.request("POST", "/validate", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())))
            sockets.append(connection.sock)
    finally:
        connection.close()
    assert [status for status, _ in answers] == [200, 400, 200], answers
    assert answers[0][1]["response"]["allowed"] is True, answers[0]
    assert sockets[0] is not None and all(sock is sockets[0] for sock in sockets), sockets


def test_the_webhook_answers_every_malformed_request_with_400(webhook: tuple[str, int]) -> None:
    _, port = webhook
    nested = b"[" * 200_000 + b"]" * 200_000
    cases = {
        "non-numeric length": ({"Content-Length": "soon", "Content-Type": "application/json"}, b"{}"),
        "deeply nested body": ({"Content-Length": str(len(nested)), "Content-Type": "application/json"}, nested),
        "not an object": ({"Content-Length": "2", "Content-Type": "application/json"}, b"[]"),
        "not JSON": ({"Content-Length": "5", "Content-Type": "application/json"}, b"{{{{{"),
    }
    for case, (headers, body) in cases.items():
        status, answer = raw_post(port, headers, body)
        assert status == 400, (case, status, answer)
        assert "error" in json.loads(answer), (case, answer)
