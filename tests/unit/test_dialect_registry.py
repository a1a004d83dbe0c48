"""Adding a gang dialect touches only its own module and the registry: checked here, not assumed.

A dialect module is a module of yuniplace/gang/dialects/ that defines `DIALECT`. Outside that folder,
modules reach dialects only through `registry` and the protocol in `base`: none imports a dialect
module, and none spells one of a dialect's keys or API paths (a key spelled twice is a second home for
it). Inside, dialect modules share only the modules that are no dialect, never one another, and the
registry lists every one of them, once.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from yuniplace.gang.dialects import registry

PACKAGE = Path(__file__).resolve().parents[2] / "yuniplace"
DIALECTS = PACKAGE / "gang" / "dialects"
PREFIX = "yuniplace.gang.dialects"
# What the rest of yuniplace may import from the folder: the lookups and the protocol.
PUBLIC = {f"{PREFIX}.registry", f"{PREFIX}.base"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _defines_dialect(path: Path) -> bool:
    return any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "DIALECT" for t in node.targets)
        for node in _tree(path).body
    )


DIALECT_MODULES = sorted(_module_name(path) for path in DIALECTS.glob("*.py") if _defines_dialect(path))
SHARED_MODULES = sorted(_module_name(path) for path in DIALECTS.glob("*.py") if not _defines_dialect(path))
OUTSIDE = sorted(path for path in PACKAGE.rglob("*.py") if DIALECTS not in path.parents)


def _imports(tree: ast.Module) -> Iterator[str]:
    """Every module an import names, including the modules `from package import name` may bring."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _dialect_imports(path: Path) -> set[str]:
    return {name for name in _imports(_tree(path)) if name in DIALECT_MODULES}


def _strings(tree: ast.Module) -> Iterator[str]:
    """The string literals of a module, docstrings left out (prose may name a key)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def _dialect_keys() -> dict[str, str]:
    """Each dialect's keys and API paths (its upper-case constants that hold one), by where they live."""
    found = {}
    for name in DIALECT_MODULES:
        module = importlib.import_module(name)
        for constant, value in vars(module).items():
            if constant.isupper() and isinstance(value, str) and "/" in value:
                found[value] = f"{name}.{constant}"
    return found


def test_the_folder_holds_the_dialects_and_what_they_share() -> None:
    assert len(DIALECT_MODULES) >= 6, DIALECT_MODULES
    assert {f"{PREFIX}.registry", f"{PREFIX}.base"} <= set(SHARED_MODULES)


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_outside_the_dialects_imports_one(path: Path) -> None:
    reached = {name for name in _imports(_tree(path)) if name.startswith(f"{PREFIX}.")}
    assert not _dialect_imports(path), f"ask the registry instead of importing {sorted(_dialect_imports(path))}"
    assert {name for name in reached if name.count(".") == 3} <= PUBLIC, reached


@pytest.mark.parametrize("name", DIALECT_MODULES)
def test_dialects_share_only_what_is_no_dialect(name: str) -> None:
    path = DIALECTS / f"{name.rsplit('.', 1)[1]}.py"
    assert _dialect_imports(path) == set(), f"{name} imports another dialect"
    assert f"{PREFIX}.registry" not in set(_imports(_tree(path)))


def test_the_registry_lists_every_dialect_once() -> None:
    assert _dialect_imports(DIALECTS / "registry.py") == set(DIALECT_MODULES)
    listed = [type(dialect).__module__ for dialect in registry.DIALECTS]
    assert sorted(listed) == DIALECT_MODULES
    for name in DIALECT_MODULES:
        assert importlib.import_module(name).DIALECT in registry.DIALECTS


def test_no_module_outside_the_dialects_spells_a_dialects_key() -> None:
    keys = _dialect_keys()
    assert keys, "the dialects define their keys"
    spelled = [
        f"{path.relative_to(PACKAGE)}: {text!r} (the key of {owner})"
        for path in OUTSIDE
        for text in _strings(_tree(path))
        for key, owner in keys.items()
        if key in text
    ]
    assert not spelled, spelled
