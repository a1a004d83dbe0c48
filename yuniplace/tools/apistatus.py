"""`yuniplace status --apis`: the optional APIs (Karpenter's, each PodGroup dialect's, Volcano's Queues,
ai-scheduler's Pools, the Workload API, DRA) the cluster serves now, and, for each yuniplace controller,
those it reads and since when.

Both are read from the cluster, not from the controller's memory: what is served from discovery, what
is read from the controller's Lease, on which the leading replica writes it with each renewal (the
annotation keys.OPTIONAL_APIS, on Leases labelled keys.CONTROLLER_LEASE). Events would say it too, but
they expire after an hour, and a controller reads most of its APIs from its start, weeks before."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from yuniplace.controller.devicewatches import DRA
from yuniplace.controller.nodepools import KARPENTER
from yuniplace.controller.optionalapis import OptionalApi, ServedApi
from yuniplace.controller.podgroups import NATIVE, pod_group_optional_api
from yuniplace.controller.queuesource import AI_SCHEDULER_POOLS, VOLCANO_QUEUES
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects.registry import pod_group_apis
from yuniplace.kube import ApiError, Forbidden, KubeClient
from yuniplace.kube.discovery import discover

# Every optional API a controller reads (with admission; without, only the PodGroups and the Workload API).
KNOWN_APIS: tuple[OptionalApi, ...] = (
    KARPENTER,
    *(pod_group_optional_api(api) for api in pod_group_apis()),
    NATIVE,
    VOLCANO_QUEUES,
    AI_SCHEDULER_POOLS,
    DRA,
)
LEASES = "/apis/coordination.k8s.io/v1/leases"
NO_LEASE = (
    "No yuniplace controller Lease found: a controller records the APIs it reads on its Lease, with "
    "--leader-elect (as the chart runs it)."
)


@dataclass(frozen=True)
class ControllerRecord:
    """What one controller's Lease says: who leads, and what it reads since when, by API key."""

    lease: str  # namespace/name
    holder: str
    reads: Mapping[str, Mapping[str, str]]
    problem: str | None = None


def served_now(client: KubeClient) -> dict[str, str | None]:
    """Each known API's group version the cluster serves now (None: not served), by key."""
    found = discover(client, [path for api in KNOWN_APIS for path in api.paths])
    shown: dict[str, str | None] = {}
    for api in KNOWN_APIS:
        served = api.served_as(found)
        shown[api.key] = served.version if isinstance(served, ServedApi) else None
    return shown


def _record(lease: Mapping[str, Any]) -> ControllerRecord:
    metadata = lease.get("metadata") or {}
    where = f"{metadata.get('namespace')}/{metadata.get('name')}"
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    text = (metadata.get("annotations") or {}).get(keys.OPTIONAL_APIS)
    if text is None:
        return ControllerRecord(
            where, holder, {}, f"no {keys.OPTIONAL_APIS} annotation yet (no replica has led since it started)"
        )
    try:
        reads = json.loads(text)
        if not isinstance(reads, dict) or not all(isinstance(v, dict) for v in reads.values()):
            raise ValueError("not an object of objects")
    except ValueError as error:
        return ControllerRecord(where, holder, {}, f"{keys.OPTIONAL_APIS} cannot be read: {error}")
    return ControllerRecord(where, holder, {str(k): {str(f): str(x) for f, x in v.items()} for k, v in reads.items()})


def controllers(client: KubeClient) -> tuple[list[ControllerRecord], str | None]:
    """Every controller Lease of the cluster, or why they cannot be read."""
    try:
        leases = client.get(LEASES, labelSelector=f"{keys.CONTROLLER_LEASE}=true")["items"]
    except Forbidden as error:
        return [], f"cannot list Leases ({error}): what each controller reads is not shown"
    except ApiError as error:
        return [], f"cannot list Leases ({error})"
    return sorted((_record(lease) for lease in leases), key=lambda r: r.lease), None


def _since(text: str | None, now: float) -> str:
    if not text:
        return "-"
    at = p.parse_time(text)
    if at is None:
        return text
    seconds = max(0, int(now - at))
    ago = f"{seconds}s" if seconds < 120 else f"{seconds // 60}m" if seconds < 7200 else f"{seconds // 3600}h"
    return f"{text} ({ago} ago)"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines)


def table(served: Mapping[str, str | None], records: Sequence[ControllerRecord], now: float) -> str:
    """One table per controller: each known API, whether the cluster serves it, and since when it is read."""
    if not records:
        alone: list[tuple[str, ...]] = [(api.title, served.get(api.key) or "-") for api in KNOWN_APIS]
        return NO_LEASE + "\n\n" + _table(("OPTIONAL API", "SERVED NOW"), alone)
    blocks = []
    for record in records:
        led = f"led by {record.holder}" if record.holder else "no replica leads now"
        head = f"Controller {record.lease} ({led})" + (f": {record.problem}" if record.problem else "")
        rows: list[tuple[str, ...]] = []
        for api in KNOWN_APIS:
            read, now_served = record.reads.get(api.key), served.get(api.key)
            if read is None:
                since = "not read" + (" yet" if now_served else "")
            else:
                since = _since(read.get("since"), now)
                if read.get("api") != now_served:
                    since += f" (reads {read.get('api')})"
            rows.append((api.title, now_served or "-", since))
        blocks.append(head + "\n" + _table(("OPTIONAL API", "SERVED NOW", "READ SINCE"), rows))
    return "\n\n".join(blocks)


def as_json(served: Mapping[str, str | None], records: Sequence[ControllerRecord]) -> dict[str, Any]:
    return {
        "apis": [{"key": api.key, "title": api.title, "served": served.get(api.key)} for api in KNOWN_APIS],
        "controllers": [
            {"lease": r.lease, "holder": r.holder, "reads": dict(r.reads), "problem": r.problem} for r in records
        ],
    }


def run(client: KubeClient, output: str) -> int:
    served = served_now(client)
    records, problem = controllers(client)
    if problem is not None:
        print(problem, file=sys.stderr)
    if output == "json":
        json.dump(as_json(served, records), sys.stdout, indent=2)
        print()
    else:
        print(table(served, records, time.time()))
    return 0
