"""The poller of a DynamoDB stream event source mapping: reads each shard in sequence order past the
mapping's checkpoint, drops the records the mapping's filters do not match, invokes the function with
Lambda's DynamoDB stream event (:func:`idempotent_local.events.lambda_dynamodb_record`) one batch at a time
per shard, and checkpoints, retries, bisects and discards as :mod:`idempotent_local.streams` describes.
A discarded batch's invocation record goes to the mapping's on-failure destination (an SQS queue or an SNS
topic); records that left the stream before the mapping delivered them are given up the same way."""

from __future__ import annotations

import datetime
import json
import threading
import uuid
from typing import Any

from botocore.exceptions import ClientError

from idempotent_local import streams
from idempotent_local.accounting import Batch, batch_error, record_outcomes
from idempotent_local.errors import RunnerError
from idempotent_local.event_filter import matches
from idempotent_local.events import lambda_dynamodb_record, stream_invocation_record
from idempotent_local.functions import Worker
from idempotent_local.mappings import StreamMapping, plural, queue_url
from idempotent_local.pollers.poller import Poller

TRIMMED = "TrimmedDataAccessException"  # DynamoDB Streams: the position asked for has left the stream


class Trimmed(Exception):
    """The records after a stream mapping's checkpoint have left the stream before it delivered them."""


