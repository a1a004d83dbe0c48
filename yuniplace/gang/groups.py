"""Gang groups across namespaces: which applications may be reserved together with which.

Joining a gang group binds an application's fate to the others (it waits for them, and follows them
when they give up), so no application may be bound by another namespace's word alone. Within a
namespace one tenant writes both sides; across namespaces each application must name the other, or
the cluster's operator must have allowed the namespaces to group together.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from yuniplace.gang.pods import AppKey


@dataclass(frozen=True)
class GroupConsent:
    # Sets of namespaces whose applications may group with each other without naming each other.
    trusted: tuple[frozenset[str], ...] = ()

    @classmethod
    def of(cls, namespace_sets: Iterable[Iterable[str]]) -> GroupConsent:
        return cls(tuple(frozenset(s) for s in namespace_sets))

    def trusts(self, namespace: str, other: str) -> bool:
        return namespace == other or any(namespace in group and other in group for group in self.trusted)

    def joins(self, key: AppKey, peer: AppKey, peer_group: Iterable[str] | None) -> bool:
        """Whether `peer` (whose own gang group is `peer_group`, None when it is not known) agrees to
        be reserved together with `key`, which names it."""
        return self.trusts(key.namespace, peer.namespace) or (peer_group is not None and str(key) in peer_group)
