"""Batches: groups of a FIFO batch run concurrently, each in order; a failure fails the rest of its group.

Each thread that runs records is bound to the invocation's deadline (:mod:`idempotent_runtime.deadline`),
so the AWS calls it makes never outlive the invocation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from idempotent_runtime import deadline
from idempotent_runtime.contract import DeadLetterKind, Outcome, QueueType
from idempotent_runtime.message import Message

# A record is not started with less invocation time left than this: it is reported failed instead, so the
# batch ends with a clean partial response rather than a timeout (which would redeliver the whole batch).
TIME_MARGIN_MS = 1000
# A run whose calling thread spent more than this share of its time off the CPU "waits" (:class:`Crew`).
WAITING_SHARE = 0.25


class RecordResult:
    """What happened to one record: ``outcome``, ``reason``, ``result`` (guarded), ``conflict``,
    ``misconfigured`` (``hint``: the likely misconfiguration), ``kind`` (quarantined: why) and ``notes``
    (more fields for its log line)."""

    __slots__ = (
        "conflict",
        "hint",
        "kind",
        "message",
        "misconfigured",
        "notes",
        "outcome",
        "reason",
        "result",
    )

    def __init__(
        self,
        message: Message,
        outcome: Outcome,
        reason: str | None = None,
        result: Any = None,
        *,
        conflict: bool = False,
        hint: str | None = None,
        kind: DeadLetterKind | None = None,
        notes: dict[str, Any] | None = None,
    ) -> None:
        self.message = message
        self.outcome = outcome
        self.reason = reason
        self.result = result
        self.conflict = conflict
        self.misconfigured = hint is not None
        self.hint = hint
        self.kind = kind
        self.notes = notes

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
    concurrently on threads kept for the environment's life, each in order; after a failure the rest of the
    group is skipped (``skip(message, reason, blocker)``), so FIFO order holds when SQS delivers it again.
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
        previous = deadline.bind(context)  # the calling thread's, once; a helper binds per group it runs
        try:
            if len(groups) <= 1 or self.max_workers == 1:
                results = [self._records(group, context) for group in groups]
            else:
                caller = threading.get_ident()

                def work(group: list[Message]) -> list[RecordResult]:
                    if threading.get_ident() == caller:
                        return self._records(group, context)
                    return self._run_group(group, context)

                results = self._crew().run(work, groups)
        finally:
            deadline.restore(previous)
        by_id = {id(r.message): r for group in results for r in group}
        return [by_id[id(message)] for message in messages], len(groups)

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

    def _crew(self) -> Crew:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = Crew(self.max_workers - 1)
        return self._pool


class Crew:
    """Runs ``work(item)`` for every item of a list: the calling thread beside up to ``helpers`` threads
    (started on first use, kept), each taking the next item not yet taken; a thread taking its first item
    wakes one more helper while items remain. Helpers only help work that waits (CPU-only work gains
    nothing from threads under the GIL): after a run whose calling thread spent under
    :data:`WAITING_SHARE` of it off the CPU, the next run leaves them asleep. A ``BaseException`` from
    ``work`` is raised to the caller once every taken item is finished.
    """

    def __init__(
        self,
        helpers: int,
        *,
        wall: Callable[[], float] = time.perf_counter,
        cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        self.helpers = helpers
        self.waits = True  # whether the last run's work waited (see the class docstring)
        self._wall = wall
        self._cpu = cpu
        self._jobs: Any = None
        self._start_lock = threading.Lock()

    def _start(self) -> Any:
        if self._jobs is None:
            with self._start_lock:
                if self._jobs is None:
                    import queue

                    jobs: Any = queue.SimpleQueue()
                    for number in range(self.helpers):
                        threading.Thread(
                            target=self._serve, args=(jobs,), name=f"group-{number}", daemon=True
                        ).start()
                    self._jobs = jobs
        return self._jobs

    def _measured(self, wall: float, cpu: float) -> None:
        """The calling thread's wall and CPU time in a run: whether the next run wakes helpers."""
        self.waits = wall - cpu > WAITING_SHARE * wall

    @staticmethod
    def _serve(jobs: Any) -> None:
        while True:
            jobs.get()()

    def run(self, work: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        if not self.waits:  # the helpers stay asleep: the calling thread does every item, in order
            wall, cpu = self._wall(), self._cpu()
            try:
                return [work(item) for item in items]
            finally:
                self._measured(self._wall() - wall, self._cpu() - cpu)
        results: list[Any] = [None] * len(items)
        taken = iter(range(len(items)))  # next() on a range iterator is atomic: each index is taken once
        last = len(items) - 1
        left = [len(items)]
        to_wake = [min(self.helpers, last)]  # helpers not yet woken (more would find nothing to take)
        lock = threading.Lock()
        finished = threading.Event()
        raised: list[BaseException] = []
        jobs = self._start()

        def drain() -> None:
            woke = False
            for index in taken:
                if not woke and index < last:
                    woke = True  # each thread wakes at most one other, on its first item
                    with lock:
                        wake, to_wake[0] = to_wake[0] > 0, to_wake[0] - 1
                    if wake:
                        jobs.put(drain)
                try:
                    results[index] = work(items[index])
                except BaseException as exc:  # handed to the caller below
                    raised.append(exc)
                with lock:
                    left[0] -= 1
                    if not left[0]:
                        finished.set()
                if raised:
                    return

        wall, cpu = self._wall(), self._cpu()
        drain()
        self._measured(self._wall() - wall, self._cpu() - cpu)
        if raised:
            # Items the other threads already took finish first; the rest are never started.
            for _untaken in taken:
                with lock:
                    left[0] -= 1
                    if not left[0]:
                        finished.set()
        finished.wait()
        if raised:
            raise raised[0]
        return results
