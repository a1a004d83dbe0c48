"""DRA device selectors, evaluated as kube-scheduler evaluates them: CEL expressions over one device
(`device.driver`, `device.attributes[domain][name]`, `device.capacity[domain][name]`), with Kubernetes'
quantity and semver functions, by a CEL library rather than a parser of our own.

Quantities are integers of milli-units here and versions canonical semver strings: the library takes
plain values only, and both compare as Kubernetes compares them. A missing attribute is a runtime
error, as it is for kube-scheduler, which then allocates nothing for the request; an expression this
environment cannot compile (a function it does not offer) says so. Either way the devices are never
counted as fitting: a gang is never started on a guess.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import semver
from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from yuniplace.kube import parse_quantity

_T = cel.Type
_STRING_LITERAL = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'")
MAX_COMPILED = 4096  # selectors remembered; tenants write them, so the cache is bounded


class SelectorError(Exception):
    """A selector that cannot be evaluated on a device (or at all); the message says why."""


def quantity_value(text: Any) -> int:
    """A quantity as an integer of milli-units (rounded up, as kube-scheduler's milli-values are)."""
    amount = Decimal(parse_quantity(text)) * 1000
    return int(amount.to_integral_value(rounding="ROUND_CEILING"))


def _quantity(text: str) -> int:
    try:
        return quantity_value(text)
    except (ValueError, ArithmeticError) as error:
        raise SelectorError(f"quantity({text!r}): {error}") from None


def _is_quantity(text: str) -> bool:
    try:
        quantity_value(text)
    except (ValueError, ArithmeticError):
        return False
    return True


def _version(text: str, normalize: bool = False) -> semver.Version:
    if normalize:
        text = text.removeprefix("v")
        parts = text.split("-", 1)[0].split("+", 1)[0].split(".")
        text = text.replace(parts[0], str(int(parts[0])), 1) if parts and parts[0].isdigit() else text
    return semver.Version.parse(text, optional_minor_and_patch=normalize)


def canonical_version(text: str, normalize: bool = False) -> str:
    """A version as `semver()` gives it: its canonical semver string."""
    try:
        return str(_version(text, normalize))
    except (ValueError, TypeError) as error:
        raise SelectorError(f"semver({text!r}): {error}") from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _version(text, normalize)
    except (ValueError, TypeError):
        return False
    return True


def _compare(left: int, right: int) -> int:
    return (left > right) - (left < right)


def _compare_versions(left: str, right: str) -> int:
    return int(semver.Version.parse(left).compare(right))


def _overload(name: str, result: cel.Type, parameters: Sequence[cel.Type], impl: Any, member: bool = False) -> Any:
    return cel.Overload(name, result, list(parameters), is_member=member, impl=impl)


def _functions() -> list[Any]:
    """Kubernetes' quantity and semver libraries, as DRA selectors use them."""
    q, s, i, b, f = _T.INT, _T.STRING, _T.INT, _T.BOOL, _T.DOUBLE
    return [
        cel.FunctionDecl("quantity", [_overload("quantity_string", q, [s], _quantity)]),
        cel.FunctionDecl("isQuantity", [_overload("is_quantity_string", b, [s], _is_quantity)]),
        cel.FunctionDecl(
            "semver",
            [
                _overload("semver_string", s, [s], canonical_version),
                _overload("semver_string_bool", s, [s, b], canonical_version),
            ],
        ),
        cel.FunctionDecl(
            "isSemver",
            [
                _overload("is_semver_string", b, [s], _is_semver),
                _overload("is_semver_string_bool", b, [s, b], _is_semver),
            ],
        ),
        cel.FunctionDecl(
            "compareTo",
            [
                _overload("quantity_compare", i, [q, q], _compare, member=True),
                _overload("semver_compare", i, [s, s], _compare_versions, member=True),
            ],
        ),
        cel.FunctionDecl(
            "isGreaterThan",
            [
                _overload("quantity_greater", b, [q, q], lambda a, c: a > c, member=True),
                _overload("semver_greater", b, [s, s], lambda a, c: _compare_versions(a, c) > 0, member=True),
            ],
        ),
        cel.FunctionDecl(
            "isLessThan",
            [
                _overload("quantity_less", b, [q, q], lambda a, c: a < c, member=True),
                _overload("semver_less", b, [s, s], lambda a, c: _compare_versions(a, c) < 0, member=True),
            ],
        ),
        cel.FunctionDecl("add", [_overload("quantity_add", q, [q, q], lambda a, c: a + c, member=True)]),
        cel.FunctionDecl("sub", [_overload("quantity_sub", q, [q, q], lambda a, c: a - c, member=True)]),
        cel.FunctionDecl("sign", [_overload("quantity_sign", i, [q], lambda a: _compare(a, 0), member=True)]),
        cel.FunctionDecl("isInteger", [_overload("quantity_is_integer", b, [q], lambda a: a % 1000 == 0, member=True)]),
        cel.FunctionDecl("asInteger", [_overload("quantity_as_integer", i, [q], _as_integer, member=True)]),
        cel.FunctionDecl(
            "asApproximateFloat", [_overload("quantity_as_float", f, [q], lambda a: a / 1000, member=True)]
        ),
        cel.FunctionDecl("major", [_overload("semver_major", i, [s], lambda v: semver.Version.parse(v).major, True)]),
        cel.FunctionDecl("minor", [_overload("semver_minor", i, [s], lambda v: semver.Version.parse(v).minor, True)]),
        cel.FunctionDecl("patch", [_overload("semver_patch", i, [s], lambda v: semver.Version.parse(v).patch, True)]),
    ]


def _as_integer(amount: int) -> int:
    if amount % 1000:
        raise SelectorError("asInteger() of a quantity with a fraction")
    return amount // 1000


@functools.cache
def _environment() -> Any:
    """The CEL environment of DRA selectors (built once: it is immutable and shared by every thread)."""
    return cel.NewEnv(
        variables={"device": _T.Map(_T.STRING, _T.DYN)},
        extensions=[ext_bindings.ExtBindings(), ext_optional.ExtOptional(), ext_strings.ExtStrings()],
        functions=_functions(),
    )


@dataclass(frozen=True)
class Device:
    """A device as a ResourceSlice publishes it, in the values a selector reads."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]]  # by domain, then name
    capacity: Mapping[str, Mapping[str, int]]  # milli-units, by domain, then name
    allow_multiple_allocations: bool = False

    @classmethod
    def of(cls, driver: str, device: Mapping[str, Any]) -> Device:
        """The device of a slice's `spec.devices` entry; a name without a domain is the driver's own."""
        attributes: dict[str, dict[str, Any]] = {}
        for name, raw in (device.get("attributes") or {}).items():
            domain, key = _qualified(str(name), driver)
            attributes.setdefault(domain, {})[key] = _attribute_value(raw)
        capacity: dict[str, dict[str, int]] = {}
        for name, raw in (device.get("capacity") or {}).items():
            domain, key = _qualified(str(name), driver)
            capacity.setdefault(domain, {})[key] = quantity_value((raw or {}).get("value", 0))
        return cls(driver, attributes, capacity, bool(device.get("allowMultipleAllocations")))


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, key = name.partition("/")
    return (domain, key) if slash else (driver, name)


def _attribute_value(raw: Any) -> Any:
    """One attribute's value: an int, bool, string or version (canonical), or a list of one of them."""
    if not isinstance(raw, Mapping):
        raise SelectorError(f"attribute value {raw!r} is not an object")
    for scalar in ("int", "bool", "string"):
        if scalar in raw:
            return raw[scalar]
    if "version" in raw:
        return canonical_version(str(raw["version"]))
    for plural in ("ints", "bools", "strings"):
        if plural in raw:
            return list(raw[plural] or [])
    if "versions" in raw:
        return [canonical_version(str(v)) for v in raw["versions"] or []]
    raise SelectorError(f"attribute value {dict(raw)!r} has no value kubernetes knows")


@dataclass(frozen=True)
class Selector:
    """One compiled CEL selector, with the string literals it names: a domain it names that a device
    lacks reads as an empty map, as Kubernetes gives it."""

    expression: str
    program: Any
    literals: frozenset[str]

    def matches(self, device: Device) -> bool:
        """Whether the device matches; SelectorError when it cannot be evaluated on it."""
        attributes = dict(device.attributes)
        capacity = dict(device.capacity)
        for literal in self.literals:
            attributes.setdefault(literal, {})
            capacity.setdefault(literal, {})
        value = self.program.eval(
            data={
                "device": {
                    "driver": device.driver,
                    "attributes": attributes,
                    "capacity": capacity,
                    "allowMultipleAllocations": device.allow_multiple_allocations,
                }
            }
        )
        result = value.value()
        if value.type() == _T.ERROR or not isinstance(result, bool):
            raise SelectorError(
                f"CEL runtime error: {result}" if value.type() == _T.ERROR else f"not a bool: {result!r}"
            )
        return result


_lock = threading.Lock()
_compiled: dict[str, Selector | SelectorError] = {}


def compile_selector(expression: str) -> Selector:
    """The selector of `expression`, compiled once; SelectorError when this environment cannot compile it."""
    with _lock:
        known = _compiled.get(expression)
    if known is None:
        try:
            program = _environment().compile(expression)
        except RuntimeError as error:
            known = SelectorError(f"CEL compile error: {_first_line(str(error))}")
        else:
            literals = frozenset(a or b for a, b in _STRING_LITERAL.findall(expression))
            known = Selector(expression, program, literals)
        with _lock:
            if len(_compiled) >= MAX_COMPILED:
                _compiled.clear()
            _compiled[expression] = known
    if isinstance(known, SelectorError):
        raise known
    return known


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
