"""Dead letters as the runtime, SQS and SNS leave them, and the message a redrive sends back.

Three hands put a message into a pipeline's dead-letter queues:

- the runtime (a quarantined record): the original body and attributes plus ``idempotency.reason`` and
  ``idempotency.details`` (docs/runtime-contract.md);
- SQS, after ``maxReceiveCount`` receives: the message as it was, without a reason; in a FIFO DLQ its
  deduplication id is replaced by its message id;
- SNS, into the subscription's DLQ, when it could not deliver the message to the queue at all.

A redrive must give the consumer the message it would have had: the producer's body, attributes, group and
(where known) deduplication id, plus ``idempotency.redrive`` so the runtime keys it as before (a message SNS
never delivered: by its id in the subscription's DLQ, so every copy a redrive sends is keyed the same).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from idempotent_runtime import contract
from idempotent_runtime.quarantine import size as message_size  # what SQS counts against a queue's limit

from idempotent_local.events import lambda_sqs_record

# Set by this tool on a redriven message: {"source_message_id": ..., "dedup_id": ...} (the runtime keys it by
# them), plus the run that sent it.
REDRIVE_ATTRIBUTE = contract.REDRIVE_ATTRIBUTE
RUN_FIELD = "run"  # in idempotency.redrive: which run sent it (a message that bounces back is not resent)
# The runtime's own attributes on a dead letter: never sent back to the consumer.
RUNTIME_ATTRIBUTES = frozenset({contract.DLQ_REASON_ATTRIBUTE, contract.DLQ_DETAILS_ATTRIBUTE})
# What SNS adds to a message it could not deliver (shown, and left on the message: they are not the
# runtime's and a producer may use the same names).
SNS_ERROR_ATTRIBUTES = ("ErrorCode", "ErrorMessage", "RequestID")
# A redrive of a dead letter whose original deduplication id is unknown sends this one instead: the same for
# the same dead letter, so a second run after an interrupted one is deduplicated by SQS.
FRESH_DEDUP_PREFIX = "redrive-"


class Which(StrEnum):
    """The pipeline's two dead-letter queues."""

    DLQ = "dlq"  # the queue's: the runtime's quarantine and SQS's redrive after maxReceiveCount
    SUBSCRIPTION = "subscription"  # the SNS subscription's: messages SNS could not deliver to the queue


class Origin(StrEnum):
    RUNTIME = "runtime"
    SQS = "sqs"
    SNS = "sns"


# Kinds a filter can name: the runtime's DeadLetterKind, plus the two kinds of dead letter without a reason.
MOVED = "moved"  # moved by SQS after maxReceiveCount receives
UNDELIVERABLE = "undeliverable"  # SNS could not deliver it to the queue
UNKNOWN = "unknown"  # the runtime's attributes are there but the details cannot be read
KINDS = (*(kind.value for kind in contract.DeadLetterKind), MOVED, UNDELIVERABLE)
# A --reason naming one of these matches that kind exactly, never a reason text that contains the word.
FILTER_KINDS = frozenset({*KINDS, UNKNOWN})


