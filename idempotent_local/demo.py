"""The demo: publish at-least-once traffic through a deployed pipeline and account for every message.

A pipeline is found from what is deployed, not from names: an SQS event source mapping gives the queue and
the function, the topic is the one with a subscription to that queue, the table is the function's
``TABLE_NAME``, the dead-letter queue its ``DLQ_URL`` (else the queue's redrive target), the subscription's
dead-letter queue its redrive policy's. The sample traffic (:class:`SampleTraffic`; one run, tagged with a
fresh run id so earlier runs do not count):

- a burst across several message groups, each message with its own business key;
- producer retries: some of those messages published again with the same deduplication id within the
  5-minute window — a FIFO topic drops them; through a standard topic they arrive and are duplicates;
- the same content re-sent after the window (a new deduplication id): delivered, a duplicate the runtime
  absorbs;
- new content under a business key already used: a *conflict* — quarantined to the dead-letter queue (the
  runtime's default, ``ON_CONFLICT=quarantine``) or counted as a duplicate (``ON_CONFLICT=duplicate``);
- a poison message (not JSON): it must end in the dead-letter queue with a reason.

Dead letters are counted exactly, from the dead-letter queue's message counts before and after the run
(receiving them one by one cannot: a FIFO queue hides the later messages of a group while an earlier one is
being looked at); the demo then reads what it can of them for the report and leaves them all in the queue.
The report is data (:class:`Report`); :meth:`Report.render` prints it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from idempotent_runtime import contract

from idempotent_local.emulator import Emulator
from idempotent_local.errors import DemoError
from idempotent_local.mappings import queue_url
from idempotent_local.pollers.sqs_poller import RECEIVE_ALL, in_batches, queue_depth
from idempotent_local.runner import EventSourceRunner, Mapping

RETRY_DELAY_SECONDS = 1
RUN_ATTRIBUTE = "run"
REASON_SHOWN = 90  # characters of a dead letter's reason in the report (--json has all of it)

__all__ = [
    "DemoError",
    "Pipeline",
    "Report",
    "SampleTraffic",
    "find_pipelines",
    "items_with_keys",
    "messages_in",
    "run_demo",
]


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
    mode: str
    key_prefix: str
    on_conflict: str
    fifo: bool
    dead_letter_queue_url: str | None
    subscription_dead_letter_queue_url: str | None = None
    processor: str = ""  # PROCESSOR ("" when the runtime stores the body as it is)


@dataclass(frozen=True)
class SampleTraffic:
    """How much of each kind of message the demo publishes."""

    groups: int = 4
    per_group: int = 5
    retried: int = 5  # same message, same deduplication id: a producer retry within the window
    resent: int = 3  # same content, new deduplication id: re-sent after the window
    changed: int = 2  # new content under a business key already used: a conflict
    poison: int = 1  # not JSON

    @property
    def published(self) -> int:
        new = self.groups * self.per_group
        return new + sum(min(n, new) for n in (self.retried, self.resent, self.changed)) + self.poison


@dataclass
class DeadLetter:
    message_id: str
    group_id: str | None
    body: str
    reason: str
    kind: str | None  # contract.DeadLetterKind, when the runtime sent it


@dataclass
class Report:
    """Every published message accounted for. ``balanced`` says the numbers add up."""

    function: str
    run_id: str
    fifo: bool
    published: int
    deduplicated_by_fifo: int
    expected_deduplicated: int  # the producer retries a FIFO topic drops (0 for a standard topic)
    undeliverable: int  # in the subscription's dead-letter queue: SNS could not deliver them
    delivered: int
    deliveries: int
    items_written: int
    duplicates_absorbed: int
    conflicts_published: int
    conflicts: int | None  # the function's own count; None: it does not count conflicts
    on_conflict: str
    dead_lettered: int
    dead_letters: list[DeadLetter] = field(default_factory=list)
    missing_keys: list[list[str]] = field(default_factory=list)
    function_metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    processor: str = ""  # the function's PROCESSOR, which decides what a sample order must hold

    @property
    def balanced(self) -> bool:
        return (
            self.published == self.delivered + self.deduplicated_by_fifo + self.undeliverable
            and self.deduplicated_by_fifo == self.expected_deduplicated
            and self.delivered == self.items_written + self.duplicates_absorbed + self.dead_lettered
            and not self.missing_keys
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "balanced": self.balanced}

    def _conflict_line(self) -> str:
        label = "  conflicts (same key, new content) "
        if self.conflicts is None:
            return (
                f"{label} {self.conflicts_published:4d}   published; the function does not count conflicts "
                "(absorbed as duplicates)"
            )
        treated = (
            "quarantined to the dead-letter queue"
            if self.on_conflict == contract.OnConflict.QUARANTINE
            else f"counted as duplicates (ON_CONFLICT={self.on_conflict})"
        )
        return f"{label} {self.conflicts:4d}   {treated}"

    def render(self) -> str:
        kind = "FIFO" if self.fifo else "standard"
        lines = [
            f"pipeline {self.function} ({kind}, run {self.run_id}, {self.seconds:.1f} s)",
            f"  published to the topic             {self.published:4d}",
            f"  dropped by FIFO deduplication      {self.deduplicated_by_fifo:4d}   (same id within 5 min)",
        ]
        if self.undeliverable:
            lines.append(f"  undeliverable (subscription DLQ)   {self.undeliverable:4d}")
        lines += [
            f"  delivered to the function          {self.delivered:4d}   ({self.deliveries} deliveries)",
            f"  items in the table                 {self.items_written:4d}",
            f"  duplicates absorbed                {self.duplicates_absorbed:4d}   (same key, same content)",
            self._conflict_line(),
            f"  in the dead-letter queue           {self.dead_lettered:4d}",
        ]
        for letter in sorted(
            self.dead_letters, key=lambda letter: (letter.group_id or "", letter.message_id)
        ):
            reason = letter.reason
            if len(reason) > REASON_SHOWN:
                reason = reason[: REASON_SHOWN - 3] + "..."
            if letter.kind and not reason.startswith(f"{letter.kind}:"):
                reason = f"{letter.kind}: {reason}"
            lines.append(f"    - {letter.body[:40]!r} (group {letter.group_id}): {reason}")
        if len(self.dead_letters) < self.dead_lettered:
            lines.append(
                f"    ({self.dead_lettered - len(self.dead_letters)} more not shown: their message group is "
                "busy; `idempotent-pipeline dlq list --local --messages` shows them later)"
            )
        if self.function_metrics:
            metrics = ", ".join(f"{k}={v:g}" for k, v in sorted(self.function_metrics.items()))
            lines.append(f"  the function's own metrics         {metrics}")
        if self.missing_keys:
            lines.append(f"  MISSING business keys              {self.missing_keys}")
            if self.processor:
                lines.append(
                    f"  the sample orders are shaped for a pipeline that stores bodies as they are; "
                    f"PROCESSOR={self.processor} decides what a message must hold (its rejections are in "
                    "the dead-letter queue above): publish your own messages and run "
                    "`idempotent-pipeline local run` instead"
                )
        if self.deduplicated_by_fifo != self.expected_deduplicated:
            lines.append(
                f"  EXPECTED {self.expected_deduplicated} producer retries dropped by FIFO deduplication"
            )
        verdict = "nothing lost, nothing doubled" if self.balanced else "THE NUMBERS DO NOT ADD UP"
        lines.append(
            f"  delivered = items + duplicates + dead letters: {self.delivered} = {self.items_written} + "
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
        if not isinstance(mapping, Mapping):
            continue  # a stream's mapping: no queue for the sample traffic
        subscribed = [
            s for s in subscriptions if s["Protocol"] == "sqs" and s["Endpoint"] == mapping.queue_arn
        ]
        env = lambda_.get_function_configuration(FunctionName=mapping.function_arn).get("Environment", {})
        variables = env.get("Variables", {})
        if not subscribed or contract.TABLE_NAME.name not in variables:
            continue
        schema = dynamodb.describe_table(TableName=variables["TABLE_NAME"])["Table"]["KeySchema"]
        keys = {k["KeyType"]: k["AttributeName"] for k in schema}
        queue = sqs.get_queue_attributes(QueueUrl=mapping.queue_url, AttributeNames=["All"])["Attributes"]
        dlq_url = variables.get(contract.DLQ_URL.name)
        if not dlq_url and "RedrivePolicy" in queue:
            dlq_url = queue_url(sqs, json.loads(queue["RedrivePolicy"])["deadLetterTargetArn"])
        subscription = sns.get_subscription_attributes(SubscriptionArn=subscribed[0]["SubscriptionArn"])
        redrive = subscription["Attributes"].get("RedrivePolicy")
        target = json.loads(redrive).get("deadLetterTargetArn") if redrive else None
        subscription_dlq_url = queue_url(sqs, target) if target else None

        def variable(v: contract.Variable, variables: dict[str, str] = variables) -> str:
            return variables.get(v.name) or v.default or ""

        pipelines.append(
            Pipeline(
                mapping=mapping,
                topic_arn=subscribed[0]["TopicArn"],
                table_name=variables["TABLE_NAME"],
                partition_key=keys["HASH"],
                sort_key=keys.get("RANGE", ""),
                partition_key_field=variable(contract.PARTITION_KEY_FIELD),
                sort_key_field=variable(contract.SORT_KEY_FIELD),
                key_source=variable(contract.KEY_SOURCE),
                mode=variable(contract.IDEMPOTENCY_MODE),
                key_prefix=variable(contract.KEY_PREFIX),
                on_conflict=variable(contract.ON_CONFLICT),
                processor=variable(contract.PROCESSOR),
                fifo=queue.get("FifoQueue") == "true",
                dead_letter_queue_url=dlq_url,
                subscription_dead_letter_queue_url=subscription_dlq_url,
            )
        )
    return pipelines


def _with_path(body: dict[str, Any], path: str, value: str) -> None:
    """Set a dotted field path (``order.id``) in ``body``."""
    *parents, last = contract.field_path(path)
    for part in parents:
        body = body.setdefault(part, {})
    body[last] = value


@dataclass
class _Sent:
    run_id: str
    published: int = 0
    keys: set[tuple[str, str]] = field(default_factory=set)


def publish_sample(emulator: Emulator, pipeline: Pipeline, traffic: SampleTraffic = SampleTraffic()) -> _Sent:
    """Publish the sample traffic described in the module docstring; returns what was sent."""
    sns = emulator.client("sns")
    sent = _Sent(run_id=uuid.uuid4().hex[:8])
    originals: list[tuple[str, str, str, str]] = []  # each new message's key (x, y), group and body

    def publish(body: str, group: str, dedup_id: str) -> None:
        request: dict[str, Any] = {
            "TopicArn": pipeline.topic_arn,
            "Message": body,
            "MessageAttributes": {RUN_ATTRIBUTE: {"DataType": "String", "StringValue": sent.run_id}},
        }
        if pipeline.fifo:
            request.update(MessageGroupId=group, MessageDeduplicationId=dedup_id)
        sns.publish(**request)
        sent.published += 1

    def document(x: str, y: str, **fields: Any) -> str:
        body: dict[str, Any] = {"run": sent.run_id, **fields}
        _with_path(body, pipeline.partition_key_field, x)
        _with_path(body, pipeline.sort_key_field, y)
        return json.dumps(body)

    for n in range(traffic.groups * traffic.per_group):
        x, y, group = str(uuid.uuid4()), str(uuid.uuid4()), f"demo-{sent.run_id}-g{n % traffic.groups}"
        originals.append((x, y, group, document(x, y, amount=n)))
        publish(originals[-1][3], group, f"{x}#{y}")
        sent.keys.add((x, y))
    for x, y, group, body in originals[: traffic.retried]:  # a producer retry: same message, same dedup id
        publish(body, group, f"{x}#{y}")
    for x, y, group, body in originals[-traffic.resent :] if traffic.resent else []:  # same body, later
        publish(body, group, f"{x}#{y}#resent")
    for n, (x, y, group, _) in enumerate(originals[: traffic.changed]):  # a conflict: new body, old key
        publish(document(x, y, amount=1000 + n, revision=2), group, f"{x}#{y}#revision-2")
    for n in range(traffic.poison):
        publish(
            f"this is not JSON (run {sent.run_id}, #{n})",
            f"demo-{sent.run_id}-poison",
            f"poison-{sent.run_id}-{n}",
        )
    return sent


def items_with_keys(
    emulator: Emulator, pipeline: Pipeline, keys: set[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The keys of ``keys`` that have their item in the pipeline's table."""
    dynamodb = emulator.client("dynamodb")
    prefix = pipeline.key_prefix
    found: set[tuple[str, str]] = set()
    wanted = sorted(keys)
    for start in range(0, len(wanted), 100):
        request = {
            pipeline.table_name: {
                "Keys": [
                    {pipeline.partition_key: {"S": prefix + x}, pipeline.sort_key: {"S": y}}
                    for x, y in wanted[start : start + 100]
                ]
            }
        }
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(pipeline.table_name, []):
                partition = item[pipeline.partition_key]["S"].removeprefix(prefix)
                found.add((partition, item[pipeline.sort_key]["S"]))
            request = response.get("UnprocessedKeys") or {}
    return found


