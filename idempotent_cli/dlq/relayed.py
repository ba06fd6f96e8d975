"""The outbox relay's dead-letter queue: what it holds, and the way back (``dlq list|show|redrive
--function RELAY``, RELAY any name of the relay's function: its name, an output naming it, its logical id).

It holds two kinds of entry:

- **batch**: Lambda's on-failure record of a stream batch it gave up on (the relay failed until
  ``retry_attempts`` ran out, or its records outlived the stream's 24 hours: ``RecordAgeExceeded``). The
  body names the batch (``DDBStreamBatchInfo``: stream, shard, first and last sequence numbers, arrival
  times, size), not its messages. They are in the relay's outbox, unchanged until their TTL: ``redrive``
  reads the batch's records from the stream while it still holds them, else the relay's outbox items whose
  commit time (in their sort key) lies between the batch's first arrival less :data:`COMMIT_LAG_SECONDS`
  and its last arrival, widened by :data:`MARGIN_SECONDS` on each side (the commit time is the committing
  function's clock, the arrival DynamoDB's), in commit time order. Outbox items of other batches in that
  window are published again too: harmless, as below. So the count cannot prove that none of the batch's
  own items expired: the entry leaves only while none committed in the window can have (outbox items live
  ``OUTBOX_TTL_SECONDS`` at least); later, or with fewer items than the batch's size, those found are
  published and the entry stays, saying so, until a redrive with ``--force`` (the operator satisfied).
  Items of one group committed within :data:`ATTEMPT_SECONDS` of each other have no order the table can
  tell: the redrive says how many.
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

import io
import json
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError
from idempotent_runtime import contract
from idempotent_runtime import outbox as layout
from idempotent_runtime import relay as runtime
from idempotent_runtime.clients import CONNECT_TIMEOUT, READ_TIMEOUT

from idempotent_cli.console import Console
from idempotent_cli.dlq.letters import DeadLetter, Which, iso_seconds, json_object, utc_text
from idempotent_cli.dlq.queue import Decision, Queue, walk
from idempotent_cli.errors import DlqError
from idempotent_cli.stack import Relay
from idempotent_local.event_filter import matches
from idempotent_local.events import lambda_dynamodb_record

# Widening of a batch's arrival times when its records are looked up by commit time in the table.
MARGIN_SECONDS = 60
# How long a commit may follow the time in its sort key: one attempt since the time is taken at each, the
# invocation (Lambda's longest, 15 minutes) for items committed by 0.4, which took it before the first.
COMMIT_LAG_SECONDS = 900
# Two commits of one group closer than one attempt may last (the runtime's client timeouts) have no order
# the table can tell.
ATTEMPT_SECONDS = CONNECT_TIMEOUT + READ_TIMEOUT
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
    body = json_object("the body", letter.body)[0] or {}
    info = body.get(BATCH_INFO)
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


class Missing(NamedTuple):
    """What a batch's records found in the table may lack: ``known`` (fewer than the batch's size: gone),
    else unproven (only the time says some may have expired; ``--force`` deletes the entry)."""

    text: str
    known: bool

    def stays(self, force: bool) -> bool:
        """Whether the entry stays: items known gone always (it is their last trace), else unless forced."""
        return self.known or not force

    def why(self) -> str:
        """Why it stays, for the redrive's line."""
        if self.known:
            return f"not every message of it was found: {self.text}"
        return f"{self.text} (--force deletes it)"


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
        # The relay's event filter, applied as the local cloud applies Lambda's: the stream as it is given.
        filters = layout.stream_filters(self.partition_key, self.sort_key, self.key_prefix)
        self.filters = [json.dumps(pattern) for pattern in filters]

    def batch(self, info: dict[str, Any]) -> tuple[list[dict[str, Any]], str, Missing | None]:
        """The batch's outbox records in commit order, where they were read, and what is missing (None)."""
        records = self._from_stream(info)
        if records is not None:
            return records, f"stream {info['streamArn']}", None
        low, high = _window(info)
        items = self._from_table(low, high)
        where = (
            f"table {self.table}: the stream no longer holds the batch; outbox items committed "
            f"{utc_text(low / 1000)}..{utc_text(high / 1000)} (the arrivals - {COMMIT_LAG_SECONDS} s, "
            f"± {MARGIN_SECONDS} s)" + _unknown_order(items, self.sort_key)
        )
        size = info.get("batchSize")
        missing = None
        if isinstance(size, int) and len(items) < size:
            text = f"the batch had {size} record(s), the table holds {len(items)} (expired by their TTL?)"
            missing = Missing(text, known=True)
        elif _now() * 1000 >= low + (layout.OUTBOX_TTL_SECONDS - MARGIN_SECONDS) * 1000:
            # The window's items outnumber the batch's (other batches' are in it too): only the time can
            # tell that none of the batch's own has expired since (by DynamoDB's clock: the margin).
            missing = Missing(
                f"outbox items committed since {utc_text(low / 1000)} may have expired by their TTL "
                f"({layout.OUTBOX_TTL_SECONDS // 3600} h after their commit): the table cannot show that it "
                "still holds every record of the batch",
                known=False,
            )
        return [self.record(item, f"table:{self.table}") for item in items], where, missing

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
                    given = lambda_dynamodb_record(record, info["streamArn"])
                    if matches(self.filters, given):
                        found.append(given)
                if not records:
                    return found
                iterator = response.get("NextShardIterator")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _GONE:
                return None
            raise
        return found

    def _from_table(self, low: int, high: int) -> list[dict[str, Any]]:
        """The relay's outbox items committed between ``low`` and ``high`` (epoch ms), by commit time."""
        pages = (
            self.clients("dynamodb")
            .get_paginator("scan")
            .paginate(
                TableName=self.table,
                ConsistentRead=True,
                FilterExpression="#e = :e AND #s BETWEEN :low AND :high",
                ExpressionAttributeNames={"#e": layout.OUTBOX_EMITTER_ATTRIBUTE, "#s": self.sort_key},
                ExpressionAttributeValues={
                    ":e": {"S": layout.emitter(self.key_prefix)},
                    ":low": {"S": layout.outbox_sort(low, "")},
                    # "$" sorts right after "#": every sort key of the last millisecond is below it.
                    ":high": {"S": layout.outbox_sort(high, "")[:-1] + "$"},
                },
            )
        )
        items = [item for page in pages for item in page.get("Items", [])]
        items.sort(key=lambda item: (item[self.sort_key]["S"], item[self.partition_key]["S"]))
        return items

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


