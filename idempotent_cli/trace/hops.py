"""``trace`` across hops: what a key emitted, and what the next consumer did with each emitted message.

A key that emitted (``message.emit``) records where its outbox items are (``idempotency:outbox`` on its
marker or guarded completion: :func:`idempotent_runtime.outbox.outbox_keys`). For each item: the target, the
downstream group, each message's deduplication id, and whether the item is still in the outbox (until its
TTL) or gone. The next consumer is the one whose queue the target is, or is subscribed to the target (a
topic), among the consumers of the emitter's stack and of the stacks given with ``--next-stack``. Each
emitted message is keyed as that consumer keys it (its body, its deduplication id) and looked up there:

  stored           its record holds this message's payload, written for this message (its deduplication id)
  duplicate        its record holds this message's payload, written for another message (the record names
                   that one's deduplication id): this message was taken for a duplicate and changed nothing
  conflict         another payload is stored for its key (a delivery of this one is a conflict)
  stale            versioned consumer: a newer version is stored (this message was replaced, or arrived after
                   it and changed nothing); a record of an older version means this one is not applied (below)
  dead-lettered    not in the table; in the consumer's dead-letter queue (its reason shown)
  not yet arrived  neither: still in flight (queue, relay, stream), or never published (see the relay's DLQ)

and when it was stored and emitted in turn, the same again, to the last hop (a cycle, a target no known
consumer reads, or :data:`MAX_HOPS` ends the walk with a line saying so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from idempotent_runtime import contract
from idempotent_runtime import outbox as layout

from idempotent_cli.dlq.commands import Context
from idempotent_cli.dlq.keystate import KeyTable
from idempotent_cli.errors import DlqError
from idempotent_cli.stack import Pipeline, deployed
from idempotent_cli.trace import look
from idempotent_cli.trace.wanted import TRACE_MESSAGE_ID, Wanted, as_received

MAX_HOPS = 10
STORED, DUPLICATE, CONFLICT, STALE = "stored", "duplicate", "conflict", "stale"
DEAD_LETTERED, NOT_ARRIVED = "dead-lettered", "not yet arrived"


@dataclass
class Emitted:
    """One message of an outbox item, and what the next consumer did with it."""

    dedup_id: str
    group_id: str | None
    body: str
    state: str | None = None  # None: not followed (no consumer found)
    consumer: str | None = None
    reason: str | None = None  # the dead letter's reason, or why it was not followed
    then: list[Item] = field(default_factory=list)


@dataclass
class Item:
    """One outbox item of a key."""

    key: dict[str, str]
    target: str | None
    state: str  # "in the outbox" or "gone"
    expires_at: float | None = None
    messages: list[Emitted] = field(default_factory=list)
    note: str | None = None  # why the walk stopped here


class Follower:
    """Walks the hops from one consumer's key (see the module)."""

    def __init__(self, context: Context, next_stacks: list[str]) -> None:
        self.base = context
        self.clients = context.clients
        stacks = [context.target.pipeline.stack, *next_stacks]
        self.pipelines = [
            p
            for name in dict.fromkeys(filter(None, stacks))
            for d in deployed(self.clients, name)
            for p in d.pipelines
        ]
        self.tables: dict[str, tuple[Context, KeyTable]] = {}
        self.subscribed: dict[str, set[str]] = {}

    def follow(self, keys: KeyTable, item: dict[str, Any], seen: tuple[str, ...] = ()) -> list[Item]:
        """The outbox items ``item`` (a key's record in ``keys``' table) names, each message followed."""
        config = keys.config
        found = []
        target = config.emit_target_arn
        for partition, sort in layout.outbox_keys(config.key_prefix, item):
            names = {config.partition_key: partition, config.sort_key: sort}
            key = {name: {"S": value} for name, value in names.items()}
            read = self.clients("dynamodb").get_item(TableName=keys.table_name, Key=key, ConsistentRead=True)
            stored = read.get("Item")
            if stored is None:
                found.append(Item(names, target, "gone", note="expired (TTL) or not readable"))
                continue
            expires = stored.get(config.ttl_attribute, {}).get("N")
            entry = Item(names, target, "in the outbox", float(expires) if expires else None)
            for message in layout.read_messages(stored):
                entry.messages.append(Emitted(message.dedup_id, message.group_id, message.body))
            self._next(entry, seen)
            found.append(entry)
        return found

    def _next(self, entry: Item, seen: tuple[str, ...]) -> None:
        consumer = self._consumer_of(entry.target)
        if consumer is None:
            entry.note = (
                f"no consumer of {entry.target} among the stacks looked at (--next-stack NAME adds one)"
            )
            return
        if consumer.label in seen or len(seen) >= MAX_HOPS:
            entry.note = f"{consumer.label} was traced already on this path: the walk ends here"
            return
        context, keys = self._table(consumer)
        for emitted in entry.messages:
            emitted.consumer = consumer.label
            self._look(context, keys, emitted, (*seen, consumer.label))

    def _look(self, context: Context, keys: KeyTable, emitted: Emitted, seen: tuple[str, ...]) -> None:
        if keys.config.key_source == contract.KeySource.MESSAGE_ID:
            emitted.reason = (
                "the consumer keys messages by their SQS message id, which the outbox does not know"
            )
            return
        wanted = Wanted(
            as_received(emitted.body, dedup_id=emitted.dedup_id), TRACE_MESSAGE_ID, emitted.dedup_id, True
        )
        try:
            record = look.table(keys, wanted)
        except DlqError as exc:
            emitted.state, emitted.reason = "invalid", str(exc)
            return
        if record.state == "stale":
            stored = record.versions.stored if record.versions else None
            emitted.state, emitted.reason = STALE, f"a newer version is stored: {stored}"
            return
        if record.state in ("stored", "completed"):
            if record.dedup_id not in (None, emitted.dedup_id):
                emitted.state = DUPLICATE
                emitted.reason = f"the same payload was stored for {record.dedup_id}"
                return
            emitted.state = STORED
            if keys.config.emit_target_arn:
                emitted.then = self.follow(keys, record.item, seen)
            return
        if record.state == "conflict":
            emitted.state = CONFLICT
            return
        letters = [
            copies[0] for found in look.dead_letters(context, keys, record.key) for copies in found.found
        ]
        if letters:
            emitted.state, emitted.reason = DEAD_LETTERED, letters[0].reason
        else:
            emitted.state = NOT_ARRIVED

    def _consumer_of(self, target: str | None) -> Pipeline | None:
        if not target:
            return None
        service, name = target.split(":")[2], target.split(":")[-1]
        queues = {name} if service == "sqs" else self._subscribed(target)
        for pipeline in self.pipelines:
            if pipeline.queue_url and pipeline.queue_url.rstrip("/").split("/")[-1] in queues:
                return pipeline
        return None

    def _subscribed(self, topic: str) -> set[str]:
        """The queues subscribed to ``topic``, read once per walk (every outbox item names its target)."""
        if topic not in self.subscribed:
            names = self.subscribed[topic] = set()
            pages = self.clients("sns").get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic)
            try:
                for page in pages:
                    names |= {
                        s["Endpoint"].split(":")[-1]
                        for s in page.get("Subscriptions", [])
                        if s.get("Protocol") == "sqs"
                    }
            except Exception:  # a topic of another account or region: nothing more known
                pass
        return self.subscribed[topic]

    def _table(self, pipeline: Pipeline) -> tuple[Context, KeyTable]:
        if pipeline.label not in self.tables:
            base = self.base
            options = (base.visibility_seconds, base.wait_seconds)
            self.tables[pipeline.label] = Context.of_consumer(self.clients, pipeline, base.console, *options)
        return self.tables[pipeline.label]


