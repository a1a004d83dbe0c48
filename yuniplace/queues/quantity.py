"""Amounts as the two configuration sources write them, turned into the milli-units admission counts in.

YuniKorn's grammar is narrower than Kubernetes': whole numbers only, one optional suffix (k M G T P E,
Ki … Ei), blanks allowed around it, and `m` for `vcore` alone, whose unit is a core (`2` is 2000
millicores, `500m` half a core). Every other resource counts in its base unit (memory in bytes). The
number and the amount in base units must fit YuniKorn's int64. What YuniKorn refuses is refused here,
with the reason, and nothing else is.

Volcano writes Kubernetes quantities (`4`, `500m`, `8Gi`, `1e3`), read as the API server reads them.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from yuniplace.gang.taskgroups import QUANTITY
from yuniplace.kube import parse_quantity

INT64_MAX = 2**63 - 1
VCORE = "vcore"  # YuniKorn's name for CPU
_YUNIKORN = re.compile(r"^([0-9]+)[ \t\n\f\r]*((?:[mkKMGTPE]i?)?)$")
_FRACTION = re.compile(r"^[+]?([0-9]*\.[0-9]+|[0-9]+\.?[0-9]*[eE][+-]?[0-9]+)")
_MULTIPLIERS = {
    "": 1,
    "m": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


class BadQuantity(ValueError):
    """The text is not a quantity; the message is what the administrator should write instead."""


def yunikorn_milli(resource: str, text: str) -> int:
    """The amount YuniKorn reads from `text` for `resource`, in milli-units of the Kubernetes resource
    (millicores for vcore, thousandths of a byte for memory)."""
    vcore = resource == VCORE
    stripped = text.strip()
    match = _YUNIKORN.match(stripped)
    if match is None:
        if stripped.startswith("-"):
            raise BadQuantity("must not be negative")
        if _FRACTION.match(stripped):
            example = '"1500m"' if vcore else '"1536Mi"'
            raise BadQuantity(f"is not a whole number: YuniKorn takes no fractions or exponents (write {example})")
        raise BadQuantity(
            'is not a quantity (examples: "2", "500m", "4k")'
            if vcore
            else 'is not a quantity (examples: "4", "4G", "512Mi")'
        )
    number, suffix = int(match.group(1)), match.group(2)
    if suffix not in _MULTIPLIERS:
        raise BadQuantity(f'has an unknown suffix "{suffix}" (k M G T P E, Ki Mi Gi Ti Pi Ei{", m" if vcore else ""})')
    if suffix == "m" and not vcore:
        raise BadQuantity('has the suffix "m", which only vcore takes (millicores)')
    if number > INT64_MAX:
        raise BadQuantity("is too large (YuniKorn's limit is 2^63-1)")
    base = number * _MULTIPLIERS[suffix] * (1000 if vcore and suffix != "m" else 1)
    if base > INT64_MAX:
        raise BadQuantity("is too large (YuniKorn's limit is 2^63-1)")
    return base if vcore else base * 1000


def kubernetes_milli(value: object) -> int:
    """A Kubernetes quantity (a string, or a YAML number) in milli-units, rounded up as the API server
    rounds requests to milli-units."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadQuantity('is not a quantity (examples: "4", "500m", "8Gi")')
    text = value if isinstance(value, str) else str(value)
    if not QUANTITY.match(text):
        raise BadQuantity('is not a quantity (examples: "4", "500m", "8Gi")')
    try:
        amount = Decimal(parse_quantity(text))
    except (ValueError, InvalidOperation, ArithmeticError):
        raise BadQuantity('is not a quantity (examples: "4", "500m", "8Gi")') from None
    if not amount.is_finite() or amount.adjusted() > 18:
        raise BadQuantity("is too large for a Kubernetes quantity")
    if amount < 0:
        raise BadQuantity("must not be negative")
    return math.ceil(amount * 1000)
