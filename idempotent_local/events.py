"""What Lambda's event source mappings send, field for field as they build it: the SQS event from
``sqs.receive_message`` output, the DynamoDB stream event from ``dynamodbstreams.get_records`` output, and
the invocation record a stream mapping sends to its on-failure destination when it discards a batch.

Receive with ``MessageSystemAttributeNames=["All"]`` (or ``AttributeNames=["All"]``) and
``MessageAttributeNames=["All"]`` so each SQS record carries MessageGroupId, SequenceNumber,
ApproximateReceiveCount...
"""

from __future__ import annotations

import base64
import datetime
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


def lambda_dynamodb_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """One record of the event for one record of ``get_records(...)["Records"]`` (as boto3 parses it)."""
    dynamodb = {name: _wire(value) for name, value in record["dynamodb"].items()}
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime.datetime):
        dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())  # epoch seconds, as Lambda sends
    lambda_record: dict[str, Any] = {
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "eventVersion": record["eventVersion"],
        "eventSource": "aws:dynamodb",
        "awsRegion": stream_arn.split(":")[3],
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }
    identity = record.get("userIdentity")
    if identity:  # a deletion by TTL: Lambda's lower-case keys
        lambda_record["userIdentity"] = {
            "type": identity.get("Type"),
            "principalId": identity.get("PrincipalId"),
        }
    return lambda_record


def lambda_dynamodb_event(
    records: Iterable[dict[str, Any]], stream_arn: str
) -> dict[str, list[dict[str, Any]]]:
    """``{"Records": [...]}`` as Lambda passes a DynamoDB stream batch to the handler."""
    return {"Records": [lambda_dynamodb_record(r, stream_arn) for r in records]}


def stream_invocation_record(
    records: list[dict[str, Any]],
    *,
    shard_id: str,
    condition: str,
    function_arn: str,
    invocations: int,
    request_id: str,
    function_error: str | None,
    at: datetime.datetime,
) -> dict[str, Any]:
    """What a DynamoDB stream mapping sends its ``OnFailure`` destination for the discarded ``records``
    (Lambda records, in order): where they are in the stream, not the records. ``condition`` is
    ``RetryAttemptsExhausted`` or ``RecordAgeExceeded``; ``invocations`` the function's attempts on them
    (``responseContext`` describes the last one, when there was one)."""
    first, last = records[0], records[-1]
    invocation: dict[str, Any] = {
        "requestContext": {
            "requestId": request_id,
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invocations,
        }
    }
    if invocations:
        response = {"statusCode": 200, "executedVersion": "$LATEST"}
        invocation["responseContext"] = response | (
            {"functionError": function_error} if function_error else {}
        )
    return invocation | {
        "version": "1.0",
        "timestamp": _iso(at, "milliseconds"),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": first["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": last["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": _arrival(first),
            "approximateArrivalOfLastRecord": _arrival(last),
            "batchSize": len(records),
            "streamArn": first["eventSourceARN"],
        },
    }


def _iso(moment: datetime.datetime, timespec: str) -> str:
    return moment.astimezone(datetime.UTC).replace(tzinfo=None).isoformat(timespec=timespec) + "Z"


def _arrival(record: dict[str, Any]) -> str:
    seconds = record["dynamodb"]["ApproximateCreationDateTime"]
    return _iso(datetime.datetime.fromtimestamp(seconds, datetime.UTC), "seconds")


def _wire(value: Any) -> Any:
    """An attribute value as it travels in JSON: boto3 hands binary (``B``, ``BS``) out as bytes; Lambda's
    event carries it base64-encoded."""
    if isinstance(value, bytes | bytearray):
        return _b64(bytes(value))
    if isinstance(value, dict):
        return {name: _wire(item) for name, item in value.items()}
    if isinstance(value, list | set):
        return [_wire(item) for item in value]
    return value
