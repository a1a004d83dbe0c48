"""Every queue setting, in one table: the field of the model it sets, where each source spells it and
what turns the written value into the model's, whether a queue below (configured, or created by a
placement rule) takes it from its parent, which modules decide with it, and its effect in one line.

The readers that share a spelling read through the table: YuniKorn's `properties` and a Volcano
Queue's `yuniplace.io/` annotations are parsed key by key from it (`keys`), and a child queue's settings
come from its parent's by its `inherits` and `join` (queues.inheritance). The docs' table of queue
settings is made from it (queues.settings_docs), and a unit test holds it to the code: every field of
the model has an entry, every reader listed reads the field, every parse function named is called by
its source's reader.

To add a setting: add the field to QueueSpec (or Limit) in queues.model, with its default; add its
entry here, naming its spellings, whether it passes down, its readers and its effect; act on it in
those readers (the rule). A spelling under `properties.` (YuniKorn) or `metadata.annotations.`
(Volcano) is then read, checked and passed down without another edit; one in a source's own
structure is read where that source's reader builds the QueueSpec. Run
`python -m yuniplace.docsgen --write` for the docs' table.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from yuniplace.queues import identity, values
from yuniplace.queues.model import Limit, QueueSpec
from yuniplace.queues.quantity import kubernetes_milli, yunikorn_milli

SNAPSHOT = "yuniplace.admission.snapshot"
DECISION = "yuniplace.admission.decision"
LINE = "yuniplace.admission.line"
QUOTA = "yuniplace.queues.quota"
POOLS = "yuniplace.queues.pools"
PLACEMENT = "yuniplace.queues.placement"
MODEL = "yuniplace.queues.model"
CONFIG = "yuniplace.queues.config"


class Source(enum.Enum):
    """A configuration format, by the module that reads it."""

    YUNIKORN = "yuniplace.queues.yunikorn"
    VOLCANO = "yuniplace.queues.volcano"
    AI_SCHEDULER = "yuniplace.queues.aischeduler"


# The maps of text each source writes settings in, parsed key by key through the table (`keys`).
KEYED = {Source.YUNIKORN: "properties.", Source.VOLCANO: "metadata.annotations."}


@dataclass(frozen=True)
class Spelling:
    """Where one source writes a setting (as its users write it: `properties.application.sort.policy`,
    `spec.capability`), and the function that turns one written value into the model's. A spelling
    under a map of text (`properties.`, `metadata.annotations.`) is parsed through the table, so its
    parse takes the text alone; any other is read by its source's reader, which calls its parse (None:
    taken as written, a name or a flag)."""

    where: str
    parse: Callable[..., Any] | None = None
    note: str = ""  # how it differs from the plain reading (an inverse, another default)


@dataclass(frozen=True)
class Setting:
    """One field of the queue model (QueueSpec, or Limit for one of YuniKorn's user and group limits)."""

    model: type[QueueSpec] | type[Limit]
    name: str
    effect: str
    readers: tuple[str, ...]  # the modules that decide with it, by dotted name
    yunikorn: tuple[Spelling, ...] = ()
    volcano: tuple[Spelling, ...] = ()
    ai_scheduler: tuple[Spelling, ...] = ()
    # A queue below takes its parent's value: a queue a placement rule creates always, a queue of
    # YuniKorn's tree unless it sets its own (Volcano's and ai-scheduler's queues each hold their own).
    # Those that do not are each queue's own (amounts, limits, where it was configured).
    inherits: bool = False
    # How a configured child's own value joins its parent's (None: it replaces it).
    join: Callable[[Any, Any], Any] | None = None

    @property
    def field(self) -> dataclasses.Field[Any]:
        return next(f for f in dataclasses.fields(self.model) if f.name == self.name)

    @property
    def default(self) -> Any:
        """The value of a queue whose sources do not set it."""
        field = self.field
        if field.default_factory is not dataclasses.MISSING:
            return field.default_factory()
        return field.default

    def spellings(self, source: Source) -> tuple[Spelling, ...]:
        return {Source.YUNIKORN: self.yunikorn, Source.VOLCANO: self.volcano, Source.AI_SCHEDULER: self.ai_scheduler}[
            source
        ]


def _inverse(where: str) -> Spelling:
    return Spelling(where, note="`true` turns it off")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        QueueSpec,
        "path",
        "the queue's place in the tree: where placement puts applications and quota counts them",
        (QUOTA, PLACEMENT),
        yunikorn=(Spelling("queues[].name", note="below its parent's path"),),
        volcano=(
            Spelling("metadata.name", note="below `spec.parent`'s path; a dot becomes `_dot_`"),
            Spelling("spec.parent"),
        ),
        ai_scheduler=(Spelling("metadata.name", note="`root.<name>`; a dot becomes `_dot_`"),),
    ),
    Setting(
        QueueSpec,
        "guaranteed",
        "room that is its own: beyond it the queue borrows, while idle it lends it, and it reclaims it",
        (QUOTA,),
        yunikorn=(Spelling("resources.guaranteed", yunikorn_milli),),
        volcano=(
            Spelling("spec.deserved", kubernetes_milli),
            Spelling("spec.guarantee.resource", kubernetes_milli, "where `spec.deserved` does not name the resource"),
        ),
        ai_scheduler=(
            Spelling(
                "spec.nodeSelector", kubernetes_milli, "the allocatable and DRA devices of the nodes it alone selects"
            ),
        ),
    ),
    Setting(
        QueueSpec,
        "max",
        "the most the queue and those below it use at once; a gang that would pass it waits",
        (QUOTA,),
        yunikorn=(Spelling("resources.max", yunikorn_milli),),
        volcano=(Spelling("spec.capability", kubernetes_milli),),
    ),
    Setting(
        QueueSpec,
        "sharing",
        "others may borrow its idle guarantee and its pool's idle nodes (default true)",
        (QUOTA, POOLS),
        yunikorn=(Spelling("properties.yuniplace.io/sharing", values.switch),),
        volcano=(
            Spelling(
                "metadata.annotations.yuniplace.io/sharing",
                values.switch,
                "default false with `spec.guarantee.resource`",
            ),
        ),
        ai_scheduler=(_inverse("spec.disableSharing"),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "borrowing",
        "it may use more than its guarantee (default true)",
        (QUOTA,),
        yunikorn=(Spelling("properties.yuniplace.io/borrowing", values.switch),),
        volcano=(Spelling("metadata.annotations.yuniplace.io/borrowing", values.switch),),
        ai_scheduler=(_inverse("spec.disableBorrowing"),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "node_selector",
        "its pool: its gangs go to these nodes only, and others' keep off them unless it shares",
        (POOLS, SNAPSHOT),
        yunikorn=(Spelling("properties.yuniplace.io/node-selector", values.node_selector),),
        volcano=(
            Spelling("metadata.annotations.yuniplace.io/node-selector", values.node_selector),
            Spelling("spec.affinity.nodeGroupAffinity", note="one required node group"),
        ),
        ai_scheduler=(Spelling("spec.nodeSelector", note="`matchLabels`, or `In` with one value"),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "preemption",
        "it reclaims its guarantee from the queues that borrowed it (default true)",
        (QUOTA,),
        yunikorn=(
            Spelling("properties.preemption.policy", values.reclaims, "`fence`: off, for the queues below too"),
            Spelling("preemption.enabled", note="the partition's: `false` turns it off for every queue"),
        ),
        ai_scheduler=(_inverse("spec.disablePreemption"),),
        inherits=True,
        join=operator.and_,
    ),
    Setting(
        QueueSpec,
        "native_gangs",
        "yuniplace holds Kubernetes' own gangs (the Workload API) placed in it until it admits them (default "
        "true); `false` leaves them to kube-scheduler's gang plugin alone",
        (SNAPSHOT,),
        yunikorn=(Spelling("properties.yuniplace.io/native-gangs", values.switch),),
        volcano=(Spelling("metadata.annotations.yuniplace.io/native-gangs", values.switch),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "ordering",
        "the order of its line after priority: `fifo` by arrival, `fair` the application using least first",
        (LINE,),
        yunikorn=(Spelling("properties.application.sort.policy", values.ordering, "`stateaware` is `fifo`"),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "by_priority",
        "its line is ordered by the pods' priority first (default true)",
        (LINE,),
        yunikorn=(Spelling("properties.application.sort.priority", values.enabled),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "submitters",
        "who may place applications in it: those its ACLs or any parent's let in (default anyone)",
        (PLACEMENT,),
        yunikorn=(
            Spelling("submitacl", identity.submitters_of_acl),
            Spelling("adminacl", identity.submitters_of_acl),
        ),
        inherits=True,
        join=identity.either,
    ),
    Setting(QueueSpec, "source", "where the queue was configured, named in messages", (CONFIG,)),
    Setting(
        QueueSpec,
        "parent_queue",
        "a parent even without children: applications go only to queues placement rules create below it",
        (MODEL,),
        yunikorn=(Spelling("parent"),),
    ),
    Setting(
        QueueSpec,
        "reclaimable",
        "what it uses beyond its guarantee may be taken back by a queue reclaiming its own (default true)",
        (QUOTA,),
        yunikorn=(Spelling("properties.preemption.policy", values.victim, "`disabled`: false"),),
        volcano=(Spelling("spec.reclaimable"),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "open",
        "it takes new applications (default true)",
        (PLACEMENT,),
        volcano=(Spelling("status.state", note="`Closed` or `Closing`: false; `spec.state` without one"),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "max_applications",
        "applications running at once in the queue and those below it; a gang past it waits (0: no limit)",
        (QUOTA,),
        yunikorn=(Spelling("maxapplications"),),
    ),
    Setting(
        QueueSpec,
        "limits",
        "each user's and group's applications and room in the queue and those below it",
        (QUOTA,),
        yunikorn=(Spelling("limits"), Spelling("partitions[].limits", note="held at root")),
    ),
    Setting(
        QueueSpec,
        "preempts_within",
        "a gang that does not fit may evict lower-priority gangs of its own queue, once nothing lent is left",
        (DECISION,),
        ai_scheduler=(_inverse("spec.disablePreemption"),),
        inherits=True,
    ),
    Setting(
        QueueSpec,
        "lenders",
        "the queues whose pools' idle nodes its gangs may borrow when they do not fit on its own (default: every "
        "queue whose pool is shared)",
        (DECISION,),
        ai_scheduler=(Spelling("spec.borrowingPools", note="Pool names"),),
    ),
    Setting(
        QueueSpec,
        "owns_the_rest",
        "its pool is every node no queue's pool selects, and every node more than one selects",
        (POOLS,),
        ai_scheduler=(Spelling("(the default pool)", note="ai-scheduler's default pool, `root.default`"),),
    ),
    Setting(
        QueueSpec,
        "home_nodes",
        "the nodes it owns by name: those more than one queue's pool selects",
        (POOLS,),
        ai_scheduler=(Spelling("(the default pool)", note="the nodes more than one Pool selects"),),
    ),
    Setting(
        Limit,
        "users",
        "the users a limit holds for; `*` each user without a limit of their own",
        (QUOTA,),
        yunikorn=(Spelling("limits[].users"),),
    ),
    Setting(
        Limit,
        "groups",
        "the groups a limit holds for; `*` each group without a limit of its own",
        (QUOTA,),
        yunikorn=(Spelling("limits[].groups"),),
    ),
    Setting(
        Limit,
        "max_applications",
        "each one's running applications (0: not limited)",
        (QUOTA,),
        yunikorn=(Spelling("limits[].maxapplications"),),
    ),
    Setting(
        Limit,
        "max_resources",
        "each one's room; a resource left out is not limited",
        (QUOTA,),
        yunikorn=(Spelling("limits[].maxresources", yunikorn_milli),),
    ),
    Setting(
        Limit, "name", "the limit's description, named in messages", (QUOTA,), yunikorn=(Spelling("limits[].limit"),)
    ),
)

QUEUE_SETTINGS = tuple(setting for setting in SETTINGS if setting.model is QueueSpec)


@dataclass(frozen=True)
class Keys:
    """The settings one source writes as text under the keys of one map (YuniKorn's `properties`, a
    Volcano Queue's annotations): for each key, the fields it sets and the parse of each."""

    by_key: Mapping[str, tuple[tuple[str, Callable[[str], Any]], ...]]

    def read(self, key: str, text: str) -> dict[str, Any]:
        """The fields `text` written under `key` sets; BadValue when it cannot be read."""
        return {name: parse(text) for name, parse in self.by_key[key]}


def keys(source: Source) -> Keys:
    """The keys `source` writes settings under in its map of text (KEYED), without the map's prefix."""
    prefix = KEYED[source]
    by_key: dict[str, tuple[tuple[str, Callable[[str], Any]], ...]] = {}
    for setting in QUEUE_SETTINGS:
        for spelling in setting.spellings(source):
            if spelling.where.startswith(prefix) and spelling.parse is not None:
                key = spelling.where.removeprefix(prefix)
                by_key[key] = (*by_key.get(key, ()), (setting.name, spelling.parse))
    return Keys(by_key)
