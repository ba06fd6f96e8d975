"""The relay: the function on the table's stream that publishes emitted messages to EMIT_TARGET_ARN.

Its event source mapping hands it only writes of its consumer's outbox items (an event filter on the layout
of :mod:`idempotent_runtime.outbox`), a shard's records in order. Each record holds the messages one source
message emitted to one lane (a downstream group on a FIFO target), with their deduplication ids. The relay
publishes them in stream order, up to ten a request (``PublishBatch`` to a topic, ``SendMessageBatch`` to a
queue), and reads nothing else: no DynamoDB request.

* A request, or an entry of it, that fails for a reason that may pass (throttling, a 5xx, a network error, a
  deployment that is wrong) stops the batch there: the relay reports the record of the first message not
  published as its batch item failure, so the stream delivers that record and every later one again, in
  order, and nothing of a group overtakes what it could not publish. Messages of that record and later
  ones that were published go out again with their deduplication ids: a FIFO target drops them within 5
  minutes, a consumer keyed by the id (``KEY_SOURCE=dedup_id``) absorbs them after that.
* A message that can never be published goes to the relay's dead-letter queue (DLQ_URL) with the reason,
  and the batch goes on: its group is not blocked, and the dead letter is out of its group's order
  (docs/runtime.md). That is a message SNS or SQS refuses for good (the request itself is invalid), a message
  the relay finds they would refuse before sending it (``outbox.check``: what ``emit()`` checks, for items
  written by 0.3 or by hand), and a record that is not a readable outbox item. A dead letter is always one
  the queue accepts: what it could not carry as it is goes encoded (:func:`read_dead_letter`).
* SNS and SQS report each entry of a request on their own: an entry refused while a later entry of the same
  group in the same request is accepted lets the later one through first. The relay counts that
  (``reordered``) and writes a WARNING line naming both deduplication ids.
* DynamoDB Streams orders records per item, not across a lane's items (docs/runtime.md, "Order"): a lane's
  item committed before one already published in that lane (commit times in their sort keys), from a later
  record of the shard (not a redelivery), is counted as ``reordered`` too, with a WARNING naming both items.
  The relay remembers the lanes it published in this execution environment (:data:`MAX_REMEMBERED_LANES`).
"""

from __future__ import annotations

import base64
import json
import os
import time
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, TextIO

from idempotent_runtime import deadline
from idempotent_runtime.clients import LazyClient
from idempotent_runtime.contract import (
    DLQ_ATTRIBUTE_PREFIX,
    DLQ_DETAILS_ATTRIBUTE,
    DLQ_ENCODING_ATTRIBUTE,
    DLQ_REASON_ATTRIBUTE,
    DLQ_URL,
    EMIT_TARGET_ARN,
    FIFO_QUEUE_SUFFIX,
    KEY_PREFIX,
    LOG_LEVEL,
    MAX_MESSAGE_ATTRIBUTES,
    MESSAGE_ID_ATTRIBUTE,
    METRICS_NAMESPACE,
    RUNTIME_PACKAGE,
    SQS_MESSAGE_BYTES,
    TABLE_NAME,
    ConfigurationError,
    DeadLetterEncoding,
    DeadLetterKind,
    LogLevel,
)
from idempotent_runtime.errors import InvalidMessage, Resource, classify, error_code, error_text, too_large
from idempotent_runtime.observability import Log, configured, emf_line
from idempotent_runtime.outbox import (
    MAX_EMITTED_BYTES,
    Emitted,
    Unreadable,
    check,
    commit_ms,
    outbox_partition,
    read_messages,
)
from idempotent_runtime.quarantine import queue_url, sendable, size, sqs_safe, string
from idempotent_runtime.retries import Retrier

RELAY_HANDLER = RUNTIME_PACKAGE + ".relay.handler"  # the relay's entry point
# The relay's settings: where it publishes, where it puts what cannot be published, its metrics; and the
# table and KEY_PREFIX of the outbox it publishes (for operators' tools: the relay reads no table).
RELAY_ENVIRONMENT = (EMIT_TARGET_ARN, DLQ_URL, TABLE_NAME, KEY_PREFIX, METRICS_NAMESPACE, LOG_LEVEL)
MAX_PUBLISH_BATCH = 10  # PublishBatch, SendMessageBatch: entries per request, and MAX_EMITTED_BYTES together
# The relay's IAM actions: to a topic (+ TOPIC_KEY_ACTIONS on its key, through SNS), to a queue (+ the
# queue key's, through SQS), and on the table's stream.
TOPIC_ACTIONS = ("sns:Publish",)
TOPIC_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
QUEUE_ACTIONS = ("sqs:SendMessage",)
STREAM_ACTIONS = ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator")
MAX_REMEMBERED_LANES = 10_000  # lanes whose newest published item the relay remembers (then it forgets all)


