"""Kubernetes' grammar of label keys and values, as the API validates them: whatever yuniplace reads as
a label key (a queue's node selector, a topology level) is refused in the same words the API would."""

from __future__ import annotations

import re

_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
LABEL_KEY = re.compile(rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?{_LABEL_NAME}$")
LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
MAX_LABEL_KEY = 317  # a prefix of 253 characters, a slash and a name of 63


def is_label_key(text: str) -> bool:
    return len(text) <= MAX_LABEL_KEY and LABEL_KEY.fullmatch(text) is not None


def is_label_value(text: str) -> bool:
    return LABEL_VALUE.fullmatch(text) is not None
