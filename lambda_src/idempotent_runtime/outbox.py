"""Emitted messages (``message.emit()``): checked when emitted, written as outbox items in the transaction
that commits the effect, published by :mod:`idempotent_runtime.relay`. The outbox's layout, which the relay,
its stream filter (the constructs) and operators' tools all read from here:

* **One item per emitting message and lane, never overwritten.** The lane is the downstream MessageGroupId
  on a FIFO target, the emitting key's ``idempotency_key`` on a standard one. Key: (KEY_PREFIX +
  :data:`OUTBOX_PARTITION_PREFIX` + lane, :data:`OUTBOX_SORT_PREFIX` + commit time in epoch milliseconds,
  13 digits, taken at the attempt that commits, + ``#`` + the emitting key's ``idempotency_key``). A lane's
  items share a partition key: one partition, one shard in practice (DynamoDB Streams promises order per
  item only: docs/runtime.md, "Order"), and the table sorts them by commit time. No item is shared by two
  commits: concurrent commits to one lane never conflict.
* **Attributes**: :data:`OUTBOX_MESSAGES_ATTRIBUTE` (L of M in emit order: :data:`OUTBOX_BODY`,
  :data:`OUTBOX_DEDUP_ID`, :data:`OUTBOX_ATTRIBUTES`), :data:`OUTBOX_GROUP_ATTRIBUTE` (FIFO), the emitting
  message's id, the TTL (max(2 days, DEDUP_TTL_SECONDS) after the commit) and :data:`OUTBOX_EMITTER_ATTRIBUTE`
  = :func:`emitter` (KEY_PREFIX + ``idempotency#outbox#``), which only the runtime writes and the relay's
  stream filter matches exactly.
* **From the emitting key**: its marker (transaction mode) or completion (guarded) holds
  ``idempotency:outbox`` = {``sort``: the items' sort key, ``lanes``: [lane, ...]}; :func:`outbox_keys`.
* **Deduplication id** of the emit at ``position``: :func:`dedup_id`, ``join_key((TABLE_NAME, partition,
  sort, position))`` - unique across emitters (a table and a KEY_PREFIX), the same for every delivery.

0.3 wrote one item per lane, (KEY_PREFIX + ``idempotency#outbox#`` + lane, :data:`LEGACY_OUTBOX_SORT`),
replaced by every emit, without the emitter attribute; the relay still publishes such records.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NamedTuple

from idempotent_runtime import numeric
from idempotent_runtime.attributes import item_size
from idempotent_runtime.contract import (
    ATTRIBUTE_PREFIX,
    DLQ_ATTRIBUTE_PREFIX,
    FIFO_ID_PATTERN,
    FIFO_QUEUE_SUFFIX,
    MAX_ITEM_BYTES,
    MAX_KEY_PREFIX_BYTES,
    MAX_MESSAGE_ATTRIBUTES,
    MAX_PARTITION_KEY_BYTES,
    MAX_SORT_KEY_BYTES,
    MAX_TRANSACTION_ITEMS,
    MESSAGE_ID_ATTRIBUTE,
    OUTBOX_ATTRIBUTE,
    RESERVED_ATTRIBUTE_PREFIXES,
    RESERVED_KEY_PREFIX,
    SNS_NUMBER_DECIMALS,
    SNS_NUMBER_MAGNITUDE,
    SQS_NUMBER_DIGITS,
    SQS_NUMBER_MAGNITUDES,
    TOKEN_ATTRIBUTE,
)
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.message import Key, Message, join_key
from idempotent_runtime.payload import encode_result
from idempotent_runtime.quarantine import UNSAFE, size

# --- the layout ----------------------------------------------------------------------------------------
OUTBOX_PARTITION_PREFIX = RESERVED_KEY_PREFIX + "outbox#"  # after KEY_PREFIX, before the lane
OUTBOX_SORT_PREFIX = RESERVED_KEY_PREFIX + "outbox#"  # before the commit time and the emitting key
LEGACY_OUTBOX_SORT = RESERVED_KEY_PREFIX + "outbox"  # 0.3: the one item of a lane
COMMIT_TIME_DIGITS = 13  # epoch milliseconds, zero-padded: sorts as a number until the year 2286
# L of M, in emit order: BODY (S), DEDUP_ID (S), ATTRIBUTES (M of PublishBatch's shape).
OUTBOX_MESSAGES_ATTRIBUTE = ATTRIBUTE_PREFIX + "messages"
OUTBOX_GROUP_ATTRIBUTE = ATTRIBUTE_PREFIX + "group"  # S: the MessageGroupId (FIFO targets)
OUTBOX_EMITTER_ATTRIBUTE = ATTRIBUTE_PREFIX + "emitter"  # S: emitter(KEY_PREFIX), never empty
OUTBOX_BODY, OUTBOX_DEDUP_ID, OUTBOX_ATTRIBUTES = "body", "dedup_id", "attributes"
# OUTBOX_ATTRIBUTE (the marker's, the completion's): M of these two.
OUTBOX_WHERE_SORT, OUTBOX_WHERE_LANES = "sort", "lanes"
# An outbox item outlives the stream's 24 hours (and the dedup TTL): it expires by itself once relayed.
STREAM_RETENTION_SECONDS = 24 * 3600
OUTBOX_TTL_SECONDS = 2 * STREAM_RETENTION_SECONDS
MAX_EMITS = 100  # per message
EMIT_POSITION_DIGITS = 3
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024  # TransactWriteItems
MAX_EMITTED_BYTES = 262_144  # SNS and SQS: the body and every attribute's name, type and value
# SNS and SQS message attribute names (the whole name: re.fullmatch; and RESERVED_ATTRIBUTE_PREFIXES).
ATTRIBUTE_NAME_PATTERN = re.compile(r"(?!\.)(?!.*\.\.)(?!.*\.$)[\w.-]{1,256}", re.ASCII)
ATTRIBUTE_TYPES = ("String", "Number", "Binary")  # each may carry a custom suffix: "String.money"
# A Number attribute's text (then SQS_NUMBER_* and, to a topic, SNS_NUMBER_*).
NUMBER_PATTERN = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def emitter(key_prefix: str) -> str:
    """The emitter attribute's value of ``key_prefix``'s outbox items (what its relay's filter matches)."""
    return key_prefix + OUTBOX_PARTITION_PREFIX


def outbox_partition(key_prefix: str, lane: str) -> str:
    return key_prefix + OUTBOX_PARTITION_PREFIX + lane


def outbox_sort(commit_ms: int, idempotency_key: str) -> str:
    return f"{OUTBOX_SORT_PREFIX}{commit_ms:0{COMMIT_TIME_DIGITS}d}#{idempotency_key}"


def commit_ms(sort: str) -> int | None:
    """The commit time in an outbox item's sort key (:func:`outbox_sort`); None for 0.3's, which has none."""
    digits = sort.removeprefix(OUTBOX_SORT_PREFIX)[:COMMIT_TIME_DIGITS]
    return int(digits) if sort.startswith(OUTBOX_SORT_PREFIX) and digits.isdigit() else None


def dedup_id(table_name: str, key: Key, position: int) -> str:
    """The deduplication id of the emit at ``position`` by ``key`` (its partition begins with KEY_PREFIX)
    in the table ``table_name``: the table and the prefix identify the emitter."""
    return join_key((table_name, key.partition, key.sort, f"{position:0{EMIT_POSITION_DIGITS}d}"))


def outbox_keys(key_prefix: str, recorded: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(partition, sort) of each outbox item a key's marker or guarded completion ``recorded`` (the item,
    in DynamoDB's JSON) names in :data:`~idempotent_runtime.contract.OUTBOX_ATTRIBUTE`; [] when it emitted
    nothing (or was written before 0.4)."""
    where = (recorded.get(OUTBOX_ATTRIBUTE) or {}).get("M") or {}
    sort = (where.get(OUTBOX_WHERE_SORT) or {}).get("S")
    lanes = (where.get(OUTBOX_WHERE_LANES) or {}).get("L") or []
    return [(outbox_partition(key_prefix, lane["S"]), sort) for lane in lanes if sort and "S" in lane]


def stream_filters(partition_key: str, sort_key: str, key_prefix: str) -> list[dict[str, Any]]:
    """The stream records of ``key_prefix``'s outbox, as Lambda event filter patterns (FilterCriteria; a
    record matching one is delivered): writes (not TTL deletions) of items in its partitions and sort keys
    whose emitter attribute is exactly its own - nothing another consumer, a marker or a processor writes
    on a shared table has that. The second pattern is 0.3's items (one per lane, sort key
    :data:`LEGACY_OUTBOX_SORT`, no emitter; a marker, the only other item with that sort key, has a token),
    still in the stream for 24 hours after the upgrade."""
    partition = {"S": [{"prefix": outbox_partition(key_prefix, "")}]}
    return [
        {
            "eventName": ["INSERT", "MODIFY"],
            "dynamodb": {"Keys": {partition_key: partition, sort_key: {"S": [sort]}}, "NewImage": image},
        }
        for sort, image in (
            ({"prefix": OUTBOX_SORT_PREFIX}, {OUTBOX_EMITTER_ATTRIBUTE: {"S": [emitter(key_prefix)]}}),
            (LEGACY_OUTBOX_SORT, {TOKEN_ATTRIBUTE: {"S": [{"exists": False}]}}),
        )
    ]


# --- one emitted message --------------------------------------------------------------------------------


class Emitted(NamedTuple):
    """One emitted message as it is published: ``attributes`` in PublishBatch's shape (name -> DataType and
    StringValue, or BinaryValue as bytes)."""

    body: str
    group_id: str | None
    dedup_id: str
    attributes: dict[str, dict[str, Any]]

    @property
    def size(self) -> int:
        """What SNS and SQS count: the body, every attribute's name, type and value."""
        return size(self.body, self.attributes)


