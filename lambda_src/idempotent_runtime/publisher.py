"""Producer helper: publish to a FIFO topic with deterministic deduplication ids, ten at a time.

The deduplication id comes from business keys (``x#y``), not from the content, so a resend with a changed
body inside SNS's 5-minute window is still recognised; the consumer's conditional write covers the rest.
Key fields are read exactly as the consumer reads them (:mod:`idempotent_runtime.keys`: dotted paths,
numbers and booleans in their canonical text).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.keys import key_parts
from idempotent_runtime.message import join_key

MAX_BATCH = 10  # PublishBatch's limit


class PublishFailure:
    """One message SNS did not accept: its position in the input, dedup id, and SNS's error."""

    __slots__ = ("code", "dedup_id", "index", "message", "sender_fault")

    def __init__(self, index: int, dedup_id: str, code: str, message: str, sender_fault: bool) -> None:
        self.index = index
        self.dedup_id = dedup_id
        self.code = code
        self.message = message
        self.sender_fault = sender_fault

    def __repr__(self) -> str:
        fault = "sender" if self.sender_fault else "service"
        where = f"index={self.index}, dedup_id={self.dedup_id!r}"
        return f"PublishFailure({where}, {self.code} ({fault} fault): {self.message})"


class PublishResult:
    """``message_ids[i]`` is SNS's id for input ``i`` (None when it failed); ``failed`` lists failures."""

    def __init__(self, count: int) -> None:
        self.message_ids: list[str | None] = [None] * count
        self.failed: list[PublishFailure] = []

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_for_failures(self) -> None:
        if self.failed:
            raise PublishError(self.failed)


class PublishError(RuntimeError):
    def __init__(self, failed: list[PublishFailure]) -> None:
        super().__init__(f"{len(failed)} message(s) not published: " + "; ".join(map(repr, failed[:5])))
        self.failed = failed


def dedup_id_for(message: Mapping[str, Any], key_fields: Sequence[str], separator: str = "#") -> str:
    """``x#y`` from the message's key fields (dotted paths; strings, numbers or booleans, read as the
    consumer reads them). When a part contains the separator (the join would be ambiguous: ``acct#1`` +
    ``p`` and ``acct`` + ``1#p``), or the result is over 128 characters or has characters SNS refuses, the
    SHA-256 of ``json.dumps([x, y])`` instead. With the consumer's key fields and no KEY_PREFIX this equals
    its ``message.key.idempotency_key``. Raises ValueError naming the field for a key the consumer would
    reject (missing, empty, null, an object or array, or beginning with ``idempotency#``)."""
    try:
        parts = key_parts(dict(message), key_fields)
    except InvalidMessage as exc:
        raise ValueError(exc.reason) from None
    return join_key(parts, separator)


def publish(
    sns_client: Any,
    topic_arn: str,
    messages: Iterable[Mapping[str, Any]],
    *,
    group_id: str | Callable[[Mapping[str, Any]], str],
    key_fields: Sequence[str] = ("x", "y"),
    separator: str = "#",
) -> PublishResult:
    """Publish JSON messages to a FIFO topic through PublishBatch (chunks of at most 10, in order).

    ``group_id``: a MessageGroupId, or a function of the message (e.g. ``lambda m: m["x"]`` to order per
    business entity while spreading load). Entries SNS refuses are returned in ``result.failed`` (call
    ``result.raise_for_failures()`` to raise); a failed PublishBatch call raises as boto3 does.
    """
    items = list(messages)
    if not key_fields:
        raise ValueError(f"key_fields must name at least one body field, got {key_fields!r}")
    result = PublishResult(len(items))
    for start in range(0, len(items), MAX_BATCH):
        entries = []
        dedup_ids = {}
        for offset, message in enumerate(items[start : start + MAX_BATCH]):
            if not isinstance(message, Mapping):
                raise ValueError(
                    f"message {start + offset} must be a json object (dict), got {message!r:.80}"
                )
            group = group_id(message) if callable(group_id) else group_id
            if not isinstance(group, str) or not group:
                raise ValueError(
                    f"group id of message {start + offset} must be a non-empty string, got {group!r}"
                )
            dedup = dedup_id_for(message, key_fields, separator)
            dedup_ids[str(offset)] = dedup
            entries.append(
                {
                    "Id": str(offset),
                    "Message": json.dumps(message, separators=(",", ":")),
                    "MessageGroupId": group,
                    "MessageDeduplicationId": dedup,
                }
            )
        response = sns_client.publish_batch(TopicArn=topic_arn, PublishBatchRequestEntries=entries)
        for ok in response.get("Successful", []):
            result.message_ids[start + int(ok["Id"])] = ok.get("MessageId")
        for bad in response.get("Failed", []):
            result.failed.append(
                PublishFailure(
                    start + int(bad["Id"]),
                    dedup_ids[bad["Id"]],
                    bad.get("Code", "Unknown"),
                    bad.get("Message", ""),
                    bool(bad.get("SenderFault")),
                )
            )
    return result
