"""What the table says about a message, for operators' tools (the DLQ tool's list / redrive / --force).

Both functions reuse the modes' own key, fingerprint and record-location code, so they see exactly what
the consumer would see::

    from idempotent_runtime.config import Config
    from idempotent_runtime.records import inspect, forget

    config = Config.from_env(function_environment)        # the consumer function's variables
    found = inspect(config, dynamodb, lambda_sqs_record)   # Inspection(key, fingerprint, state, ...)
    if found.state == "done":
        forget(config, dynamodb, found.key)                # a redrive then processes the key again

``inspect`` reads with ``GetItem`` (consistent); ``forget`` deletes with ``DeleteItem``. Neither is used by
the consumer function itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from idempotent_runtime.config import Config
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.keys import KeyBuilder
from idempotent_runtime.message import Key, Message
from idempotent_runtime.modes import Mode, RecordState, make_mode

__all__ = ["Inspection", "RecordState", "forget", "inspect"]


@dataclass(frozen=True)
class Inspection:
    """``state``: ``new`` (a delivery would process it), ``done`` (a duplicate), ``conflict`` (the key is done
    with another payload, or guarded: held by another payload's expired claim; ``stored_fingerprint``
    differs from ``fingerprint``), ``in_progress`` (guarded: a live claim), ``invalid`` (the message cannot
    be keyed: ``key`` is None and ``reason`` says why)."""

    key: Key | None
    fingerprint: str | None
    state: RecordState
    stored_fingerprint: str | None = None
    reason: str | None = None


def _not_called(message: Message) -> Any:  # pragma: no cover - inspect never processes
    raise AssertionError("records.inspect never runs the processor")


def _mode(config: Config, dynamodb_client: Any) -> Mode:
    return make_mode(config, lambda: dynamodb_client, _not_called)


def inspect(
    config: Config, dynamodb_client: Any, record: dict[str, Any], *, now: float | None = None
) -> Inspection:
    """The state of ``record``'s key (``record``: one record of Lambda's SQS event, e.g. from
    ``idempotent_local.events.lambda_sqs_record``)."""
    mode = _mode(config, dynamodb_client)
    message = Message(record)
    try:
        key = KeyBuilder(config, sort_reserve=mode.sort_reserve)(message)
    except InvalidMessage as exc:
        return Inspection(None, None, RecordState.INVALID, reason=exc.reason)
    message.key = key
    fingerprint = mode.fingerprint(message)
    response = dynamodb_client.get_item(
        TableName=config.table_name, Key=mode.location(key), ConsistentRead=True
    )
    item = response.get("Item") or {}
    state, stored = mode.state(item, fingerprint, time.time() if now is None else now)
    reason = (
        "the key is held by an item that is not an idempotency record"
        if state == RecordState.INVALID
        else None
    )
    return Inspection(key, fingerprint, state, stored, reason)


def forget(config: Config, dynamodb_client: Any, key: Key) -> bool:
    """Delete the idempotency record of ``key`` (document mode: the document itself; transaction: the
    marker, not the processor's writes; guarded: the claim or result), so the next delivery of a message
    with this key is processed again. Returns whether there was one."""
    mode = _mode(config, dynamodb_client)
    response = dynamodb_client.delete_item(
        TableName=config.table_name, Key=mode.location(key), ReturnValues="ALL_OLD"
    )
    return bool(response.get("Attributes"))
