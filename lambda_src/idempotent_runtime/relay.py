"""The relay: the function on the table's stream that publishes emitted messages to EMIT_TARGET_ARN.

Its event source mapping hands it only writes of outbox items (an event filter on the contract's layout), a
shard's records in order. Each record holds the messages one source message emitted to one group (FIFO
target) or to the target (standard), with their deduplication ids. The relay publishes them in stream
order, up to ten a request (``PublishBatch`` to a topic, ``SendMessageBatch`` to a queue), and reads
nothing else: no DynamoDB request.

* A request, or an entry of it, that fails for a reason that may pass (throttling, a 5xx, a network error, a
  deployment that is wrong) stops the batch there: the relay reports the record of the first message not
  published as its batch item failure, so the stream delivers that record and every later one again, in
  order, and nothing of a group overtakes what it could not publish. Messages of that record and later
  ones that were published go out again with their deduplication ids: a FIFO target drops them within 5
  minutes, a consumer keyed by the id (``KEY_SOURCE=dedup_id``) absorbs them after that.
* An entry the target refuses for good (SNS or SQS says the request itself is invalid: too large, a bad
  attribute) goes to the relay's dead-letter queue (DLQ_URL) with the reason, and the batch goes on: its
  group is not blocked forever, and the dead letter is out of its group's order (docs/runtime.md).
* SNS and SQS report each entry of a request on their own: an entry refused while a later entry of the same
  group in the same request is accepted lets the later one through first. The relay counts that
  (``reordered``) and writes a WARNING line naming both deduplication ids.
"""

from __future__ import annotations

import base64
import os
import time
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, TextIO

from idempotent_runtime import deadline
from idempotent_runtime.clients import LazyClient
from idempotent_runtime.contract import (
    DLQ_URL,
    EMIT_TARGET_ARN,
    FIFO_QUEUE_SUFFIX,
    LOG_LEVEL,
    MESSAGE_ID_ATTRIBUTE,
    METRICS_NAMESPACE,
    RUNTIME_PACKAGE,
    ConfigurationError,
    DeadLetterKind,
    LogLevel,
)
from idempotent_runtime.errors import Resource, classify, error_code, error_text
from idempotent_runtime.observability import Log, emf_line
from idempotent_runtime.outbox import (
    MAX_EMITTED_BYTES,
    OUTBOX_ATTRIBUTES,
    OUTBOX_BODY,
    OUTBOX_DEDUP_ID,
    OUTBOX_GROUP_ATTRIBUTE,
    OUTBOX_MESSAGES_ATTRIBUTE,
)
from idempotent_runtime.quarantine import fit, size, sqs_safe
from idempotent_runtime.retries import Retrier

RELAY_HANDLER = RUNTIME_PACKAGE + ".relay.handler"  # the relay's entry point
# The relay's settings: where it publishes, where it puts what the target refuses for good, its metrics.
RELAY_ENVIRONMENT = (EMIT_TARGET_ARN, DLQ_URL, METRICS_NAMESPACE, LOG_LEVEL)
MAX_PUBLISH_BATCH = 10  # PublishBatch, SendMessageBatch: entries per request, and MAX_EMITTED_BYTES together
# The relay's IAM actions: to a topic (+ TOPIC_KEY_ACTIONS on its key, through SNS), to a queue (+ the
# queue key's, through SQS), and on the table's stream.
TOPIC_ACTIONS = ("sns:Publish",)
TOPIC_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
QUEUE_ACTIONS = ("sqs:SendMessage",)
STREAM_ACTIONS = ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator")


class RelayMetric(StrEnum):
    """The relay's Embedded Metric Format counters of one batch (unit Count, dimension FunctionName)."""

    PUBLISHED = "published"  # emitted messages the target accepted
    DEAD_LETTERED = "dead_lettered"  # refused for good: sent to the relay's DLQ with the reason
    FAILED = "failed"  # left for the stream to deliver again (from the first record not published)
    REORDERED = "reordered"  # accepted after an earlier message of its group was refused in one request