def check(message: Emitted, target: str, what: str) -> None:
    """Raise InvalidMessage, naming ``what``, for anything SNS or SQS would refuse for good in ``message``
    published to ``target`` (an ARN; "": a standard queue): the one check of ``emit()`` and of the relay
    before it publishes."""
    fifo, sns = target.endswith(FIFO_QUEUE_SUFFIX), target.split(":")[2:3] == ["sns"]
    _check_text(message.body, f"{what}'s body")
    if fifo and message.group_id is None:
        raise InvalidMessage(f"{what} needs a group_id: the emit target is FIFO")
    for field, value in (("group_id", message.group_id), ("deduplication id", message.dedup_id)):
        if value is not None and not (isinstance(value, str) and FIFO_ID_PATTERN.fullmatch(value)):
            raise InvalidMessage(
                f"{what}: {field} must be 1-128 letters, digits and punctuation (no space), as SNS and SQS "
                f"take a MessageGroupId or MessageDeduplicationId; got {value!r:.140}"
            )
    if len(message.attributes) > MAX_MESSAGE_ATTRIBUTES:
        raise InvalidMessage(
            f"{what}: at most {MAX_MESSAGE_ATTRIBUTES} attributes (SNS delivers no more to a queue), got "
            f"{len(message.attributes)}"
        )
    for name, attribute in message.attributes.items():
        _check_attribute(name, attribute, what, sns)
    if message.size > MAX_EMITTED_BYTES:
        raise InvalidMessage(
            f"{what} is {message.size} bytes with its attributes, over the {MAX_EMITTED_BYTES} bytes SNS and "
            "SQS take"
        )


