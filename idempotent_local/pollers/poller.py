"""The poller of one event source mapping, after LocalStack's model: a small abstract base with a subclass
per kind of source. A poller reads its source (``poll_events``), keeps what the mapping's filters match
(``filter_events``), hands each batch to the invoker (:mod:`idempotent_local.functions`), settles what the
function answered, sends what the mapping gives up where the mapping says (``send_events_to_dlq``), and
counts each batch in the runner's accounts (:mod:`idempotent_local.accounting`). The runner
(:mod:`idempotent_local.runner`) runs one poller per mapping."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idempotent_local.accounting import Accounts
from idempotent_local.emulator import Emulator
from idempotent_local.functions import Invoker, Worker
from idempotent_local.mappings import Mapping, StreamMapping
from idempotent_local.streams import Checkpoints


@dataclass(frozen=True)
class Context:
    """What the pollers of one runner share. ``retry_delay``: seconds before a failed record comes back
    (None: the queue's visibility timeout, or :data:`idempotent_local.streams.STREAM_RETRY_SECONDS`);
    ``clock``: the time stream mappings judge record age and retry delays by."""

    emulator: Emulator
    invoker: Invoker
    accounts: Accounts
    checkpoints: Checkpoints
    retry_delay: float | None
    wait_seconds: int
    clock: Callable[[], float]


class Poller(ABC):
    """The poller of ``mapping``; the runner replaces ``mapping`` with its latest configuration."""

    def __init__(self, mapping: Any, context: Context) -> None:
        self.mapping: Mapping | StreamMapping = mapping
        self.context = context

    def event_source(self) -> str:
        """The ARN the mapping reads."""
        return self.mapping.source_arn

    @abstractmethod
    def poll_events(self, worker: Worker, wait_seconds: int | None, abandon: threading.Event | None) -> int:
        """One step: read, invoke ``worker``, settle; returns the records handled (delivered, read past or
        given up). ``wait_seconds``: how long a read may wait for something (None: the runner's)."""

    @abstractmethod
    def backlog(self) -> int:
        """What the mapping has yet to hand over."""

    def filter_events(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The events the mapping's ``FilterCriteria`` match (all of them without filters)."""
        return events

    def send_events_to_dlq(self, events: list[dict[str, Any]], why: str, **batch: Any) -> str:
        """Hand the events the mapping gives up (``why``) to where it says; what happened, for the batch's
        line. An SQS mapping gives up nothing: the queue's redrive policy moves a message after
        ``maxReceiveCount`` receives."""
        return ""

    def failures(self, ids: list[str], reply: dict[str, Any]) -> tuple[set[str], bool]:
        """The ids of the batch's records that failed, and whether the invocation itself failed (an error,
        a timeout, a malformed response: every record) rather than the function naming some."""
        everything = set(ids)
        if "result" not in reply:
            self.context.accounts.count(whole_batch_failures=1)
            return everything, True
        result = reply["result"] if self.mapping.report_batch_item_failures else None
        failures = result.get("batchItemFailures") if isinstance(result, dict) else None
        if failures is None:
            return set(), False
        found = set()
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if not identifier or identifier not in everything:
                # Lambda treats a malformed response as a failure of the whole batch.
                self.context.accounts.count(whole_batch_failures=1)
                return everything, True
            found.add(identifier)
        return found, False

    def wait(self, wait_seconds: int | None) -> int:
        return self.context.wait_seconds if wait_seconds is None else wait_seconds


__all__ = ["Context", "Poller"]
