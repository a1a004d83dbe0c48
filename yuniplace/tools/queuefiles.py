"""Queue configurations among the documents of a file, checked as the controller would read them, so an
administrator sees every problem before the cluster refuses the configuration: YuniKorn's queues.yaml
(a document with `partitions:`), a ConfigMap holding one (`data["queues.yaml"]`, or the key its
`service.policyGroup` names), and Volcano's Queues (kind Queue, scheduling.volcano.sh/v1beta1; alone, in
several documents or in a List). The Volcano Queues of a file are read together (a parent may be
written after its children), and merged with the file's YuniKorn configuration to find a queue both
configure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

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
    if any(isinstance(d, Mapping) and "partitions" in d and "kind" not in d for d in documents):
        # A queues.yaml is read from its text: YuniKorn reads scalars as written, which parsing has lost.
        _read(result, where, yunikorn, partial(read_queues_yaml, text))
    for place, document in _items(documents, where):
        if _queue_configmap(document):
            _read(result, place, yunikorn, partial(read_configmap, document))
        elif document.get("kind") == KIND and document.get("apiVersion") == API_VERSION:
            volcano.append(document)
    if volcano:
        configs: list[tuple[str, QueueConfig]] = []
        _read(result, where, configs, partial(read_volcano_queues, volcano))
        if configs and len(yunikorn) == 1:
            try:
                merge(yunikorn[0][1], configs[0][1])
            except InvalidQueues as error:
                result.errors += [(where, str(problem)) for problem in error.problems]
    return result


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
