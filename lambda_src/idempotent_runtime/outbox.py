"""Emitted messages (``message.emit()``): checked when emitted, written as outbox items in the transaction
that commits the effect, published by :mod:`idempotent_runtime.relay`. The deduplication id of the emit at
``position`` is :func:`~idempotent_runtime.message.join_key` of (partition, sort, position): the same for
every delivery of the emitting message."""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from idempotent_runtime import numeric
from idempotent_runtime.attributes import item_size
from idempotent_runtime.contract import (
    ATTRIBUTE_PREFIX,
    FIFO_QUEUE_SUFFIX,
    MAX_ITEM_BYTES,
    MAX_MESSAGE_ATTRIBUTES,
    MAX_TRANSACTION_ITEMS,
    MESSAGE_ID_ATTRIBUTE,
    RESERVED_KEY_PREFIX,
)
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.message import Key, Message, join_key
from idempotent_runtime.payload import encode_result

# Outbox item: (KEY_PREFIX + OUTBOX_PARTITION_PREFIX + lane, OUTBOX_SORT). A FIFO target's lane is the
# downstream group: its one item is replaced by every write, and the stream keeps an item's records in
# write order. A standard target's lane is the emitting key (no order, nothing shared).
OUTBOX_PARTITION_PREFIX = RESERVED_KEY_PREFIX + "outbox#"
OUTBOX_SORT = RESERVED_KEY_PREFIX + "outbox"
# L of M, in emit order: BODY (S), DEDUP_ID (S), ATTRIBUTES (M of PublishBatch's shape).
OUTBOX_MESSAGES_ATTRIBUTE = ATTRIBUTE_PREFIX + "messages"
OUTBOX_GROUP_ATTRIBUTE = ATTRIBUTE_PREFIX + "group"  # S: the MessageGroupId (FIFO targets)
OUTBOX_BODY, OUTBOX_DEDUP_ID, OUTBOX_ATTRIBUTES = "body", "dedup_id", "attributes"
# An outbox item outlives the stream's 24 hours (and the dedup TTL): it expires by itself once relayed.
STREAM_RETENTION_SECONDS = 24 * 3600
OUTBOX_TTL_SECONDS = 2 * STREAM_RETENTION_SECONDS
MAX_EMITS = 100  # per message
EMIT_POSITION_DIGITS = 3
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024  # TransactWriteItems
MAX_EMITTED_BYTES = 262_144  # SNS and SQS: the body and every attribute's name, type and value
# SNS and SQS message attribute names.
ATTRIBUTE_NAME_PATTERN = re.compile(r"(?!(?:AWS|Amazon)\.)(?!\.)(?!.*\.\.)(?!.*\.$)[\w.-]{1,256}", re.ASCII)


def outbox_partition(key_prefix: str, lane: str) -> str:
    return key_prefix + OUTBOX_PARTITION_PREFIX + lane


# The outbox items of one message leave room for one more item (the marker or the guarded completion).
MAX_OUTBOX_BYTES = MAX_TRANSACTION_BYTES - MAX_ITEM_BYTES


class TransactionTooLarge(InvalidMessage):
    """More than one TransactWriteItems takes (MAX_TRANSACTION_ITEMS items, MAX_TRANSACTION_BYTES)."""


class Outbox:
    """The messages one message emits, by lane (the downstream group on a FIFO target, else the emitting
    key), in emit order."""

    def __init__(self, target_arn: str, key_prefix: str, message: Message) -> None:
        assert message.key is not None
        self.fifo = target_arn.endswith(FIFO_QUEUE_SUFFIX)
        self.key: Key = message.key
        self.prefix = key_prefix
        self.message = message
        self.count = 0
        self.lanes: dict[str, tuple[str | None, list[dict[str, Any]]]] = {}  # lane -> (group, messages)

    def add(self, body: Any, group_id: str | None, attributes: Any) -> str:
        position = self.count
        what = f"emitted message {position}"
        if position >= MAX_EMITS:
            raise InvalidMessage(f"a message may emit at most {MAX_EMITS} messages; {what} is one more")
        text = _text(body, what)
        group = self._group(group_id, what)
        sent = _attributes(attributes, what)
        size = len(text.encode("utf-8", "surrogatepass")) + sum(
            len(name) + _attribute_bytes(value) for name, value in sent.items()
        )
        if size > MAX_EMITTED_BYTES:
            raise InvalidMessage(
                f"{what} is {size} bytes with its attributes, over the {MAX_EMITTED_BYTES} bytes SNS and SQS "
                "take"
            )
        dedup_id = join_key((self.key.partition, self.key.sort, f"{position:0{EMIT_POSITION_DIGITS}d}"))
        entry: dict[str, Any] = {OUTBOX_BODY: {"S": text}, OUTBOX_DEDUP_ID: {"S": dedup_id}}
        if sent:
            entry[OUTBOX_ATTRIBUTES] = {"M": {name: {"M": value} for name, value in sent.items()}}
        lane = group if self.fifo and group is not None else self.key.idempotency_key
        if lane not in self.lanes and len(self.lanes) >= MAX_TRANSACTION_ITEMS - 1:
            raise TransactionTooLarge(
                f"a message may emit to at most {MAX_TRANSACTION_ITEMS - 1} groups (an outbox item each, in "
                f"one TransactWriteItems); {what}'s group {group!r} is one more"
            )
        lanes = {**self.lanes, lane: (group, [*self.lanes.get(lane, (group, []))[1], {"M": entry}])}
        _check_sizes(lanes, lane, what)
        self.lanes = lanes
        self.count += 1
        return dedup_id

    def _group(self, group_id: Any, what: str) -> str | None:
        if group_id is None and self.fifo:
            group_id = self.message.group_id
            if group_id is None:
                raise InvalidMessage(
                    f"{what} needs a group_id: the emit target is FIFO and this message has no "
                    "MessageGroupId to take it from"
                )
        if group_id is not None and (not isinstance(group_id, str) or join_key((group_id,)) != group_id):
            raise InvalidMessage(
                f"{what}: group_id must be 1-128 printable ASCII characters (a MessageGroupId), got "
                f"{group_id!r:.140}"
            )
        return group_id

    def items(self, table: str, names: tuple[str, str, str], ttl_seconds: int, now: float) -> list[dict]:
        """TransactWriteItems ``Put`` entries; ``names``: the partition key, sort key, TTL attribute."""
        pk, sk, ttl = names
        expires = {"N": str(int(now) + max(OUTBOX_TTL_SECONDS, ttl_seconds))}
        puts = []
        for lane, (group, messages) in self.lanes.items():
            item = _attributes_of(group, messages)
            item[pk] = {"S": outbox_partition(self.prefix, lane)}
            item[sk] = {"S": OUTBOX_SORT}
            item[MESSAGE_ID_ATTRIBUTE] = {"S": self.message.message_id}
            item[ttl] = expires
            puts.append({"Put": {"TableName": table, "Item": item}})
        return puts


