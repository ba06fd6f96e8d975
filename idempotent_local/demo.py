"""The demo: publish at-least-once traffic through a deployed pipeline and account for every message.

A pipeline is found from what is deployed, not from names: an SQS event source mapping gives the queue and
the function, the topic is the one with a subscription to that queue, the table is the function's
``TABLE_NAME``, the dead-letter queue is the queue's redrive target. The sample traffic (one run, tagged
with a fresh run id so earlier runs do not count):

- a burst across several message groups, each message with its own business key (``x``, ``y``);
- duplicates within the deduplication window: some of those messages published again with the same
  deduplication id (a producer retry) — SNS/SQS FIFO drops them;
- the same business keys published again with new content and a new deduplication id, as a producer
  would after the 5-minute window — they are delivered, and the runtime must absorb them;
- one poison message (not JSON) — it must end in the dead-letter queue with a reason.

The report is data (:class:`Report`); :meth:`Report.render` prints it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from idempotent_local.emulator import Emulator
from idempotent_local.runner import EventSourceRunner, Mapping

RETRY_DELAY_SECONDS = 1


class DemoError(RuntimeError):
    """The demo cannot run against what is deployed."""


@dataclass(frozen=True)
class Pipeline:
    """The deployed resources of one pipeline, as found in the emulator."""

    mapping: Mapping
    topic_arn: str
    table_name: str
    partition_key: str
    sort_key: str
    partition_key_field: str
    sort_key_field: str
    key_source: str
    dead_letter_queue_url: str | None


@dataclass
class DeadLetter:
    message_id: str
    group_id: str | None
    body: str
    reason: str


@dataclass
class Report:
    """Every published message accounted for. ``balanced`` says the numbers add up."""

    function: str
    run_id: str
    published: int
    deduplicated_by_fifo: int
    delivered: int
    deliveries: int
    items_written: int
    duplicates_absorbed: int
    dead_lettered: int
    dead_letters: list[DeadLetter] = field(default_factory=list)
    missing_keys: list[list[str]] = field(default_factory=list)
    function_metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def balanced(self) -> bool:
        return (
            self.published == self.delivered + self.deduplicated_by_fifo
            and self.delivered == self.items_written + self.duplicates_absorbed + self.dead_lettered
            and not self.missing_keys
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "balanced": self.balanced}

    def render(self) -> str:
        lines = [
            f"pipeline {self.function} (run {self.run_id}, {self.seconds:.1f} s)",
            f"  published to the topic          {self.published:4d}",
            f"  dropped by FIFO deduplication   {self.deduplicated_by_fifo:4d}   (same id within 5 min)",
            f"  delivered to the function       {self.delivered:4d}   ({self.deliveries} deliveries)",
            f"  items in the table              {self.items_written:4d}",
            f"  duplicates absorbed             {self.duplicates_absorbed:4d}   (same key, new content)",
            f"  in the dead-letter queue        {self.dead_lettered:4d}",
        ]
        for letter in self.dead_letters:
            lines.append(f"    - {letter.body[:40]!r} (group {letter.group_id}): {letter.reason}")
        if self.function_metrics:
            metrics = ", ".join(f"{k}={v:g}" for k, v in sorted(self.function_metrics.items()))
            lines.append(f"  the function's own metrics      {metrics}")
        if self.missing_keys:
            lines.append(f"  MISSING business keys           {self.missing_keys}")
        verdict = "nothing lost, nothing doubled" if self.balanced else "THE NUMBERS DO NOT ADD UP"
        lines.append(
            f"  delivered = items + absorbed + dead letters: {self.delivered} = {self.items_written} + "
            f"{self.duplicates_absorbed} + {self.dead_lettered}: {verdict}"
        )
        return "\n".join(lines)


def find_pipelines(emulator: Emulator, runner: EventSourceRunner) -> list[Pipeline]:
    """Every SQS-mapped function whose queue is subscribed to a topic and whose environment names a table."""
    sns, sqs, lambda_ = emulator.client("sns"), emulator.client("sqs"), emulator.client("lambda")
    dynamodb = emulator.client("dynamodb")
    subscriptions = [
        s for page in sns.get_paginator("list_subscriptions").paginate() for s in page["Subscriptions"]
    ]
    pipelines = []
    for mapping in runner.mappings():
        topics = [
            s["TopicArn"]
            for s in subscriptions
            if s["Protocol"] == "sqs" and s["Endpoint"] == mapping.queue_arn
        ]
        env = lambda_.get_function_configuration(FunctionName=mapping.function_arn).get("Environment", {})
        variables = env.get("Variables", {})
        if not topics or "TABLE_NAME" not in variables:
            continue
        schema = dynamodb.describe_table(TableName=variables["TABLE_NAME"])["Table"]["KeySchema"]
        keys = {k["KeyType"]: k["AttributeName"] for k in schema}
        redrive = sqs.get_queue_attributes(QueueUrl=mapping.queue_url, AttributeNames=["RedrivePolicy"])
        dlq_url = variables.get("DLQ_URL")
        if not dlq_url and "RedrivePolicy" in redrive.get("Attributes", {}):
            target = json.loads(redrive["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"]
            dlq_url = sqs.get_queue_url(QueueName=target.rsplit(":", 1)[-1])["QueueUrl"]
        pipelines.append(
            Pipeline(
                mapping=mapping,
                topic_arn=topics[0],
                table_name=variables["TABLE_NAME"],
                partition_key=keys["HASH"],
                sort_key=keys.get("RANGE", ""),
                partition_key_field=variables.get("PARTITION_KEY_FIELD", "x"),
                sort_key_field=variables.get("SORT_KEY_FIELD", "y"),
                key_source=variables.get("KEY_SOURCE", "fields"),
                dead_letter_queue_url=dlq_url,
            )
        )
    return pipelines


@dataclass
class _Traffic:
    run_id: str
    published: int = 0
    keys: set[tuple[str, str]] = field(default_factory=set)
    poison: int = 0


def publish_sample(
    emulator: Emulator,
    pipeline: Pipeline,
    *,
    groups: int = 4,
    per_group: int = 5,
    retried: int = 5,
    republished: int = 3,
) -> _Traffic:
    """Publish the sample traffic described in the module docstring; returns what was sent."""
    sns = emulator.client("sns")
    traffic = _Traffic(run_id=uuid.uuid4().hex[:8])
    sent: list[dict[str, Any]] = []

    def publish(body: str, group: str, dedup_id: str) -> None:
        sns.publish(
            TopicArn=pipeline.topic_arn,
            Message=body,
            MessageGroupId=group,
            MessageDeduplicationId=dedup_id,
            MessageAttributes={"run": {"DataType": "String", "StringValue": traffic.run_id}},
        )
        traffic.published += 1

    for n in range(groups * per_group):
        group = f"demo-{traffic.run_id}-g{n % groups}"
        x, y = str(uuid.uuid4()), str(uuid.uuid4())
        body = json.dumps(
            {pipeline.partition_key_field: x, pipeline.sort_key_field: y, "amount": n, "run": traffic.run_id}
        )
        message = {"body": body, "group": group, "dedup_id": f"{x}#{y}", "x": x, "y": y}
        publish(body, group, message["dedup_id"])
        traffic.keys.add((x, y))
        sent.append(message)
    for message in sent[:retried]:  # a producer retry: same message, same deduplication id
        publish(message["body"], message["group"], message["dedup_id"])
    for n, message in enumerate(sent[-republished:]):  # the same business key after the window, new content
        body = json.dumps(
            {
                pipeline.partition_key_field: message["x"],
                pipeline.sort_key_field: message["y"],
                "amount": 1000 + n,
                "run": traffic.run_id,
                "revision": 2,
            }
        )
        publish(body, message["group"], f"{message['dedup_id']}#revision-2")
    publish(
        f"this is not JSON (run {traffic.run_id})",
        f"demo-{traffic.run_id}-poison",
        f"poison-{traffic.run_id}",
    )
    traffic.poison = 1
    return traffic


def _items_of_run(emulator: Emulator, pipeline: Pipeline, keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
    dynamodb = emulator.client("dynamodb")
    found: set[tuple[str, str]] = set()
    wanted = sorted(keys)
    for start in range(0, len(wanted), 100):
        request = {
            pipeline.table_name: {
                "Keys": [
                    {pipeline.partition_key: {"S": x}, pipeline.sort_key: {"S": y}}
                    for x, y in wanted[start : start + 100]
                ]
            }
        }
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(pipeline.table_name, []):
                found.add((item[pipeline.partition_key]["S"], item[pipeline.sort_key]["S"]))
            request = response.get("UnprocessedKeys") or {}
    return found


def _dead_letters(emulator: Emulator, pipeline: Pipeline, run_id: str) -> list[DeadLetter]:
    """This run's messages in the dead-letter queue, left there (made visible again) for the operator."""
    if not pipeline.dead_letter_queue_url:
        return []
    sqs = emulator.client("sqs")
    url = pipeline.dead_letter_queue_url
    received: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=30,
            WaitTimeSeconds=0,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            break
        received += messages
    for start in range(0, len(received), 10):
        sqs.change_message_visibility_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(received[start : start + 10])
            ],
        )
    letters = []
    seen = set()
    for message in received:
        group = message.get("Attributes", {}).get("MessageGroupId")
        if message["MessageId"] in seen or not (group or "").startswith(f"demo-{run_id}"):
            continue
        seen.add(message["MessageId"])
        attributes = message.get("MessageAttributes", {})
        reason = attributes.get("reason", {}).get("StringValue") or (
            f"redriven after {message.get('Attributes', {}).get('ApproximateReceiveCount', '?')} receives "
            "(maxReceiveCount reached)"
        )
        letters.append(
            DeadLetter(
                message_id=message["MessageId"], group_id=group, body=message.get("Body", ""), reason=reason
            )
        )
    return letters