@dataclass
class DeadLetter:
    """One message received from a dead-letter queue (or, for a trace's peek, from the source queue)."""

    message_id: str
    receipt_handle: str
    body: str
    system: dict[str, str]  # SQS's attributes: MessageGroupId, SequenceNumber, SentTimestamp...
    attributes: dict[str, dict[str, Any]]  # message attributes, SendMessage's shape
    origin: Origin
    reason: str | None = None
    details: dict[str, Any] | None = None
    details_error: str | None = None
    # idempotency.redrive of a redriven message that failed again
    earlier_redrive: dict[str, Any] | None = None

    @classmethod
    def from_message(cls, message: Mapping[str, Any], which: Which) -> DeadLetter:
        """From one entry of ``receive_message(...)["Messages"]`` (all attributes requested)."""
        attributes = {name: dict(value) for name, value in (message.get("MessageAttributes") or {}).items()}
        reason = _string(attributes.get(contract.DLQ_REASON_ATTRIBUTE))
        details_text = _string(attributes.get(contract.DLQ_DETAILS_ATTRIBUTE))
        details, details_error = json_object(contract.DLQ_DETAILS_ATTRIBUTE, details_text)
        earlier_redrive, _ = json_object(REDRIVE_ATTRIBUTE, _string(attributes.get(REDRIVE_ATTRIBUTE)))
        origin = Origin.SNS if which is Which.SUBSCRIPTION else Origin.SQS
        if reason is not None or details_text is not None:
            origin = Origin.RUNTIME
        return cls(
            message_id=message["MessageId"],
            receipt_handle=message["ReceiptHandle"],
            body=message.get("Body", ""),
            system=dict(message.get("Attributes") or {}),
            attributes=attributes,
            origin=origin,
            reason=reason,
            details=details,
            details_error=details_error,
            earlier_redrive=earlier_redrive,
        )

    # -- what SQS says ----------------------------------------------------------------------------------

    @property
    def group_id(self) -> str | None:
        """The MessageGroupId in the DLQ."""
        return self.system.get("MessageGroupId")

    @property
    def dedup_id(self) -> str | None:
        """The MessageDeduplicationId in the DLQ (in a FIFO DLQ, often not the original: see below)."""
        return self.system.get("MessageDeduplicationId")

    @property
    def sent_ms(self) -> int:
        return int(self.system.get("SentTimestamp") or 0)

    @property
    def sent_at(self) -> str:
        return utc_text(self.sent_ms / 1000) if self.sent_ms else "?"

    @property
    def receive_count(self) -> int:
        return int(self.system.get("ApproximateReceiveCount") or 0)

    # -- what the dead letter says about the original message -------------------------------------------

    def _detail(self, name: str) -> Any:
        return (self.details or {}).get(name)

    @property
    def kind(self) -> str:
        moved = {Origin.SQS: MOVED, Origin.SNS: UNDELIVERABLE}.get(self.origin)
        return moved or _text_in(self.details, "kind") or UNKNOWN

    @property
    def original_group_id(self) -> str | None:
        """The producer's MessageGroupId (the runtime's details, else the DLQ's: a move keeps it)."""
        if self.details is not None and "group_id" in self.details:
            return _text_in(self.details, "group_id")
        return self.group_id

    @property
    def source_message_id(self) -> str | None:
        """The message id the consumer saw (and keyed by, with KEY_SOURCE=message_id), if it saw one."""
        value = _text_in(self.earlier_redrive, "source_message_id") or _text_in(
            self.details, "source_message_id"
        )
        # SQS keeps a message's id when it moves it.
        return value or (self.message_id if self.origin is Origin.SQS else None)

    @property
    def identity(self) -> str:
        """The dead letter this message is a copy of. The runtime may send one twice (a SendMessage whose
        answer was lost, retried; a standard DLQ keeps both, a FIFO DLQ after 5 minutes): its copies carry
        the same ``source_message_id`` in their details. A message without details (SQS or SNS moved it)
        is its own."""
        value = _text_in(self.details, "source_message_id") if self.origin is Origin.RUNTIME else None
        return value or self.message_id

    @property
    def message_ids(self) -> tuple[str, ...]:
        """Every id this message has had, oldest first: the original the consumer first saw, the delivery the
        runtime dead-lettered (after a redrive, the redriven copy: the id the runtime logged), and its id in
        the DLQ. SQS may answer a send it drops as a duplicate with any of them."""
        earlier = _text_in(self.earlier_redrive, "source_message_id")
        ids = (earlier, _text_in(self.details, "source_message_id"), self.message_id)
        return tuple(dict.fromkeys(value for value in ids if value))

    @property
    def original_dedup_id(self) -> str | None:
        """The producer's MessageDeduplicationId, where it is known.

        The runtime writes it in its details; a redriven message carries it in ``idempotency.redrive``. A FIFO
        DLQ message moved by SQS has its message id as deduplication id: the original is lost. SNS keeps the
        published one in the subscription's DLQ.
        """
        earlier = _text_in(self.earlier_redrive, "dedup_id")
        if earlier:
            return earlier
        if self.origin is Origin.RUNTIME:
            return _text_in(self.details, "dedup_id")
        if self.dedup_id and self.dedup_id != self.message_id:
            return self.dedup_id
        return None

    @property
    def key_text(self) -> str | None:
        key = self._detail("key")
        if isinstance(key, dict):
            return f"{key.get('partition')}#{key.get('sort')}"
        return None

    @property
    def dropped_attributes(self) -> list[str]:
        dropped = self._detail("dropped_attributes")
        return [str(name) for name in dropped] if isinstance(dropped, list) else []

    @property
    def producer_attributes(self) -> dict[str, dict[str, Any]]:
        """The message attributes without the runtime's (and without an earlier ``idempotency.redrive``)."""
        return {
            name: value
            for name, value in self.attributes.items()
            if name not in RUNTIME_ATTRIBUTES and name != REDRIVE_ATTRIBUTE
        }

    def describe(self, max_receive_count: int | None = None) -> str:
        """Why it is here, in one line."""
        if self.origin is Origin.RUNTIME:
            text = self.reason or "(no reason text)"
            return text if self.details_error is None else f"{text} [{self.details_error}]"
        if self.origin is Origin.SNS:
            error = " ".join(
                f"{name}={_string(self.attributes.get(name))}"
                for name in SNS_ERROR_ATTRIBUTES[:2]
                if _string(self.attributes.get(name))
            )
            return "SNS could not deliver it to the queue" + (f" ({error})" if error else "")
        after = f"after {max_receive_count} receives" if max_receive_count else "after maxReceiveCount"
        return (
            f"moved by SQS {after} without a reason from the runtime (receive count {self.receive_count}, "
            "reads of the DLQ included)"
        )


