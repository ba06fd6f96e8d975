"""The runner's accounts: what each batch was (:class:`Batch`), each record's outcome as the function told
it, and the running totals per message (:class:`Stats`): what ``local run`` reports per batch and sums up at
the end, and the demo balances."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from idempotent_runtime.contract import OUTCOME_METRIC, Outcome

from idempotent_local.mappings import plural

# A record's final outcome in the runner's accounts: the runtime's (contract.Outcome), or "succeeded" for a
# function that does not say (no Embedded Metric Format line).
OUTCOMES = (*(outcome.value for outcome in Outcome), "succeeded")
# The batch counters that name an outcome (a failed record is known from the batch item failures).
_METRIC_OUTCOME = {
    metric.value: outcome.value for outcome, metric in OUTCOME_METRIC.items() if outcome != Outcome.FAILED
}


@dataclass
class Stats:
    """What the runner did. ``records`` counts deliveries (a redelivered message counts again);
    ``outcomes`` holds each message's (or stream record's) *last* outcome, so a message that failed twice
    and was then processed counts once, as processed."""

    invocations: int = 0
    records: int = 0
    succeeded: int = 0
    failed: int = 0
    whole_batch_failures: int = 0
    message_ids: set[str] = field(default_factory=set)
    metrics: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)  # message id -> last outcome
    exhausted: set[str] = field(default_factory=set)  # failed on their last receive: moved to the DLQ
    stream_records: set[str] = field(default_factory=set)  # which of ``outcomes`` are stream records
    discarded: set[str] = field(default_factory=set)  # stream records a mapping gave up on
    filtered: int = 0  # stream records no filter matched: read past, never delivered
    unable: dict[str, str] = field(default_factory=dict)  # function -> why it cannot run (until it runs)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def delivered(self) -> int:
        """Distinct messages (and stream records) handed to the functions."""
        return len(self.message_ids)

    def totals(self) -> dict[str, int]:
        """Messages by last outcome; ``stale`` (versioned mode's) only when a message was."""
        counts = {name: 0 for name in OUTCOMES if name != Outcome.STALE}
        for outcome in self.outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def describe_totals(self) -> str:
        counts = self.totals()
        parts = [
            f"{counts[name]} {name}"
            for name in OUTCOMES
            if name in counts and (counts[name] or name != "succeeded")
        ]
        conflicts = int(self.metrics.get("conflicts", 0))
        records = len(self.stream_records)
        kinds = ((len(self.outcomes) - records, "message"), (records, "stream record"))
        units = " and ".join(plural(n, unit) for n, unit in kinds if n) or plural(0, "message")
        text = f"{units}: " + ", ".join(parts)
        if conflicts:
            text += f" ({conflicts} conflict{'s' if conflicts != 1 else ''})"
        return text

    def summary(self) -> str:
        """The final outcome of every message the runner saw (one per message, not per attempt)."""
        deliveries = plural(self.records, "delivery", "deliveries")
        text = f"{self.describe_totals()}; {deliveries} in {plural(self.invocations, 'invocation')}"
        failed = [m for m, outcome in self.outcomes.items() if outcome == "failed"]
        if failed:
            exhausted = len(self.exhausted.intersection(failed))
            discarded = len(self.discarded.intersection(failed))
            said = []
            if exhausted or not discarded:
                said.append(
                    f"{exhausted} reached the queue's maxReceiveCount (SQS moves them to the dead-letter "
                    "queue)"
                )
            if discarded:
                said.append(
                    f"{discarded} were discarded by their stream mapping once its retries or record age ran "
                    "out (its on-failure destination, if it has one, got their place in the stream)"
                )
            again = len(failed) - exhausted - discarded
            text += f"; of the {len(failed)} failed, {', '.join(said)} and {again} will be delivered again"
        if self.filtered:
            text += f"; {plural(self.filtered, 'stream record')} matched no filter (never delivered)"
        for function, why in sorted(self.unable.items()):
            text += f"\n{function} could not run, its messages wait in the queue: {why}"
        return text


def emf_counts(documents: list[dict[str, Any]]) -> dict[str, float]:
    """The counters of Embedded Metric Format documents, summed by metric name, as CloudWatch would."""
    counts: dict[str, float] = {}
    for document in documents:
        try:
            for directive in document["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    value = document.get(metric["Name"])
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        counts[metric["Name"]] = counts.get(metric["Name"], 0) + value
        except (KeyError, TypeError):
            continue
    return counts


@dataclass(frozen=True)
class Batch:
    """One invocation as the runner saw it: what went in, what came out."""

    function: str
    message_ids: tuple[str, ...]
    groups: tuple[str, ...]
    outcomes: tuple[str, ...]  # per record, in message order
    error: str | None = None  # why the whole batch failed (exception, timeout, crash, cold start)
    source: str = ""  # where the records came from when not a queue's message groups (a stream's shard)
    then: str = ""  # what the mapping does next with them (a stream's retry or discard)

    def describe(self) -> str:
        counts = {name: self.outcomes.count(name) for name in OUTCOMES if name in self.outcomes}
        groups = (
            f" (group{'s' if len(self.groups) != 1 else ''} {', '.join(self.groups)})" if self.groups else ""
        )
        outcome = ", ".join(f"{n} {name}" for name, n in counts.items())
        if self.error:
            outcome += f": {self.error}"
        if self.then:
            outcome += f"; {self.then}"
        records = f"{len(self.message_ids)} record{'s' if len(self.message_ids) != 1 else ''}"
        where = f" ({self.source})" if self.source else groups
        return f"{self.function}: {records}{where} -> {outcome}"


def record_outcomes(ids: list[str], failed_ids: set[str], logs: list[dict[str, Any]]) -> list[str]:
    """Each record's outcome (``ids``: as the function names them, a message id or a stream record's
    sequence number): what the function logged for it, else failed (a batch item failure), else
    processed / duplicate / quarantined as the batch's EMF counts say (only the totals matter), else
    succeeded (a function that reports nothing)."""
    logged: dict[str, str] = {}
    for line in logs:
        message_id, outcome = line.get("message_id"), line.get("outcome")
        if isinstance(message_id, str) and outcome in OUTCOMES:
            logged[message_id] = str(outcome)
    counts = emf_counts([line for line in logs if "_aws" in line])
    remaining = {
        outcome: int(counts.get(metric, 0)) - sum(1 for o in logged.values() if o == outcome)
        for metric, outcome in _METRIC_OUTCOME.items()
    }
    outcomes = []
    for message_id in ids:
        if message_id in failed_ids:
            outcomes.append("failed")
        elif message_id in logged:
            outcomes.append(logged[message_id])
        else:
            outcome = next((name for name, left in remaining.items() if left > 0), "succeeded")
            if outcome != "succeeded":
                remaining[outcome] -= 1
            outcomes.append(outcome)
    return outcomes


class Accounts:
    """The runner's :class:`Stats`, kept by every poller: one line per batch to ``report``."""

    def __init__(self, report: Callable[[str], None] | None = None) -> None:
        self.stats = Stats()
        self.report = report

    def account(
        self,
        batch: Batch,
        logs: list[dict[str, Any]],
        *,
        failed: int,
        given_up: set[str],
        invoked: bool = True,
        stream: bool = False,
    ) -> None:
        """Count a batch and report its line. ``given_up``: the records that will not come back if they
        failed (a message on its last receive: SQS moves it to the DLQ; a stream record a mapping
        discarded); ``invoked`` is False for stream records discarded without an invocation."""
        with self.stats.lock:
            stats = self.stats
            if invoked:
                stats.invocations += 1
                stats.records += len(batch.message_ids)
                stats.message_ids.update(batch.message_ids)
            stats.succeeded += len(batch.message_ids) - failed
            stats.failed += failed
            for name, value in emf_counts([line for line in logs if "_aws" in line]).items():
                stats.metrics[name] = stats.metrics.get(name, 0) + value
            ended = stats.discarded if stream else stats.exhausted
            for key, outcome in zip(batch.message_ids, batch.outcomes, strict=True):
                stats.outcomes[key] = outcome
                if stream:
                    stats.stream_records.add(key)
                if outcome == "failed" and key in given_up:
                    ended.add(key)
                else:
                    ended.discard(key)
            line = f"{batch.describe()} | run total, every function: {stats.describe_totals()}"
        if self.report is not None:
            self.report(line)

    def count(self, *, whole_batch_failures: int = 0, filtered: int = 0) -> None:
        with self.stats.lock:
            self.stats.whole_batch_failures += whole_batch_failures
            self.stats.filtered += filtered


def batch_error(reply: dict[str, Any]) -> str | None:
    if "cold_start" in reply:
        return str(reply["cold_start"])
    if "error" in reply:
        error = reply["error"] or {}
        return f"the function raised {error.get('errorType', 'an error')}: {error.get('errorMessage', '')}"
    if "timeout" in reply:
        return "the function timed out"
    if "crash" in reply:
        return "the function's process exited"
    return None


__all__ = ["OUTCOMES", "Accounts", "Batch", "Stats", "batch_error", "emf_counts", "record_outcomes"]