def refused_character(text: str) -> tuple[int, str] | None:
    """The first character of ``text`` SQS refuses, with its index; None when it takes them all."""
    found = re.search(UNSAFE, text)
    return (found.start(), found.group()) if found else None


def _check_text(text: Any, what: str) -> None:
    if not isinstance(text, str) or not text:
        raise InvalidMessage(f"{what} is empty: SNS and SQS refuse an empty message")
    found = refused_character(text)
    if found is not None:
        index, character = found
        raise InvalidMessage(
            f"{what} holds U+{ord(character):04X} at character {index}, which SNS and SQS refuse (they take "
            "tab, line feed, carriage return and U+0020 to U+10FFFF but for surrogates, U+FFFE and U+FFFF)"
        )


def _check_attribute(name: Any, value: Any, what: str, sns: bool) -> None:
    if not isinstance(name, str) or not ATTRIBUTE_NAME_PATTERN.fullmatch(name):
        raise InvalidMessage(
            f"{what}: attribute name {name!r:.80} is not one SNS and SQS take (1-256 letters, digits, '_', "
            "'-', '.'; no '..', no '.' first or last)"
        )
    if name.lower().startswith(RESERVED_ATTRIBUTE_PREFIXES):
        raise InvalidMessage(
            f"{what}: attribute name {name!r:.80} begins with {name[: name.index('.') + 1]!r}: SNS and SQS "
            "reserve 'AWS.' and 'Amazon.' in any casing; name it otherwise"
        )
    data_type = value.get("DataType") if isinstance(value, Mapping) else None
    if not isinstance(data_type, str) or data_type.split(".", 1)[0] not in ATTRIBUTE_TYPES:
        raise InvalidMessage(f"{what}: attribute {name} has no DataType SNS and SQS take: {value!r:.80}")
    if data_type.startswith("Binary"):
        if not isinstance(value.get("BinaryValue"), bytes | bytearray) or not value["BinaryValue"]:
            raise InvalidMessage(f"{what}: attribute {name} is Binary without a non-empty BinaryValue")
        return
    _check_text(value.get("StringValue"), f"{what}: attribute {name}'s value")
    text = value["StringValue"]
    refused = _number_refused(text, sns) if data_type.startswith("Number") else None
    if refused:
        raise InvalidMessage(f"{what}: attribute {name} is the Number {text!r:.60}, {refused}; send a str")


