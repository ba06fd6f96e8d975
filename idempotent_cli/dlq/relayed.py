"""The outbox relay's dead-letter queue: what it holds, and the way back (``dlq list|show|redrive
--function RELAY``, RELAY any name of the relay's function: its name, an output naming it, its logical id).

It holds two kinds of entry:

- **batch**: Lambda's on-failure record of a stream batch it gave up on (the relay failed until
  ``retry_attempts`` ran out, or its records outlived the stream's 24 hours: ``RecordAgeExceeded``). The
  body names the batch (``DDBStreamBatchInfo``: stream, shard, first and last sequence numbers, arrival
  times), not its messages. They are in the relay's outbox, unchanged until their TTL: ``redrive`` reads the
  batch's records from the stream while it still holds them, else the relay's outbox items whose commit
  time (in their sort key) lies between the batch's first and last arrival, widened by
  :data:`MARGIN_SECONDS` on each side (the commit time is the committing function's clock, the arrival
  DynamoDB's). Outbox items of other batches in that window are published again too: harmless, as below.
- **unpublishable**: an emitted message the relay could not publish for good (its reason in
  ``idempotency.reason``, the outbox item and the message's position in ``idempotency.details``, the
  message itself, maybe encoded: :func:`idempotent_runtime.relay.read_dead_letter`). ``redrive`` publishes it
  again - from its outbox item while that exists, else from the dead letter - once the target takes it.

Publishing is the relay's own code (:class:`idempotent_runtime.relay.Relay`, run here with the operator's
credentials): the same checks, the original MessageGroupId and MessageDeduplicationId, records in commit
order (each downstream group in its order), ten a request. A message published twice is absorbed: by the
target's deduplication within 5 minutes, after that by the consumer downstream (keyed by ``dedup_id``, or by
its business key). An entry leaves the queue only once everything it stands for was published; a batch's
message the target refuses for good goes to the relay's DLQ as its own unpublishable entry, as the relay
would have sent it; an unpublishable entry the target still refuses stays, with the new reason.
"""

from __future__ import annotations

import datetime
import io
import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from idempotent_runtime import contract
from idempotent_runtime import outbox as layout
from idempotent_runtime import relay as runtime

from idempotent_cli.dlq.console import Console
from idempotent_cli.dlq.letters import DeadLetter, Which
from idempotent_cli.dlq.queue import Decision, Queue, walk
from idempotent_cli.errors import DlqError
from idempotent_cli.stack import Relay
from idempotent_local.events import lambda_dynamodb_record

# Widening of a batch's arrival times when its records are looked up by commit time in the table.
MARGIN_SECONDS = 60
BATCH_INFO = "DDBStreamBatchInfo"
BATCH, UNPUBLISHABLE, UNKNOWN = "batch", "unpublishable", "unknown"
# The stream no longer holds what was asked (trimmed after 24 hours, the stream deleted or replaced).
_GONE = frozenset(
    {
        "TrimmedDataAccessException",
        "ResourceNotFoundException",
        "ExpiredIteratorException",
        "ValidationException",
    }
)


@dataclass(frozen=True)
class Entry:
    """One dead letter of the relay's queue, read."""

    letter: DeadLetter
    kind: str
    batch: dict[str, Any] | None = None  # DDBStreamBatchInfo
    condition: str | None = None  # Lambda's: RetryAttemptsExhausted, RecordAgeExceeded, ...
    problem: str | None = None  # why an entry cannot be read

    @property
    def details(self) -> dict[str, Any]:
        return self.letter.details or {}

    def describe(self) -> str:
        if self.kind == BATCH:
            info = self.batch or {}
            return (
                f"batch: shard {info.get('shardId')}, sequence {info.get('startSequenceNumber')}.."
                f"{info.get('endSequenceNumber')} ({info.get('batchSize')} record(s)), arrived "
                f"{info.get('approximateArrivalOfFirstRecord')}..{info.get('approximateArrivalOfLastRecord')}"
                f", {self.condition or 'condition unknown'}"
            )
        if self.kind == UNPUBLISHABLE:
            details = self.details
            return (
                f"unpublishable: dedup id {details.get('dedup_id')}, group {details.get('group_id')}: "
                f"{self.letter.reason}"
            )
        return f"unknown: {self.problem}"

    def summary(self) -> dict[str, Any]:
        found: dict[str, Any] = {"message_id": self.letter.message_id, "kind": self.kind}
        found["description"] = self.describe()
        if self.kind == BATCH:
            found.update(batch=self.batch, condition=self.condition)
        elif self.kind == UNPUBLISHABLE:
            found.update(reason=self.letter.reason, details=self.details)
        return found


