"""A DynamoDB table with a stream, a queue for discarded batches and a function that records what it receives,
deployed as a code zip into the emulator: the stream mapping tests' deployment."""

from __future__ import annotations

import io
import json
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idempotent_local.emulator import Emulator
from idempotent_local.runner import EventSourceRunner, StreamMapping

# Writes each invocation's event to $OUT (one JSON line), then acts on each record's `mode` attribute:
# "raise" fails the whole batch, "fail" reports the record as a batch item failure, "fail-once" does so
# the first time the function sees the record only.
PROBE = textwrap.dedent(
    """
    import json
    import os

    OUT = os.environ["OUT"]


    def handler(event, context):
        records = event["Records"]
        seen = []
        if os.path.exists(OUT):
            with open(OUT) as log:
                seen = [r["eventID"] for line in log for r in json.loads(line)["records"]]
        with open(OUT, "a") as log:
            log.write(json.dumps({"request_id": context.aws_request_id, "records": records}) + "\\n")
        failures = []
        for record in records:
            image = record["dynamodb"].get("NewImage", {})
            mode = image.get("mode", {}).get("S", "ok")
            if mode == "raise":
                raise RuntimeError("poison " + record["dynamodb"]["Keys"]["pk"]["S"])
            if mode == "fail" or (mode == "fail-once" and record["eventID"] not in seen):
                failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
        return {"batchItemFailures": failures}
    """
)
OUTBOX_ONLY = json.dumps({"dynamodb": {"NewImage": {"kind": {"S": ["outbox"]}}}})


def zip_of(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@dataclass
class Deployed:
    emulator: Emulator
    table: str
    stream_arn: str
    out: Path
    on_failure_url: str

    def put(self, key: str, kind: str = "outbox", mode: str = "ok") -> None:
        item = {"pk": {"S": key}, "kind": {"S": kind}, "mode": {"S": mode}}
        self.emulator.client("dynamodb").put_item(TableName=self.table, Item=item)

    def invocations(self) -> list[list[str]]:
        """The keys of the records of each invocation, in order."""
        if not self.out.exists():
            return []
        lines = [json.loads(line) for line in self.out.read_text().splitlines()]
        return [[r["dynamodb"]["Keys"]["pk"]["S"] for r in line["records"]] for line in lines]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.read_text().splitlines()] if self.out.exists() else []

    def on_failure(self) -> list[dict[str, Any]]:
        received = self.emulator.client("sqs").receive_message(
            QueueUrl=self.on_failure_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        )
        return [json.loads(m["Body"]) for m in received.get("Messages", [])]

    def mapping(self, runner: EventSourceRunner) -> StreamMapping:
        (mapping,) = runner.mappings()
        assert isinstance(mapping, StreamMapping)
        return mapping

    def shard_id(self) -> str:
        described = self.emulator.client("dynamodbstreams").describe_stream(StreamArn=self.stream_arn)
        return str(described["StreamDescription"]["Shards"][0]["ShardId"])

    def runner(self, **kwargs: Any) -> EventSourceRunner:
        return EventSourceRunner(self.emulator, retry_delay=0, **kwargs)


def deploy(
    emulator: Emulator, out: Path, code: str = PROBE, *, mapping: bool = True, **settings: Any
) -> Deployed:
    """A table with a NEW_AND_OLD_IMAGES stream, a queue for discarded batches, the function, and (unless
    ``mapping`` is False) its stream mapping from TRIM_HORIZON with ``settings`` (FilterCriteria, ...)."""
    dynamodb, sqs, s3, lambda_ = (emulator.client(s) for s in ("dynamodb", "sqs", "s3", "lambda"))
    stream_arn = dynamodb.create_table(
        TableName="outbox",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    on_failure = sqs.create_queue(QueueName="stream-failures")["QueueUrl"]
    s3.create_bucket(Bucket="assets")
    s3.put_object(Bucket="assets", Key="relay.zip", Body=zip_of({"relay.py": code}))
    role = emulator.client("iam").create_role(RoleName="relay", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lambda_.create_function(
        FunctionName="relay",
        Runtime="python3.12",
        Role=role,
        Handler="relay.handler",
        Timeout=10,
        Code={"S3Bucket": "assets", "S3Key": "relay.zip"},
        Environment={"Variables": {"OUT": str(out)}},
    )
    deployed = Deployed(emulator, "outbox", stream_arn, out, on_failure)
    if mapping:
        map_stream(deployed, **settings)
    return deployed


def map_stream(deployed: Deployed, **settings: Any) -> None:
    queue_arn = deployed.emulator.client("sqs").get_queue_attributes(
        QueueUrl=deployed.on_failure_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    deployed.emulator.client("lambda").create_event_source_mapping(
        **{
            "EventSourceArn": deployed.stream_arn,
            "FunctionName": "relay",
            "StartingPosition": "TRIM_HORIZON",
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "DestinationConfig": {"OnFailure": {"Destination": queue_arn}},
            **settings,
        }
    )