def _number_refused(text: str, sns: bool) -> str | None:
    """Why SQS (and SNS: ``sns``) refuse ``text`` as a Number attribute's value; None when they take it."""
    if not NUMBER_PATTERN.fullmatch(text):
        return "which is not a number"
    value = Decimal(text).copy_abs()  # exact: abs() would round to the context's 28 digits
    if not value:
        return None
    _, digits, exponent = numeric.normalized(value)
    low, high = (Decimal(bound) for bound in SQS_NUMBER_MAGNITUDES)
    if len(digits) > SQS_NUMBER_DIGITS or not low <= value <= high:
        return f"which SQS refuses (at most {SQS_NUMBER_DIGITS} digits, a magnitude from {low} to {high})"
    if sns and (value > Decimal(SNS_NUMBER_MAGNITUDE) or exponent < -SNS_NUMBER_DECIMALS):
        return (
            f"which SNS refuses (from -{SNS_NUMBER_MAGNITUDE} to {SNS_NUMBER_MAGNITUDE}, at most "
            f"{SNS_NUMBER_DECIMALS} digits after the point)"
        )
    return None


def _attributes(attributes: Any, what: str) -> dict[str, dict[str, Any]]:
    """Python values (str, bytes, numbers) as PublishBatch's message attributes; ``check`` judges them."""
    if not attributes:
        return {}
    if not isinstance(attributes, Mapping):
        raise InvalidMessage(f"{what}: attributes must be a mapping of names, got {attributes!r:.120}")
    converted: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        if isinstance(name, str) and name.startswith(DLQ_ATTRIBUTE_PREFIX):
            raise InvalidMessage(
                f"{what}: attribute name {name!r:.80} begins with {DLQ_ATTRIBUTE_PREFIX!r}, the runtime's "
                "own attributes (a consumer downstream would read them as its own)"
            )
        if isinstance(value, bytes) and value:
            converted[name] = {"DataType": "Binary", "BinaryValue": value}
        elif isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            try:
                converted[name] = {"DataType": "Number", "StringValue": numeric.exact(value)}
            except ValueError as exc:
                raise InvalidMessage(f"{what}: attribute {name}: {exc}") from None
        elif isinstance(value, str) and value:
            converted[name] = {"DataType": "String", "StringValue": value}
        else:
            raise InvalidMessage(
                f"{what}: attribute {name} must be a non-empty str, bytes or a number, got {value!r:.80}"
            )
    return converted


