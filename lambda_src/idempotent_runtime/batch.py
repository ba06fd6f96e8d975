"""Batches: groups of a FIFO batch run concurrently, each in order; a failure fails the rest of its group.

Each thread that runs records is bound to the invocation's deadline (:mod:`idempotent_runtime.deadline`),
so the AWS calls it makes never outlive the invocation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from idempotent_runtime import deadline
from idempotent_runtime.contract import DeadLetterKind, Outcome, QueueType
from idempotent_runtime.message import Message

# A record is not started with less invocation time left than this: it is reported failed instead, so the
# batch ends with a clean partial response rather than a timeout (which would redeliver the whole batch).
TIME_MARGIN_MS = 1000


class RecordResult(NamedTuple):
    """What happened to one record: ``outcome``, ``reason``, ``result`` (guarded), ``conflict``,
    ``misconfigured`` (``hint``: the likely misconfiguration), ``kind`` (quarantined: why) and ``notes``
    (more fields for its log line)."""

    message: Message
    outcome: Outcome
    reason: str | None = None
    result: Any = None
    conflict: bool = False
    hint: str | None = None
    kind: DeadLetterKind | None = None
    notes: dict[str, Any] | None = None

    @property
    def misconfigured(self) -> bool:
        return self.hint is not None

    @property
    def failed(self) -> bool:
        return self.outcome == Outcome.FAILED

    def __repr__(self) -> str:
        return f"RecordResult({self.message.message_id!r}, {self.outcome.value!r}, {self.reason!r})"


def group_records(messages: Iterable[Message], queue_type: QueueType = QueueType.FIFO) -> list[list[Message]]:
    """Split a batch into groups in event order: on a FIFO queue one per MessageGroupId; a record without one
    (and every record of a standard queue, even with a group id) is alone."""
    groups: dict[object, list[Message]] = {}
    fifo = queue_type == QueueType.FIFO
    for index, message in enumerate(messages):
        group = message.group_id if fifo and message.group_id is not None else index
        groups.setdefault(group, []).append(message)
    return list(groups.values())


class BatchRunner:
    """Runs ``process(message, context) -> RecordResult`` (which must not raise) over a batch: groups run
    concurrently on a thread pool kept for the environment's life, each in order; after a failure the rest
    of the group is skipped (``skip(message, reason, blocker)``), so FIFO order holds when SQS delivers it
    again. A ``BaseException`` in a group (the environment ending) reaches the caller once the groups
    already started have finished; the others are not started.
    """

    def __init__(
        self,
        process: Callable[[Message, Any], RecordResult],
        skip: Callable[[Message, str, RecordResult | None], RecordResult],
        max_workers: int,
        queue_type: QueueType = QueueType.FIFO,
    ) -> None:
        self.process = process
        self.skip = skip
        self.max_workers = max_workers
        self.queue_type = queue_type
        self._pool: Any = None
        self._lock = threading.Lock()

    def run(self, messages: list[Message], context: Any = None) -> tuple[list[RecordResult], int]:
        """The results in event order, and the number of groups."""
        groups = group_records(messages, self.queue_type)
        if len(groups) <= 1 or self.max_workers == 1:
            results = [self._run_group(group, context) for group in groups]
        else:
            results = self._concurrently(groups, context)
        by_id = {id(r.message): r for group in results for r in group}
        return [by_id[id(message)] for message in messages], len(groups)

    def _concurrently(self, groups: list[list[Message]], context: Any) -> list[list[RecordResult]]:
        from concurrent.futures import FIRST_EXCEPTION, wait  # imported by boto3 before the first batch

        futures = [self._executor().submit(self._run_group, group, context) for group in groups]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:  # after a BaseException: the groups not started yet never start
            future.cancel()
        wait(futures)
        return [future.result() for future in futures]

    def _executor(self) -> Any:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="group")
        return self._pool

    def _run_group(self, group: list[Message], context: Any) -> list[RecordResult]:
        previous = deadline.bind(context)
        try:
            return self._records(group, context)
        finally:
            deadline.restore(previous)

    def _records(self, group: list[Message], context: Any) -> list[RecordResult]:
        results = []
        blocker: RecordResult | None = None
        late = False  # the invocation is about to time out: this record and the rest of its group wait
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        ordered = self.queue_type == QueueType.FIFO
        for message in group:
            late = late or (blocker is None and remaining is not None and remaining() < TIME_MARGIN_MS)
            if late:
                results.append(self.skip(message, "not attempted: the invocation is about to time out", None))
                continue
            if blocker is not None:
                reason = f"not attempted: earlier record {blocker.message.message_id} of its group failed"
                results.append(self.skip(message, reason, blocker))
                continue
            result = self.process(message, context)
            results.append(result)
            if result.failed and ordered and message.group_id is not None:
                blocker = result
        return results