def messages_in(emulator: Emulator, url: str | None) -> int:
    """Every message of a queue: visible, in flight and delayed (exact in the emulator)."""
    return queue_depth(emulator.client("sqs"), url) if url else 0


def _string(attributes: dict[str, Any], name: str) -> str | None:
    value = attributes.get(name, {}).get("StringValue")
    return value if isinstance(value, str) else None


def _dead_letters(emulator: Emulator, url: str | None, run_id: str) -> list[DeadLetter]:
    """This run's messages in a dead-letter queue, as far as a receive shows them; they stay in the queue."""
    if not url:
        return []
    sqs = emulator.client("sqs")
    received: dict[str, dict[str, Any]] = {}
    handles = []
    while True:
        messages = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=30,
            WaitTimeSeconds=0,
            **RECEIVE_ALL,
        ).get("Messages", [])
        handles += [m["ReceiptHandle"] for m in messages]
        fresh = [m for m in messages if m["MessageId"] not in received]
        if not fresh:
            break
        received.update((m["MessageId"], m) for m in fresh)
    visible = [{"ReceiptHandle": handle, "VisibilityTimeout": 0} for handle in handles]
    in_batches(sqs.change_message_visibility_batch, url, visible)
    letters = []
    for message in received.values():
        attributes = message.get("MessageAttributes", {})
        if _string(attributes, RUN_ATTRIBUTE) != run_id and run_id not in message.get("Body", ""):
            continue
        details_text = _string(attributes, contract.DLQ_DETAILS_ATTRIBUTE)
        try:
            details = json.loads(details_text) if details_text else {}
        except ValueError:
            details = {}
        reason = (
            _string(attributes, contract.DLQ_REASON_ATTRIBUTE)
            or _string(attributes, "reason")
            or _string(attributes, "ErrorMessage")
            or (
                f"moved by SQS after {message.get('Attributes', {}).get('ApproximateReceiveCount', '?')} "
                "receives (maxReceiveCount reached)"
            )
        )
        letters.append(
            DeadLetter(
                message_id=message["MessageId"],
                group_id=message.get("Attributes", {}).get("MessageGroupId"),
                body=message.get("Body", ""),
                reason=reason,
                kind=details.get("kind") if isinstance(details, dict) else None,
            )
        )
    return letters