def read(letter: DeadLetter) -> Entry:
    """What ``letter`` is (see the module)."""
    if (letter.details or {}).get("kind") == contract.DeadLetterKind.UNPUBLISHABLE.value:
        return Entry(letter, UNPUBLISHABLE)
    try:
        body = json.loads(letter.body)
    except ValueError:
        body = None
    info = body.get(BATCH_INFO) if isinstance(body, dict) else None
    needed = ("shardId", "startSequenceNumber", "endSequenceNumber", "streamArn")
    if isinstance(info, dict) and all(isinstance(info.get(name), str) for name in needed):
        condition = (body.get("requestContext") or {}).get("condition")
        return Entry(letter, BATCH, batch=info, condition=condition)
    return Entry(
        letter,
        UNKNOWN,
        problem=f"neither a relay's dead letter nor Lambda's record of a stream batch ({BATCH_INFO}): "
        f"{letter.body[:120]!r}",
    )


class Outbox:
    """The relay's table and outbox: where a batch's records and a dead letter's item are read back."""

    def __init__(self, clients: Any, relay: Relay) -> None:
        self.clients, self.relay = clients, relay
        environment = relay.environment
        self.table = environment.get(contract.TABLE_NAME.name) or relay.table_name
        if not self.table:
            raise DlqError(f"relay {relay.label}: its function names no {contract.TABLE_NAME.name}")
        self.key_prefix = environment.get(contract.KEY_PREFIX.name, "")
        schema = clients("dynamodb").describe_table(TableName=self.table)["Table"]["KeySchema"]
        names = {entry["KeyType"]: entry["AttributeName"] for entry in schema}
        self.partition_key, self.sort_key = names["HASH"], names.get("RANGE", "")
        self.filters = layout.stream_filters(self.partition_key, self.sort_key, self.key_prefix)

    def batch(self, info: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The batch's outbox records in commit order, and where they were read."""
        records = self._from_stream(info)
        if records is not None:
            return records, f"stream {info['streamArn']}"
        low, high = _window(info)
        return self._from_table(low, high), (
            f"table {self.table}: the stream no longer holds the batch; outbox items committed "
            f"{_iso(low)}..{_iso(high)} (the arrivals ± {MARGIN_SECONDS} s)"
        )

    def _from_stream(self, info: dict[str, Any]) -> list[dict[str, Any]] | None:
        streams = self.clients("dynamodbstreams")
        end = int(info["endSequenceNumber"])
        found: list[dict[str, Any]] = []
        try:
            iterator = streams.get_shard_iterator(
                StreamArn=info["streamArn"],
                ShardId=info["shardId"],
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=info["startSequenceNumber"],
            )["ShardIterator"]
            while iterator:
                response = streams.get_records(ShardIterator=iterator, Limit=1000)
                records = response.get("Records", [])
                for record in records:
                    if int(record["dynamodb"]["SequenceNumber"]) > end:
                        return found
                    if layout.matches_any(self.filters, record):
                        found.append(lambda_dynamodb_record(record, info["streamArn"]))
                if not records:
                    return found
                iterator = response.get("NextShardIterator")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _GONE:
                return None
            raise
        return found

    def _from_table(self, low: int, high: int) -> list[dict[str, Any]]:
        client = self.clients("dynamodb")
        request: dict[str, Any] = {
            "TableName": self.table,
            "ConsistentRead": True,
            "FilterExpression": "#e = :e AND #s BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#e": layout.OUTBOX_EMITTER_ATTRIBUTE, "#s": self.sort_key},
            "ExpressionAttributeValues": {
                ":e": {"S": layout.emitter(self.key_prefix)},
                ":low": {"S": layout.outbox_sort(low, "")},
                # "$" sorts right after "#": every sort key of the last millisecond is below it.
                ":high": {"S": layout.outbox_sort(high, "")[:-1] + "$"},
            },
        }
        items: list[dict[str, Any]] = []
        while True:
            response = client.scan(**request)
            items += response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        items.sort(key=lambda item: (item[self.sort_key]["S"], item[self.partition_key]["S"]))
        return [self.record(item, f"table:{self.table}") for item in items]

    def item(self, key: dict[str, Any]) -> dict[str, Any] | None:
        """The outbox item a dead letter names (``outbox_item``: attribute name -> string), or None."""
        if set(key) != {self.partition_key, self.sort_key}:
            return None
        found = self.clients("dynamodb").get_item(
            TableName=self.table,
            Key={name: {"S": value} for name, value in key.items()},
            ConsistentRead=True,
        )
        return found.get("Item")

    def record(self, image: dict[str, Any], sequence: str) -> dict[str, Any]:
        """A stream record of ``image``, as the relay reads one."""
        return _inserted(image, (self.partition_key, self.sort_key), sequence)


