"""Pods and nodes decoded from the API's bytes straight into the fields yuniplace reads.

Every pod of the cluster passes through the controller several times in its life (created, bound,
running, deleted, and the answers to the controller's own writes), and a pod as the API sends it is
mostly managed fields, container images and volumes nobody here reads. Decoding it whole and
trimming it afterwards cost the controller a quarter of its CPU; a decoder typed with the kept fields
skips the rest as it parses (`python -m yuniplace.bench.decode` measures both on the same bytes).

The kept fields are those `pods.trim` keeps, the fields every gang dialect reads among them, so the
decoder and the trim can never disagree about what a watched pod says. The types are loose
(any JSON inside a kept field): the API server writes these objects, and a value of an unexpected
shape must reach the readers that validate it, never fail the event that carries it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict, cast

import msgspec

from yuniplace.gang import pods as p
from yuniplace.gang.dialects.registry import DIALECTS

JsonObject = dict[str, Any]
# The decoders' types are built from the field lists at import, which type checkers do not follow.
_Typed: Any = TypedDict
_List: Any = list


def _typed(name: str, fields: dict[str, Any]) -> Any:
    """A TypedDict of `fields` (name: type), none required: what msgspec keeps of an object, skipping
    the rest as it parses."""
    return _Typed(name, fields, total=False)


def _any_of(name: str, names: Iterable[str]) -> Any:
    """A TypedDict of `names`, each any JSON value."""
    return _typed(name, dict.fromkeys(names, Any))


_CONTAINERS = _List[_any_of("Container", p.KEPT_CONTAINER)]
_POD = _typed(
    "Pod",
    {
        "metadata": _any_of("PodMeta", p.KEPT_METADATA),
        "spec": _typed(
            "PodSpec",
            {
                **dict.fromkeys((*p.KEPT_SPEC, *(f for dialect in DIALECTS for f in dialect.spec_fields)), Any),
                "containers": _CONTAINERS,
                "initContainers": _CONTAINERS,
            },
        ),
        "status": _typed(
            "PodStatus",
            {
                **dict.fromkeys(p.KEPT_STATUS, Any),
                "containerStatuses": _List[
                    _typed(
                        "ContainerStatus",
                        {"name": Any, "state": _typed("ContainerState", {"waiting": _any_of("Waiting", ("reason",))})},
                    )
                ],
            },
        ),
    },
)
_NODE = _typed(
    "Node",
    {
        "metadata": _any_of("NodeMeta", ("name", "uid", "resourceVersion", "labels")),
        "spec": _any_of("NodeSpec", ("taints", "unschedulable")),
        "status": _any_of("NodeStatus", ("allocatable", "capacity")),
    },
)


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


def _page(kind: Any) -> Any:
    return _typed("Page", {"metadata": _any_of("ListMeta", ("resourceVersion", "continue")), "items": _List[kind]})


class Decoder:
    """Decodes one kind of object from the API's JSON: a watch event, a page of a list, or the object
    a write answers with. A watch event's object is decoded once its type is known: an ERROR carries
    a Status, whose fields the typed object would drop, and is read whole."""

    def __init__(self, kind: Any) -> None:
        self._event = msgspec.json.Decoder(_Event)
        self._page: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_page(kind))
        self._object: msgspec.json.Decoder[Any] = msgspec.json.Decoder(kind)

    def event(self, line: bytes) -> JsonObject:
        event = self._event.decode(line)
        body = self.object(event.object) if event.type != "ERROR" else msgspec.json.decode(event.object)
        return {"type": event.type, "object": body}

    def page(self, body: bytes) -> JsonObject:
        try:
            return cast(JsonObject, self._page.decode(body))
        except msgspec.ValidationError:
            return cast(JsonObject, msgspec.json.decode(body))

    def object(self, body: bytes) -> JsonObject:
        """The object's kept fields; one of a shape the types do not expect is read whole instead (and
        trimmed where it is stored), so no object is ever lost to its shape."""
        try:
            return cast(JsonObject, self._object.decode(body))
        except msgspec.ValidationError:
            return cast(JsonObject, msgspec.json.decode(body))


PODS = Decoder(_POD)
NODES = Decoder(_NODE)