def _text(body: Any, what: str) -> str:
    if isinstance(body, str):
        return body
    if not isinstance(body, Mapping):
        raise InvalidMessage(f"{what} must be a dict (sent as JSON) or a text, got {type(body).__name__}")
    try:
        return encode_result(dict(body))
    except Exception as exc:  # whatever the body's own values raise while being written
        raise InvalidMessage(f"{what} cannot be written as JSON: {type(exc).__name__}: {exc}") from None


# --- the item's messages, both ways ----------------------------------------------------------------------


def stored(message: Emitted) -> dict[str, Any]:
    """``message`` as a member of :data:`OUTBOX_MESSAGES_ATTRIBUTE` (DynamoDB's JSON)."""
    entry: dict[str, Any] = {OUTBOX_BODY: {"S": message.body}, OUTBOX_DEDUP_ID: {"S": message.dedup_id}}
    if message.attributes:
        entry[OUTBOX_ATTRIBUTES] = {
            "M": {
                name: {"M": {part: {"B" if part == "BinaryValue" else "S": data} for part, data in v.items()}}
                for name, v in message.attributes.items()
            }
        }
    return {"M": entry}


class Unreadable(ValueError):
    """An item (or stream image) that is not an outbox item as :func:`stored` writes it; the text says why."""


def read_messages(image: Mapping[str, Any]) -> list[Emitted]:
    """The messages of an outbox item (or of a stream record's NewImage: binary values in base64), in emit
    order; :class:`Unreadable` when it is not one."""
    listed = (image.get(OUTBOX_MESSAGES_ATTRIBUTE) or {}).get("L")
    if not isinstance(listed, list) or not listed:
        raise Unreadable(f"{OUTBOX_MESSAGES_ATTRIBUTE} is not a non-empty list (L)")
    group = (image.get(OUTBOX_GROUP_ATTRIBUTE) or {}).get("S")
    found = []
    for position, member in enumerate(listed):
        try:
            fields = member["M"]
            attributes = {}
            for name, value in ((fields.get(OUTBOX_ATTRIBUTES) or {}).get("M") or {}).items():
                attributes[name] = {part: _value(data) for part, data in value["M"].items()}
            found.append(Emitted(fields[OUTBOX_BODY]["S"], group, fields[OUTBOX_DEDUP_ID]["S"], attributes))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise Unreadable(
                f"message {position} of {OUTBOX_MESSAGES_ATTRIBUTE} is malformed ({exc!r})"
            ) from None
    return found


def _value(data: Mapping[str, Any]) -> Any:
    if "B" in data:
        raw = data["B"]
        return base64.b64decode(raw, validate=True) if isinstance(raw, str) else bytes(raw)
    return data["S"]


# --- the outbox of one message ----------------------------------------------------------------------------

# The outbox items of one message leave room for one more item (the marker or the guarded completion).
MAX_OUTBOX_BYTES = MAX_TRANSACTION_BYTES - MAX_ITEM_BYTES
# An outbox item's keys, emitter, message id, group and TTL: at most this many bytes.
ITEM_OVERHEAD = MAX_PARTITION_KEY_BYTES + MAX_SORT_KEY_BYTES + MAX_KEY_PREFIX_BYTES + 1024


class TransactionTooLarge(InvalidMessage):
    """More than one TransactWriteItems takes (MAX_TRANSACTION_ITEMS items, MAX_TRANSACTION_BYTES)."""