def _inserted(image: dict[str, Any], key_names: tuple[str, ...], sequence: str) -> dict[str, Any]:
    """The stream record of ``image`` written (an outbox item, or a message rebuilt from its dead letter)."""
    keys = {name: image[name] for name in key_names if name in image}
    return {"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": image, "SequenceNumber": sequence}}


def _window(info: dict[str, Any]) -> tuple[int, int]:
    """Epoch milliseconds: the batch's first arrival - MARGIN, its last + MARGIN (arrivals are in seconds)."""
    first = _arrival(info.get("approximateArrivalOfFirstRecord"))
    last = _arrival(info.get("approximateArrivalOfLastRecord")) or first
    if first is None or last is None:
        raise DlqError(f"the batch's arrival times are missing or unreadable: {info}")
    return round((first - MARGIN_SECONDS) * 1000), round((last + 1 + MARGIN_SECONDS) * 1000)


def _arrival(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _iso(milliseconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(milliseconds / 1000, datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


# -- publishing: the relay's own code ---------------------------------------------------------------------


class Publisher:
    """Runs the relay (:class:`idempotent_runtime.relay.Relay`) on records, with the operator's clients."""

    def __init__(self, clients: Any, relay: Relay) -> None:
        self.clients, self.relay = clients, relay
        self.config = runtime.RelayConfig.from_env(relay.environment)
        self.fifo = self.config.target_arn.endswith(contract.FIFO_QUEUE_SUFFIX)

    def messages(self, records: list[dict[str, Any]]) -> list[runtime.Outgoing]:
        return [m for index, r in enumerate(records) for m in runtime.outgoing(index, r, self.fifo)]

    def publish(self, records: list[dict[str, Any]], *, dead_letters: bool) -> tuple[bool, Counter[str], str]:
        """Publish ``records``; whether all went out (or, with ``dead_letters``, to the relay's DLQ), the
        relay's counts, and its log (the reasons of what did not)."""
        service = self.config.target_arn.split(":")[2]
        config = self.config if dead_letters else replace(self.config, dlq_url=None)
        log = io.StringIO()
        relay = runtime.Relay(
            config, target_client=self.clients(service), sqs_client=self.clients("sqs"), log_stream=log
        )
        answer = relay({"Records": records})
        entries = _entries(log.getvalue())
        counts: Counter[str] = Counter()
        for fields in entries:
            for metric in runtime.RelayMetric:
                if isinstance(fields.get(metric.value), int):
                    counts[metric.value] += fields[metric.value]
        return not answer["batchItemFailures"], counts, _reasons(entries)


def _entries(log: str) -> list[dict[str, Any]]:
    """The relay's JSON log lines, read once."""
    entries = []
    for line in log.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def _reasons(entries: list[dict[str, Any]]) -> str:
    """The relay's warnings and errors, one line each (what did not go out, and why)."""
    lines = []
    for fields in entries:
        if fields.get("level") in ("WARNING", "ERROR") and "message" in fields:
            error = fields.get("error") or fields.get("reason") or ""
            lines.append(f"{fields['message']}" + (f" ({fields.get('dedup_id')}: {error})" if error else ""))
    return "; ".join(lines)


# -- the commands -------------------------------------------------------------------------------------------


@dataclass
class RelayContext:
    clients: Any
    console: Console
    relay: Relay
    visibility_seconds: int
    wait_seconds: int

    def dlq(self) -> Queue:
        url = self.relay.dead_letter_queue_url
        if not url:
            raise DlqError(f"relay {self.relay.label} has no dead-letter queue (its function has no DLQ_URL)")
        return Queue(
            self.clients("sqs"),
            url,
            visibility_seconds=self.visibility_seconds,
            wait_seconds=self.wait_seconds,
        )

    def header(self, dlq: Queue) -> None:
        counts = dlq.counts()
        self.console.print(
            f"dead-letter queue {dlq.url} of the outbox relay {self.relay.label} (it publishes to "
            f"{self.relay.target_arn}), in {self.clients.where}"
        )
        self.console.print(
            f"{counts.total} message(s): {counts.visible} visible, {counts.in_flight} in flight"
        )


def cmd_list(context: RelayContext, *, as_json: bool) -> int:
    from idempotent_cli.dlq.commands import report_walk

    dlq = context.dlq()
    if not as_json:
        context.header(dlq)
    entries: list[Entry] = []

    def visit(letter: DeadLetter) -> Decision:
        entries.append(read(letter))
        return Decision.LEAVE

    result = walk(dlq, Which.DLQ, visit, clock=context.console.clock, sleep=context.console.sleep)
    if as_json:
        context.console.print(json.dumps([entry.summary() for entry in entries], indent=2, default=str))
        return 0
    for entry in entries:
        context.console.print(f"{entry.letter.message_id}  {entry.describe()}")
    kinds = Counter(entry.kind for entry in entries)
    context.console.print(", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "no message")
    report_walk(context.console, result)
    return 0


def cmd_show(context: RelayContext, *, message_id: str, as_json: bool) -> int:
    dlq = context.dlq()
    found: list[Entry] = []

    def visit(letter: DeadLetter) -> Decision:
        if letter.message_id == message_id:
            found.append(read(letter))
            return Decision.STOP
        return Decision.LEAVE

    walk(dlq, Which.DLQ, visit, clock=context.console.clock, sleep=context.console.sleep)
    if not found:
        raise DlqError(
            f"no message {message_id} in {dlq.url}; `dlq list --function {context.relay.function}`"
        )
    summary = found[0].summary()
    if found[0].kind == UNPUBLISHABLE:
        carried = runtime.read_dead_letter(found[0].letter.body, found[0].letter.attributes)
        summary["message"] = carried
    if as_json:
        context.console.print(json.dumps(summary, indent=2, default=str))
    else:
        for name, value in summary.items():
            context.console.print(
                f"{name}: {json.dumps(value, default=str) if not isinstance(value, str) else value}"
            )
    return 0


class Redriver:
    """Visits each entry of the relay's DLQ and publishes what it stands for (see the module)."""

    def __init__(self, context: RelayContext, dlq: Queue, *, dry_run: bool, limit: int | None) -> None:
        self.context, self.dlq, self.dry_run, self.limit = context, dlq, dry_run, limit
        self.outbox = Outbox(context.clients, context.relay)
        self.publisher = Publisher(context.clients, context.relay)
        self.tally: Counter[str] = Counter()
        self.done = 0

    def __call__(self, letter: DeadLetter) -> Decision:
        if self.limit is not None and self.done >= self.limit:
            return Decision.STOP
        entry = read(letter)
        say = self.context.console.print
        try:
            records, where = self._records(entry)
        except (ClientError, BotoCoreError, DlqError) as exc:
            return self._keep(entry, f"cannot read what it stands for: {exc}")
        if records is None:
            return self._keep(entry, where)
        messages = self.publisher.messages(records)
        head = f"{letter.message_id}  {entry.describe()}\n    {len(messages)} message(s) from {where}"
        if self.dry_run:
            self.done += 1
            self.tally["would publish"] += 1
            say(head)
            for message in messages:
                state = f"never publishable: {message.problem}" if message.problem else "would publish"
                say(f"    {message.dedup_id} group {message.group}: {state}")
            return Decision.LEAVE
        if entry.kind == UNPUBLISHABLE and messages and messages[0].problem:
            return self._keep(entry, f"still refused: {messages[0].problem}")
        ok, counts, reasons = self.publisher.publish(records, dead_letters=entry.kind == BATCH)
        if not ok:
            return self._keep(entry, f"not all published ({reasons or 'see the relay log'}): it stays")
        self.dlq.delete(letter)
        self.done += 1
        self.tally["redriven"] += 1
        dead = counts.get(runtime.RelayMetric.DEAD_LETTERED.value, 0)
        say(
            f"{head}: published {counts.get(runtime.RelayMetric.PUBLISHED.value, 0)}"
            + (f", {dead} refused for good sent back to this DLQ with the reason" if dead else "")
            + "; deleted from the DLQ"
        )
        return Decision.DELETED

    def _records(self, entry: Entry) -> tuple[list[dict[str, Any]] | None, str]:
        if entry.kind == BATCH:
            assert entry.batch is not None
            records, where = self.outbox.batch(entry.batch)
            if not records:
                return None, f"no outbox record of this batch found ({where})"
            return records, where
        if entry.kind == UNPUBLISHABLE:
            return self._dead_letter(entry)
        return None, entry.problem or "unreadable"

    def _dead_letter(self, entry: Entry) -> tuple[list[dict[str, Any]] | None, str]:
        """The one message of an unpublishable entry: from its outbox item while it exists, else from the
        dead letter."""
        details = entry.details
        position = details.get("position")
        item = self.outbox.item(details.get("outbox_item") or {})
        if item is not None and isinstance(position, int):
            messages = (item.get(layout.OUTBOX_MESSAGES_ATTRIBUTE) or {}).get("L") or []
            if 0 <= position < len(messages):
                image = {**item, layout.OUTBOX_MESSAGES_ATTRIBUTE: {"L": [messages[position]]}}
                where = f"outbox item {details.get('outbox_item')} of table {self.outbox.table}"
                return [self.outbox.record(image, f"dlq:{entry.letter.message_id}")], where
        carried = runtime.read_dead_letter(entry.letter.body, entry.letter.attributes)
        if not carried or "body" not in carried or not details.get("dedup_id"):
            return None, (
                "the message is in neither its outbox item (expired) nor the dead letter (omitted, or a "
                "record that was not an outbox item): nothing to publish"
            )
        emitted = layout.Emitted(
            carried["body"], details.get("group_id"), details["dedup_id"], carried.get("attributes") or {}
        )
        image = {layout.OUTBOX_MESSAGES_ATTRIBUTE: {"L": [layout.stored(emitted)]}}
        if emitted.group_id is not None:
            image[layout.OUTBOX_GROUP_ATTRIBUTE] = {"S": emitted.group_id}
        return [_inserted(image, (), "dlq")], "the dead letter (its outbox item is gone)"

    def _keep(self, entry: Entry, why: str) -> Decision:
        self.tally["kept"] += 1
        self.context.console.print(f"{entry.letter.message_id}  {entry.describe()}\n    kept: {why}")
        return Decision.LEAVE_AND_STOP_GROUP


def cmd_redrive(context: RelayContext, *, dry_run: bool, limit: int | None) -> int:
    from idempotent_cli.dlq.commands import report_unread, report_walk

    dlq = context.dlq()
    context.header(dlq)
    redriver = Redriver(context, dlq, dry_run=dry_run, limit=limit)
    context.console.print(
        ("checking" if dry_run else "publishing again")
        + f" to {context.relay.target_arn}, from the relay's outbox"
    )
    result = walk(dlq, Which.DLQ, redriver, clock=context.console.clock, sleep=context.console.sleep)
    outcome = ", ".join(f"{n} {name}" for name, n in sorted(redriver.tally.items())) or "no message"
    context.console.print(outcome + ("; nothing was changed" if dry_run else ""))
    report_walk(context.console, result)
    unread = report_unread(context.console, result)
    return 1 if redriver.tally["kept"] or unread else 0
