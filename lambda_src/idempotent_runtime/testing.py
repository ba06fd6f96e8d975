"""Test a processor without Lambda, SQS or DynamoDB: :func:`message` builds the ``Message`` the consumer would
hand it, its key computed as the consumer computes it and, in guarded mode, a lease that needs no table::

    from idempotent_runtime.testing import message

    def test_a_line_gets_its_total():
        line = {"order_id": "o-1", "line_id": "1", "quantity": 2, "unit_cents": 450}
        got = handle(message(line, partition_key_field="order_id", sort_key_field="line_id"))
        assert got["total_cents"] == 900

Not part of the function's code asset unless your code names it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from idempotent_runtime.config import Config
from idempotent_runtime.contract import MARKER_SORT_PREFIX, Mode, QueueType
from idempotent_runtime.errors import LeaseLost
from idempotent_runtime.keys import KeyBuilder
from idempotent_runtime.message import Key, Message

__all__ = ["LocalLease", "message"]


class LocalLease:
    """A guarded claim held in memory: ``remaining()``, ``extend(seconds)`` and ``expires_at`` behave as the
    real lease's; with ``lost=True`` ``extend`` raises :class:`~idempotent_runtime.LeaseLost`, as when
    another invocation took the key over. ``extensions`` lists the seconds asked for."""

    def __init__(
        self, key: Key, seconds: float, *, lost: bool = False, clock: Callable[[], float] = time.time
    ) -> None:
        self.key = key
        self.token = "local"
        self.lost = lost
        self.extensions: list[float] = []
        self._clock = clock
        self.expires_at = clock() + seconds

    def remaining(self) -> float:
        return self.expires_at - self._clock()

    def extend(self, seconds: float) -> float:
        if not seconds > 0:
            raise ValueError(f"lease extension must be a positive number of seconds, got {seconds!r}")
        if self.lost:
            raise LeaseLost(f"lease on key {self.key} was taken over by another invocation")
        self.extensions.append(seconds)
        self.expires_at = max(self.expires_at, self._clock() + seconds)
        return self.remaining()


def message(
    body: Any,
    *,
    attributes: Mapping[str, Any] | None = None,
    message_id: str | None = None,
    group_id: str | None = "group-1",
    dedup_id: str | None = None,
    receive_count: int = 1,
    lease_seconds: float = 900,
    lease_lost: bool = False,
    **settings: Any,
) -> Message:
    """The ``Message`` a processor gets for ``body`` (a str is the body's text; anything else is sent as
    JSON), with message ``attributes`` (a str is a String, bytes Binary, a number Number).

    ``settings`` are the consumer's (``Config`` fields, as the constructs set them: ``mode``,
    ``key_source``, ``partition_key_field``, ``sort_key_field``, ``key_prefix``, ``table_name`` (default
    ``test``), ...). A body the consumer could not key raises what the consumer would quarantine it with.
    With ``emit_target_arn`` (transaction or guarded mode) ``message.emit()`` works as in the consumer - the
    same checks, the same deduplication ids - and ``message.outbox.emitted`` lists what the effect would
    commit: :class:`~idempotent_runtime.outbox.Emitted` (``body``, ``group_id``, ``dedup_id``,
    ``attributes``), in emit order. In guarded mode ``message.lease`` is a
    :class:`LocalLease` of ``lease_seconds`` (``lease_lost``: its ``extend`` raises ``LeaseLost``). On a
    standard queue (``queue_type="standard"``) a record has no group or deduplication id.
    """
    settings.setdefault("table_name", "test")
    config = Config(**settings)
    text = body if isinstance(body, str) else json.dumps(body)
    fifo = config.queue_type == QueueType.FIFO
    system = {"ApproximateReceiveCount": str(receive_count), "SentTimestamp": str(int(time.time() * 1000))}
    if fifo and group_id is not None:
        system["MessageGroupId"] = group_id
    if fifo:
        system["MessageDeduplicationId"] = dedup_id or hashlib.sha256(text.encode()).hexdigest()
    record = {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "local",
        "body": text,
        "attributes": system,
        "messageAttributes": {name: _attribute(value) for name, value in (attributes or {}).items()},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:local" + (".fifo" if fifo else ""),
    }
    built = Message(record)
    reserve = len(MARKER_SORT_PREFIX) if config.mode == Mode.TRANSACTION else 0
    built.key = KeyBuilder(config, sort_reserve=reserve)(built)
    if config.mode == Mode.GUARDED:
        built.lease = LocalLease(built.key, lease_seconds, lost=lease_lost)
    if config.emit_target_arn:
        from idempotent_runtime.outbox import outbox_for  # the consumer's own outbox

        outbox_for(config.emit_target_arn, config.table_name, config.key_prefix, built)
    return built


def _attribute(value: Any) -> dict[str, str]:
    """A message attribute as Lambda's event holds it."""
    if isinstance(value, bytes):
        return {"dataType": "Binary", "binaryValue": base64.b64encode(value).decode()}
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return {"dataType": "Number", "stringValue": str(value)}
    return {"dataType": "String", "stringValue": str(value)}
