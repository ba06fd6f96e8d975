"""Helpers for the outbox and relay tests: the table's stream as Lambda hands it to the relay, downstream
targets, and stub publishers that fail on purpose."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

import boto3
from runtime_helpers import REGION, TABLE

TARGET_TOPIC = "payments.fifo"
TARGET_QUEUE = "payments-in.fifo"


class Stream:
    """The table's DynamoDB stream (moto records it in-process): ``new()`` gives the records written since
    the last call, in Lambda's DynamoDB event shape (``B`` in base64, times in epoch seconds)."""

    def __init__(self, dynamodb: Any, table: str = TABLE, key_prefix: str = "") -> None:
        dynamodb.update_table(
            TableName=table, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
        )
        self.arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        self.seen = 0
        self.key_prefix = key_prefix

    def _records(self) -> list[dict[str, Any]]:
        from moto.dynamodbstreams.models import dynamodbstreams_backends

        backend = dynamodbstreams_backends["123456789012"][REGION]
        shard = backend.describe_stream(self.arn)["Shards"][0]["ShardId"]
        iterator = backend.get_shard_iterator(self.arn, shard, "TRIM_HORIZON", None)
        return backend.get_records(iterator.arn, 10_000)["Records"]

    def new(self, outbox_only: bool = True) -> list[dict[str, Any]]:
        records = self._records()
        fresh, self.seen = records[self.seen :], len(records)
        lambda_records = [lambda_record(r, self.arn) for r in fresh]
        if outbox_only:  # what the relay's event filter lets through
            lambda_records = [r for r in lambda_records if is_outbox(r, self.key_prefix)]
        return lambda_records


def is_outbox(record: dict[str, Any], key_prefix: str = "") -> bool:
    """Whether the relay of ``key_prefix``'s outbox gets ``record``: its event filter, applied as the local
    cloud applies it."""
    from idempotent_runtime.outbox import stream_filters

    from idempotent_local.event_filter import matches

    return matches([json.dumps(f) for f in stream_filters("pk", "sk", key_prefix)], record)


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A stream record as Lambda's event source mapping delivers it."""

    def wire(value: Any) -> Any:
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        if isinstance(value, datetime.datetime):
            return value.replace(tzinfo=datetime.UTC).timestamp()
        if isinstance(value, dict):
            return {k: wire(v) for k, v in value.items()}
        if isinstance(value, list):
            return [wire(v) for v in value]
        return value

    converted = wire(record)
    converted["eventSourceARN"] = stream_arn
    return json.loads(json.dumps(converted))


def stream_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}


def fifo_target(sqs: Any) -> tuple[str, str, str]:
    """A FIFO topic with a FIFO queue subscribed (raw delivery): (topic ARN, queue URL, queue ARN)."""
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name=TARGET_TOPIC, Attributes={"FifoTopic": "true"})["TopicArn"]
    url = sqs.create_queue(QueueName=TARGET_QUEUE, Attributes={"FifoQueue": "true"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    return topic, url, arn


class FlakyPublisher:
    """An SNS (or SQS) client that answers chosen entries of chosen requests as failed, passing the rest to
    the real client: ``refuse[n] = {entry index: (code, sender_fault)}`` for the n-th request (0-based)."""

    def __init__(self, client: Any, refuse: dict[int, dict[int, tuple[str, bool]]] | None = None) -> None:
        self.client = client
        self.meta = client.meta
        self.refuse = refuse or {}
        self.requests: list[list[dict[str, Any]]] = []

    def publish_batch(self, TopicArn: str, PublishBatchRequestEntries: list[dict[str, Any]]) -> dict:
        return self._batch(
            PublishBatchRequestEntries,
            lambda entries: self.client.publish_batch(TopicArn=TopicArn, PublishBatchRequestEntries=entries),
        )

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict:
        return self._batch(
            Entries, lambda entries: self.client.send_message_batch(QueueUrl=QueueUrl, Entries=entries)
        )

    def _batch(self, entries: list[dict[str, Any]], send: Any) -> dict:
        refused = self.refuse.get(len(self.requests), {})
        self.requests.append(entries)
        passing = [entry for position, entry in enumerate(entries) if position not in refused]
        response = send(passing) if passing else {"Successful": [], "Failed": []}
        failed = [
            {"Id": entries[position]["Id"], "Code": code, "Message": "injected", "SenderFault": fault}
            for position, (code, fault) in refused.items()
        ]
        return {"Successful": response.get("Successful", []), "Failed": response.get("Failed", []) + failed}


class StrictSqs:
    """An SQS client that refuses what SQS refuses and moto takes: a body or a string attribute value with a
    character outside SQS's set (InvalidMessageContents), as SendMessage and SendMessageBatch (per entry)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.meta = client.meta
        self.refused: list[str] = []

    @staticmethod
    def _bad(body: str, attributes: dict[str, Any] | None) -> bool:
        from idempotent_runtime.outbox import refused_character

        texts = [body, *(v.get("StringValue") or "" for v in (attributes or {}).values())]
        return any(refused_character(text) is not None for text in texts)

    def send_message(self, **request: Any) -> dict:
        from botocore.exceptions import ClientError

        if self._bad(request["MessageBody"], request.get("MessageAttributes")):
            self.refused.append(request["MessageBody"])
            error = {
                "Code": "InvalidMessageContents",
                "Message": "Invalid characters found",
                "Type": "Sender",
            }
            raise ClientError({"Error": error}, "SendMessage")
        return self.client.send_message(**request)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict:
        bad = [e for e in Entries if self._bad(e["MessageBody"], e.get("MessageAttributes"))]
        good = [e for e in Entries if e not in bad]
        self.refused += [e["MessageBody"] for e in bad]
        response = self.client.send_message_batch(QueueUrl=QueueUrl, Entries=good) if good else {}
        failed = [
            {
                "Id": e["Id"],
                "Code": "InvalidMessageContents",
                "Message": "Invalid characters",
                "SenderFault": True,
            }
            for e in bad
        ]
        return {"Successful": response.get("Successful", []), "Failed": response.get("Failed", []) + failed}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)