class StreamPoller(Poller):
    mapping: StreamMapping

    def __init__(self, mapping: StreamMapping, *args: Any) -> None:
        super().__init__(mapping, *args)
        self._shards: dict[str, streams.Shard] = {}  # shard id -> what is pending in it
        self._lock = threading.Lock()  # one step of the mapping at a time

    @property
    def _streams(self) -> Any:
        return self.context.emulator.client("dynamodbstreams")

    def poll_events(self, worker: Worker, wait_seconds: int | None, abandon: threading.Event | None) -> int:
        """One step of each shard (read, filter, invoke, checkpoint): the stream records handled, delivered,
        read past or discarded. Idle, it waits a quarter of a second, as Lambda polls a shard four times a
        second (not with ``wait_seconds`` 0)."""
        handled = 0
        with self._lock:
            for shard_id in self._shard_ids():
                handled += self._step(shard_id, worker)
        if not handled and self.wait(wait_seconds):
            (abandon or threading.Event()).wait(streams.POLL_SECONDS)
        return handled

    def backlog(self) -> int:
        """The stream's records after the mapping's checkpoints (a batch waiting for its retry included)."""
        left = 0
        for shard_id in self._shard_ids():
            try:
                left += len(self._unread(shard_id))
            except Trimmed:  # records it has yet to give up
                left += 1
        return left

    def filter_events(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [event for event in events if matches(self.mapping.filters, event)]

    def _shard_ids(self) -> list[str]:
        described = self._streams.describe_stream(StreamArn=self.mapping.stream_arn)["StreamDescription"]
        return [shard["ShardId"] for shard in described["Shards"]]

    def _checkpoint(self, shard_id: str, position: streams.Position | None = None) -> streams.Position | None:
        """The mapping's position in the shard, moved to ``position`` when given."""
        checkpoints = self.context.checkpoints
        if position is not None:
            checkpoints.set(self.mapping.uuid, shard_id, position)
        return checkpoints.get(self.mapping.uuid, shard_id)

    def _unread(self, shard_id: str) -> list[dict[str, Any]]:
        """The shard's records after the mapping's checkpoint (from its start without one), a read's worth."""
        position = self._checkpoint(shard_id)
        where = (
            {"ShardIteratorType": position.iterator_type, "SequenceNumber": position.sequence_number}
            if position
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        if position is None and self._expired(shard_id, None)[0]:
            raise Trimmed(shard_id)  # written after the mapping, gone before its first read
        try:
            iterator = self._streams.get_shard_iterator(
                StreamArn=self.mapping.stream_arn, ShardId=shard_id, **where
            )
            page = self._streams.get_records(
                ShardIterator=iterator["ShardIterator"], Limit=streams.MAX_RECORDS_PER_READ
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == TRIMMED:
                raise Trimmed(shard_id) from None
            raise
        return list(page["Records"])

    def _step(self, shard_id: str, worker: Worker) -> int:
        state = self._shards.setdefault(shard_id, streams.Shard())
        if not state.pending:
            try:
                passed = self._read(shard_id, state)
            except Trimmed:
                return self._give_up_expired(shard_id)
            if passed or not state.pending:
                return passed
        batch, now = state.pending[0], self.context.clock()
        if now < batch.not_before:
            return 0
        horizon = self._trim_horizon(shard_id, batch)
        old = streams.expired(batch, self.mapping.maximum_record_age, now, horizon)
        if old:
            self._discard_old(shard_id, state, old)
            return old
        return self._invoke(shard_id, state, worker)

    def _trim_horizon(self, shard_id: str, batch: streams.Pending) -> int | None:
        """The sequence number of the shard's oldest record still held, when the stream no longer holds the
        batch's first record (it waited for a retry past the stream's 24 hours), else None."""
        first = streams.sequence_number(batch.records[0])
        try:
            self._streams.get_shard_iterator(
                StreamArn=self.mapping.stream_arn,
                ShardId=shard_id,
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=first,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != TRIMMED:
                raise
            horizon = self._expired(shard_id, None)[1]
            # None: the stream holds none of the shard's records, the batch's included
            if horizon is None:
                return int(streams.sequence_number(batch.records[-1])) + 1
            return int(horizon)
        return None

    def _expired(self, shard_id: str, after: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """The shard's records after ``after`` that left the stream and were the mapping's to deliver (for
        a LATEST mapping, those written after it), as Lambda records, and the shard's trim horizon: the
        emulator's answer (its control API)."""
        mapping = self.mapping
        found = self.context.emulator.control.expired_records(mapping.stream_arn, shard_id, after)
        records = [lambda_dynamodb_record(raw, mapping.stream_arn) for raw in found["Records"]]
        if mapping.starting_position == "LATEST" and after is None:
            created = int(mapping.created)
            records = [r for r in records if r["dynamodb"]["ApproximateCreationDateTime"] >= created]
        return records, found["TrimHorizon"]

    def _give_up_expired(self, shard_id: str) -> int:
        """The records after the mapping's checkpoint left the stream (24 hours) before it delivered them:
        give them up as Lambda does, one batch of up to ``BatchSize`` at a time, the invocation record of
        each to the on-failure destination (``RecordAgeExceeded``, never invoked); the checkpoint moves past
        them. In AWS Lambda's poller had read them while they were held; the runner, which polls only while
        ``local run`` runs, reads them from the emulator (its control API)."""
        position, after = self._checkpoint(shard_id), None
        if position is not None:
            number = int(position.sequence_number)
            after = str(number if position.iterator_type == "AFTER_SEQUENCE_NUMBER" else number - 1)
        records, horizon = self._expired(shard_id, after)
        delivered = self.filter_events(records)
        self.context.accounts.count(filtered=len(records) - len(delivered))
        size = self.mapping.batch_size
        for chunk in (delivered[start : start + size] for start in range(0, len(delivered), size)):
            self._given_up(shard_id, chunk, streams.Pending(chunk, streams.sequence_number(chunk[-1])))
        if records:
            self._checkpoint(shard_id, streams.Position.after(streams.sequence_number(records[-1])))
        elif horizon is not None:
            self._checkpoint(shard_id, streams.Position.at(horizon))
        return len(records) or 1

    def _read(self, shard_id: str, state: streams.Shard) -> int:
        """Read the shard past its checkpoint. Up to ``BatchSize`` records the filters match become the
        pending batch, once it is full or the batching window has closed; records no filter matches are
        dropped with it (or, without a batch, read past at once: the count returned), as are, for a LATEST
        mapping without a checkpoint yet, the records written before the mapping."""
        mapping, clock = self.mapping, self.context.clock
        starting = self._checkpoint(shard_id) is None and mapping.starting_position == "LATEST"
        records: list[dict[str, Any]] = []
        through, passed, filtered = None, 0, 0
        for raw in self._unread(shard_id):
            record = lambda_dynamodb_record(raw, mapping.stream_arn)
            if starting and raw["dynamodb"]["ApproximateCreationDateTime"].timestamp() < mapping.created:
                passed += 1
            elif not self.filter_events([record]):
                passed, filtered = passed + 1, filtered + 1
            elif len(records) == mapping.batch_size:
                break
            else:
                records.append(record)
            through = streams.sequence_number(record)
        if records and len(records) < mapping.batch_size and mapping.batching_window:
            state.window_opened = state.window_opened or clock()
            if clock() - state.window_opened < mapping.batching_window:
                return 0  # gathering: read again on the next poll
        self.context.accounts.count(filtered=filtered)
        if records:
            state.window_opened = None
            state.pending.append(streams.Pending(records, str(through)))
            return 0
        if through is not None:
            self._checkpoint(shard_id, streams.Position.after(through))
        return passed

    def _invoke(self, shard_id: str, state: streams.Shard, worker: Worker) -> int:
        """Invoke the shard's pending batch, then checkpoint, retry, bisect or discard as Lambda does."""
        mapping, context = self.mapping, self.context
        batch = state.pending[0]
        batch.invocations, batch.request_id = batch.invocations + 1, str(uuid.uuid4())
        event = {"Records": batch.records}
        reply, cold_start = context.invoker.invoke(worker, mapping.function_arn, event, batch.request_id)
        sequence_numbers = [streams.sequence_number(r) for r in batch.records]
        failed_ids, whole = self.failures(sequence_numbers, reply)
        batch.function_error = "Unhandled" if "result" not in reply else None
        failed_from = min((sequence_numbers.index(i) for i in failed_ids), default=None)
        delay = context.retry_delay if context.retry_delay is not None else streams.STREAM_RETRY_SECONDS
        settled = streams.settle(
            batch,
            failed_from,
            whole=whole,
            maximum_retry_attempts=mapping.maximum_retry_attempts,
            bisect=mapping.bisect,
            retry_at=context.clock() + delay,
        )
        then = ""
        if settled.discarded:
            then = self.send_events_to_dlq(
                settled.discarded, str(settled.condition), shard_id=shard_id, batch=batch
            )
        elif settled.pending:
            then = _retrying(settled.pending, batch.invocations, mapping.maximum_retry_attempts)
        if settled.checkpoint is not None:
            self._checkpoint(shard_id, settled.checkpoint)
        state.pending[:1] = settled.pending
        logs = reply.get("logs") or []
        outcomes = record_outcomes(sequence_numbers, failed_ids, logs)
        context.accounts.account(
            self._batch(shard_id, batch.records, outcomes, reply, then),
            logs,
            failed=len(failed_ids),
            given_up={r["eventID"] for r in settled.discarded},
            stream=True,
        )
        if cold_start is not None:
            raise cold_start
        return len(batch.records)

    def _discard_old(self, shard_id: str, state: streams.Shard, count: int) -> None:
        """Discard the pending batch's first ``count`` records, older than ``MaximumRecordAgeInSeconds``,
        without invoking the function; the checkpoint moves past them."""
        batch = state.pending[0]
        old, batch.records = batch.records[:count], batch.records[count:]
        self._given_up(shard_id, old, batch)
        if batch.records:
            self._checkpoint(shard_id, streams.Position.at(streams.sequence_number(batch.records[0])))
        else:
            state.pending.pop(0)
            self._checkpoint(shard_id, streams.Position.after(batch.through))

    def _given_up(self, shard_id: str, records: list[dict[str, Any]], batch: streams.Pending) -> None:
        """Give up records too old to deliver without invoking the function (``batch``: the pending batch
        they belong to): their invocation record to the on-failure destination, and counted."""
        then = self.send_events_to_dlq(records, streams.RECORD_AGE_EXCEEDED, shard_id=shard_id, batch=batch)
        self.context.accounts.account(
            self._batch(shard_id, records, ["failed"] * len(records), {}, then),
            [],
            failed=len(records),
            given_up={r["eventID"] for r in records},
            invoked=False,
            stream=True,
        )

    def send_events_to_dlq(self, events: list[dict[str, Any]], why: str, **batch: Any) -> str:
        """Send the on-failure destination the invocation record of the discarded ``events`` (``why``:
        ``RecordAgeExceeded`` or ``RetryAttemptsExhausted``; ``batch``: ``shard_id`` and the pending batch
        they were part of); what happened, for the batch's line."""
        mapping, pending = self.mapping, batch["batch"]
        reason = (
            f"older than MaximumRecordAgeInSeconds {mapping.maximum_record_age}"
            if why == streams.RECORD_AGE_EXCEEDED
            else f"MaximumRetryAttempts {mapping.maximum_retry_attempts} reached"
        )
        discarded = f"{plural(len(events), 'record')} discarded ({reason})"
        destination = mapping.on_failure
        if not destination:
            return f"{discarded}, no on-failure destination"
        record = stream_invocation_record(
            events,
            shard_id=batch["shard_id"],
            condition=why,
            function_arn=mapping.function_arn,
            invocations=pending.invocations,
            request_id=pending.request_id or str(uuid.uuid4()),
            function_error=pending.function_error,
            at=datetime.datetime.fromtimestamp(self.context.clock(), datetime.UTC),
        )
        service, emulator = destination.split(":")[2], self.context.emulator
        if service == "sqs":
            sqs = emulator.client("sqs")
            sqs.send_message(QueueUrl=queue_url(sqs, destination), MessageBody=json.dumps(record))
        elif service == "sns":
            emulator.client("sns").publish(TopicArn=destination, Message=json.dumps(record))
        else:
            raise RunnerError(
                f"{mapping.function_name}'s stream mapping has the on-failure destination {destination}: the "
                "runner sends to SQS queues and SNS topics"
            )
        return f"{discarded}, invocation record sent to {destination}"

    def _batch(
        self,
        shard_id: str,
        records: list[dict[str, Any]],
        outcomes: list[str],
        reply: dict[str, Any],
        then: str,
    ) -> Batch:
        first, last = streams.sequence_number(records[0]), streams.sequence_number(records[-1])
        span = first if first == last else f"{first}-{last}"
        return Batch(
            function=self.mapping.function_name,
            message_ids=tuple(r["eventID"] for r in records),
            groups=(),
            outcomes=tuple(outcomes),
            error=batch_error(reply),
            source=f"shard {shard_id}, {span}",
            then=then,
        )


def _retrying(pending: list[streams.Pending], retry: int, limit: int) -> str:
    """What a stream mapping does with a batch that failed: its batch line's last words."""
    split = "split in two, " if len(pending) > 1 else ""
    records = pending[0].records
    return (
        f"{split}retrying {plural(len(records), 'record')} from {streams.sequence_number(records[0])} "
        f"(retry {retry} of {limit if limit >= 0 else 'unlimited'})"
    )


__all__ = ["StreamPoller", "Trimmed"]
