"""Idempotency keys: from two body fields or one, the SQS deduplication id, the message id, or a hash of the
body.

One implementation for the consumer and the producer helper: dotted key field paths; strings as they are,
numbers and booleans in one canonical text (``100`` = ``100.0`` = ``1e2``). A missing, empty, null, object
or array key field is rejected naming the field; so is a value beginning with ``idempotency#``, before or
after ``KEY_PREFIX`` (in :meth:`KeyBuilder.key`, for every key source).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from idempotent_runtime import numeric
from idempotent_runtime.attributes import lone_surrogate
from idempotent_runtime.config import Config
from idempotent_runtime.contract import (
    FIELD_KEY_SOURCES,
    FIELD_PATH_SEPARATOR,
    FIFO_ID_PATTERN,
    FIFO_ONLY_KEY_SOURCES,
    KEY_SOURCE,
    MAX_PARTITION_KEY_BYTES,
    MAX_SORT_KEY_BYTES,
    REDRIVE_ATTRIBUTE,
    RESERVED_KEY_PREFIX,
    KeySource,
)
from idempotent_runtime.errors import InvalidMessage, Misconfiguration
from idempotent_runtime.message import Key, Message
from idempotent_runtime.payload import raw_fingerprint

# A numeric key longer than any key DynamoDB accepts is rejected before its digits are written out.
_MAX_KEY_EXPONENT = MAX_PARTITION_KEY_BYTES


def key_text(value: Any, what: str) -> str:
    """The canonical text of a key value; ``what`` names it in the reason (``partition key field 'x'``)."""
    if isinstance(value, str):
        if not value:
            raise InvalidMessage(f"{what} is empty, got ''")
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        if isinstance(value, Decimal) and value and abs(value.adjusted()) > _MAX_KEY_EXPONENT:
            raise InvalidMessage(f"{what} is the number {value}, too long for a dynamodb key")
        try:
            return numeric.plain(value)
        except numeric.NotFinite as exc:
            raise InvalidMessage(f"{what} is {exc.text}, not a number a key can hold") from None
    if value is None:
        raise InvalidMessage(f"{what} is null; a key must be a string, a number or a boolean")
    if isinstance(value, dict):  # described without walking it: it may be nested thousands deep
        shown = f"an object with fields {_names(value)}"
    elif isinstance(value, list):
        shown = f"an array of {len(value)} items"
    else:
        shown = f"a {type(value).__name__}"
    raise InvalidMessage(f"{what} is {shown}, not a string, number or boolean")


def _field_what(field: str | None, role: str) -> str:
    return f"{role} key field {field!r}"


def field_key(data: Any, field: str, role: str) -> str:
    """The key text of the body field at the dotted path ``field`` (``role``: partition or sort); not
    checked against the reserved namespace (the caller does, on the final value)."""
    return _path_key(data, field.split(FIELD_PATH_SEPARATOR), _field_what(field, role))


def _path_key(data: Any, path: Sequence[str], what: str) -> str:
    value: Any = data
    for part in path:
        if not isinstance(value, dict) or part not in value:
            where = f" (fields: {_names(value)})" if isinstance(value, dict) else ""
            raise InvalidMessage(f"{what} is missing from the body{where}")
        value = value[part]
    if type(value) is str and value:  # the common case, without a call
        return value
    return key_text(value, what)


def _unreserved(text: str, what: str) -> None:
    if text.startswith(RESERVED_KEY_PREFIX):
        raise InvalidMessage(
            f"{what} begins with {RESERVED_KEY_PREFIX!r}, which the runtime reserves for its own records: "
            f"{text[:80]!r}"
        )


def _names(body: dict) -> str:
    names = list(body)[:10]
    return ", ".join(repr(n) for n in names) + (", ..." if len(body) > 10 else "") if names else "none"


def _check(value: str, what: str, limit: int) -> str:
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidMessage(f"{what} {lone_surrogate(exc)}") from None
    if size > limit:
        raise InvalidMessage(f"{what} is {size} bytes, over dynamodb's {limit}-byte limit: {value[:40]!r}...")
    return value


def redrive_of(message: Message) -> dict[str, Any] | None:
    """The ``idempotency.redrive`` attribute of a message the DLQ tool redrove, parsed (None: absent)."""
    attribute = message.message_attributes.get(REDRIVE_ATTRIBUTE)
    if attribute is None:
        return None
    text = attribute.get("stringValue") if isinstance(attribute, dict) else None
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise InvalidMessage(
            f"message attribute {REDRIVE_ATTRIBUTE} must be a JSON object with source_message_id and "
            f"dedup_id, got {text!r:.120}"
        )
    return value


def written_for(message: Message) -> str | None:
    """The deduplication id a record of ``message`` names (``DEDUP_ID_ATTRIBUTE``): a redriven message's
    original one, else its own (None on a standard queue). A redrive attribute the runtime cannot read, or
    whose id SQS could never have given (``FIFO_ID_PATTERN``), names nothing here: keying the message says
    why, where the key source reads it."""
    try:
        redriven = _redriven(message, "dedup_id")
    except InvalidMessage:
        redriven = None
    if redriven is not None and FIFO_ID_PATTERN.fullmatch(redriven):
        return redriven
    return message.dedup_id


def _redriven_what(field: str) -> str:
    return f"partition key {field} of message attribute {REDRIVE_ATTRIBUTE}"


def _redriven(message: Message, field: str) -> str | None:
    redrive = redrive_of(message)
    if redrive is None or redrive.get(field) is None:
        return None
    value = redrive[field]
    if not isinstance(value, str) or not value:
        raise InvalidMessage(
            f"message attribute {REDRIVE_ATTRIBUTE}: {field} must be a non-empty string, got {value!r:.80}"
        )
    return value


class KeyBuilder:
    """``build(message) -> Key`` for the configured key source: ``fields`` reads PARTITION_KEY_FIELD and
    SORT_KEY_FIELD, ``field`` PARTITION_KEY_FIELD with the field's path as the sort key; the other sources
    give the partition (a redriven message keeps its original id) and their own name as the sort key.
    ``sort_reserve`` bytes stay free in the sort key (transaction markers).
    """

    def __init__(self, config: Config, *, sort_reserve: int = 0) -> None:
        self.source = config.key_source
        self.prefix = config.key_prefix
        self.fields = (config.partition_key_field, config.sort_key_field)
        # Split and named once: a record is keyed on the hot path.
        self._paths = tuple(field.split(FIELD_PATH_SEPARATOR) for field in self.fields if field is not None)
        partition, sort = self.fields
        self._whats = (
            _field_what(partition, "partition"),
            _field_what(sort, "sort") if sort is not None else "sort key (the key field's path)",
        )
        self.max_partition = MAX_PARTITION_KEY_BYTES
        self.max_sort = MAX_SORT_KEY_BYTES - sort_reserve

    def key(self, partition: str, sort: str, what: tuple[str, str]) -> Key:
        """The key of ``partition`` (before KEY_PREFIX) and ``sort``; ``what`` names them in reasons.

        The one place every key source passes: neither value may begin with ``idempotency#`` (this
        pipeline's own records are at KEY_PREFIX + ``idempotency#``...), nor may the prefixed partition (the
        records of pipelines without a prefix sharing the table)."""
        _unreserved(partition, what[0])
        _unreserved(sort, what[1])
        prefixed = self.prefix + partition
        if self.prefix:
            _unreserved(prefixed, f"{what[0]} with KEY_PREFIX {self.prefix!r}")
        return Key(_check(prefixed, what[0], self.max_partition), _check(sort, what[1], self.max_sort))

    def __call__(self, message: Message) -> Key:
        source = self.source
        if source in FIELD_KEY_SOURCES:
            body = message.json_object()
            whats = self._whats
            partition = _path_key(body, self._paths[0], whats[0])
            sort = _path_key(body, self._paths[1], whats[1]) if source == KeySource.FIELDS else self.fields[0]
            return self.key(partition, sort, whats)  # type: ignore[arg-type]
        if source == KeySource.DEDUP_ID:
            value = _redriven(message, "dedup_id")
            what = _redriven_what("dedup_id")
            if value is None:
                value, what = message.dedup_id, "partition key MessageDeduplicationId"
            if not value and message.from_fifo_queue is False:
                raise _standard_queue(message, source)
            if not value:
                raise InvalidMessage(
                    "message has no MessageDeduplicationId attribute "
                    f"(KEY_SOURCE=dedup_id needs a fifo queue), got {value!r}"
                )
            return self.key(value, source.value, (what, "sort key"))
        if source == KeySource.MESSAGE_ID:
            value = _redriven(message, "source_message_id")
            what = _redriven_what("source_message_id")
            if value is None:
                value, what = message.message_id, "partition key messageId"
            return self.key(value, source.value, (what, "sort key"))
        return self.key(raw_fingerprint(message.body), source.value, ("partition key", "sort key"))


def _standard_queue(message: Message, source: KeySource) -> Misconfiguration:
    """The deployment feeds a FIFO-only key source from a standard queue: no record of it can be keyed."""
    others = [other.value for other in KeySource if other not in FIFO_ONLY_KEY_SOURCES]
    return Misconfiguration(
        f"{KEY_SOURCE.name}={source}, but the record comes from the standard queue "
        f"{message.record.get('eventSourceARN')}, whose messages carry no MessageDeduplicationId",
        f"{KEY_SOURCE.name}={source} needs a FIFO queue: the event source is a standard queue, whose "
        f"messages carry no MessageDeduplicationId; use {KEY_SOURCE.name}={', '.join(others[:-1])} or "
        f"{others[-1]}, or a FIFO queue",
    )


def key_parts(data: Any, key_fields: Sequence[str]) -> list[str]:
    """The key texts of ``key_fields`` (dotted paths) of ``data``, as the consumer reads them (without
    KEY_PREFIX, which the producer does not know)."""
    parts = []
    for index, field in enumerate(key_fields):
        role = ("partition", "sort")[min(index, 1)]
        text = field_key(data, field, role)
        _unreserved(text, _field_what(field, role))
        parts.append(text)
    return parts
