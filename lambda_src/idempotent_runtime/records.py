"""What the table says about a message, for operators' tools (the DLQ tool's list / redrive / --force,
``trace``).

They reuse the modes' own key, fingerprint and record-location code, so they see exactly what the consumer
would see::

    from idempotent_runtime.config import Config
    from idempotent_runtime.records import inspect, forget

    config = Config.from_env(function_environment)        # the consumer function's variables
    found = inspect(config, dynamodb, lambda_sqs_record)   # Inspection(key, fingerprint, state, ...)
    if found.state == "done":
        forget(config, dynamodb, found)                    # only if the record is still as found

``inspect`` reads with ``GetItem`` (consistent); ``forget`` reads again and deletes with ``DeleteItem`` and a
condition on what it read; ``key_of`` only keys a record (no request). None is used by the consumer function
itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from idempotent_runtime.config import Config
from idempotent_runtime.contract import (
    FINGERPRINT_ATTRIBUTE,
    LEASE_ATTRIBUTE,
    LEGACY_LEASE_ATTRIBUTE,
    LEGACY_OWNER_ATTRIBUTE,
    LEGACY_STATUS_ATTRIBUTE,
    OWNER_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    TOKEN_ATTRIBUTE,
)
from idempotent_runtime.errors import InvalidMessage, is_conditional_check_failed
from idempotent_runtime.keys import KeyBuilder
from idempotent_runtime.message import Key, Message
from idempotent_runtime.modes import BaseMode, RecordState, make_mode
from idempotent_runtime.modes.base import text_of

__all__ = ["Inspection", "RecordState", "forget", "inspect", "key_of"]


@dataclass(frozen=True)
class Inspection:
    """``state``: ``new`` (a delivery would process it), ``done`` (a duplicate), ``conflict`` (the key is done
    with another payload, or guarded: held by another payload's expired claim; ``stored_fingerprint``
    differs from ``fingerprint``), ``in_progress`` (guarded: a live claim), ``stale`` (versioned: the key
    holds a newer version), ``invalid`` (the message cannot be keyed: ``key`` is None and ``reason`` says
    why; versioned: or its version cannot be compared with the stored one). ``location`` is the DynamoDB
    key of the key's idempotency record (transaction mode: its marker), ``item`` that record as read
    (``{}``: none)."""

    key: Key | None
    fingerprint: str | None
    state: RecordState
    stored_fingerprint: str | None = None
    reason: str | None = None
    location: dict[str, Any] | None = None
    item: dict[str, Any] | None = None


def _not_called(message: Message) -> Any:  # pragma: no cover - inspect never processes
    raise AssertionError("records.inspect never runs the processor")


def _mode(config: Config, dynamodb_client: Any) -> BaseMode:
    return make_mode(config, lambda: dynamodb_client, _not_called)


def key_of(config: Config, record: dict[str, Any]) -> tuple[Key | None, str | None]:
    """The key the consumer gives ``record`` (one record of Lambda's SQS event), or None and why it cannot
    key it. Reads nothing."""
    mode = _mode(config, None)
    try:
        return KeyBuilder(config, sort_reserve=mode.sort_reserve)(Message(record)), None
    except InvalidMessage as exc:
        return None, exc.reason


def inspect(
    config: Config,
    dynamodb_client: Any,
    record: dict[str, Any],
    *,
    now: float | None = None,
    compare_payload: bool = True,
) -> Inspection:
    """The state of ``record``'s key (``record``: one record of Lambda's SQS event, e.g. from
    ``idempotent_local.events.lambda_sqs_record``).

    ``compare_payload=False`` is for a record that only carries the key (an operator asking about a key, not
    a message): the stored record is judged as a delivery of its own payload would see it, so the state is
    never ``conflict`` (nor, in versioned mode, ``stale``)."""
    mode = _mode(config, dynamodb_client)
    message = Message(record)
    try:
        key = KeyBuilder(config, sort_reserve=mode.sort_reserve)(message)
    except InvalidMessage as exc:
        return Inspection(None, None, RecordState.INVALID, reason=exc.reason)
    message.key = key
    fingerprint = mode.fingerprint(message)
    location = mode.location(key)
    response = dynamodb_client.get_item(TableName=config.table_name, Key=location, ConsistentRead=True)
    item = response.get("Item") or {}
    judged = fingerprint if compare_payload else (text_of(item, FINGERPRINT_ATTRIBUTE) or fingerprint)
    try:
        state, stored = mode.delivery_state(
            message if compare_payload else None, item, judged, time.time() if now is None else now
        )
    except InvalidMessage as exc:  # versioned: a version a delivery would be quarantined for
        return Inspection(key, fingerprint, RecordState.INVALID, None, exc.reason, location, item)
    reason = (
        "the key is held by an item that is not an idempotency record"
        if state == RecordState.INVALID
        else None
    )
    return Inspection(key, fingerprint, state, stored, reason, location, item)


# What every write of a record changes: a document's or marker's write token; a guarded claim's owner,
# status and lease (0.1's names too); the fingerprint and the TTL.
VERSION_ATTRIBUTES = (
    TOKEN_ATTRIBUTE,
    OWNER_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    LEASE_ATTRIBUTE,
    FINGERPRINT_ATTRIBUTE,
    LEGACY_OWNER_ATTRIBUTE,
    LEGACY_STATUS_ATTRIBUTE,
    LEGACY_LEASE_ATTRIBUTE,
)


def forget(config: Config, dynamodb_client: Any, found: Inspection, *, now: float | None = None) -> bool:
    """Delete the idempotency record of ``found.key`` (document mode: the document itself; transaction: the
    marker, not the processor's writes; guarded: the claim or result), so the next delivery of the key is
    processed again - only while the record is still what ``found`` (an :func:`inspect`) saw: the same
    state and stored fingerprint on a consistent read, and that very item at the delete (a condition on
    every attribute a write changes). Returns False, deleting nothing, when it changed: e.g. a guarded
    redelivery took an expired claim over, which must never be deleted while it runs."""
    if found.key is None or found.fingerprint is None:
        return False
    mode = _mode(config, dynamodb_client)
    location = mode.location(found.key)
    item = dynamodb_client.get_item(TableName=config.table_name, Key=location, ConsistentRead=True).get(
        "Item"
    )
    if not item:
        return False
    state, stored = mode.state(item, found.fingerprint, time.time() if now is None else now)
    if (state, stored) != (found.state, found.stored_fingerprint):
        return False
    names: dict[str, str] = {"#pk": config.partition_key}
    values: dict[str, Any] = {}
    conditions = ["attribute_exists(#pk)"]
    version = dict.fromkeys((*VERSION_ATTRIBUTES, config.ttl_attribute))
    for n, name in enumerate(name for name in version if name not in location):
        names[f"#v{n}"] = name
        if name in item:
            values[f":v{n}"] = item[name]
            conditions.append(f"#v{n} = :v{n}")
        else:
            conditions.append(f"attribute_not_exists(#v{n})")
    request: dict[str, Any] = {
        "TableName": config.table_name,
        "Key": location,
        "ConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": names,
    }
    if values:
        request["ExpressionAttributeValues"] = values
    try:
        dynamodb_client.delete_item(**request)
    except Exception as exc:
        if is_conditional_check_failed(exc):
            return False
        raise
    return True
