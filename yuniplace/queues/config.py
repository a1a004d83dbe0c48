"""The queue configuration in force: YuniKorn's queues.yaml and Volcano's Queues merged into one model,
and the placement of applications in it. This is what the controller calls:

    config = merge(read_configmap(configmap), read_volcano_queues(queues))   # InvalidQueues: keep the old one
    placement = place(config, provided_queue=…, namespace=…, labels=…, service_account=…)

Each source is read and checked on its own; merging refuses a queue path configured in both (a queue
has one owner, so nobody has to guess which guarantee wins). The placement rules are YuniKorn's; with
Volcano's Queues alone, YuniKorn's implicit rule applies: the queue the application names (a Volcano
Queue's name is enough), else root.default, which Volcano's default Queue becomes (and which exists
without one, as Volcano creates its default Queue itself).
"""

from __future__ import annotations

from collections.abc import Sequence

from yuniplace.queues.model import ROOT, QueueConfig, QueueSpec
from yuniplace.queues.placement import DEFAULT_QUEUE, Placement, dynamic_queue, place
from yuniplace.queues.problems import InvalidQueues, QueueProblem
from yuniplace.queues.volcano import read_volcano_queues
from yuniplace.queues.yunikorn import read_configmap, read_queues_yaml

__all__ = [
    "InvalidQueues",
    "Placement",
    "QueueConfig",
    "dynamic_queue",
    "merge",
    "place",
    "read_configmap",
    "read_queues_yaml",
    "read_volcano_queues",
]


def merge(yunikorn: QueueConfig | None, volcano: QueueConfig | Sequence[QueueSpec] = ()) -> QueueConfig:
    """One configuration of both sources' queues; YuniKorn's rules, root and ACLs. Empty when neither
    configures a queue (the caller then keeps today's behaviour). InvalidQueues names each queue path
    both configure."""
    other = volcano if isinstance(volcano, QueueConfig) else QueueConfig({spec.path: spec for spec in volcano})
    first = yunikorn or QueueConfig()
    if first.empty and other.empty:
        return QueueConfig(warnings=first.warnings + other.warnings)
    queues: dict[str, QueueSpec] = dict(first.queues)
    queues.setdefault(ROOT, other.queues.get(ROOT) or QueueSpec(ROOT, parent_queue=True))
    problems: list[QueueProblem] = []
    for path, spec in other.queues.items():
        if path == ROOT:
            continue
        if path in first.queues:
            problems.append(
                QueueProblem(
                    spec.source,
                    path,
                    "",
                    spec.name,
                    f"is also configured in {first.queues[path].source}: each queue is configured in one place",
                )
            )
            continue
        queues[path] = spec
    for name, path in other.names.items():
        shadowed = f"{ROOT}.{name}"
        if path != shadowed and shadowed in first.queues:
            problems.append(
                QueueProblem(
                    other.queues[path].source,
                    path,
                    "metadata.name",
                    name,
                    f"is also the name of {shadowed} in {first.queues[shadowed].source}: an application naming "
                    f"{name} could mean either",
                )
            )
    if problems:
        raise InvalidQueues(problems)
    names = dict(other.names)
    if first.empty and DEFAULT_QUEUE not in queues:
        # Volcano alone: a job naming no queue goes to Volcano's `default` Queue, which Volcano creates
        # itself; so here too, rather than every application that names none being refused.
        queues[DEFAULT_QUEUE] = QueueSpec(DEFAULT_QUEUE, source="Volcano's default Queue (implicit)")
        names.setdefault("default", DEFAULT_QUEUE)
    return QueueConfig(queues, first.rules, names, first.warnings + other.warnings)
