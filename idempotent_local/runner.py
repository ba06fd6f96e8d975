"""The event-source runner: what Lambda's event source mappings do, for functions in the emulator.

The emulator stores functions but cannot run them (moto needs Docker for that). The runner reads the event
source mappings back from the emulator (SQS queues and DynamoDB streams: :mod:`idempotent_local.mappings`)
and runs a poller per mapping, each in its own thread as Lambda polls each mapping on its own, or until
every queue is empty and every stream read. Each role has its own module, as LocalStack's event source
mappings keep them: the pollers on one small base (:mod:`idempotent_local.pollers`, what each does with its
source), the invoker and the functions' warm workers (:mod:`idempotent_local.functions`), the accounts
(:mod:`idempotent_local.accounting`).

**One deliberate difference, off by default:** with ``retry_delay`` set, a failed queue record is visible
again after that many seconds instead of the queue's full visibility timeout (``ChangeMessageVisibility``),
so a demo does not wait 6 x the function timeout per retry; the number of receives before the queue's
redrive policy moves it to the dead-letter queue is unchanged. A failed stream batch is retried after
``retry_delay`` too, or after :data:`idempotent_local.streams.STREAM_RETRY_SECONDS`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from idempotent_local import streams
from idempotent_local.accounting import Accounts, Batch, Stats
from idempotent_local.emulator import Emulator
from idempotent_local.errors import RunnerError
from idempotent_local.events import lambda_sqs_event
from idempotent_local.functions import Invoker, Worker, function_log_path
from idempotent_local.mappings import Mapping, StreamMapping, read
from idempotent_local.pollers.poller import Context, Poller
from idempotent_local.pollers.sqs_poller import SqsPoller
from idempotent_local.pollers.stream_poller import StreamPoller

__all__ = [
    "Batch",
    "EventSourceRunner",
    "Mapping",
    "RunnerError",
    "Stats",
    "StreamMapping",
    "Worker",
    "function_log_path",
    "lambda_sqs_event",
]

# In the emulator's state directory: where stream mappings have read to.
CHECKPOINTS = "stream-checkpoints.json"


class EventSourceRunner:
    """Polls every enabled SQS and DynamoDB stream event source mapping of the emulator and invokes the
    mapped functions.

    ``report``, when given, receives one line per batch: the function, its records and message groups (or
    shard), each record's outcome, what a stream mapping does next, and the running totals per message.
    ``clock`` is the time stream mappings judge record age and retry delays by.
    """

    def __init__(
        self,
        emulator: Emulator,
        *,
        retry_delay: float | None = None,
        wait_seconds: int = 1,
        work_dir: Path | str | None = None,
        report: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.emulator = emulator
        self.retry_delay = retry_delay
        self.wait_seconds = wait_seconds
        state_dir = Path(emulator.state_dir).resolve()
        self.invoker = Invoker(emulator, Path(work_dir).resolve() if work_dir else state_dir / "functions")
        self.accounts = Accounts(report)
        self.checkpoints = streams.Checkpoints(state_dir / CHECKPOINTS)
        self.context = Context(
            emulator, self.invoker, self.accounts, self.checkpoints, retry_delay, wait_seconds, clock
        )
        self._pollers: dict[str, Poller] = {}  # by mapping uuid: a stream's shard state outlives a change
        self._pollers_lock = threading.Lock()

    @property
    def stats(self) -> Stats:
        return self.accounts.stats

    def mappings(self, *, resolve: bool = True) -> list[Mapping | StreamMapping]:
        """Every SQS and DynamoDB stream event source mapping (other sources are not run); see
        :func:`idempotent_local.mappings.read`."""
        found = self.emulator.client("lambda").get_paginator("list_event_source_mappings").paginate()
        sqs = self.emulator.client("sqs") if resolve else None
        return read((esm for page in found for esm in page["EventSourceMappings"]), sqs)

    def poller(self, mapping: Mapping | StreamMapping) -> Poller:
        """The mapping's poller, given the mapping's latest configuration."""
        kind: type[Poller] = StreamPoller if isinstance(mapping, StreamMapping) else SqsPoller
        with self._pollers_lock:
            poller = self._pollers.get(mapping.uuid)
            if not isinstance(poller, kind):
                poller = self._pollers[mapping.uuid] = kind(mapping, self.context)
            poller.mapping = mapping
            return poller

    def poll(
        self,
        mapping: Mapping | StreamMapping,
        wait_seconds: int | None = None,
        abandon: threading.Event | None = None,
    ) -> int:
        """One receive + invoke + delete cycle for one mapping (for a stream mapping: one step of each of
        its shards); returns the number of records handled.

        The function's worker starts before anything is received: a function that cannot run here (code
        bundled for another Python, a failing cold start) raises :class:`RunnerError` and its messages stay
        in the queue untouched, instead of being received until the queue moves them to the DLQ without a
        reason (a stream's records stay unread). A worker that dies and cannot start again mid-batch fails
        that batch and raises too. A cold start is abandoned (RunnerError) once ``abandon`` is set.
        """
        worker = self.invoker.worker(mapping.function_arn, abandon)
        return self.poller(mapping).poll_events(worker, wait_seconds, abandon)

    def invoke(self, function_arn: str, event: dict[str, Any]) -> dict[str, Any]:
        """Invoke a function once with ``event`` and return its reply, as Lambda's synchronous ``Invoke``
        would (what API Gateway's proxy integration does: ``local request``): ``{"result": ...}``, or
        ``{"error": ...}``, ``{"timeout": True}``, ``{"crash": ...}``; ``"logs"`` beside. A function that
        cannot start raises :class:`RunnerError`."""
        reply, cold_start = self.invoker.invoke(self.invoker.worker(function_arn), function_arn, event)
        if cold_start is not None:
            raise cold_start
        return reply

    def backlog(self, mapping: Mapping | StreamMapping) -> int:
        """What the mapping has yet to hand over: the queue's messages (visible, in flight or delayed), or
        the stream's records after the mapping's checkpoints (a batch waiting for its retry included)."""
        return self.poller(mapping).backlog()

    def drain(self, timeout: float = 120.0, mappings: list[Mapping | StreamMapping] | None = None) -> Stats:
        """Poll until every mapped queue is empty (no visible, in-flight or delayed message) and every mapped
        stream is read to its end with nothing waiting for a retry."""
        mappings = [m for m in (mappings if mappings is not None else self.mappings()) if m.enabled]
        deadline = time.monotonic() + timeout
        while True:
            handled = sum(self.poll(m, wait_seconds=0) for m in mappings)
            if handled:
                continue
            left = {m: self.backlog(m) for m in mappings}
            if not any(left.values()):
                return self.stats
            if time.monotonic() > deadline:
                raise RunnerError(_not_drained(timeout, left, self.retry_delay))
            time.sleep(0.2)

    def _poll_until(
        self, mapping: Mapping | StreamMapping, stop: threading.Event, gone: threading.Event
    ) -> None:
        """The poller of one mapping (its own thread, as Lambda polls each mapping on its own). A function
        that cannot run is said once, and again when it runs; meanwhile the poller waits for a redeploy.
        ``stop`` also abandons a cold start in progress (Ctrl-C need not wait for it)."""
        name = mapping.function_name
        while not stop.is_set() and not gone.is_set():
            try:
                self.poll(mapping, abandon=stop)
            except RunnerError as exc:  # the code cannot run here: said once, until a redeploy fixes it
                if stop.is_set():
                    break  # a cold start abandoned
                with self.stats.lock:
                    said = self.stats.unable.get(name) == str(exc)
                    self.stats.unable[name] = str(exc)
                if not said:
                    print(f"runner: {name}: {exc}", file=sys.stderr, flush=True)
                stop.wait(2)
            except ClientError as exc:  # a redeploy or destroy replaced the queue or the function
                print(f"runner: {name}: {exc}", file=sys.stderr, flush=True)
                stop.wait(1)
            else:
                with self.stats.lock:
                    recovered = self.stats.unable.pop(name, None) is not None
                if recovered:
                    print(f"runner: {name} runs now", file=sys.stderr, flush=True)

    def run(self, stop: threading.Event, refresh_seconds: float = 10.0) -> Stats:
        """Poll every mapping concurrently until ``stop`` is set (the body of ``local run``); mappings added
        or removed meanwhile are picked up every ``refresh_seconds``."""
        pollers: dict[Mapping | StreamMapping, tuple[threading.Thread, threading.Event]] = {}
        try:
            while not stop.is_set():
                try:
                    current = {m for m in self.mappings() if m.enabled}
                except ClientError as exc:
                    print(
                        f"runner: cannot list the event source mappings: {exc}", file=sys.stderr, flush=True
                    )
                    current = set(pollers)
                for mapping in set(pollers) - current:
                    pollers.pop(mapping)[1].set()
                for mapping in current - set(pollers):
                    gone = threading.Event()
                    thread = threading.Thread(
                        target=self._poll_until,
                        args=(mapping, stop, gone),
                        name=f"poll-{mapping.function_name}",
                        daemon=True,
                    )
                    pollers[mapping] = (thread, gone)
                    thread.start()
                for mapping, (thread, _) in list(pollers.items()):
                    if not thread.is_alive():
                        pollers.pop(mapping)
                stop.wait(refresh_seconds)
        finally:
            stop.set()
            for thread, gone in pollers.values():
                gone.set()
                thread.join(self.wait_seconds + 15)
        return self.stats

    def close(self) -> None:
        """Stop every worker (an invocation in flight finishes first, within the function's timeout)."""
        self.invoker.close()

    def __enter__(self) -> EventSourceRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _not_drained(timeout: float, left: dict[Mapping | StreamMapping, int], retry_delay: float | None) -> str:
    where = ", ".join(
        f"{n} in {m.queue_arn.rsplit(':', 1)[-1]}"
        if isinstance(m, Mapping)
        else f"{n} in stream {m.stream_arn.split(':', 5)[5].removeprefix('table/')}"
        for m, n in left.items()
    )
    hints = []
    if retry_delay is None and any(n and isinstance(m, Mapping) for m, n in left.items()):
        hints.append(
            "a failed message comes back only after the queue's visibility timeout (--retry-delay S "
            "shortens it)"
        )
    if any(n and isinstance(m, StreamMapping) for m, n in left.items()):
        hints.append(
            "a stream batch that keeps failing is retried until its mapping's MaximumRetryAttempts or "
            "MaximumRecordAgeInSeconds runs out (-1, the default: until the record leaves the stream)"
        )
    what = "queues" if all(isinstance(m, Mapping) for m in left) else "queues and streams"
    return f"{what} not drained within {timeout:.0f} s: {where}" + "".join(f"; {hint}" for hint in hints)
