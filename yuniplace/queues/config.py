"""The queue configuration in force: YuniKorn's queues.yaml, Volcano's Queues and ai-scheduler's Pools
merged into one model, and the placement of applications in it. This is what the controller calls:

    config = merge(read_configmap(configmap), read_volcano_queues(queues), read_ai_scheduler_pools(pools, nodes))
    placement = place(config, provided_queue=…, namespace=…, labels=…, service_account=…)

Each source is read and checked on its own; merging refuses a queue path configured in two (a queue
has one owner, so nobody has to guess which guarantee wins), and a name that would stand for two
queues. The placement rules are YuniKorn's; without a queues.yaml, YuniKorn's implicit rule applies:
the queue the application names (a Volcano Queue's or a Pool's name is enough), else root.default.
With Pools, root.default is ai-scheduler's default pool unless a source configures it, so that a pod
naming no Pool, or one that does not exist, goes there as in ai-scheduler. With Volcano's Queues
alone, it is Volcano's default Queue (which exists without one, as Volcano creates it itself).
"""

from __future__ import annotations

from collections.abc import Sequence

from yuniplace.queues.aischeduler import read_ai_scheduler_pools
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
    "read_ai_scheduler_pools",
    "read_configmap",
    "read_queues_yaml",
    "read_volcano_queues",
]


def merge(
    yunikorn: QueueConfig | None,
    volcano: QueueConfig | Sequence[QueueSpec] = (),
    pools: QueueConfig | None = None,
) -> QueueConfig:
    """One configuration of every source's queues; YuniKorn's rules, root and ACLs. Empty when none
    configures a queue (the caller then keeps today's behaviour). InvalidQueues names each queue path
    two sources configure, and each name that two queues would answer to."""
    first = yunikorn or QueueConfig()
    others = [
        volcano if isinstance(volcano, QueueConfig) else QueueConfig({spec.path: spec for spec in volcano}),
        pools or QueueConfig(),
    ]
    warnings = first.warnings + tuple(w for other in others for w in other.warnings)
    if first.empty and all(other.empty for other in others):
        return QueueConfig(warnings=warnings)
    queues: dict[str, QueueSpec] = dict(first.queues)
    roots = [other.queues[ROOT] for other in others if ROOT in other.queues]
    queues.setdefault(ROOT, roots[0] if roots else QueueSpec(ROOT, parent_queue=True))
    problems: list[QueueProblem] = []
    for other in others:
        for path, spec in other.queues.items():
            if path == ROOT:
                continue
            if path in queues:
                if spec.owns_the_rest:
                    continue  # ai-scheduler's default pool: a root.default configured elsewhere wins
                problems.append(
                    QueueProblem(
                        spec.source,
                        path,
                        "",
                        spec.name,
                        f"is also configured in {queues[path].source}: each queue is configured in one place",
                    )
                )
                continue
            queues[path] = spec
    names: dict[str, str] = {}
    for other in others:
        for name, path in other.names.items():
            shadowed = f"{ROOT}.{name}"
            clash = names.get(name) or (shadowed if path != shadowed and shadowed in queues else None)
            if clash is not None and clash != path:
                problems.append(
                    QueueProblem(
                        other.queues[path].source,
                        path,
                        "metadata.name",
                        name,
                        f"is also the name of {clash} in {queues[clash].source}: an application naming "
                        f"{name} could mean either",
                    )
                )
                continue
            names[name] = path
    if problems:
        raise InvalidQueues(problems)
    if DEFAULT_QUEUE not in queues and first.empty:
        # Volcano alone: a job naming no queue goes to Volcano's `default` Queue, which Volcano creates
        # itself; so here too, rather than every application that names none being refused.
        queues[DEFAULT_QUEUE] = QueueSpec(DEFAULT_QUEUE, source="Volcano's default Queue (implicit)")
        names.setdefault("default", DEFAULT_QUEUE)
    return QueueConfig(queues, first.rules, names, warnings)
