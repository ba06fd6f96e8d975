"""Lambda's SQS event from ``sqs.receive_message`` output, field for field as the event source mapping
builds it.

Receive with ``MessageSystemAttributeNames=["All"]`` (or ``AttributeNames=["All"]``) and
``MessageAttributeNames=["All"]`` so each record carries MessageGroupId, SequenceNumber,
ApproximateReceiveCount...
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any


def lambda_sqs_record(message: dict[str, Any], queue_arn: str, region: str | None = None) -> dict[str, Any]:
    """One record of the event for one message of ``receive_message(...)["Messages"]``."""
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": {
            name: _attribute(value) for name, value in (message.get("MessageAttributes") or {}).items()
        },
        "md5OfBody": message["MD5OfBody"],
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    record["eventSource"] = "aws:sqs"
    record["eventSourceARN"] = queue_arn
    record["awsRegion"] = region or queue_arn.split(":")[3]
    return record


def lambda_sqs_event(
    messages: Iterable[dict[str, Any]], queue_arn: str, region: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """``{"Records": [...]}`` as Lambda passes it to the handler; ``region`` defaults to the ARN's."""
    return {"Records": [lambda_sqs_record(m, queue_arn, region) for m in messages]}


def _attribute(value: dict[str, Any]) -> dict[str, Any]:
    # Lambda uses camelCase, lists always present, binary values base64-encoded.
    attribute: dict[str, Any] = {
        "stringListValues": list(value.get("StringListValues") or []),
        "binaryListValues": [_b64(v) for v in value.get("BinaryListValues") or []],
        "dataType": value["DataType"],
    }
    if "StringValue" in value:
        attribute["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        attribute["binaryValue"] = _b64(value["BinaryValue"])
    return attribute


def _b64(raw: bytes | str) -> str:
    return base64.b64encode(raw if isinstance(raw, bytes) else raw.encode("utf-8")).decode("ascii")