class RelayMetric(StrEnum):
    """The relay's Embedded Metric Format counters of one batch (unit Count, dimension FunctionName)."""

    PUBLISHED = "published"  # emitted messages the target accepted
    DEAD_LETTERED = "dead_lettered"  # never publishable: sent to the relay's DLQ with the reason
    FAILED = "failed"  # left for the stream to deliver again (from the first record not published)
    # Out of its group's order: refused, then a later one accepted; or committed earlier.
    REORDERED = "reordered"


REFUSED = "the emit target refused it for good: "
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
    """The relay's settings (:data:`RELAY_ENVIRONMENT`)."""

    target_arn: str
    dlq_url: str | None = None
    table_name: str | None = None
    key_prefix: str = KEY_PREFIX.default
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
        for variable in RELAY_ENVIRONMENT[1:]:  # each sets the field of its name (DLQ_URL: dlq_url)
            if env.get(variable.name):
                values[variable.name.lower()] = variable.parse(env[variable.name])
        return cls(**values)


class Lane(NamedTuple):
    """What the relay published of a lane: its newest item (commit ms, dedup id, key) and the sequence number
    of the latest record (None: not a number)."""

    committed: int
    position: int | None
    dedup_id: str | None
    item_key: dict[str, str]


class Outgoing(NamedTuple):
    """One emitted message as the stream delivered it, and where it is; or (``message`` None) a record the
    relay cannot read as an outbox item, with its ``image``."""

    record: int  # index in the batch
    message: Emitted | None
    source_message_id: str | None  # the emitting message's
    item_key: dict[str, str]  # the outbox item's key (the record's Keys)
    position: int | None  # in the item's messages
    problem: str | None = None  # why it can never be published, found before sending
    image: dict[str, Any] | None = None  # an unreadable record's NewImage

    @property
    def dedup_id(self) -> str | None:
        return self.message.dedup_id if self.message is not None else None

    @property
    def group(self) -> str | None:
        return self.message.group_id if self.message is not None else None

    @property
    def size(self) -> int:
        return self.message.size if self.message is not None else 0


def outgoing(index: int, record: dict[str, Any], target: str) -> list[Outgoing]:
    """The messages of one stream record (its NewImage), in emit order, each checked as ``emit()`` checks
    (``problem``); one unreadable entry when the record is not an outbox item."""
    stream = record.get("dynamodb") or {}
    image = stream.get("NewImage") or {}
    keys = {
        name: next(iter(value.values()))
        for name, value in (stream.get("Keys") or {}).items()
        if isinstance(value, dict) and value
    }
    source = (image.get(MESSAGE_ID_ATTRIBUTE) or {}).get("S")
    try:
        messages = read_messages(image)
    except Unreadable as exc:
        return [
            Outgoing(index, None, source, keys, None, f"not an outbox item the relay can read: {exc}", image)
        ]
    found = []
    for position, message in enumerate(messages):
        try:
            check(message, target, f"emitted message {position}")
            problem = None
        except InvalidMessage as exc:
            problem = f"SNS and SQS would refuse it: {exc}"
        found.append(Outgoing(index, message, source, keys, position, problem))
    return found


def requests(messages: list[Outgoing]) -> list[list[Outgoing]]:
    """Consecutive messages, at most MAX_PUBLISH_BATCH and MAX_EMITTED_BYTES a request, in stream order; a
    message that can never be published alone."""
    batches: list[list[Outgoing]] = []
    size = 0
    for message in messages:
        alone = message.problem is not None or (batches and batches[-1][0].problem is not None)
        if (
            alone
            or not batches
            or len(batches[-1]) >= MAX_PUBLISH_BATCH
            or size + message.size > MAX_EMITTED_BYTES
        ):
            batches.append([])
            size = 0
        batches[-1].append(message)
        size += message.size
    return batches


# --- dead letters: always accepted ------------------------------------------------------------------------


