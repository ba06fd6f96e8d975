"""Batches: groups of a FIFO batch run concurrently, each in order; a failure fails the rest of its group."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from idempotent_runtime.message import Message

PROCESSED = "processed"
DUPLICATE = "duplicate"
QUARANTINED = "quarantined"
FAILED = "failed"
# Outcomes after which the record is done (deleted from the queue); only FAILED is reported back.
HANDLED = frozenset({PROCESSED, DUPLICATE, QUARANTINED})
# A record is not started with less invocation time left than this: it is reported failed instead, so the
# batch ends with a clean partial response rather than a timeout (which would redeliver the whole batch).
TIME_MARGIN_MS = 1000


class RecordResult:
    """What happened to one record: ``outcome`` is processed, duplicate, quarantined or failed."""

    __slots__ = ("message", "outcome", "reason", "result")

    def __init__(self, message: Message, outcome: str, reason: str | None = None, result: Any = None) -> None:
        self.message = message
        self.outcome = outcome
        self.reason = reason
        self.result = result

    @property
    def failed(self) -> bool:
        return self.outcome == FAILED

    def __repr__(self) -> str:
        return f"RecordResult({self.message.message_id!r}, {self.outcome!r}, {self.reason!r})"


def group_records(messages: Iterable[Message]) -> list[list[Message]]:
    """Split a batch into groups in event order: one per MessageGroupId; a record without one is alone."""
    groups: dict[object, list[Message]] = {}
    for index, message in enumerate(messages):
        groups.setdefault(message.group_id if message.group_id is not None else index, []).append(message)
    return list(groups.values())


class BatchRunner:
    """Runs ``process(message, context) -> RecordResult`` over a batch (``process`` must not raise).

    Groups run concurrently on a small thread pool created once per execution environment; inside a group
    records run in order and, after a failure, the remaining records of the group are failed unprocessed
    (``skip(message, reason)``) so FIFO order holds when SQS delivers them again.
    """

    def __init__(
        self,
        process: Callable[[Message, Any], RecordResult],
        skip: Callable[[Message, str], RecordResult],
        max_workers: int,
    ) -> None:
        self.process = process
        self.skip = skip
        self.max_workers = max_workers
        self._pool: Any = None
        self._lock = threading.Lock()

    def run(self, messages: list[Message], context: Any = None) -> list[RecordResult]:
        groups = group_records(messages)
        if len(groups) <= 1 or self.max_workers == 1:
            results = [self._run_group(group, context) for group in groups]
        else:
            results = list(self._executor().map(lambda group: self._run_group(group, context), groups))
        by_id = {id(r.message): r for group in results for r in group}
        return [by_id[id(message)] for message in messages]

    def _run_group(self, group: list[Message], context: Any) -> list[RecordResult]:
        results = []
        blocker: RecordResult | None = None
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        for message in group:
            if blocker is None and remaining is not None and remaining() < TIME_MARGIN_MS:
                result = self.skip(message, "not attempted: the invocation is about to time out")
                results.append(result)
                blocker = result
                continue
            if blocker is not None:
                results.append(
                    self.skip(
                        message,
                        f"not attempted: earlier record {blocker.message.message_id} of its group failed",
                    )
                )
                continue
            result = self.process(message, context)
            results.append(result)
            if result.failed and message.group_id is not None:
                blocker = result
        return results

    def _executor(self) -> Any:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="group")
        return self._pool
