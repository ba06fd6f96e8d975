"""How a DynamoDB stream event source mapping moves through a shard: its checkpoint, the batch it retries,
and what it decides after each invocation. The runner (:mod:`idempotent_local.runner`) reads the records,
invokes the function and reports; this module holds the state and the rules, as Lambda documents them:

- records are read in sequence order, one batch at a time per shard; a record the mapping's filters do
  not match is dropped (read past, never delivered);
- a batch that succeeds moves the checkpoint past it (past the records filtered out with it too);
- with ``ReportBatchItemFailures``, a response naming items moves the checkpoint to the lowest sequence
  number named, and the batch is retried from there;
- an error (an exception, a timeout, a malformed response) retries the whole batch, split in two halves
  first with ``BisectBatchOnFunctionError`` (each half carries the retries the batch had);
- after ``MaximumRetryAttempts`` retries, or once a record is older than ``MaximumRecordAgeInSeconds``,
  the batch is discarded: its invocation record goes to the ``OnFailure`` destination and the checkpoint
  moves past it. ``-1`` (the default) retries until the record leaves the stream (24 hours, by the
  emulator's streams' clock: :mod:`idempotent_local.dynamodb_streams`);
- records that leave the stream before the mapping delivered them (it retried a batch that long, or
  ``local run`` did not run) are given up the same way, ``RecordAgeExceeded``, one batch of up to
  ``BatchSize`` at a time, and the mapping goes on with the oldest record the stream holds.

Lambda keeps a mapping's checkpoints with the mapping; the runner keeps them in the emulator's state
directory (:class:`Checkpoints`), so a second ``local run`` goes on where the first stopped.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Lambda retries a failed stream batch at once (its backoff is not documented): the runner waits this long,
# or the runner's retry delay when it has one.
STREAM_RETRY_SECONDS = 1.0
POLL_SECONDS = 0.25  # Lambda polls each shard four times a second
MAX_RECORDS_PER_READ = 1000  # DynamoDB Streams' GetRecords limit
RETRY_ATTEMPTS_EXHAUSTED = "RetryAttemptsExhausted"
RECORD_AGE_EXCEEDED = "RecordAgeExceeded"


@dataclass(frozen=True)
class Position:
    """Where reading a shard resumes: after a sequence number (the batch it ends succeeded or was
    discarded), or at one (the lowest failed item of a batch)."""

    iterator_type: str  # AFTER_SEQUENCE_NUMBER or AT_SEQUENCE_NUMBER
    sequence_number: str

    @classmethod
    def after(cls, sequence_number: str) -> Position:
        return cls("AFTER_SEQUENCE_NUMBER", sequence_number)

    @classmethod
    def at(cls, sequence_number: str) -> Position:
        return cls("AT_SEQUENCE_NUMBER", sequence_number)


class Checkpoints:
    """Each stream mapping's position in each shard, kept in a JSON file: ``{uuid: {shard id: position}}``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._positions: dict[str, dict[str, list[str]]] = json.loads(path.read_text())
        except (OSError, ValueError):
            self._positions = {}

    def get(self, uuid: str, shard_id: str) -> Position | None:
        with self._lock:
            found = self._positions.get(uuid, {}).get(shard_id)
        return Position(*found) if found else None

    def set(self, uuid: str, shard_id: str, position: Position) -> None:
        with self._lock:
            self._positions.setdefault(uuid, {})[shard_id] = [
                position.iterator_type,
                position.sequence_number,
            ]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            staging = self.path.with_suffix(f".{os.getpid()}.partial")
            staging.write_text(json.dumps(self._positions, indent=1, sort_keys=True))
            staging.replace(self.path)


def sequence_number(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


@dataclass
class Pending:
    """A batch the mapping has read and not yet settled: its Lambda records in order, the last stream
    record it accounts for (records filtered out after its last one included), the invocations it has had
    and when it may be invoked again."""

    records: list[dict[str, Any]]
    through: str
    invocations: int = 0
    not_before: float = 0.0
    function_error: str | None = None  # of the last invocation: "Unhandled", or None (it answered)
    request_id: str = ""


@dataclass
class Shard:
    """What the runner holds in memory for one shard of one mapping: batches to (re)invoke, oldest first
    (two after a bisection), and since when a partial batch waits for the batching window."""

    pending: list[Pending] = field(default_factory=list)
    window_opened: float | None = None


@dataclass(frozen=True)
class Settled:
    """What happens after an invocation: where the checkpoint moves (None: it stays), what is discarded
    (and why), and the batches left to invoke, in order."""

    checkpoint: Position | None
    discarded: list[dict[str, Any]]
    condition: str | None
    pending: list[Pending]


def exhausted(batch: Pending, maximum_retry_attempts: int) -> bool:
    """Whether the batch has had all the retries the mapping allows (``-1``: never)."""
    return 0 <= maximum_retry_attempts <= batch.invocations - 1


def settle(
    batch: Pending,
    failed_from: int | None,
    *,
    whole: bool,
    maximum_retry_attempts: int,
    bisect: bool,
    retry_at: float,
) -> Settled:
    """The decision after invoking ``batch``: ``failed_from`` is the index of its lowest failed record
    (None: it succeeded); ``whole`` says the invocation itself failed (error, timeout, malformed response)."""
    if failed_from is None:
        return Settled(Position.after(batch.through), [], None, [])
    remaining = replace(batch, records=batch.records[failed_from:], not_before=retry_at)
    moved = Position.at(sequence_number(remaining.records[0])) if failed_from else None
    if exhausted(remaining, maximum_retry_attempts):
        return Settled(Position.after(batch.through), remaining.records, RETRY_ATTEMPTS_EXHAUSTED, [])
    if whole and bisect and len(remaining.records) > 1:
        half = len(remaining.records) // 2
        first = replace(
            remaining, records=remaining.records[:half], through=sequence_number(remaining.records[half - 1])
        )
        return Settled(moved, [], None, [first, replace(remaining, records=remaining.records[half:])])
    return Settled(moved, [], None, [remaining])


def expired(batch: Pending, maximum_record_age: int, now: float, trim_horizon: int | None = None) -> int:
    """How many of the batch's first records are older than ``MaximumRecordAgeInSeconds`` (``-1``: no limit
    of its own), or have left the stream (a sequence number below ``trim_horizon``, the oldest the stream
    still holds: records stay 24 hours); records come in the order they were written, so the old ones come
    first."""

    def old(record: dict[str, Any]) -> bool:
        age = now - record["dynamodb"]["ApproximateCreationDateTime"]
        gone = trim_horizon is not None and int(sequence_number(record)) < trim_horizon
        return gone or 0 <= maximum_record_age <= age

    ages = [old(r) for r in batch.records]
    return ages.index(False) if False in ages else len(ages)


__all__ = [
    "MAX_RECORDS_PER_READ",
    "POLL_SECONDS",
    "RECORD_AGE_EXCEEDED",
    "RETRY_ATTEMPTS_EXHAUSTED",
    "STREAM_RETRY_SECONDS",
    "Checkpoints",
    "Pending",
    "Position",
    "Settled",
    "Shard",
    "exhausted",
    "expired",
    "sequence_number",
    "settle",
]
