"""What emitting costs: DynamoDB write units the outbox adds to the consumer's transaction, and the relay's
requests per emitted message. moto in-process: an orders consumer in transaction mode (one write and one
emit per message, 10-message batches over 10 groups), the table's stream read as Lambda hands it to the
relay in 10-record batches, a FIFO topic as the target."""

from __future__ import annotations

import base64
import datetime
import io
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

REGION = "us-east-1"
TABLE = "orders"
TOPIC = "payments.fifo"
MESSAGES = 100
STREAM_BATCH = 10
# DynamoDB: a transactional write of an item costs 2 write units per KB (rounded up) of the item.
TRANSACTIONAL_UNITS_PER_KB = 2


@dataclass
class OutboxCost:
    emitted: int
    outbox_write_units: int  # the outbox items' Puts in the consumer's transactions
    transaction_write_units: int  # the processor's writes and the marker, as without emitting
    relay_publish_requests: int
    relay_dynamodb_requests: int
    published: int

    @property
    def write_units_per_emit(self) -> float:
        return self.outbox_write_units / self.emitted

    @property
    def publish_requests_per_emit(self) -> float:
        return self.relay_publish_requests / self.emitted

    @property
    def relay_dynamodb_per_emit(self) -> float:
        return self.relay_dynamodb_requests / self.emitted


def _order(message: Any) -> list[dict[str, Any]]:
    line = message.json_object()
    message.emit({"order": line["x"], "line": line["y"], "cents": 250})
    item = {"pk": {"S": f"order#{line['x']}"}, "sk": {"S": f"line#{line['y']}"}, "cents": {"N": "250"}}
    return [{"Put": {"Item": item}}]


def _record(order: str, group: str) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": "rh",
        "body": json.dumps({"x": order, "y": "1"}),
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1700000000000",
            "MessageGroupId": group,
            "MessageDeduplicationId": uuid.uuid4().hex,
            "SequenceNumber": "1",
        },
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:orders.fifo",
        "awsRegion": REGION,
    }


def _wire(value: Any) -> Any:
    """A stream record as Lambda delivers it (bytes in base64, times in epoch seconds)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=datetime.UTC).timestamp()
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def _stream_records(dynamodb: Any) -> list[dict[str, Any]]:
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    backend = dynamodbstreams_backends["123456789012"][REGION]
    shard = backend.describe_stream(arn)["Shards"][0]["ShardId"]
    iterator = backend.get_shard_iterator(arn, shard, "TRIM_HORIZON", None)
    return [_wire(r) for r in backend.get_records(iterator.arn, 10_000)["Records"]]


def _transactional_units(item: dict[str, Any]) -> int:
    from idempotent_runtime.attributes import item_size

    return TRANSACTIONAL_UNITS_PER_KB * max(1, math.ceil(item_size(item) / 1024))


def measure() -> OutboxCost:
    import boto3
    from idempotent_runtime.config import Config
    from idempotent_runtime.contract import Mode
    from idempotent_runtime.flow import build_handler
    from idempotent_runtime.outbox import OUTBOX_PARTITION_PREFIX
    from idempotent_runtime.relay import Relay, RelayConfig
    from moto import mock_aws

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        sns = boto3.client("sns", region_name=REGION)
        topic = sns.create_topic(Name=TOPIC, Attributes={"FifoTopic": "true"})["TopicArn"]
        units = {"outbox": 0, "transaction": 0}

        def count_units(params: dict[str, Any], **_: Any) -> None:
            for entry in params.get("TransactItems", []):
                ((_, body),) = entry.items()
                item = body.get("Item") or body.get("Key") or {}
                outbox = item.get("pk", {}).get("S", "").startswith(OUTBOX_PARTITION_PREFIX)
                units["outbox" if outbox else "transaction"] += _transactional_units(item)

        dynamodb.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", count_units)
        handler = build_handler(
            # One group at a time: moto's in-process stream is not safe across threads.
            Config(table_name=TABLE, mode=Mode.TRANSACTION, emit_target_arn=topic, max_workers=1),
            dynamodb_client=dynamodb,
            processor=_order,
            log_stream=io.StringIO(),
        )
        for start in range(0, MESSAGES, 10):
            batch = [_record(f"o-{n}", f"g-{n % 10}") for n in range(start, start + 10)]
            assert handler({"Records": batch}, None) == {"batchItemFailures": []}
        # What the relay's event filter lets through: writes of outbox items.
        records = [
            r
            for r in _stream_records(dynamodb)
            if r["eventName"] in ("INSERT", "MODIFY")
            and r["dynamodb"]["Keys"]["pk"]["S"].startswith(OUTBOX_PARTITION_PREFIX)
        ]
        calls = {"publish": 0, "entries": 0, "dynamodb": 0}

        def count_publish(params: dict[str, Any], **_: Any) -> None:
            calls["publish"] += 1
            calls["entries"] += len(params["PublishBatchRequestEntries"])

        def count_dynamodb(**_: Any) -> None:
            calls["dynamodb"] += 1

        sns.meta.events.register("provide-client-params.sns.PublishBatch", count_publish)
        # Every client made meanwhile (the relay makes its own lazily) reports its DynamoDB requests.
        previous = boto3.DEFAULT_SESSION
        boto3.setup_default_session()
        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("before-send.dynamodb.*", count_dynamodb)
        dynamodb.meta.events.register("before-send.dynamodb.*", count_dynamodb)
        try:
            relay = Relay(RelayConfig(target_arn=topic), target_client=sns, log_stream=io.StringIO())
            for start in range(0, len(records), STREAM_BATCH):
                response = relay({"Records": records[start : start + STREAM_BATCH]})
                assert response == {"batchItemFailures": []}, response
        finally:
            boto3.DEFAULT_SESSION = previous
        return OutboxCost(
            emitted=MESSAGES,
            outbox_write_units=units["outbox"],
            transaction_write_units=units["transaction"],
            relay_publish_requests=calls["publish"],
            relay_dynamodb_requests=calls["dynamodb"],
            published=calls["entries"],
        )