@dataclass(frozen=True)
class Filters:
    """Which dead letters a command acts on: group ids (shell patterns) and reasons. A reason that names a
    kind (``invalid``, ``exhausted``...) matches that kind only; any other reason, and every ``texts``
    entry, matches the reason text containing it (case-insensitive). A letter must match a group (if any
    are given) and a reason or text (if any are given)."""

    groups: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.groups or self.reasons or self.texts)

    def matches(self, letter: DeadLetter, max_receive_count: int | None = None) -> bool:
        if self.groups:
            group = letter.original_group_id or ""
            if not any(fnmatch.fnmatchcase(group, pattern) for pattern in self.groups):
                return False
        if self.reasons or self.texts:
            text = letter.describe(max_receive_count).casefold()
            kinds = [wanted.casefold() for wanted in self.reasons if wanted.casefold() in FILTER_KINDS]
            contained = [
                wanted.casefold() for wanted in self.reasons if wanted.casefold() not in FILTER_KINDS
            ]
            contained += [wanted.casefold() for wanted in self.texts]
            if letter.kind not in kinds and not any(wanted in text for wanted in contained):
                return False
        return True

    def describe(self) -> str:
        parts = [f"group {' or '.join(self.groups)}"] if self.groups else []
        if self.reasons:
            parts.append(f"reason {' or '.join(repr(r) for r in self.reasons)}")
        if self.texts:
            parts.append(f"reason text {' or '.join(repr(t) for t in self.texts)}")
        return ", ".join(parts) if parts else "all messages"


@dataclass
class Outgoing:
    """What a redrive sends to the source queue for one dead letter."""

    body: str
    attributes: dict[str, dict[str, Any]]
    group_id: str | None = None
    dedup_id: str | None = None
    dedup_restored: bool = False  # the producer's deduplication id (False: a fresh one, or none)
    redrive: dict[str, Any] | None = None  # the idempotency.redrive value, if set
    problem: str | None = None  # why the key cannot be restored: not redriven without --force
    blocked: str | None = None  # why it cannot be sent at all (too big for the source queue)
    notes: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return message_size(self.body, self.attributes)

    def entry(self) -> dict[str, Any]:
        """The message as an entry of SendMessageBatch."""
        request: dict[str, Any] = {"MessageBody": self.body}
        if self.attributes:
            request["MessageAttributes"] = self.attributes
        if self.group_id is not None:
            request["MessageGroupId"] = self.group_id
        if self.dedup_id is not None:
            request["MessageDeduplicationId"] = self.dedup_id
        return request