def run_demo(
    emulator: Emulator,
    *,
    pipeline: Pipeline | None = None,
    traffic: SampleTraffic = SampleTraffic(),
    retry_delay: int = RETRY_DELAY_SECONDS,
    timeout: float = 180.0,
    with_processor: bool = True,
) -> Report:
    """Publish the sample traffic to one pipeline (the first found), drain it through the runner, report.

    ``with_processor=False`` refuses, before publishing anything, a pipeline whose function runs a
    PROCESSOR: it decides what a message must hold, and may send every sample order to its dead-letter queue.
    """
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
        if pipeline.key_source != contract.KeySource.FIELDS or pipeline.mode != contract.Mode.DOCUMENT:
            raise DemoError(
                "the demo needs a pipeline in document mode with keys from body fields (IDEMPOTENCY_MODE="
                f"document, KEY_SOURCE=fields); {pipeline.mapping.function_name} has IDEMPOTENCY_MODE="
                f"{pipeline.mode}, KEY_SOURCE={pipeline.key_source}. Publish your own messages and run "
                "`idempotent-pipeline local run` instead"
            )
        if pipeline.processor and not with_processor:
            raise DemoError(
                f"{pipeline.mapping.function_name} runs PROCESSOR={pipeline.processor}: the demo's sample "
                "orders are shaped for a pipeline that stores bodies as they are; your processor may send "
                "them all to its dead-letter queue. Publish your own messages and run `idempotent-pipeline "
                "local run`, or run the demo with --anyway"
            )
        # Earlier traffic (a previous run, a user's messages) is drained first so it does not count.
        runner.drain(timeout=timeout, mappings=[pipeline.mapping])
    dead_before = messages_in(emulator, pipeline.dead_letter_queue_url)
    undeliverable_before = messages_in(emulator, pipeline.subscription_dead_letter_queue_url)
    # A fresh runner, so nothing of the earlier traffic (its log lines included) is counted.
    with EventSourceRunner(emulator, retry_delay=retry_delay) as runner:
        sent = publish_sample(emulator, pipeline, traffic)
        stats = runner.drain(timeout=timeout, mappings=[pipeline.mapping])
    dead_lettered = messages_in(emulator, pipeline.dead_letter_queue_url) - dead_before
    undeliverable = messages_in(emulator, pipeline.subscription_dead_letter_queue_url) - undeliverable_before
    written = items_with_keys(emulator, pipeline, sent.keys)
    letters = _dead_letters(emulator, pipeline.dead_letter_queue_url, sent.run_id)
    metrics = dict(stats.metrics)
    # The function counts the duplicates it absorbed (Embedded Metric Format, as CloudWatch would show); a
    # function without those metrics gets the remainder, which then balances by construction.
    absorbed = (
        int(metrics[contract.Metric.DUPLICATES])
        if contract.Metric.DUPLICATES in metrics
        else stats.delivered - len(written) - dead_lettered
    )
    conflicts = int(metrics[contract.Metric.CONFLICTS]) if contract.Metric.CONFLICTS in metrics else None
    return Report(
        function=pipeline.mapping.function_name,
        run_id=sent.run_id,
        fifo=pipeline.fifo,
        published=sent.published,
        deduplicated_by_fifo=sent.published - stats.delivered - undeliverable,
        expected_deduplicated=traffic.retried if pipeline.fifo else 0,
        undeliverable=undeliverable,
        delivered=stats.delivered,
        deliveries=stats.records,
        items_written=len(written),
        duplicates_absorbed=absorbed,
        conflicts_published=traffic.changed,
        conflicts=conflicts,
        on_conflict=pipeline.on_conflict,
        processor=pipeline.processor,
        dead_lettered=dead_lettered,
        dead_letters=letters,
        missing_keys=[list(k) for k in sorted(sent.keys - written)],
        function_metrics=metrics,
        seconds=time.monotonic() - started,
    )