def _unknown_order(items: list[dict[str, Any]], sort_key: str) -> str:
    """What ``items`` (by commit time) cannot tell: how many committed within ATTEMPT_SECONDS of the item
    before them in their group."""
    close = 0
    previous: dict[str | None, int | None] = {}  # group -> the commit time of its item before
    for item in items:
        group = (item.get(layout.OUTBOX_GROUP_ATTRIBUTE) or {}).get("S")
        committed, before = layout.commit_ms(item[sort_key]["S"]), previous.get(group)
        if group and committed is not None and before is not None:
            close += committed - before < ATTEMPT_SECONDS * 1000
        previous[group] = committed
    said = f"; {close} of them committed within {ATTEMPT_SECONDS} s of the one before in their group"
    return said + ", an order the table cannot tell (published by commit time)" if close else ""


def _now() -> float:
    """The operator's clock (epoch seconds)."""
    return time.time()


def _window(info: dict[str, Any]) -> tuple[int, int]:
    """Epoch milliseconds: the batch's first arrival - COMMIT_LAG - MARGIN, its last + MARGIN (arrivals are
    in seconds)."""
    first = iso_seconds(info.get("approximateArrivalOfFirstRecord"))
    last = iso_seconds(info.get("approximateArrivalOfLastRecord")) or first
    if first is None or last is None:
        raise DlqError(f"the batch's arrival times are missing or unreadable: {info}")
    low = first - COMMIT_LAG_SECONDS - MARGIN_SECONDS
    return round(low * 1000), round((last + 1 + MARGIN_SECONDS) * 1000)


