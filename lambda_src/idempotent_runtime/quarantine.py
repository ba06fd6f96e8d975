"""Permanent failures go to the dead-letter queue at once, with the reason, so their group is unblocked."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from idempotent_runtime.message import Message

# SQS accepts at most 10 message attributes; two are ours.
MAX_ATTRIBUTES = 10
REASON_ATTRIBUTE = "reason"
SOURCE_ATTRIBUTE = "source_message_id"
_MAX_REASON = 1024


class Quarantine:
    """Sends a message to ``dlq_url`` with the original body and attributes plus ``reason``.

    FIFO DLQ: same MessageGroupId (or the message id for a record without one) and MessageDeduplicationId
    = the source message id, so sending the same record twice within 5 minutes stores it once.
    Raises whatever SendMessage raises: the caller then reports a batch item failure (nothing is lost).
    """

    def __init__(self, dlq_url: str, sqs: Callable[[], Any]) -> None:
        self.dlq_url = dlq_url
        self.fifo = dlq_url.endswith(".fifo")
        self._sqs = sqs

    def send(self, message: Message, reason: str) -> list[str]:
        """Send; returns the names of original attributes that did not fit (SQS allows 10)."""
        attributes = {
            REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason[:_MAX_REASON] or "unknown"},
            SOURCE_ATTRIBUTE: {"DataType": "String", "StringValue": message.message_id},
        }
        dropped = []
        for name, value in message.message_attributes.items():
            if name in attributes:
                continue
            if len(attributes) >= MAX_ATTRIBUTES:
                dropped.append(name)
                continue
            converted = _attribute(value)
            if converted is None:
                dropped.append(name)
            else:
                attributes[name] = converted
        request: dict[str, Any] = {
            "QueueUrl": self.dlq_url,
            "MessageBody": message.body or " ",  # SQS rejects an empty body
            "MessageAttributes": attributes,
        }
        if self.fifo:
            request["MessageGroupId"] = message.group_id or message.message_id
            request["MessageDeduplicationId"] = message.message_id[:128]
        self._sqs().send_message(**request)
        return dropped


def _attribute(value: Any) -> dict[str, Any] | None:
    """Lambda's event shape (stringValue, binaryValue in base64) back to SendMessage's shape."""
    if not isinstance(value, dict):
        return None
    data_type = value.get("dataType") or value.get("DataType")
    if not data_type:
        return None
    if value.get("stringValue") is not None:
        return {"DataType": data_type, "StringValue": value["stringValue"]}
    binary = value.get("binaryValue")
    if binary is not None:
        raw = base64.b64decode(binary) if isinstance(binary, str) else bytes(binary)
        return {"DataType": data_type, "BinaryValue": raw}
    return None
