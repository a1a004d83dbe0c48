"""YAML read the way YuniKorn's Go decoder reads its configuration: every scalar stays the text that was
written (null aside), because YuniKorn decodes resources, names and properties into strings. PyYAML's own
typing would turn `vcore: 017` into 15 and `name: no` into False; YuniKorn reads "017" and "no".

The text comes from a ConfigMap anyone with edit rights on it can write, so reading is bounded: its
size, its nesting, and the nodes visited (aliases count each time they are used, so a few anchors
cannot expand into millions of queues). A mapping key defined twice is refused, as Go's decoder does.

libyaml parses when PyYAML has it (a 10 000-queue file in a fraction of the time). Its composer recurses
in C, where Python cannot stop a stack overflow, so the nesting is measured first from the parser's
events, which come without recursion.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_BYTES = 1024 * 1024  # a ConfigMap holds at most 1 MiB
MAX_DEPTH = 100  # a queue level is two (a list of mappings): room for every level a reader allows
MAX_NODES = 200_000

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSES = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
NULL_TAG = "tag:yaml.org,2002:null"
MERGE_TAG = "tag:yaml.org,2002:merge"


class Unreadable(ValueError):
    """The text is not one YAML document yuniplace can read; the message says where and why."""


def _one_line(error: yaml.YAMLError) -> str:
    """The parser's message on one line, where the problem is first: an event's note and a log line
    show it whole, rather than the parser's several lines quoting `<unicode string>`."""
    if isinstance(error, yaml.reader.ReaderError):
        return f"character {error.position + 1}: {error.reason}"
    if not isinstance(error, yaml.MarkedYAMLError):
        return " ".join(str(error).split())
    problem = error.problem or "cannot be read"
    if error.problem_mark is not None:
        mark = error.problem_mark
        problem = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if error.context:
        context = error.context
        if error.context_mark is not None:
            context += f" that starts at line {error.context_mark.line + 1}, column {error.context_mark.column + 1}"
        problem += f" ({context})"
    return " ".join(problem.split())


def load(text: str) -> Any:
    """The document as dicts, lists, strings and None; None for a blank document."""
    if len(text.encode()) > MAX_BYTES:
        raise Unreadable(f"is larger than {MAX_BYTES} bytes")
    loader = _LOADER(text)
    try:
        _check_depth(text)
        node = loader.get_single_node()
    except yaml.composer.ComposerError as error:
        if "expected a single document" in str(error):
            raise Unreadable("holds more than one YAML document; a configuration is one document") from None
        raise Unreadable(f"is not valid YAML: {_one_line(error)}") from None
    except yaml.YAMLError as error:
        raise Unreadable(f"is not valid YAML: {_one_line(error)}") from None
    except RecursionError:
        raise Unreadable(f"is nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()
    if node is None:
        return None
    return _Builder().build(node, 0)


def _check_depth(text: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, _OPENS):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise Unreadable(f"line {line}: is nested more than {MAX_DEPTH} levels deep")
        elif isinstance(event, _CLOSES):
            depth -= 1


class _Builder:
    def __init__(self) -> None:
        self.visited = 0

    def build(self, node: yaml.Node, depth: int) -> Any:
        self.visited += 1
        if self.visited > MAX_NODES:
            raise Unreadable(f"has more than {MAX_NODES} values (aliases counted each time they are used)")
        if depth > MAX_DEPTH:
            raise Unreadable(f"line {node.start_mark.line + 1}: is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.ScalarNode):
            return None if node.tag == NULL_TAG else node.value
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, depth + 1) for item in node.value]
        assert isinstance(node, yaml.MappingNode)
        return self._mapping(node, depth)

    def _mapping(self, node: yaml.MappingNode, depth: int) -> dict[str | None, Any]:
        merged: dict[str | None, Any] = {}
        explicit: dict[str | None, Any] = {}
        lines: dict[str | None, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                merged.update(self._merge_source(value_node, depth))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise Unreadable(f"line {key_node.start_mark.line + 1}: a mapping key must be a plain value")
            key = self.build(key_node, depth + 1)
            line = key_node.start_mark.line + 1
            if key in explicit:
                raise Unreadable(f'line {line}: mapping key "{key}" is already defined at line {lines[key]}')
            lines[key] = line
            explicit[key] = self.build(value_node, depth + 1)
        return {**merged, **explicit}

    def _merge_source(self, node: yaml.Node, depth: int) -> dict[str | None, Any]:
        """`<<: *defaults` or `<<: [*a, *b]` (the first mapping listed wins, as in YAML's merge type)."""
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str | None, Any] = {}
        for source in reversed(sources):
            if not isinstance(source, yaml.MappingNode):
                raise Unreadable(f"line {source.start_mark.line + 1}: `<<` merges mappings only")
            merged.update(self._mapping(source, depth + 1))
        return merged