# Entry and request errors that say the message itself can never be published: anything else may pass.
REFUSED_FOR_GOOD = frozenset(
    {
        "InvalidParameter",
        "InvalidParameterValue",
        "InvalidParameterException",
        "ValidationException",
        "ValidationError",
        "InvalidMessageContents",
        "InvalidAttributeName",
        "InvalidAttributeValue",
        "MessageTooLong",
        "BatchRequestTooLong",
        "AWS.SimpleQueueService.BatchRequestTooLong",
        "AWS.SimpleQueueService.InvalidParameterValue",
    }
)


@dataclass(frozen=True)
class RelayConfig:
    """The relay's settings (contract.RELAY_ENVIRONMENT)."""

    target_arn: str
    dlq_url: str | None = None
    metrics_namespace: str = METRICS_NAMESPACE.default
    log_level: LogLevel = LOG_LEVEL.default
    function_name: str = "local"

    @classmethod
    def from_env(cls, env: Any) -> RelayConfig:
        target = env.get(EMIT_TARGET_ARN.name)
        if not target:
            raise ConfigurationError(f"{EMIT_TARGET_ARN.name} is required by the relay, got {target!r}")
        values = {
            "target_arn": EMIT_TARGET_ARN.parse(target),
            "function_name": env.get("AWS_LAMBDA_FUNCTION_NAME") or "local",
        }
        for variable, field in ((DLQ_URL, "dlq_url"), (METRICS_NAMESPACE, "metrics_namespace")):
            if env.get(variable.name):
                values[field] = variable.parse(env[variable.name])
        if env.get(LOG_LEVEL.name):
            values["log_level"] = LOG_LEVEL.parse(env[LOG_LEVEL.name])
        return cls(**values)


class Outgoing(NamedTuple):
    """One emitted message as the stream delivered it, and the record that holds it."""

    record: int  # index in the batch
    body: str
    dedup_id: str
    group: str | None
    attributes: dict[str, Any]
    source_message_id: str | None

    @property
    def size(self) -> int:
        """What SNS and SQS count: the body, every attribute's name, type and value."""
        return size(self.body, self.attributes)


def outgoing(index: int, record: dict[str, Any]) -> list[Outgoing] | None:
    """The messages of one stream record (its NewImage), in emit order; None when it holds none."""
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    listed = (image.get(OUTBOX_MESSAGES_ATTRIBUTE) or {}).get("L")
    if not isinstance(listed, list):
        return None
    group = (image.get(OUTBOX_GROUP_ATTRIBUTE) or {}).get("S")
    source = (image.get(MESSAGE_ID_ATTRIBUTE) or {}).get("S")
    found = []
    for member in listed:
        fields = member["M"]
        attributes = {}
        for name, value in ((fields.get(OUTBOX_ATTRIBUTES) or {}).get("M") or {}).items():
            parts = value["M"]
            attribute: dict[str, Any] = {"DataType": parts["DataType"]["S"]}
            if "StringValue" in parts:
                attribute["StringValue"] = parts["StringValue"]["S"]
            else:
                raw = parts["BinaryValue"]["B"]
                attribute["BinaryValue"] = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
            attributes[name] = attribute
        body, dedup = fields[OUTBOX_BODY]["S"], fields[OUTBOX_DEDUP_ID]["S"]
        found.append(Outgoing(index, body, dedup, group, attributes, source))
    return found


def requests(messages: list[Outgoing]) -> list[list[Outgoing]]:
    """Consecutive messages, at most MAX_PUBLISH_BATCH and MAX_EMITTED_BYTES a request, in stream order."""
    batches: list[list[Outgoing]] = []
    size = 0
    for message in messages:
        if not batches or len(batches[-1]) >= MAX_PUBLISH_BATCH or size + message.size > MAX_EMITTED_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(message)
        size += message.size
    return batches