def utc_text(seconds: float) -> str:
    """Epoch seconds as every command shows a time: ``2026-11-23 10:33:17Z``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def iso_seconds(text: Any) -> float | None:
    """An ISO 8601 time as epoch seconds (UTC if it names no zone); None if ``text`` is not one."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except (AttributeError, TypeError, ValueError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def outgoing(
    letter: DeadLetter,
    *,
    source_fifo: bool,
    key_source: str | None,
    max_bytes: int = contract.SQS_MESSAGE_BYTES,
    run_id: str | None = None,
) -> Outgoing:
    """The message to send back for ``letter``; ``key_source`` is the consumer's KEY_SOURCE (None: unknown),
    ``max_bytes`` the source queue's MaximumMessageSize, ``run_id`` the run that sends it.

    The runtime's attributes are dropped and the producer's kept; ``idempotency.redrive`` carries the id and
    deduplication id the consumer keyed the original by (for a message SNS never delivered: its id in the
    subscription's DLQ and its deduplication id) where it fits; a FIFO queue gets the original group and the
    original deduplication id when the consumer keys by it (``KEY_SOURCE=dedup_id``, or unknown), else
    ``redrive-<DLQ message id>``. ``problem`` is set when the consumer would key the message differently than
    the first time, ``blocked`` when the source queue cannot take it.
    """
    attributes = dict(letter.producer_attributes)
    notes = []
    if letter.dropped_attributes:
        notes.append(
            "attributes dropped when it was dead-lettered (SQS allows 10) cannot be restored: "
            + ", ".join(letter.dropped_attributes)
        )
    problem = None
    original_dedup = letter.original_dedup_id
    group_id = letter.original_group_id
    fresh_dedup = f"{FRESH_DEDUP_PREFIX}{letter.message_id}"[:128]  # the same for every run on this letter
    if source_fifo:
        group_id = group_id or letter.group_id or letter.source_message_id or letter.message_id
    redrive: dict[str, str | None] | None
    if letter.origin is Origin.SNS:
        # SNS never delivered it, so the consumer has not keyed it: it is keyed by its id in the
        # subscription's DLQ (and its deduplication id), the same for every copy a redrive may send of it
        # (a run that sent it and could not delete it, a send retried after a lost answer).
        redrive = {
            "source_message_id": letter.message_id,
            "dedup_id": (original_dedup or fresh_dedup) if source_fifo else None,
        }
    else:
        redrive = {"source_message_id": letter.source_message_id, "dedup_id": original_dedup}
    if run_id is not None:
        redrive[RUN_FIELD] = run_id
    blocked, no_room = _room(letter.body, attributes, redrive, max_bytes)
    if blocked or no_room:
        redrive = None
    else:
        attributes[REDRIVE_ATTRIBUTE] = _redrive_attribute(redrive)
    if no_room and key_source in (None, contract.KeySource.MESSAGE_ID, contract.KeySource.DEDUP_ID):
        unknown = "" if key_source else " (its key source is unknown: name the consumer with --function)"
        problem = (
            f"{no_room}, so there is no room for {REDRIVE_ATTRIBUTE}, which the consumer needs to key it as "
            f"before{unknown}"
        )
    elif no_room:
        notes.append(f"sent without {REDRIVE_ATTRIBUTE}: {no_room} (the consumer keys it by its body)")
    dedup_id = None
    if source_fifo:
        # SQS's own deduplication id. A consumer keyed by the deduplication id (or one whose key source is
        # unknown) gets the original back. Any other keys a redriven message by its body or by
        # idempotency.redrive, so it is sent with an id SQS has not seen for it: the original would be
        # dropped by SQS until 5 minutes after the first send, and the redrive would wait for that.
        restore = key_source in (None, contract.KeySource.DEDUP_ID)
        dedup_id = original_dedup if restore and original_dedup else fresh_dedup
    unknown_dedup = source_fifo and original_dedup is None
    if unknown_dedup and problem is None and key_source in (None, contract.KeySource.DEDUP_ID):
        why = (
            "SQS replaced it with the message id when it moved the message to the DLQ"
            if letter.origin is Origin.SQS
            else "the dead letter does not name it"
        )
        problem = f"its original deduplication id is unknown ({why}), and " + (
            "the consumer keys messages by it (KEY_SOURCE=dedup_id)"
            if key_source
            else "the consumer may key messages by it (its key source is unknown: name the consumer "
            "with --stack or --function)"
        )
    return Outgoing(
        body=letter.body,
        attributes=attributes,
        group_id=group_id,
        dedup_id=dedup_id,
        dedup_restored=source_fifo and dedup_id == original_dedup,
        redrive=redrive,
        problem=problem,
        blocked=blocked,
        notes=notes,
    )