def _attributes_of(group: str | None, messages: list[dict[str, Any]]) -> dict[str, Any]:
    item: dict[str, Any] = {OUTBOX_MESSAGES_ATTRIBUTE: {"L": messages}}
    if group is not None:
        item[OUTBOX_GROUP_ATTRIBUTE] = {"S": group}
    return item


# An outbox item's key, message id and TTL: at most this many bytes.
ITEM_OVERHEAD = 2 * 1024 + 2 * 128 + 256


def _check_sizes(lanes: dict[str, tuple[str | None, list[dict[str, Any]]]], lane: str, what: str) -> None:
    sizes = {name: item_size(_attributes_of(*value)) + ITEM_OVERHEAD for name, value in lanes.items()}
    if sizes[lane] > MAX_ITEM_BYTES:
        raise InvalidMessage(
            f"{what} makes its outbox item about {sizes[lane]} bytes, over DynamoDB's {MAX_ITEM_BYTES}"
        )
    if sum(sizes.values()) > MAX_OUTBOX_BYTES:
        raise TransactionTooLarge(f"{what} makes the outbox items over {MAX_OUTBOX_BYTES} bytes")


def outbox_for(target_arn: str | None, key_prefix: str, message: Message) -> Outbox | None:
    """The message's outbox, set before the processor runs (None without a target: ``emit`` refuses)."""
    message.outbox = Outbox(target_arn, key_prefix, message) if target_arn else None
    return message.outbox


def _text(body: Any, what: str) -> str:
    if isinstance(body, str):
        if not body:
            raise InvalidMessage(f"{what} is empty: SNS and SQS refuse an empty message")
        return body
    if not isinstance(body, Mapping):
        raise InvalidMessage(f"{what} must be a dict (sent as JSON) or a text, got {type(body).__name__}")
    try:
        return encode_result(dict(body))
    except Exception as exc:  # whatever the body's own values raise while being written
        raise InvalidMessage(f"{what} cannot be written as JSON: {type(exc).__name__}: {exc}") from None


def _attributes(attributes: Any, what: str) -> dict[str, dict[str, Any]]:
    """Message attributes as PublishBatch's, in DynamoDB's shape: name -> {DataType, StringValue or
    BinaryValue}."""
    if not attributes:
        return {}
    if not isinstance(attributes, Mapping) or len(attributes) > MAX_MESSAGE_ATTRIBUTES:
        raise InvalidMessage(
            f"{what}: attributes must be a mapping of at most {MAX_MESSAGE_ATTRIBUTES} names (SNS delivers "
            f"no more to a queue), got {attributes!r:.120}"
        )
    converted = {}
    for name, value in attributes.items():
        if not isinstance(name, str) or not ATTRIBUTE_NAME_PATTERN.fullmatch(name):
            raise InvalidMessage(
                f"{what}: attribute name {name!r:.80} is not one SNS and SQS take (1-256 letters, digits, "
                "'_', '-', '.'; not 'AWS.' or 'Amazon.' first, no '..')"
            )
        if isinstance(value, bytes) and value:
            converted[name] = {"DataType": {"S": "Binary"}, "BinaryValue": {"B": value}}
        elif isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            try:
                text = numeric.dynamodb(value)
            except ValueError as exc:
                raise InvalidMessage(f"{what}: attribute {name} {exc}") from None
            converted[name] = {"DataType": {"S": "Number"}, "StringValue": {"S": text}}
        elif isinstance(value, str) and value:
            converted[name] = {"DataType": {"S": "String"}, "StringValue": {"S": value}}
        else:
            raise InvalidMessage(
                f"{what}: attribute {name} must be a non-empty str, bytes or a number, got {value!r:.80}"
            )
    return converted


def _attribute_bytes(value: dict[str, Any]) -> int:
    """What SNS and SQS count of an attribute besides its name: its type and value."""
    data_type = value["DataType"]["S"]
    data = value.get("StringValue", {}).get("S", "").encode("utf-8", "surrogatepass")
    return len(data_type) + len(data or value.get("BinaryValue", {}).get("B", b""))