# -- publishing: the relay's own code ---------------------------------------------------------------------


def _reasons(log: str) -> str:
    """The relay's warnings and errors in its JSON ``log``, one line each (what did not go out, and why)."""
    lines = []
    for line in log.splitlines():
        fields = json_object("a log line", line)[0] or {}
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


def _entries_of(context: RelayContext, dlq: Queue, message_id: str | None = None) -> tuple[list[Entry], Any]:
    """The entries of the relay's DLQ, read (with ``message_id``: that one only), and the walk's result."""
    found: list[Entry] = []

    def visit(letter: DeadLetter) -> Decision:
        if message_id is None or letter.message_id == message_id:
            found.append(read(letter))
        return Decision.LEAVE if message_id is None or not found else Decision.STOP

    return found, walk(dlq, Which.DLQ, visit, clock=context.console.clock, sleep=context.console.sleep)


def cmd_list(context: RelayContext, *, as_json: bool) -> int:
    from idempotent_cli.dlq.commands import report_walk

    dlq = context.dlq()
    if not as_json:
        context.header(dlq)
    entries, result = _entries_of(context, dlq)
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
    found, _ = _entries_of(context, dlq, message_id)
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

    def __init__(
        self, context: RelayContext, dlq: Queue, *, dry_run: bool, limit: int | None, force: bool
    ) -> None:
        self.context, self.dlq, self.dry_run, self.limit = context, dlq, dry_run, limit
        self.force = force  # delete a batch entry once what was found is published, even if not all
        self.outbox = Outbox(context.clients, context.relay)
        self.config = runtime.RelayConfig.from_env(context.relay.environment)
        self.tally: Counter[str] = Counter()
        self.done = 0

    def __call__(self, letter: DeadLetter) -> Decision:
        if self.limit is not None and self.done >= self.limit:
            return Decision.STOP
        entry = read(letter)
        say = self.context.console.print
        try:
            records, where, missing = self._records(entry)
        except (ClientError, BotoCoreError, DlqError) as exc:
            return self._keep(entry, f"cannot read what it stands for: {exc}")
        if records is None:
            return self._keep(entry, where)
        target = self.config.target_arn
        messages = [m for index, r in enumerate(records) for m in runtime.outgoing(index, r, target)]
        head = f"{letter.message_id}  {entry.describe()}\n    {len(messages)} message(s) from {where}"
        if self.dry_run:
            self.done += 1
            self.tally["would publish"] += 1
            say(head)
            for message in messages:
                state = f"never publishable: {message.problem}" if message.problem else "would publish"
                say(f"    {message.dedup_id} group {message.group}: {state}")
            if missing:
                stays = missing.stays(self.force)
                say(f"    would {'stay' if stays else 'be deleted (--force), though'}: {missing.text}")
            return Decision.LEAVE
        if entry.kind == UNPUBLISHABLE and messages and messages[0].problem:
            return self._keep(entry, f"still refused: {messages[0].problem}")
        ok, counts, reasons = self._publish(records, dead_letters=entry.kind == BATCH)
        if not ok:
            return self._keep(entry, f"not all published ({reasons or 'see the relay log'}): it stays")
        dead = counts.get(runtime.RelayMetric.DEAD_LETTERED.value, 0)
        kept = missing is not None and missing.stays(self.force)
        say(
            f"{head}: published {counts.get(runtime.RelayMetric.PUBLISHED.value, 0)}"
            + (f", {dead} refused for good sent back to this DLQ with the reason" if dead else "")
            + ("" if kept else "; deleted from the DLQ")
            + (f" (--force, though {missing.text})" if missing and not kept else "")
        )
        if missing and kept:
            return self._keep(entry, missing.why())
        self.dlq.delete(letter)
        self.done += 1
        self.tally["redriven"] += 1
        return Decision.DELETED

    def _publish(
        self, records: list[dict[str, Any]], *, dead_letters: bool
    ) -> tuple[bool, Counter[str], str]:
        """Publish ``records`` with the relay's own code (:class:`idempotent_runtime.relay.Relay`) and the
        operator's clients; whether all went out (or, with ``dead_letters``, to the relay's DLQ), the relay's
        counts, and its log (the reasons of what did not)."""
        service = self.config.target_arn.split(":")[2]
        config = self.config if dead_letters else replace(self.config, dlq_url=None)
        log = io.StringIO()
        clients = self.context.clients
        relay = runtime.Relay(
            config, target_client=clients(service), sqs_client=clients("sqs"), log_stream=log
        )
        answer = relay({"Records": records})
        return not answer["batchItemFailures"], relay.counts, _reasons(log.getvalue())

    def _records(self, entry: Entry) -> tuple[list[dict[str, Any]] | None, str, Missing | None]:
        """What ``entry`` stands for as stream records (None: nothing to publish), where they were read,
        and what of it is missing (None: nothing)."""
        if entry.kind == BATCH:
            assert entry.batch is not None
            records, where, missing = self.outbox.batch(entry.batch)
            if not records:
                return None, f"no outbox record of this batch found ({where})", None
            return records, where, missing
        if entry.kind == UNPUBLISHABLE:
            return *self._dead_letter(entry), None
        return None, entry.problem or "unreadable", None

    def _dead_letter(self, entry: Entry) -> tuple[list[dict[str, Any]] | None, str]:
        """The one message of an unpublishable entry: from its outbox item while it holds it at its position
        (checked by its deduplication id: 0.3's item was replaced by every emit), else from the dead
        letter."""
        details = entry.details
        position = details.get("position")
        item = self.outbox.item(details.get("outbox_item") or {})
        messages = ((item or {}).get(layout.OUTBOX_MESSAGES_ATTRIBUTE) or {}).get("L") or []
        held = messages[position] if isinstance(position, int) and 0 <= position < len(messages) else {}
        named = details.get("dedup_id")
        if item is not None and named and (held.get("M") or {}).get(layout.OUTBOX_DEDUP_ID) == {"S": named}:
            image = {**item, layout.OUTBOX_MESSAGES_ATTRIBUTE: {"L": [held]}}
            where = f"outbox item {details.get('outbox_item')} of table {self.outbox.table}"
            return [self.outbox.record(image, f"dlq:{entry.letter.message_id}")], where
        carried = runtime.read_dead_letter(entry.letter.body, entry.letter.attributes)
        if not carried or "body" not in carried or not details.get("dedup_id"):
            return None, (
                "the message is in neither its outbox item (expired, or replaced by a later emit) nor the "
                "dead letter (omitted, or a record that was not an outbox item): nothing to publish"
            )
        emitted = layout.Emitted(
            carried["body"], details.get("group_id"), details["dedup_id"], carried.get("attributes") or {}
        )
        image = {layout.OUTBOX_MESSAGES_ATTRIBUTE: {"L": [layout.stored(emitted)]}}
        if emitted.group_id is not None:
            image[layout.OUTBOX_GROUP_ATTRIBUTE] = {"S": emitted.group_id}
        now = "is gone" if item is None else f"holds another message at {position} now"
        return [_inserted(image, (), "dlq")], f"the dead letter (its outbox item {now})"

    def _keep(self, entry: Entry, why: str) -> Decision:
        self.tally["kept"] += 1
        self.context.console.print(f"{entry.letter.message_id}  {entry.describe()}\n    kept: {why}")
        return Decision.LEAVE_AND_STOP_GROUP


def cmd_redrive(
    context: RelayContext, *, dry_run: bool, limit: int | None, force: bool = False, yes: bool = False
) -> int:
    from idempotent_cli.dlq.commands import report_unread, report_walk

    dlq = context.dlq()
    context.header(dlq)
    if force and not dry_run:
        context.console.confirm(
            "--force deletes each batch entry whose items the table cannot show it still holds all of, once "
            "those it holds are published (check the downstream consumer first).",
            yes=yes,
        )
    redriver = Redriver(context, dlq, dry_run=dry_run, limit=limit, force=force)
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
