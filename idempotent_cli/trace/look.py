"""What a trace looks at: the key's record in the table, the dead letters of the key in both DLQs, and the
source queue.

Everything is read with the DLQ tool's own parts: the consumer's configuration and the runtime's
``records`` (through :class:`~idempotent_cli.dlq.keystate.KeyTable`), the dead-letter walk that receives
with a short visibility timeout and makes every message visible again when it ends, and the DLQ tool's
model of a dead letter (whose key is in ``idempotency.details``, or, for a message SQS or SNS moved, what
the consumer's code makes of its body and ids).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from typing import Any

from idempotent_runtime import contract
from idempotent_runtime.modes.base import number_of, text_of
from idempotent_runtime.modes.guarded import LEGACY_ATTRIBUTES

from idempotent_cli.dlq.commands import Context
from idempotent_cli.dlq.keystate import KeyTable, State
from idempotent_cli.dlq.letters import DeadLetter, Outgoing, Which, by_identity, outgoing, utc_text
from idempotent_cli.dlq.queue import Counts, Decision, Queue, Walk
from idempotent_cli.dlq.target import subscription_dlq
from idempotent_cli.errors import DlqError
from idempotent_cli.trace.wanted import Wanted

# A peek receives at most this many times (10 messages each, at visibility 0).
PEEK_RECEIVES = 10
# Keying a dead letter never sends it: no size limit applies.
NO_LIMIT = 2**62
NONE = Counts(0, 0, 0)  # a queue the trace does not know


def when(seconds: float | None) -> str | None:
    """Epoch seconds as every command shows a time; None stays None."""
    return utc_text(seconds) if seconds is not None else None


# -- the table ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    """Versioned mode: the stored state's version and the traced body's, as the consumer reads them (the
    runtime's ``Version``: its kind, number or timestamp, and its text, a timestamp in UTC)."""

    stored: Any | None  # None: no item, or one no versioned write made
    message: Any | None  # None: no body given, or one whose version the consumer refuses (see the reason)
    deleted: bool  # the stored state is a tombstone: the entity is deleted


@dataclass(frozen=True)
class Record:
    """The key's idempotency record as the consumer sees it."""

    key: Any  # the runtime's Key
    # absent, expired, stored, completed, in_progress, lease_expired, conflict, invalid; versioned: stale
    # (it holds a newer version than the body's), older (an older one: a delivery of the body writes it)
    state: str
    record_state: str  # the runtime's: new, done, conflict, in_progress, invalid
    location: dict[str, str]  # the item's key attributes (transaction mode: the marker's)
    item: dict[str, Any]  # as read (DynamoDB JSON); {} when there is none
    fingerprint: str | None  # stored
    message_fingerprint: str | None  # of --body, when given
    expires_at: float | None  # the TTL attribute (epoch seconds)
    status: str | None  # guarded: IN_PROGRESS or COMPLETED
    owner: str | None  # guarded: the claim's owner token
    lease_expires_at: float | None  # guarded: epoch seconds
    message_id: str | None  # the message that wrote it, where the mode records it
    dedup_id: str | None  # the deduplication id it was written for (0.4: a FIFO message's, or a redrive's)
    reason: str | None = None
    versions: Versions | None = None  # versioned mode only


def table(keys: KeyTable, wanted: Wanted, *, now: float | None = None) -> Record:
    """Read the key's record (a consistent GetItem) and say what it means, through ``records.inspect``."""
    inspection = keys.inspect(wanted.message, message_id=wanted.message_id, compare_payload=wanted.with_body)
    if inspection.key is None:
        raise DlqError(f"the consumer cannot key {wanted.given}: {inspection.reason}")
    item: dict[str, Any] = dict(inspection.item or {})
    location = {name: value.get("S", "") for name, value in (inspection.location or {}).items()}
    status = text_of(item, contract.STATUS_ATTRIBUTE, contract.LEGACY_STATUS_ATTRIBUTE)
    expires = number_of(item, keys.config.ttl_attribute)
    lease_ms = number_of(item, contract.LEASE_ATTRIBUTE, contract.LEGACY_LEASE_ATTRIBUTE)
    now = time.time() if now is None else now
    state = _state(inspection.state, item, status, expires, now)
    versions = _versions(keys, wanted, item) if keys.mode == contract.Mode.VERSIONED else None
    if state == "expired" and versions and not (expires is not None and expires < int(now)):
        state = "older"  # no TTL passed: the body's version is newer than the stored one (or it has none)
    return Record(
        key=inspection.key,
        state=state,
        record_state=inspection.state.value,
        location=location,
        item=item,
        fingerprint=text_of(item, contract.FINGERPRINT_ATTRIBUTE),
        message_fingerprint=inspection.fingerprint if wanted.with_body else None,
        expires_at=expires,
        status=status,
        owner=text_of(item, contract.OWNER_ATTRIBUTE, contract.LEGACY_OWNER_ATTRIBUTE),
        lease_expires_at=lease_ms / 1000 if lease_ms is not None else None,
        message_id=text_of(item, contract.MESSAGE_ID_ATTRIBUTE, contract.LEGACY_MESSAGE_ID_ATTRIBUTE),
        dedup_id=text_of(item, contract.DEDUP_ID_ATTRIBUTE),
        reason=inspection.reason,
        versions=versions,
    )


def _versions(keys: KeyTable, wanted: Wanted, item: dict[str, Any]) -> Versions:
    """The stored version and the body's, read by the runtime's versioned mode (the consumer's own reading:
    a timestamp's offset, a number's exact value)."""
    from idempotent_runtime.errors import InvalidMessage
    from idempotent_runtime.message import Message
    from idempotent_runtime.modes import make_mode
    from idempotent_runtime.modes.versioned import stored_version

    try:
        stored = stored_version(item)
    except InvalidMessage:  # of no version kind: the inspection says why
        stored = None
    message = None
    if wanted.with_body:
        mode: Any = make_mode(keys.config, lambda: None, None)
        # A version a delivery would be quarantined for is no version: the inspection's reason says why.
        with contextlib.suppress(InvalidMessage):
            message = mode.version(Message(keys.record(wanted.message, message_id=wanted.message_id)))
    return Versions(stored, message, item.get(contract.DELETED_ATTRIBUTE) == {"BOOL": True})


def _state(state: State, item: dict[str, Any], status: str | None, expires: float | None, now: float) -> str:
    """The runtime's state, told apart where it covers several cases an operator acts on differently."""
    if state is State.NEW:
        if not item:
            return "absent"
        if status == contract.GuardedStatus.IN_PROGRESS and not (expires is not None and expires < int(now)):
            return "lease_expired"  # a delivery of the same payload takes the claim over
        return "expired"  # past its TTL: counts as absent (DynamoDB deletes it within about 48 hours)
    if state is State.DONE:
        return "completed" if status == contract.GuardedStatus.COMPLETED else "stored"
    return state.value


def stored_attributes(item: dict[str, Any], key_names: list[str], ttl: str) -> list[str]:
    """The item's attributes that are not the runtime's: a document's fields."""
    runtime = {*key_names, ttl, *LEGACY_ATTRIBUTES}  # the key, the TTL, what 0.1 wrote on a guarded record
    return sorted(
        name for name in item if name not in runtime and not name.startswith(contract.ATTRIBUTE_PREFIX)
    )


def has_result(item: dict[str, Any]) -> bool:
    return contract.RESULT_ATTRIBUTE in item or contract.LEGACY_RESULT_ATTRIBUTE in item


# -- the dead-letter queues -----------------------------------------------------------------------------


@dataclass
class Letters:
    """One DLQ as the trace read it."""

    which: Which
    url: str | None  # None: the pipeline has no such DLQ
    walked: Walk = field(default_factory=lambda: Walk(fifo=False, hold_seconds=0))  # what it read, what not
    key_unknown: int = 0  # dead letters whose key the consumer's configuration cannot tell
    found: list[list[DeadLetter]] = field(default_factory=list)  # the key's, each with its copies
    max_receive_count: int | None = None


def dead_letters(context: Context, keys: KeyTable, key: Any) -> list[Letters]:
    """The key's dead letters in the queue's DLQ and in the SNS subscription's DLQ (if it has one)."""
    target = context.target
    subscription = subscription_dlq(context.clients, target.pipeline)
    source = context.source() if target.source_url else None
    found = [_read(context, keys, key, source)]
    if subscription:
        sub = replace(context, target=replace(target, which=Which.SUBSCRIPTION, dlq_url=subscription))
        found.append(_read(sub, keys, key, source))
    else:
        found.append(Letters(Which.SUBSCRIPTION, None))
    return found


def _read(context: Context, keys: KeyTable, key: Any, source: Queue | None) -> Letters:
    target = context.target
    letters = Letters(target.which, target.dlq_url, max_receive_count=target.max_receive_count)
    wanted = (key.partition, key.sort)
    matching: list[DeadLetter] = []

    def visit(letter: DeadLetter) -> Decision:
        letter_key, unknown = letter_key_of(letter, keys, source_fifo=bool(source and source.fifo))
        letters.key_unknown += unknown
        if letter_key == wanted:
            matching.append(letter)
        return Decision.LEAVE

    letters.walked = context.walk(context.dlq(), visit)
    letters.found = list(by_identity(matching).values())
    return letters


def letter_key_of(
    letter: DeadLetter, keys: KeyTable, *, source_fifo: bool
) -> tuple[tuple[str, str] | None, bool]:
    """The key the consumer gave (or would give) a dead letter, and whether it cannot be known.

    The runtime names it in ``idempotency.details``; otherwise (SQS or SNS moved the message, or the details
    were shortened to fit) the consumer's code keys the message a redrive would send. With
    ``KEY_SOURCE=dedup_id`` the original deduplication id of a message SQS moved is lost: its key is unknown.
    """
    named = (letter.details or {}).get("key")
    if (
        isinstance(named, dict)
        and isinstance(named.get("partition"), str)
        and isinstance(named.get("sort"), str)
    ):
        return (named["partition"], named["sort"]), False
    plan = outgoing(letter, source_fifo=source_fifo, key_source=keys.config.key_source, max_bytes=NO_LIMIT)
    if plan.problem:
        return None, True
    computed, _ = keys.key_of(plan, message_id=letter.message_id)
    return ((computed.partition, computed.sort) if computed is not None else None), False


# -- the source queue -----------------------------------------------------------------------------------


@dataclass
class InFlight:
    """The source queue: its counts, and what a peek saw."""

    url: str | None
    fifo: bool = False
    counts: Counts = NONE  # in flight: received, not yet deleted or returned
    peeked: bool = False
    read: int = 0
    found: list[dict[str, Any]] = field(default_factory=list)
    max_receive_count: int | None = None


def in_flight(context: Context, keys: KeyTable, key: Any, *, peek: bool) -> InFlight:
    """The source queue's counts; with ``peek``, its visible messages that carry the key (received at
    visibility 0: they stay visible, and each receive counts toward their receive count)."""
    if not context.target.source_url:
        return InFlight(None)
    queue = context.source()
    counts = queue.counts()
    view = InFlight(queue.url, queue.fifo, counts, peek, max_receive_count=context.target.max_receive_count)
    if peek and counts.visible:
        seen = _peek(queue, counts.visible)
        view.read = len(seen)
        view.found = [_summary(m) for m in seen if _key_of_message(keys, m) == (key.partition, key.sort)]
    return view


def _peek(queue: Queue, visible: int) -> list[DeadLetter]:
    """The visible messages a receive at visibility 0 hands out: they stay visible. At visibility 0 the queue
    hands out the same ones again, so it stops at a receive that brings nothing new (or all it counts)."""
    seen: dict[str, DeadLetter] = {}
    peeking = Queue(queue.sqs, queue.url, visibility_seconds=0, wait_seconds=0)
    for _ in range(PEEK_RECEIVES):
        new = [m for m in peeking.receive() if m["MessageId"] not in seen]
        seen.update((m["MessageId"], DeadLetter.from_message(m, Which.DLQ)) for m in new)
        if not new or len(seen) >= visible:
            break
    return list(seen.values())


def _key_of_message(keys: KeyTable, message: DeadLetter) -> tuple[str, str] | None:
    """The key the consumer will give a message of the source queue (its body, ids and attributes)."""
    plan = Outgoing(message.body, message.attributes, message.group_id, message.dedup_id)
    computed, _ = keys.key_of(plan, message_id=message.message_id)
    return (computed.partition, computed.sort) if computed is not None else None


def _summary(message: DeadLetter) -> dict[str, Any]:
    return {
        "message_id": message.message_id,
        "group": message.group_id,
        "sent": message.sent_at if message.sent_ms else None,
        "receive_count": message.receive_count,
    }
