"""Idempotency keys: from two body fields, the SQS deduplication id, the message id, or a hash of the body."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from idempotent_runtime.attributes import lone_surrogate
from idempotent_runtime.config import Config
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.message import Key, Message

# DynamoDB's limits on key attribute values (UTF-8 bytes).
MAX_PARTITION_BYTES = 2048
MAX_SORT_BYTES = 1024


def key_builder(config: Config, *, sort_reserve: int = 0) -> Callable[[Message], Key]:
    """Return ``build(message) -> Key`` for the configured key source.

    ``fields``: partition = body[PARTITION_KEY_FIELD], sort = body[SORT_KEY_FIELD] (non-empty strings).
    ``dedup_id`` / ``message_id`` / ``body_sha256``: partition = that value, sort = the key source's name, so
    keys spread over partitions. ``sort_reserve`` bytes are kept free in the sort key (transaction markers).
    """
    max_sort = MAX_SORT_BYTES - sort_reserve
    source = config.key_source
    if source == "fields":
        pk_field, sk_field = config.partition_key_field, config.sort_key_field

        def from_fields(message: Message) -> Key:
            body = message.json_object()
            return Key(
                _field(body, pk_field, "partition", MAX_PARTITION_BYTES),
                _field(body, sk_field, "sort", max_sort),
            )

        return from_fields
    if source == "dedup_id":

        def from_dedup_id(message: Message) -> Key:
            value = message.dedup_id
            if not value:
                raise InvalidMessage(
                    "message has no MessageDeduplicationId attribute "
                    "(KEY_SOURCE=dedup_id needs a fifo queue), "
                    f"got {value!r}"
                )
            return Key(_check(value, "MessageDeduplicationId", "partition", MAX_PARTITION_BYTES), "dedup_id")

        return from_dedup_id
    if source == "message_id":
        return lambda message: Key(message.message_id, "message_id")

    def from_body(message: Message) -> Key:
        return Key(hashlib.sha256(message.body.encode("utf-8")).hexdigest(), "body_sha256")

    return from_body


def _field(body: dict, name: str, role: str, limit: int) -> str:
    if name not in body:
        raise InvalidMessage(f"{role} key field {name!r} is missing from the body (fields: {_names(body)})")
    value = body[name]
    if not isinstance(value, str):
        raise InvalidMessage(
            f"{role} key field {name!r} must be a string, got {type(value).__name__} {value!r:.80}"
        )
    return _check(value, f"field {name!r}", role, limit)


def _check(value: str, what: str, role: str, limit: int) -> str:
    if not value:
        raise InvalidMessage(f"{role} key {what} is empty, got {value!r}")
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidMessage(f"{role} key {what} {lone_surrogate(exc)}") from None
    if size > limit:
        raise InvalidMessage(
            f"{role} key {what} is {size} bytes, over dynamodb's {limit}-byte limit: {value[:40]!r}..."
        )
    return value


def _names(body: dict) -> str:
    names = list(body)[:10]
    return ", ".join(repr(n) for n in names) + (", ..." if len(body) > 10 else "") if names else "none"