def letters(letter: Outgoing, reason: str, details: dict[str, Any], budget: int) -> list[tuple[str, dict]]:
    """The dead letters that can carry ``letter`` (body, message attributes), best first: the emitted message
    as it is, when the queue takes its text and attributes beside the runtime's two; encoded
    (:class:`~idempotent_runtime.contract.DeadLetterEncoding`); omitted, when even that is over ``budget``
    bytes (the outbox item named in ``details`` holds it until its TTL)."""
    reason = sqs_safe(reason)
    ours = {
        DLQ_REASON_ATTRIBUTE: string(reason),
        DLQ_DETAILS_ATTRIBUTE: string(json.dumps(details, separators=(",", ":"))),
    }
    found = []
    message = letter.message
    if (
        message is not None
        and _travels(message)
        and size(message.body, {**message.attributes, **ours}) <= budget
    ):
        found.append((message.body, {**message.attributes, **ours}))
    payload = (
        {"record": letter.image}
        if message is None
        else {
            "body": message.body,
            "attributes": {
                name: {
                    k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in value.items()
                }
                for name, value in message.attributes.items()
            },
        }
    )
    text = json.dumps(payload, separators=(",", ":"))  # ASCII: lone surrogates too, exactly
    encoded = base64.b64encode(zlib.compress(text.encode("ascii"), 9)).decode("ascii")
    encoding = {**ours, DLQ_ENCODING_ATTRIBUTE: string(DeadLetterEncoding.JSON_ZLIB_BASE64.value)}
    if size(encoded, encoding) <= budget:
        found.append((encoded, encoding))
    omitted = {**ours, DLQ_ENCODING_ATTRIBUTE: string(DeadLetterEncoding.OMITTED.value)}
    found.append(("omitted: the outbox item in idempotency.details holds this message", omitted))
    return found


def _travels(message: Emitted) -> bool:
    """Whether the queue takes ``message``'s body and attributes as they are, beside the runtime's two."""
    if len(message.attributes) > MAX_MESSAGE_ATTRIBUTES - 2:
        return False
    try:
        check(message._replace(group_id=None, dedup_id="x"), "", "")  # to a standard queue
    except InvalidMessage:
        return False
    return not any(name.startswith(DLQ_ATTRIBUTE_PREFIX) for name in message.attributes)