def run_demo(
    emulator: Emulator,
    *,
    pipeline: Pipeline | None = None,
    retry_delay: int = RETRY_DELAY_SECONDS,
    timeout: float = 180.0,
) -> Report:
    """Publish the sample traffic to one pipeline (the first found), drain it through the runner, report."""
    started = time.monotonic()
    with EventSourceRunner(emulator, retry_delay=retry_delay) as runner:
        if pipeline is None:
            pipelines = find_pipelines(emulator, runner)
            if not pipelines:
                raise DemoError(
                    "no pipeline deployed: found no SQS event source mapping whose queue is subscribed to a "
                    "topic and whose function has TABLE_NAME; deploy first"
                )
            pipeline = pipelines[0]
        if pipeline.key_source != "fields":
            raise DemoError(
                f"the demo needs KEY_SOURCE=fields, the function has KEY_SOURCE={pipeline.key_source!r}"
            )
        # Earlier traffic (a previous run, a user's messages) is drained first so it does not count.
        runner.drain(timeout=timeout, mappings=[pipeline.mapping])
    # A fresh runner, so nothing of the earlier traffic (its log lines included) is counted.
    with EventSourceRunner(emulator, retry_delay=retry_delay) as runner:
        traffic = publish_sample(emulator, pipeline)
        stats = runner.drain(timeout=timeout, mappings=[pipeline.mapping])
    written = _items_of_run(emulator, pipeline, traffic.keys)
    letters = _dead_letters(emulator, pipeline, traffic.run_id)
    metrics = dict(stats.metrics)
    # The function counts the duplicates it absorbed (Embedded Metric Format, as CloudWatch would show);
    # a function without those metrics gets the remainder, which then balances by construction.
    absorbed = (
        int(metrics["duplicates"])
        if "duplicates" in metrics
        else stats.delivered - len(written) - len(letters)
    )
    return Report(
        function=pipeline.mapping.function_name,
        run_id=traffic.run_id,
        published=traffic.published,
        deduplicated_by_fifo=traffic.published - stats.delivered,
        delivered=stats.delivered,
        deliveries=stats.records,
        items_written=len(written),
        duplicates_absorbed=absorbed,
        dead_lettered=len(letters),
        dead_letters=letters,
        missing_keys=[list(k) for k in sorted(traffic.keys - written)],
        function_metrics=metrics,
        seconds=time.monotonic() - started,
    )
