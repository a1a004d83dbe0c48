"""Prometheus metrics, in a registry of their own so tests and several controllers in one process
never share counters."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import OnTimeout
from yuniplace.gang.topology import Domains
from yuniplace.queues.report import QueuesReport

# The *_created series double every counter for a timestamp nobody graphs.
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated

# Domains of one level whose free room is reported: a gang asking for a level of thousands of domains
# (kubernetes.io/hostname, say) must not flood the metrics.
MAX_DOMAINS_SHOWN = 256
MAX_LEVELS_SHOWN = 8

DURATION_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.applications = Gauge("yuniplace_applications", "Applications by state.", ["state"], registry=r)
        self.placeholders = Gauge(
            "yuniplace_placeholders", "Placeholder pods by state (pending: not yet placed).", ["state"], registry=r
        )
        self.placeholders_created = Counter("yuniplace_placeholders_created_total", "Placeholders created.", registry=r)
        self.placeholders_deleted = Counter(
            "yuniplace_placeholders_deleted_total", "Placeholders deleted, by why.", ["reason"], registry=r
        )
        self.claims_handed_over = Counter(
            "yuniplace_dra_claims_handed_over_total",
            "DRA ResourceClaims a placeholder held and handed to its member in a swap, still allocated.",
            registry=r,
        )
        self.reservation_seconds = Histogram(
            "yuniplace_reservation_duration_seconds",
            "From the reservation's start to every placeholder placed.",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.swap_seconds = Histogram(
            "yuniplace_swap_duration_seconds",
            "From a swap's start to the real pod bound.",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.gang_starts = Counter(
            "yuniplace_gang_starts_total",
            "Gangs that began to start, by path (direct: on the nodes admission chose, no placeholders; "
            "placeholders: reserved with placeholders first).",
            ["path"],
            registry=r,
        )
        self.swaps = Counter(
            "yuniplace_swaps_total",
            "Real pods swapped into a reservation, by outcome (landed: on the reserved node; moved: elsewhere).",
            ["outcome"],
            registry=r,
        )
        self.timeouts = Counter(
            "yuniplace_timeouts_total",
            "Reservations that timed out, by timeout rule (a style, or a dialect's own).",
            ["style"],
            registry=r,
        )
        self.degradations = Counter(
            "yuniplace_gangs_degraded_total",
            "Started gangs reported below their minimum (members lost: failed, evicted, deleted, on a node gone, "
            "not Ready in time).",
            registry=r,
        )
        self.loss_actions = Counter(
            "yuniplace_gang_loss_actions_total",
            "What degraded gangs' policies did: restarted (evicted whole for their owner to make them again), "
            "released (evicted whole after their recovery timeout) or failed (past their restart limit).",
            ["action"],
            registry=r,
        )
        self.degraded = Gauge(
            "yuniplace_degraded_applications", "Started gangs below their minimum now (reported).", registry=r
        )
        self.api_requests = Counter(
            "yuniplace_api_requests_total",
            "Kubernetes API requests, by verb, resource and status code.",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "yuniplace_reconcile_duration_seconds",
            "Time to plan and apply one reconcile.",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.direct_start_seconds = Histogram(
            "yuniplace_direct_start_stage_duration_seconds",
            "Time a worker spends in each stage of a direct start: record (the gang's record written), check "
            "(waiting for the pod watch to bring it back and looking at the seats), nominate, release (the gates "
            "lifted).",
            ["stage"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.reconcile_errors = Counter(
            "yuniplace_reconcile_errors_total", "Reconciles that failed and were retried.", registry=r
        )
        self.internal_errors = Counter(
            "yuniplace_internal_errors_total",
            "Faults of yuniplace's own met for one application, by stage (snapshot, decide: admission; plan; apply; "
            "read: the application itself): the gang is held as it is, never failed or released, and tried again "
            "after a backoff.",
            ["stage"],
            registry=r,
        )
        self.events = Counter(
            "yuniplace_events_total", "Kubernetes Events posted, by type and reason.", ["type", "reason"], registry=r
        )
        self.admission_cycle_seconds = Histogram(
            "yuniplace_admission_cycle_duration_seconds",
            "Time of one admission cycle: every waiting application decided once.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.admission_cycle_cpu = Counter(
            "yuniplace_admission_cycle_cpu_seconds_total", "CPU time spent in admission cycles.", registry=r
        )
        self.admission_waiting = Gauge(
            "yuniplace_admission_waiting_applications",
            "Applications waiting for room to reserve their gang.",
            registry=r,
        )
        self.queue_depth = Gauge("yuniplace_queue_depth", "Applications waiting to be reconciled.", registry=r)
        # Per queue of the queue configuration (yuniplace_queue_depth above is the work queue's).
        per_queue = ["queue", "resource"]
        self.queue_amounts = {
            "guaranteed": Gauge("yuniplace_queue_guaranteed", "A queue's guarantee.", per_queue, registry=r),
            "max": Gauge("yuniplace_queue_max", "A queue's max (resources it limits).", per_queue, registry=r),
            "used": Gauge(
                "yuniplace_queue_used",
                "What a queue holds: placeholders, gang members, ordinary pods on its pool's nodes.",
                per_queue,
                registry=r,
            ),
            "borrowed": Gauge("yuniplace_queue_borrowed", "Used beyond the guarantee.", per_queue, registry=r),
            "lent": Gauge("yuniplace_queue_lent", "A queue's idle guarantee that others use.", per_queue, registry=r),
        }
        self.queue_waiting = Gauge(
            "yuniplace_queue_waiting_applications", "Applications waiting for admission.", ["queue"], registry=r
        )
        # Per pool (the nodes a queue owns), as ai-scheduler's resource table shows them.
        per_pool = ["pool", "resource"]
        self.pool_amounts = {
            "capacity": Gauge("yuniplace_pool_capacity", "What a pool's nodes have.", per_pool, registry=r),
            "allocatable": Gauge(
                "yuniplace_pool_allocatable", "What a pool's nodes have for pods.", per_pool, registry=r
            ),
            "used": Gauge("yuniplace_pool_used", "What every pod on a pool's nodes takes.", per_pool, registry=r),
            "shared": Gauge(
                "yuniplace_pool_shared", "What pods of other queues take on a pool's nodes.", per_pool, registry=r
            ),
        }
        self.pool_pending = Gauge(
            "yuniplace_pool_pending_pods", "Pods of a pool's gangs not on a node yet.", ["pool"], registry=r
        )
        self.topology_placed = Counter(
            "yuniplace_topology_gangs_placed_total",
            "Gangs whose reservation began in topology domains, by level (a node label key) and placement: "
            "single (one domain) or spread (a preferred level no one domain held).",
            ["level", "placement"],
            registry=r,
        )
        self.topology_free = Gauge(
            "yuniplace_topology_domain_free",
            "Free room of each topology domain (of the levels gangs ask for, at most "
            f"{MAX_DOMAINS_SHOWN} domains a level): cpu in cores, memory in bytes, pods as a count.",
            ["level", "domain", "resource"],
            registry=r,
        )
        for state in AppState:
            self.applications.labels(state.value)
        for placement in ("pending", "placed"):
            self.placeholders.labels(placement)
        for outcome in ("landed", "moved"):
            self.swaps.labels(outcome)
        for rule in OnTimeout:
            self.timeouts.labels(rule.value)

    def count_nodes(self, known: Callable[[], int], taking_pods: Callable[[], int]) -> None:
        """Node gauges read at each scrape from admission's view of the nodes. Only a controller with
        admission watches nodes: without it they are left out rather than shown as 0."""
        r = self.registry
        known_nodes = Gauge("yuniplace_nodes", "Nodes admission knows (its view of the cluster).", registry=r)
        known_nodes.set_function(known)
        Gauge(
            "yuniplace_nodes_taking_pods",
            "Nodes admission knows that take new pods (not tainted not-ready or unreachable, not cordoned).",
            registry=r,
        ).set_function(taking_pods)

    def report_queues(self, report: QueuesReport | None) -> None:
        """Set the per-queue and per-pool gauges to the report (cpu in cores, memory in bytes, pods as a
        count); queues and pools no longer configured disappear."""
        for gauge in (*self.queue_amounts.values(), self.queue_waiting, *self.pool_amounts.values(), self.pool_pending):
            gauge.clear()
        if report is None:
            return
        for pool in report.pools:
            self.pool_pending.labels(pool.queue).set(pool.pending)
            for what, amounts in (
                ("capacity", pool.capacity),
                ("allocatable", pool.allocatable),
                ("used", pool.used),
                ("shared", pool.shared),
            ):
                for resource, milli in amounts.items():
                    self.pool_amounts[what].labels(pool.queue, resource).set(milli / 1000)
        for row in report.queues:
            self.queue_waiting.labels(row.path).set(row.waiting)
            for what, amounts in (
                ("guaranteed", row.guaranteed),
                ("max", row.max or {}),
                ("used", row.used),
                ("borrowed", row.borrowed),
                ("lent", row.lent),
            ):
                for resource, milli in amounts.items():
                    self.queue_amounts[what].labels(row.path, resource).set(milli / 1000)

    def report_domains(self, domains: Iterable[tuple[str, str, Mapping[str, int]]]) -> None:
        """Set the free room (in milli-units) of each topology domain, given as (level, domain, free);
        domains no longer asked for disappear."""
        self.topology_free.clear()
        for level, domain, free in domains:
            for resource, milli in free.items():
                self.topology_free.labels(level, domain, resource).set(milli / 1000)

    def placed_in(self, domains: Domains) -> None:
        """A gang's reservation began in these topology domains."""
        for pin in domains.pins():
            self.topology_placed.labels(pin.key, "single" if len(pin.values) == 1 else "spread").inc()

    def observe_api_call(self, verb: str, resource: str, code: str) -> None:
        self.api_requests.labels(verb, resource, code).inc()