class Outbox:
    """The messages one message emits (``emitted``, in emit order), by lane."""

    def __init__(self, target_arn: str, table_name: str, key_prefix: str, message: Message) -> None:
        assert message.key is not None
        self.target = target_arn
        self.fifo = target_arn.endswith(FIFO_QUEUE_SUFFIX)
        self.key: Key = message.key
        self.table_name = table_name
        self.prefix = key_prefix
        self.message = message
        self.emitted: list[Emitted] = []
        self.lanes: dict[str, list[Emitted]] = {}  # lane -> its messages, in emit order

    @property
    def count(self) -> int:
        return len(self.emitted)

    def add(self, body: Any, group_id: Any, attributes: Any) -> str:
        position = self.count
        what = f"emitted message {position}"
        if position >= MAX_EMITS:
            raise InvalidMessage(f"a message may emit at most {MAX_EMITS} messages; {what} is one more")
        if group_id is None and self.fifo:
            group_id = self.message.group_id
            if group_id is None:
                raise InvalidMessage(
                    f"{what} needs a group_id: the emit target is FIFO and this message has no "
                    "MessageGroupId to take it from"
                )
        emitted = Emitted(
            _text(body, what),
            group_id,
            dedup_id(self.table_name, self.key, position),
            _attributes(attributes, what),
        )
        check(emitted, self.target, what)
        lane = group_id if self.fifo else self.key.idempotency_key
        if lane not in self.lanes and len(self.lanes) >= MAX_TRANSACTION_ITEMS - 1:
            raise TransactionTooLarge(
                f"a message may emit to at most {MAX_TRANSACTION_ITEMS - 1} groups (an outbox item each, in "
                f"one TransactWriteItems); {what}'s group {group_id!r} is one more"
            )
        lanes = {**self.lanes, lane: [*self.lanes.get(lane, []), emitted]}
        _check_sizes(lanes, lane, what)
        self.lanes = lanes
        self.emitted.append(emitted)
        return emitted.dedup_id

    def sort(self, now: float) -> str:
        """The sort key of this message's outbox items when it commits at ``now`` (epoch seconds)."""
        return outbox_sort(round(now * 1000), self.key.idempotency_key)

    def items(self, table: str, names: tuple[str, str, str], ttl_seconds: int, now: float) -> list[dict]:
        """TransactWriteItems ``Put`` entries of a commit at ``now``; ``names``: the partition key, sort key,
        TTL attribute. Built once per commit: a retried request sends the very same items."""
        pk, sk, ttl = names
        expires = {"N": str(int(now) + max(OUTBOX_TTL_SECONDS, ttl_seconds))}
        puts = []
        for lane, messages in self.lanes.items():
            item = _attributes_of(messages)
            item[pk] = {"S": outbox_partition(self.prefix, lane)}
            item[sk] = {"S": self.sort(now)}
            item[MESSAGE_ID_ATTRIBUTE] = {"S": self.message.message_id}
            item[OUTBOX_EMITTER_ATTRIBUTE] = {"S": emitter(self.prefix)}
            item[ttl] = expires
            puts.append({"Put": {"TableName": table, "Item": item}})
        return puts

    def where(self, now: float) -> dict[str, Any]:
        """The value of the marker's (the completion's) :data:`OUTBOX_ATTRIBUTE` for a commit at ``now``."""
        return {
            "M": {
                OUTBOX_WHERE_SORT: {"S": self.sort(now)},
                OUTBOX_WHERE_LANES: {"L": [{"S": lane} for lane in self.lanes]},
            }
        }


def _attributes_of(messages: list[Emitted]) -> dict[str, Any]:
    item: dict[str, Any] = {OUTBOX_MESSAGES_ATTRIBUTE: {"L": [stored(m) for m in messages]}}
    if messages[0].group_id is not None:
        item[OUTBOX_GROUP_ATTRIBUTE] = {"S": messages[0].group_id}
    return item


def _check_sizes(lanes: dict[str, list[Emitted]], lane: str, what: str) -> None:
    sizes = {name: item_size(_attributes_of(messages)) + ITEM_OVERHEAD for name, messages in lanes.items()}
    if sizes[lane] > MAX_ITEM_BYTES:
        raise InvalidMessage(
            f"{what} makes its outbox item about {sizes[lane]} bytes, over DynamoDB's {MAX_ITEM_BYTES}"
        )
    if sum(sizes.values()) > MAX_OUTBOX_BYTES:
        raise TransactionTooLarge(f"{what} makes the outbox items over {MAX_OUTBOX_BYTES} bytes")


def outbox_for(target_arn: str | None, table_name: str, key_prefix: str, message: Message) -> Outbox | None:
    """The message's outbox, set before the processor runs (None without a target: ``emit`` refuses)."""
    message.outbox = Outbox(target_arn, table_name, key_prefix, message) if target_arn else None
    return message.outbox