def document(items: list[Item]) -> list[dict[str, Any]]:
    """The ``--json`` form of the walk."""
    return [
        {
            "outbox_item": item.key,
            "target": item.target,
            "state": item.state,
            "expires_at": look.when(item.expires_at),
            "note": item.note,
            "messages": [
                {
                    "dedup_id": m.dedup_id,
                    "group_id": m.group_id,
                    "body": m.body,
                    "consumer": m.consumer,
                    "state": m.state,
                    "reason": m.reason,
                    "emitted": document(m.then),
                }
                for m in item.messages
            ],
        }
        for item in items
    ]


def lines(items: list[Item], depth: int = 0) -> list[str]:
    """The walk as indented lines, one block per hop."""
    pad = "  " * depth
    out = []
    for item in items:
        where = " / ".join(item.key.values())
        until = f" until {look.when(item.expires_at)}" if item.expires_at else ""
        out.append(f"{pad}emitted to {item.target}: outbox item {where}, {item.state}{until}")
        for m in item.messages:
            group = f" group {m.group_id}" if m.group_id else ""
            state = m.state or "not followed"
            reason = f" ({m.reason})" if m.reason else ""
            out.append(f"{pad}  {m.dedup_id}{group} -> {m.consumer or '?'}: {state}{reason}")
            out += lines(m.then, depth + 2)
        if item.note:
            out.append(f"{pad}  {item.note}")
    return out
