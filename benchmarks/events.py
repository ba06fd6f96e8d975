"""Lambda SQS FIFO events shaped exactly as the event source mapping delivers them."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Container
from typing import Any

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:bench-queue.fifo"


def message_body(x: str, y: str, seq: int) -> str:
    """A raw-delivered SNS message: two UUIDs that together are unique, plus a small business payload."""
    return json.dumps(
        {
            "x": x,
            "y": y,
            "amount": 1000 + seq,
            "currency": "EUR",
            "note": "benchmark order line",
            "tags": ["bench", f"n{seq}"],
        },
        separators=(",", ":"),
    )


def sqs_record(
    body: str, group_id: str, seq: int, dedup_id: str, message_id: str | None = None
) -> dict[str, Any]:
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": f"bench-receipt-{seq}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1763766000000",
            "SequenceNumber": f"{18_800_000_000_000_000_000 + seq}",
            "MessageGroupId": group_id,
            "SenderId": "AIDABENCHSENDER",
            "MessageDeduplicationId": dedup_id,
            "ApproximateFirstReceiveTimestamp": "1763766000001",
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def fifo_batch(records: int, groups: int, *, start: int = 0) -> dict[str, Any]:
    """A batch of `records` new messages spread round-robin over `groups` message groups.

    Each message has fresh UUID keys, so every record is new to both idempotency stores.
    """
    if records < 1 or groups < 1 or groups > records:
        raise ValueError(f"need 1 <= groups <= records, got records={records!r} groups={groups!r}")
    out = []
    for i in range(records):
        seq = start + i
        x, y = str(uuid.uuid4()), str(uuid.uuid4())
        out.append(sqs_record(message_body(x, y, seq), f"group-{i % groups}", seq, f"{x}#{y}"))
    # Lambda hands a FIFO batch over in queue order, which keeps each group's records in order.
    return {"Records": out}


def redelivery(event: dict[str, Any], message_ids: Container[str] | None = None) -> dict[str, Any]:
    """The same messages (those of ``message_ids``, if given) delivered again: a new receive, a new receipt
    handle."""
    records = []
    for record in event["Records"]:
        if message_ids is None or record["messageId"] in message_ids:
            again = json.loads(json.dumps(record))
            attributes = again["attributes"]
            attributes["ApproximateReceiveCount"] = str(int(attributes["ApproximateReceiveCount"]) + 1)
            again["receiptHandle"] += "-again"
            records.append(again)
    return {"Records": records}