def read_dead_letter(body: str, attributes: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a relay dead letter carries, from its body and message attributes (ReceiveMessage's shape):
    ``{"body": text, "attributes": {name: {DataType, StringValue | BinaryValue (bytes)}}}`` (the emitted
    message exactly; its group and deduplication id are ``group_id`` and ``dedup_id`` of the details),
    ``{"record": NewImage}`` (a stream record that is not a readable outbox item), or None when the body was
    omitted (the outbox item the details name holds the message until its TTL)."""
    encoding = (attributes.get(DLQ_ENCODING_ATTRIBUTE) or {}).get("StringValue")
    if encoding == DeadLetterEncoding.OMITTED:
        return None
    if encoding is None:
        kept = {
            name: value for name, value in attributes.items() if not name.startswith(DLQ_ATTRIBUTE_PREFIX)
        }
        return {"body": body, "attributes": {name: sendable(value) for name, value in kept.items()}}
    payload: dict[str, Any] = json.loads(zlib.decompress(base64.b64decode(body, validate=True)))
    if "attributes" in payload:
        payload["attributes"] = {
            name: {k: base64.b64decode(v) if k == "BinaryValue" else v for k, v in value.items()}
            for name, value in payload["attributes"].items()
        }
    return payload


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
        self.calls = Retrier(sleep)
        self.log = Log(config.log_level, config.function_name, log_stream)
        self.records: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()  # the last batch's (:class:`RelayMetric`)
        self.newest: dict[str, Lane] = {}  # FIFO group -> what the relay published of it

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        started = time.monotonic()
        previous = deadline.bind(context)
        try:
            records = self.records = event.get("Records") or []
            counts = self.counts = Counter()
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
            messages += outgoing(index, record, self.config.target_arn)
        for request in requests(messages):
            first = request[0]
            if first.problem is not None:
                stopped = self._dead_letter(first, f"never published: {first.problem}", counts)
            else:
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
                return self._dead_letter(request[0], REFUSED + error_text(exc), counts)
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
                self._in_commit_order(message, counts)
                continue
            reason = f"{bad.get('Code')}: {bad.get('Message', '')}"
            for_good = bad.get("SenderFault") and bad.get("Code") in REFUSED_FOR_GOOD
            if first is None and for_good and self._dead_letter(message, REFUSED + reason, counts) is None:
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
        for position, found in enumerate(request):
            message = found.message
            assert message is not None
            entry: dict[str, Any] = {"Id": str(position), body: message.body}
            if message.attributes:
                entry["MessageAttributes"] = message.attributes
            if message.group_id is not None:
                entry["MessageGroupId"] = message.group_id
            if self.fifo:
                entry["MessageDeduplicationId"] = message.dedup_id
            entries.append(entry)
        if self.to_queue:
            client = self.target()
            url = queue_url(self.config.target_arn, client.meta.endpoint_url)
            return self.calls(client.send_message_batch, QueueUrl=url, Entries=entries)
        return self.calls(
            self.target().publish_batch, TopicArn=self.config.target_arn, PublishBatchRequestEntries=entries
        )

    def _dead_letter(self, letter: Outgoing, reason: str, counts: Counter[str]) -> Outgoing | None:
        """To the relay's DLQ with the reason (None); ``letter`` back when that fails or there is none. A
        form the queue refuses for its size or content is followed by the next (:func:`letters`)."""
        if self.config.dlq_url is None:
            self.log.warn(
                "never publishable, and the relay has no DLQ_URL: retried",
                dedup_id=letter.dedup_id,
                error=sqs_safe(reason),
            )
            return letter
        forms = letters(letter, reason, self._details(letter), SQS_MESSAGE_BYTES)
        for attempt, (body, attributes) in enumerate(forms, 1):
            try:
                self.calls(
                    self.sqs().send_message,
                    QueueUrl=self.config.dlq_url,
                    MessageBody=body,
                    MessageAttributes=attributes,
                )
                break
            except Exception as exc:
                if attempt < len(forms) and (too_large(exc) or error_code(exc) in REFUSED_FOR_GOOD):
                    continue
                self._failed(letter, exc, Resource.DLQ)
                return letter
        counts[RelayMetric.DEAD_LETTERED.value] += 1
        self.log.warn(
            "never publishable: sent to the relay's dead-letter queue",
            dedup_id=letter.dedup_id,
            reason=sqs_safe(reason),
            encoding=attributes.get(DLQ_ENCODING_ATTRIBUTE, {}).get("StringValue"),
        )
        return None

    def _details(self, letter: Outgoing) -> dict[str, Any]:
        """What a tool needs to find the message again and publish it (its ids, group, outbox item)."""
        sequence = (self.records[letter.record].get("dynamodb") or {}).get("SequenceNumber")
        return {
            "kind": DeadLetterKind.UNPUBLISHABLE.value,
            # Readers count a dead letter once by it: the deduplication id, or the record's.
            "source_message_id": letter.dedup_id or sequence,
            "emitted_by": letter.source_message_id,
            "group_id": letter.group,
            "dedup_id": letter.dedup_id,
            "target": self.config.target_arn,
            "table": self.config.table_name,
            "outbox_item": letter.item_key,
            "position": letter.position,
            "sequence_number": sequence,
            "function": self.config.function_name,
            "dropped_attributes": [],
        }

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

    def _in_commit_order(self, message: Outgoing, counts: Counter[str]) -> None:
        """Count and name ``message`` (just published) when its lane's newest published item committed after
        it and came from an earlier record of the shard (see the module)."""
        group = message.group
        partition = outbox_partition(self.config.key_prefix, group or "")
        committed = commit_ms(next((key for key in message.item_key.values() if key != partition), ""))
        if group is None or committed is None:
            return
        sequence = str((self.records[message.record].get("dynamodb") or {}).get("SequenceNumber"))
        position = int(sequence) if sequence.isdigit() else None
        lane = self.newest.get(group)
        later = position is None or lane is None or lane.position is None or position > lane.position
        if lane is not None and later and committed < lane.committed:
            counts[RelayMetric.REORDERED.value] += 1
            self.log.warn(
                "order: published after an item of its group that committed later (DynamoDB Streams orders "
                "records per item only)",
                group_id=group,
                published_first=lane.dedup_id,
                published_first_item=lane.item_key,
                committed_first=message.dedup_id,
                committed_first_item=message.item_key,
            )
        if lane is None or committed >= lane.committed:
            if len(self.newest) >= MAX_REMEMBERED_LANES and group not in self.newest:
                self.newest.clear()
            latest = position if later or lane is None else lane.position
            self.newest[group] = Lane(committed, latest, message.dedup_id, message.item_key)
        elif later:
            self.newest[group] = lane._replace(position=position)


def _oldest_age(records: list[dict[str, Any]]) -> float | None:
    created = [r.get("dynamodb", {}).get("ApproximateCreationDateTime") for r in records]
    known = [value for value in created if isinstance(value, (int, float))]
    return round(time.time() - min(known), 1) if known else None


_relay: Relay | None = None


def handler(event: dict[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
    """Lambda entry point ``idempotent_runtime.relay.handler``: the relay configured from the environment."""
    global _relay
    if _relay is None:
        _relay = configured(lambda: Relay(RelayConfig.from_env(os.environ)), "relay configuration refused")
    return _relay(event, context)
