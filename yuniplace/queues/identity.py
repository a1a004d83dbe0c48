"""YuniKorn's users and groups (submit ACLs, placement rule filters), as far as they mean something to
yuniplace. yuniplace knows who an application is by what its pods run as: a namespace and a service
account, which Kubernetes authenticates as the user `system:serviceaccount:<namespace>:<name>` in the
groups `system:serviceaccounts`, `system:serviceaccounts:<namespace>` and `system:authenticated`. Those
names map; a person's user name or a directory group does not (yuniplace never learns who submitted a
workload), so it is dropped with a warning, the way YuniKorn itself drops ACL entries it cannot use.
Dropping never widens access: an ACL or filter without a usable entry lets no one through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from yuniplace.queues.model import RuleFilter, Submitters
from yuniplace.queues.problems import Findings

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
SERVICE_ACCOUNT_USER = re.compile(rf"^system:serviceaccount:({_LABEL}):({_SUBDOMAIN})$")
NAMESPACE_GROUP = re.compile(rf"^system:serviceaccounts:({_LABEL})$")
EVERY_POD_GROUPS = ("system:serviceaccounts", "system:authenticated")  # every pod runs as a service account
# YuniKorn's filter takes a single entry with one of these as a regular expression.
_REGEXP_CHARACTERS = re.compile(r"[\^$*+?()\[{}|]")
WILDCARD = "*"
NOBODY = Submitters(anyone=False)


@dataclass
class _Who:
    anyone: bool = False
    namespaces: set[str] | None = None
    service_accounts: set[str] | None = None

    def add_user(self, user: str) -> bool:
        if SERVICE_ACCOUNT_USER.match(user) is None:
            return False
        self.service_accounts = (self.service_accounts or set()) | {user}
        return True

    def add_group(self, group: str) -> bool:
        if group in EVERY_POD_GROUPS:
            self.anyone = True
            return True
        match = NAMESPACE_GROUP.match(group)
        if match is None:
            return False
        self.namespaces = (self.namespaces or set()) | {match.group(1)}
        return True

    def submitters(self) -> Submitters:
        if self.anyone:
            return Submitters()
        return Submitters(False, frozenset(self.namespaces or ()), frozenset(self.service_accounts or ()))


_UNMAPPED_USER = (
    "is not a service account (system:serviceaccount:<namespace>:<name>): yuniplace knows an application by its "
    "namespace and service account, not by who submitted it; the entry is ignored"
)
_UNMAPPED_GROUP = (
    "is not system:serviceaccounts:<namespace>, system:serviceaccounts or system:authenticated: yuniplace cannot "
    "tell its members; the entry is ignored"
)


def submitters_of_acl(text: str, findings: Findings, queue: str, field: str) -> Submitters:
    """Who a YuniKorn ACL (`"users groups"`, each a comma-separated list; `*` for everyone; empty for
    no one) lets submit. Split on single spaces as YuniKorn splits it, so `" group"` lists groups only
    and three fields are an error."""
    if text.strip() == WILDCARD:
        return Submitters()
    if not text:
        return Submitters(anyone=False)
    fields = text.split(" ")
    if len(fields) > 2:
        findings.error(
            queue,
            field,
            text,
            'has more than one space: an ACL is "user1,user2 group1,group2" (users, a space, groups)',
        )
        return Submitters(anyone=False)
    who = _Who()
    users = fields[0].split(",")
    groups = fields[1].split(",") if len(fields) == 2 else []
    if users == [WILDCARD] or groups == [WILDCARD]:
        return Submitters()
    for user in filter(None, users):
        if not who.add_user(user):
            findings.warn(queue, field, user, _UNMAPPED_USER)
    for group in filter(None, groups):
        if not who.add_group(group):
            findings.warn(queue, field, group, _UNMAPPED_GROUP)
    return who.submitters()


def either(first: Submitters, second: Submitters) -> Submitters:
    """Whoever either lets in: YuniKorn grants submitting to a queue by its submit or its admin ACL, or
    by any of its parents'."""
    if first.anyone or second.anyone:
        return Submitters()
    return Submitters(False, first.namespaces | second.namespaces, first.service_accounts | second.service_accounts)


def rule_filter(kind: str, users: list[str], groups: list[str], findings: Findings, field: str) -> RuleFilter | None:
    """A rule filter of `kind` ("", allow or deny) over these users and groups; None when it cannot be
    used (reported). A single entry with regular-expression characters is YuniKorn's regular expression,
    which yuniplace does not run: Python's engine, unlike Go's, can take exponential time on some
    patterns. Without users and groups the filter lets everyone through, or, as `deny`, no one."""
    deny = kind.lower() == "deny"
    who = _Who()
    usable = True
    for entries, name, add, unmapped in (
        (users, "users", who.add_user, _UNMAPPED_USER),
        (groups, "groups", who.add_group, _UNMAPPED_GROUP),
    ):
        if len(entries) == 1 and _REGEXP_CHARACTERS.search(entries[0]):
            findings.error(
                "",
                f"{field}.{name}",
                entries[0],
                "is a regular expression, which yuniplace does not take in a filter: list the service accounts "
                "(system:serviceaccount:<namespace>:<name>) or namespaces (system:serviceaccounts:<namespace>)",
            )
            usable = False
            continue
        for entry in entries:
            if not add(entry):
                findings.warn("", f"{field}.{name}", entry, unmapped)
    if not usable:
        return None
    if not users and not groups:
        return RuleFilter(deny=deny)
    return RuleFilter(deny=deny, who=who.submitters())
