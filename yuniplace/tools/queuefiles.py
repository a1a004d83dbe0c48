"""Queue configurations among the documents of a file, checked as the controller would read them, so an
administrator sees every problem before the cluster refuses the configuration: YuniKorn's queues.yaml
(a document with `partitions:`), a ConfigMap holding one (`data["queues.yaml"]`, or the key its
`service.policyGroup` names), and Volcano's Queues (kind Queue, scheduling.volcano.sh/v1beta1; alone, in
several documents or in a List), and ai-scheduler's Pools (kind Pool, resource.aibee.cn/v1alpha1). The
Volcano Queues of a file are read together (a parent may be written after its children), and so are its
Pools; each is merged with the file's YuniKorn configuration to find a queue two sources configure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from yuniplace.queues import aischeduler
from yuniplace.queues.config import merge
from yuniplace.queues.model import ROOT, QueueConfig
from yuniplace.queues.problems import InvalidQueues
from yuniplace.queues.volcano import API_VERSION, KIND, read_volcano_queues
from yuniplace.queues.yunikorn import POLICY_GROUP_KEY, QUEUES_KEY, read_configmap, read_queues_yaml


@dataclass
class QueueCheck:
    """What the queue configurations of one file came to."""

    configurations: int = 0  # found, valid or not
    queues: int = 0  # queues below root in the valid ones
    errors: list[tuple[str, str]] = field(default_factory=list)  # (where, message)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def _items(documents: list[Any], where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for index, document in enumerate(documents):
        if isinstance(document, Mapping) and document.get("kind") == "List":
            for position, item in enumerate(document.get("items") or []):
                if isinstance(item, Mapping):
                    yield f"{where}#{index}[{position}]", item
        elif isinstance(document, Mapping):
            yield f"{where}#{index}", document


def _queue_configmap(document: Mapping[str, Any]) -> bool:
    data = document.get("data")
    return (
        document.get("kind") == "ConfigMap"
        and isinstance(data, Mapping)
        and (QUEUES_KEY in data or POLICY_GROUP_KEY in data)
    )


def check(documents: list[Any], text: str, where: str) -> QueueCheck:
    """The queue configurations among `documents` (parsed from `text`) checked; `where` names the file."""
    result = QueueCheck()
    yunikorn: list[tuple[str, QueueConfig]] = []
    volcano: list[Mapping[str, Any]] = []
    pools: list[Mapping[str, Any]] = []
    if any(isinstance(d, Mapping) and "partitions" in d and "kind" not in d for d in documents):
        # A queues.yaml is read from its text: YuniKorn reads scalars as written, which parsing has lost.
        _read(result, where, yunikorn, partial(read_queues_yaml, text))
    for place, document in _items(documents, where):
        if _queue_configmap(document):
            _read(result, place, yunikorn, partial(read_configmap, document))
        elif document.get("kind") == KIND and document.get("apiVersion") == API_VERSION:
            volcano.append(document)
        elif document.get("kind") == aischeduler.KIND and document.get("apiVersion") == aischeduler.API_VERSION:
            pools.append(document)
    volcano_config = _read_together(result, where, volcano, read_volcano_queues)
    pools_config = _read_together(result, where, pools, aischeduler.read_ai_scheduler_pools)
    if (volcano_config or pools_config) and len(yunikorn) <= 1:
        try:
            merge(yunikorn[0][1] if yunikorn else None, volcano_config or (), pools_config)
        except InvalidQueues as error:
            result.errors += [(where, str(problem)) for problem in error.problems]
    return result


def _read_together(
    result: QueueCheck, where: str, objects: list[Mapping[str, Any]], read: Callable[[list[Any]], QueueConfig]
) -> QueueConfig | None:
    """A source's objects of the file read as one configuration (None when there are none, or it is refused)."""
    if not objects:
        return None
    configs: list[tuple[str, QueueConfig]] = []
    _read(result, where, configs, partial(read, list(objects)))
    return configs[0][1] if configs else None


def _read(result: QueueCheck, where: str, into: list[tuple[str, QueueConfig]], read: Callable[[], QueueConfig]) -> None:
    result.configurations += 1
    try:
        config = read()
    except InvalidQueues as error:
        result.errors += [(where, str(problem)) for problem in error.problems]
        return
    result.queues += sum(1 for path in config.queues if path != ROOT)
    result.warnings += [(where, warning) for warning in config.warnings]
    into.append((where, config))