def _redrive_attribute(redrive: Mapping[str, Any]) -> dict[str, str]:
    return {"DataType": "String", "StringValue": json.dumps(redrive, separators=(",", ":"))}


def _room(
    body: str, attributes: Mapping[str, Mapping[str, Any]], redrive: Mapping[str, Any], max_bytes: int
) -> tuple[str | None, str | None]:
    """Whether the message fits the source queue (else why not), and whether idempotency.redrive fits beside
    it (else why not)."""
    size = message_size(body, attributes)
    if size > max_bytes:
        return (
            f"the message is {size:,} bytes, over the source queue's MaximumMessageSize of {max_bytes:,} "
            "bytes: raise the queue's limit to redrive it",
            None,
        )
    if len(attributes) >= contract.MAX_MESSAGE_ATTRIBUTES:
        return None, (
            f"it has {len(attributes)} message attributes of its own: SQS allows "
            f"{contract.MAX_MESSAGE_ATTRIBUTES}"
        )
    bigger = size + message_size("", {REDRIVE_ATTRIBUTE: _redrive_attribute(redrive)})
    if bigger > max_bytes:
        return None, (
            f"the message is {size:,} bytes and {REDRIVE_ATTRIBUTE} would make it {bigger:,}, over the "
            f"source queue's MaximumMessageSize of {max_bytes:,} bytes"
        )
    return None, None


def lambda_record(message: Outgoing, *, message_id: str, queue_arn: str, region: str) -> dict[str, Any]:
    """The record Lambda's SQS event source would hand the consumer for ``message`` (for key inspection)."""
    system = {"ApproximateReceiveCount": "1", "SentTimestamp": "0"}
    if message.group_id is not None:
        system["MessageGroupId"] = message.group_id
    if message.dedup_id is not None:
        system["MessageDeduplicationId"] = message.dedup_id
    received: dict[str, Any] = {
        "MessageId": message_id,
        "ReceiptHandle": "",
        "Body": message.body,
        "MD5OfBody": hashlib.md5(message.body.encode("utf-8")).hexdigest(),
        "Attributes": system,
        "MessageAttributes": message.attributes,
    }
    return lambda_sqs_record(received, queue_arn, region)


def attribute_text(value: Mapping[str, Any]) -> str:
    """A message attribute's value for display."""
    if "StringValue" in value:
        return str(value["StringValue"])
    raw = value.get("BinaryValue")
    if raw is not None:
        return f"<{len(raw)} bytes>"
    return "?"


def by_identity(letters: Iterable[DeadLetter]) -> dict[str, list[DeadLetter]]:
    """The copies of each dead letter, by :attr:`DeadLetter.identity`, in the order given."""
    copies: dict[str, list[DeadLetter]] = {}
    for letter in letters:
        copies.setdefault(letter.identity, []).append(letter)
    return copies


def oldest_first(letters: Iterable[DeadLetter]) -> list[DeadLetter]:
    """By sent time; messages sent in the same millisecond keep the order the queue handed them out."""
    return sorted(letters, key=lambda letter: letter.sent_ms)


def _string(value: Mapping[str, Any] | None) -> str | None:
    text = (value or {}).get("StringValue")
    return text if isinstance(text, str) else None


def json_object(name: str, text: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in ``text`` (None: no text, or JSON null), or None and why there is none (``name``:
    what the text is, for the reason)."""
    try:
        parsed = json.loads(text) if text is not None else None
    except ValueError as exc:
        return None, f"{name} is not JSON ({exc})"
    if parsed is not None and not isinstance(parsed, dict):
        return None, f"{name} is not a JSON object"
    return parsed, None


def _text_in(mapping: Mapping[str, Any] | None, name: str) -> str | None:
    """``mapping[name]`` if it is a string that is not empty."""
    value = mapping.get(name) if mapping else None
    return value if isinstance(value, str) and value else None
