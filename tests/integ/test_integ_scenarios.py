"""Each integration test's scenario, run through the runtime on moto: what a deployed test waits for (the
items and dead letters of ``integ/integ_*.py``) is what the runtime does with the messages it publishes.

The function's settings come from the committed snapshot's template (test_integ_snapshots.py keeps it equal
to the app), the messages go through the SNS topic and the SQS queue the template describes, the batches
are handled as Lambda's event source mapping does (failed records come back, the others are deleted).
What a deployment adds — IAM, KMS, SNS's and Lambda's own behaviour — only a real account shows
(``make integ``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from moto import mock_aws

from idempotent_local.events import lambda_sqs_event

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "integ"))

import harness  # noqa: E402  (integ/ on the path first)
from steps import Scenario, get_item_parameters, publish_parameters  # noqa: E402

REGION = "us-east-1"
RUNTIME_HANDLER = "idempotent_runtime.handler.handler"


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


def stack_resources(app: Path) -> dict[str, dict[str, Any]]:
    snapshot = harness.snapshot_dir(app)
    (stack,) = next(iter(json.loads((snapshot / "integ.json").read_text())["testCases"].values()))["stacks"]
    return json.loads((snapshot / f"{stack}.template.json").read_text())["Resources"]


def only(resources: dict[str, dict[str, Any]], type_: str) -> dict[str, Any]:
    (found,) = [r.get("Properties", {}) for r in resources.values() if r["Type"] == type_]
    return found


class Pipeline:
    """The test stack's topic, queue, dead-letter queue, table and function, on moto."""

    def __init__(self, resources: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
        function = only(resources, "AWS::Lambda::Function")
        assert function["Handler"] == RUNTIME_HANDLER
        environment = dict(function["Environment"]["Variables"])
        topic = only(resources, "AWS::SNS::Topic")
        self.fifo = bool(topic.get("FifoTopic"))
        suffix = ".fifo" if self.fifo else ""
        self.sns, self.sqs, self.dynamodb = (
            boto3.client(s, region_name=REGION) for s in ("sns", "sqs", "dynamodb")
        )

        mapping = only(resources, "AWS::Lambda::EventSourceMapping")
        self.batch_size = mapping.get("BatchSize", 10)
        queue = resources[mapping["EventSourceArn"]["Fn::GetAtt"][0]].get("Properties", {})
        queue_attributes = {
            name: str(queue[name]).lower()
            for name in ("FifoQueue", "ContentBasedDeduplication")
            if name in queue
        }
        self.queue = self.sqs.create_queue(QueueName=f"queue{suffix}", Attributes=queue_attributes)[
            "QueueUrl"
        ]
        dead_letter_attributes = {"FifoQueue": "true"} if self.fifo else {}
        self.dead_letters = self.sqs.create_queue(
            QueueName=f"dlq{suffix}", Attributes=dead_letter_attributes
        )["QueueUrl"]
        self.queue_arn = self.sqs.get_queue_attributes(QueueUrl=self.queue, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        topic_attributes = {
            name: str(topic[name]).lower()
            for name in ("FifoTopic", "ContentBasedDeduplication")
            if name in topic
        }
        self.topic = self.sns.create_topic(Name=f"topic{suffix}", Attributes=topic_attributes)["TopicArn"]
        self.sns.subscribe(
            TopicArn=self.topic,
            Protocol="sqs",
            Endpoint=self.queue_arn,
            Attributes={"RawMessageDelivery": "true"},
        )
        self.table = "integ"
        keys = [environment["PARTITION_KEY"], environment["SORT_KEY"]]
        self.dynamodb.create_table(
            TableName=self.table,
            KeySchema=[
                {"AttributeName": keys[0], "KeyType": "HASH"},
                {"AttributeName": keys[1], "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
            BillingMode="PAY_PER_REQUEST",
        )
        environment.update(TABLE_NAME=self.table, DLQ_URL=self.dead_letters)
        unresolved = {name: value for name, value in environment.items() if not isinstance(value, str)}
        assert not unresolved, f"deploy-time values this test cannot stand in for: {unresolved}"
        for name, value in environment.items():  # a processor may read them, as in Lambda
            monkeypatch.setenv(name, value)
        self.handler = build_handler(Config.from_env(environment))

    def publish(self, scenario_messages: Any) -> None:
        for message in scenario_messages:
            self.sns.publish(**publish_parameters(self.topic, message))

    def drain(self) -> None:
        """Hand the queue's messages to the handler as the event source mapping does, until it is empty."""
        for _ in range(20):
            messages = self.sqs.receive_message(
                QueueUrl=self.queue,
                MaxNumberOfMessages=self.batch_size,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                return
            reply = self.handler(lambda_sqs_event(messages, self.queue_arn), None)
            failed = {failure["itemIdentifier"] for failure in reply["batchItemFailures"]}
            assert not failed, f"records failed (every scenario message has an outcome at once): {reply}"
            for message in messages:
                self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=message["ReceiptHandle"])
        raise AssertionError("the queue did not empty")

    def item(self, item: Any) -> dict[str, Any]:
        return self.dynamodb.get_item(**get_item_parameters(self.table, item)).get("Item", {})

    def received_dead_letters(self) -> list[dict[str, Any]]:
        letters: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=self.dead_letters,
            MaxNumberOfMessages=10,
            VisibilityTimeout=60,
            MessageAttributeNames=["All"],
        ).get("Messages", []):
            letters.extend(batch)
        return letters


def assert_items(pipeline: Pipeline, scenario: Scenario) -> None:
    for item in scenario.items:
        stored = pipeline.item(item)
        expected = {name: {"S": value} for name, value in item.key.items()} | dict(item.attributes)
        assert {name: stored.get(name) for name in expected} == expected, stored


def assert_dead_letters(pipeline: Pipeline, scenario: Scenario) -> None:
    received = pipeline.received_dead_letters()
    assert len(received) == len(scenario.dead_letters), [m["Body"] for m in received]
    for letter in scenario.dead_letters:
        (message,) = [m for m in received if m["Body"] == letter.body]
        attributes = message["MessageAttributes"]
        reason = attributes["idempotency.reason"]["StringValue"]
        details = json.loads(attributes["idempotency.details"]["StringValue"])
        assert re.search(letter.reason, reason), reason
        assert {name: details.get(name) for name in letter.details} == dict(letter.details), details


@pytest.mark.parametrize("app", harness.APPS, ids=lambda app: app.stem)
def test_the_runtime_does_with_the_scenario_what_the_integration_test_expects(app, monkeypatch):
    scenario = harness.load(app).SCENARIO
    pipeline = Pipeline(stack_resources(app), monkeypatch)

    pipeline.publish(scenario.first)
    pipeline.drain()
    assert_items(pipeline, scenario)

    pipeline.publish(scenario.then)
    pipeline.drain()
    assert_dead_letters(pipeline, scenario)
    assert_items(pipeline, scenario)  # the duplicates and the conflict changed nothing
