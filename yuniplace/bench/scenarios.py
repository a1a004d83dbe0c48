"""The benchmark scenarios. Each measures yuniplace and a baseline (the same pods, no gang, no
controller involved) on the same cluster in the same run, and returns plain figures."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from yuniplace.bench import decode
from yuniplace.bench.pods import PodTimeline, phases
from yuniplace.bench.subjects import (
    MEMBER_LABEL,
    ControllerUnderTest,
    delete_namespace,
    gang,
    plain,
)
from yuniplace.bench.workload import create_pods, create_spread
from yuniplace.gang import keys
from yuniplace.kube import workloadapi
from yuniplace.localcluster import LocalCluster

Pods = list[dict[str, Any]]
SELECTOR = f"{MEMBER_LABEL}=true"


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


class Run(NamedTuple):
    seconds: float  # from the first pod's creation to the last one bound
    cpu: dict[str, float]  # CPU seconds each process used meanwhile (none unless sampled)
    story: list[dict[str, object]]  # each pod's moments from the first creation (PodTimeline.story)
    after_last_s: float = 0.0  # from the last pod's creation to the last one bound


def time_to_bound(
    cluster: LocalCluster,
    namespace: str,
    pods: Pods,
    timeout_s: float,
    settle: Callable[[], None] | None = None,
    objects: Sequence[tuple[str, dict[str, Any]]] = (),
    sample: Callable[[], dict[str, float]] | None = None,
    labels: Mapping[str, str] | None = None,
    setup: Callable[[str], None] | None = None,
    spread_s: float = 0.0,
) -> Run:
    """Time from the first pod's creation to the last one bound (all created at once), and with
    `sample` (CPU seconds used so far by each process) what each process used in that time. `setup`
    creates the namespace (by default an empty one, with `labels`: a webhook's selector; a peer may
    need its queue there first); `objects` (API path under the namespace, object) are created next,
    untimed; `settle` runs before the namespace is deleted (e.g. to let the controller post its last
    events); `spread_s` makes the pods one at a time over that many seconds rather than all at once."""
    client = cluster.client()
    if setup is None:
        cluster.create_namespace(namespace, labels=dict(labels or {}))
    else:
        setup(namespace)
    try:
        for path, body in objects:
            client.create(path.format(namespace=namespace), body)
        with PodTimeline(client, namespace, label_selector=SELECTOR) as timeline:
            before = sample() if sample is not None else {}
            started = time.monotonic()
            if spread_s:
                create_spread(client, namespace, pods, spread_s)
            else:
                create_pods(client, namespace, pods)
            made = time.monotonic()
            last = timeline.wait_bound([p["metadata"]["name"] for p in pods], timeout_s)
            after = sample() if sample is not None else {}
        if settle is not None:
            settle()
        return Run(last - started, _spent(before, after), timeline.story(started), max(0.0, last - made))
    finally:
        delete_namespace(cluster, namespace)


def native_gang(served: workloadapi.ServedVersion, name: str, members: int) -> tuple[list[tuple[str, Any]], Pods]:
    """A gang of Kubernetes' own (the Workload API): its pod group's objects and its M plain pods."""
    objects = [
        (f"{served.api}/namespaces/{{namespace}}/{resource}", body)
        for resource, body in workloadapi.manifests(served, name, members)
    ]
    pods = plain(name, members)
    for pod in pods:
        pod["spec"].update(workloadapi.member_spec(served, name))
    return objects, pods


def native_admission(
    cluster: LocalCluster,
    sizes: Sequence[int],
    repeats: int,
    served: workloadapi.ServedVersion,
    queue: str,
    held: Mapping[str, str],
    spread_s: float = 0.0,
    controller: ControllerUnderTest | None = None,
) -> dict[int, dict[str, Any]]:
    """Scenario 1c (a controller holding `queue`, serving the native-gang webhook for namespaces labelled
    `held`, must be running): one native gang of M members admitted by yuniplace (its pods created as a
    user's are, gated by the webhook until the gang is admitted, in `queue`) against the same gang left
    to kube-scheduler's gang plugin alone (no webhook), alternating, `repeats` times; by M. With
    `spread_s`, each gang's pods come one at a time over that many seconds, and the time from the last
    one's creation is reported too; with `controller`, its API writes a member and the placeholders it
    made."""
    found: dict[int, dict[str, Any]] = {}
    for members in sizes:
        alone, admitted, alone_after, admitted_after, writes, placeholders = [], [], [], [], [], []
        stories: dict[str, list[dict[str, object]]] = {}
        timeout_s = max(120.0, members * 0.5)
        for attempt in range(repeats):
            name = f"alone-{members}-{attempt}"
            objects, pods = native_gang(served, name, members)
            run = time_to_bound(cluster, name, pods, timeout_s, objects=objects, spread_s=spread_s)
            alone.append(run.seconds)
            alone_after.append(run.after_last_s)
            stories.setdefault("alone", run.story)
            name = f"admitted-{members}-{attempt}"
            objects, pods = native_gang(served, name, members)
            for pod in pods:
                pod["metadata"]["labels"][keys.YUNIKORN_QUEUE] = queue
            before = controller.writes() if controller is not None else {}
            made_before = controller.placeholders_made() if controller is not None else 0.0
            run = time_to_bound(cluster, name, pods, timeout_s, objects=objects, labels=held, spread_s=spread_s)
            if controller is not None:
                after = controller.writes()
                writes.append(sum(after.get(k, 0.0) - before.get(k, 0.0) for k in after if k != "events") / members)
                placeholders.append(controller.placeholders_made() - made_before)
            admitted.append(run.seconds)
            admitted_after.append(run.after_last_s)
            stories.setdefault("admitted", run.story)
        plugin_s, admitted_s = statistics.median(alone), statistics.median(admitted)
        row: dict[str, Any] = {
            "native_alone_s": round(plugin_s, 2),
            "native_admitted_s": round(admitted_s, 2),
            "runs_native_alone_s": [round(x, 2) for x in alone],
            "runs_native_admitted_s": [round(x, 2) for x in admitted],
            "native_admitted_vs_alone": round(admitted_s / plugin_s, 2),
            "native_timelines": stories,  # one run of each: every pod seen, let go, bound
        }
        if spread_s:
            row["native_alone_after_last_s"] = round(statistics.median(alone_after), 2)
            row["native_admitted_after_last_s"] = round(statistics.median(admitted_after), 2)
            row["runs_native_alone_after_last_s"] = [round(x, 2) for x in alone_after]
            row["runs_native_admitted_after_last_s"] = [round(x, 2) for x in admitted_after]
        if writes:
            row["native_writes_per_member"] = round(statistics.median(writes), 2)
            row["native_placeholders"] = [int(x) for x in placeholders]
        found[members] = row
    return found


def _spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: round(after[name] - before[name], 2) for name in after if name in before}


def decoding(cluster: LocalCluster, members: int) -> dict[str, Any]:
    """Scenario 4c: the pod watch lines of one gang of `members`, from its creation to every member
    Running (the controller must be running), decoded whole and typed."""
    client = cluster.client()
    namespace = "decode"
    cluster.create_namespace(namespace)
    try:
        pods = gang("decode", members)
        with decode.recorded_lines(client, namespace) as lines, PodTimeline(client, namespace) as timeline:
            create_pods(client, namespace, pods)
            timeline.wait_running(members, max(120.0, members * 0.5))
        return {"members": members, **decode.compare(list(lines))}
    finally:
        delete_namespace(cluster, namespace)


def arrivals(
    cluster: LocalCluster,
    namespace: str,
    apps: int,
    members: int,
    rate_per_s: float,
    make: Callable[[str], Pods],
    timeout_s: float,
    setup: Callable[[str], None] | None = None,
    objects: Callable[[str], Sequence[tuple[str, dict[str, Any]]]] = lambda _app: (),
) -> dict[str, Any]:
    """Applications of `members` pods arriving at a steady rate; per-application start latency. `setup`
    creates the namespace, as for `time_to_bound`. `make(app)` makes an application's pods, named
    `<app>-<i>`, and `objects(app)` what it needs besides (a native pod group's objects: API path under
    the namespace, object), created just before them as a user would; applications are named after the
    namespace, so no two runs share one (YuniKorn folds pods into a recently finished application of
    the same id)."""
    client = cluster.client()
    (setup or cluster.create_namespace)(namespace)

    def arrive(app: str) -> None:
        for path, body in objects(app):
            client.create(path.format(namespace=namespace), body)
        create_pods(client, namespace, make(app))

    try:
        with PodTimeline(client, namespace, label_selector=SELECTOR) as timeline, ThreadPoolExecutor(8) as pool:
            created: dict[str, float] = {}
            started = time.monotonic()
            futures = []
            for index in range(apps):
                due = started + index / rate_per_s
                time.sleep(max(0.0, due - time.monotonic()))  # pacing the arrivals, not waiting for a state
                app = f"{namespace}-{index}"
                created[app] = time.monotonic()
                futures.append(pool.submit(arrive, app))
            for future in futures:
                future.result()
            latencies, reactions = [], []
            spent: dict[str, list[float]] = {}  # each phase's moment, by gang (pods.PHASES)
            last = started
            for app, at in created.items():
                names = [f"{app}-{i}" for i in range(members)]
                bound = timeline.wait_bound(names, timeout_s)
                latencies.append(bound - at)
                last = max(last, bound)
                if reaction := _reaction(timeline, names):
                    reactions.append(reaction)
                for figure, moment in phases(timeline.story(at, names)).items():
                    spent.setdefault(figure, []).append(moment)
        found = {
            "p50_s": round(_percentile(latencies, 0.50), 2),
            "p95_s": round(_percentile(latencies, 0.95), 2),
            "p99_s": round(_percentile(latencies, 0.99), 2),
            "pods_per_s": round(apps * members / (last - started), 1),
            # Where the median gang's time went, from its arrival (each moment's median over the gangs).
            **{figure: round(statistics.median(moments), 3) for figure, moments in spent.items()},
        }
        if reactions:
            found["reaction_ms_p50"] = round(statistics.median(reactions) * 1000, 1)
            found["reaction_ms_p95"] = round(_percentile(reactions, 0.95) * 1000, 1)
        return found
    finally:
        delete_namespace(cluster, namespace)


def _reaction(timeline: PodTimeline, names: Sequence[str]) -> float | None:
    """How long after its last member was seen created a gang's first gate came off (None: none was
    gated, or a gate came off before the last member came)."""
    gated = [name for name in names if name in timeline.gated and name in timeline.free_at]
    if not gated:
        return None
    reaction = min(timeline.free_at[name] for name in gated) - max(timeline.seen_at[name] for name in names)
    return reaction if reaction >= 0 else None


def contention(
    cluster: LocalCluster, *, gangs: int, members: int, flood: int, cpu_per_pod: str = "1"
) -> dict[str, Any]:
    """Scenario 3: gangs swapping in while a flood of ordinary pods of the same priority competes for
    the same nodes. Every pod fits in the end, so any member not bound is stuck."""
    client = cluster.client()
    namespace = "contention"
    cluster.create_namespace(namespace)
    try:
        # No label selector: the placeholders' nodes are watched too, to tell where each member landed.
        with PodTimeline(client, namespace) as timeline, ThreadPoolExecutor(4) as pool:
            gang_pods = [gang(f"gang-{g}", members, cpu=cpu_per_pod, memory="256Mi") for g in range(gangs)]
            flood_pods = plain("flood", flood, cpu=cpu_per_pod, memory="256Mi")
            # Interleaved: flood pods keep arriving (and retrying) while the gangs reserve and swap.
            batches = [flood_pods[i::gangs] for i in range(gangs)]
            futures = []
            for pods, flood_batch in zip(gang_pods, batches, strict=True):
                futures.append(pool.submit(create_pods, client, namespace, pods))
                futures.append(pool.submit(create_pods, client, namespace, flood_batch))
            for future in futures:
                future.result()
            members_all = [p["metadata"]["name"] for pods in gang_pods for p in pods]
            stuck = 0
            try:
                timeline.wait_bound(members_all + [p["metadata"]["name"] for p in flood_pods], 300)
            except TimeoutError:
                stuck = sum(1 for name in members_all if name not in timeline.bound_at)
        by_name = {
            p["metadata"]["name"]: p
            for p in client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=SELECTOR)["items"]
        }

        def given(pod: dict[str, Any]) -> str | None:
            """The node whose room the member was handed: its placeholder's, or its seat."""
            notes = pod["metadata"].get("annotations") or {}
            if keys.SWAP_PLACEHOLDER in notes:
                return timeline.nodes.get(notes[keys.SWAP_PLACEHOLDER])
            return notes.get(keys.SEAT)

        handed = [(pod, node) for name in members_all if (node := given(pod := by_name[name])) is not None]
        landed = sum(1 for pod, node in handed if pod["spec"].get("nodeName") == node)
        seated = sum(1 for pod, _ in handed if keys.SEAT in pod["metadata"]["annotations"])
        return {
            "gangs": gangs,
            "members": members,
            "flood_pods": flood,
            "swapped": len(handed),
            "seated": seated,
            "landed": landed,
            "landed_rate": round(landed / len(handed), 3) if handed else None,
            "stuck": stuck,
        }
    finally:
        delete_namespace(cluster, namespace)


def managed_memory(
    cluster: LocalCluster, controller: ControllerUnderTest, *, apps: int, members: int
) -> dict[str, Any]:
    """Scenario 4b: the controller's memory while it manages `apps` × `members` gang pods (and as many
    placeholders while they reserve), measured until every member is bound."""
    client = cluster.client()
    namespace = "managed"
    cluster.create_namespace(namespace)
    pods = [
        pod for index in range(apps) for pod in gang(f"m{index}", members, cpu="10m", memory="16Mi", timeout_s=1800)
    ]
    with controller.rss_sampler() as rss, PodTimeline(client, namespace, label_selector=SELECTOR) as timeline:
        cpu_before = controller.cpu_seconds()
        started = time.monotonic()
        create_pods(client, namespace, pods)
        timeline.wait_bound([p["metadata"]["name"] for p in pods], max(600.0, len(pods) * 0.2))
        elapsed = time.monotonic() - started
        cpu = controller.cpu_seconds() - cpu_before
    mib = 1024 * 1024
    return {
        "managed_pods": len(pods),
        "peak_rss_mib": round(rss.peak_total / mib),
        "seconds_to_all_bound": round(elapsed, 1),
        "controller_cpu_s": round(cpu, 1),
    }