class Relay:
    """``relay(event, context) -> {"batchItemFailures": [...]}`` for the stream's records (see the module).

    ``target_client`` (SNS or SQS, as the target) and ``sqs_client`` (the DLQ) replace the lazily created
    clients; ``sleep`` is what retries wait with.
    """

    def __init__(
        self,
        config: RelayConfig,
        *,
        target_client: Any = None,
        sqs_client: Any = None,
        sleep: Any = time.sleep,
        log_stream: TextIO | None = None,
    ) -> None:
        self.config = config
        arn = config.target_arn.split(":")
        self.to_queue = arn[2] == "sqs"
        self.fifo = config.target_arn.endswith(FIFO_QUEUE_SUFFIX)
        self.target = LazyClient(arn[2], target_client)
        self.sqs = LazyClient(
            "sqs", sqs_client if sqs_client is not None or not self.to_queue else target_client
        )
        self.queue = (arn[4], arn[5])
        self.calls = Retrier(sleep)
        self.log = Log(config.log_level, config.function_name, log_stream)

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        started = time.monotonic()
        previous = deadline.bind(context)
        try:
            records = event.get("Records") or []
            counts: Counter[str] = Counter()
            stopped = self._relay(records, counts)
        finally:
            deadline.restore(previous)
        failed = records[stopped:] if stopped is not None else []
        counts[RelayMetric.FAILED.value] = len(failed)
        self.log.write(
            emf_line(
                self.config.metrics_namespace,
                self.config.function_name,
                counts,
                names=tuple(metric.value for metric in RelayMetric),
                records=len(records),
                oldest_age_s=_oldest_age(records),
                duration_ms=round((time.monotonic() - started) * 1000, 1),
            )
        )
        self.log.flush()
        return {
            "batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in failed[:1]]
        }

    def _relay(self, records: list[dict[str, Any]], counts: Counter[str]) -> int | None:
        """Publish every record's messages; the index of the first record not wholly published, or None."""
        messages: list[Outgoing] = []
        for index, record in enumerate(records):
            found = outgoing(index, record)
            if found is None:
                self.log.warn("stream record skipped: not an outbox item", event_id=record.get("eventID"))
            messages += found or []
        for request in requests(messages):
            stopped = self._send(request, counts)
            if stopped is not None:
                return stopped.record
        return None

    def _send(self, request: list[Outgoing], counts: Counter[str]) -> Outgoing | None:
        """One request; the first message not published (and not dead-lettered), or None."""
        try:
            response = self._publish(request)
        except Exception as exc:
            if error_code(exc) in REFUSED_FOR_GOOD and len(request) > 1:
                for single in request:  # find the one the target refuses; the others go out
                    stopped = self._send([single], counts)
                    if stopped is not None:
                        return stopped
                return None
            if error_code(exc) in REFUSED_FOR_GOOD:
                return self._dead_letter(request[0], error_text(exc), counts)
            self._failed(request[0], exc)
            return request[0]
        refused = {int(bad["Id"]): bad for bad in response.get("Failed", [])}
        held: dict[str | None, Outgoing] = {}  # a group's first message not published in this request
        first: Outgoing | None = None
        for position, message in enumerate(request):
            bad = refused.get(position)
            if bad is None:
                counts[RelayMetric.PUBLISHED.value] += 1
                if self.fifo and message.group in held:
                    self._reordered(held[message.group], message, counts)
                continue
            reason = f"{bad.get('Code')}: {bad.get('Message', '')}"
            for_good = bad.get("SenderFault") and bad.get("Code") in REFUSED_FOR_GOOD
            if first is None and for_good and self._dead_letter(message, reason, counts) is None:
                continue
            held.setdefault(message.group, message)
            if first is None:
                first = message
                self.log.warn(
                    "not published; the stream delivers it again", dedup_id=message.dedup_id, error=reason
                )
        return first

    def _publish(self, request: list[Outgoing]) -> dict[str, Any]:
        body = "MessageBody" if self.to_queue else "Message"
        entries = []
        for position, message in enumerate(request):
            entry: dict[str, Any] = {"Id": str(position), body: message.body}
            if message.attributes:
                entry["MessageAttributes"] = message.attributes
            if message.group is not None:
                entry["MessageGroupId"] = message.group
            if self.fifo:
                entry["MessageDeduplicationId"] = message.dedup_id
            entries.append(entry)
        if self.to_queue:
            client = self.target()
            url = f"{client.meta.endpoint_url.rstrip('/')}/{self.queue[0]}/{self.queue[1]}"
            return self.calls(client.send_message_batch, QueueUrl=url, Entries=entries)
        return self.calls(
            self.target().publish_batch, TopicArn=self.config.target_arn, PublishBatchRequestEntries=entries
        )

    def _dead_letter(self, message: Outgoing, reason: str, counts: Counter[str]) -> Outgoing | None:
        """To the relay's DLQ with the reason (None); the message back when that fails or there is none."""
        reason = sqs_safe(f"the emit target refused it for good: {reason}")
        if self.config.dlq_url is None:
            self.log.warn(
                "refused for good, and the relay has no DLQ_URL: retried",
                dedup_id=message.dedup_id,
                error=reason,
            )
            return message
        details: dict[str, Any] = {
            "kind": DeadLetterKind.UNPUBLISHABLE.value,
            "source_message_id": message.dedup_id,
            "emitted_by": message.source_message_id,
            "group_id": message.group,
            "dedup_id": message.dedup_id,
            "target": self.config.target_arn,
            "function": self.config.function_name,
            "dropped_attributes": [],
        }
        attributes = fit(message.body, dict(message.attributes), details, reason, MAX_EMITTED_BYTES)
        try:
            self.calls(
                self.sqs().send_message,
                QueueUrl=self.config.dlq_url,
                MessageBody=message.body,
                MessageAttributes=attributes,
            )
        except Exception as exc:
            self._failed(message, exc, Resource.DLQ)
            return message
        counts[RelayMetric.DEAD_LETTERED.value] += 1
        self.log.warn(
            "refused for good: sent to the relay's dead-letter queue",
            dedup_id=message.dedup_id,
            reason=reason,
        )
        return None

    def _failed(self, message: Outgoing, exc: Exception, where: Resource = Resource.TARGET) -> None:
        failure = classify(exc, where)
        level = LogLevel.ERROR if failure.misconfigured else LogLevel.WARNING
        fields = {"likely_misconfiguration": failure.hint} if failure.misconfigured else {}
        self.log.emit(
            level,
            "not published; the stream delivers it again",
            dedup_id=message.dedup_id,
            error=error_text(exc),
            **fields,
        )

    def _reordered(self, refused: Outgoing, accepted: Outgoing, counts: Counter[str]) -> None:
        counts[RelayMetric.REORDERED.value] += 1
        self.log.warn(
            "order: the target accepted a message after refusing an earlier one of its group in one request",
            group_id=accepted.group,
            refused=refused.dedup_id,
            accepted=accepted.dedup_id,
        )


def _oldest_age(records: list[dict[str, Any]]) -> float | None:
    created = [r.get("dynamodb", {}).get("ApproximateCreationDateTime") for r in records]
    known = [value for value in created if isinstance(value, (int, float))]
    return round(time.time() - min(known), 1) if known else None


_relay: Relay | None = None


def handler(event: dict[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
    """Lambda entry point ``idempotent_runtime.relay.handler``: the relay configured from the environment."""
    global _relay
    if _relay is None:
        try:
            _relay = Relay(RelayConfig.from_env(os.environ))
        except ConfigurationError as refused:
            Log(LogLevel.ERROR, os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or "local").emit(
                LogLevel.ERROR,
                "relay configuration refused: batches are retried until it is fixed",
                error=str(refused),
            )
            raise
    return _relay(event, context)
