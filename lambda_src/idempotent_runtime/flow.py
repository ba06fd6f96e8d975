"""A record's flow from key to outcome, and ``build_handler``: the configured consumer, callable as a Lambda
handler. Importing needs no environment."""

from __future__ import annotations

import contextlib
import importlib
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TextIO

from idempotent_runtime import deadline
from idempotent_runtime.batch import BatchRunner, RecordResult
from idempotent_runtime.clients import LazyClient
from idempotent_runtime.config import Config
from idempotent_runtime.contract import (
    OUTCOME_METRIC,
    PROCESSOR,
    DeadLetterKind,
    LogLevel,
    Metric,
    Outcome,
    check_settings,
    metrics_of,
)
from idempotent_runtime.errors import (
    ConfigurationError,
    Conflict,
    PermanentError,
    Resource,
    TransientError,
    classify,
    error_text,
    safe_error_text,
)
from idempotent_runtime.keys import KeyBuilder
from idempotent_runtime.message import Message
from idempotent_runtime.modes import make_mode
from idempotent_runtime.observability import Log, emf_line
from idempotent_runtime.quarantine import Quarantine, SendFailed
from idempotent_runtime.retries import MIN_ATTEMPT_SECONDS, Retrier


def load_processor(spec: str) -> Callable[[Message], Any]:
    """Import ``package.module:function`` (once, at cold start); failures name PROCESSOR and the value."""
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigurationError(f"PROCESSOR {spec!r}: cannot import module {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigurationError(
                f"PROCESSOR {spec!r}: {module_name!r} has no attribute {attribute!r}"
            ) from None
    if not callable(target):
        raise ConfigurationError(f"PROCESSOR {spec!r} is not callable, got {type(target).__name__}")
    return target


# A processor's unexpected exception carries its type, place and traceback here (raised_in).
RAISED = "idempotency_raised"
RAISED_TRACEBACK = "traceback"


def watched(processor: Callable[[Message], Any]) -> Callable[[Message], Any]:
    """``processor``, its unexpected exceptions (not its answers PermanentError, TransientError) marked."""

    def run(message: Message) -> Any:
        try:
            return processor(message)
        except (PermanentError, TransientError):
            raise
        except Exception as exc:
            with contextlib.suppress(Exception):
                setattr(exc, RAISED, raised_in(exc))
            raise

    return run


def raised_in(exc: BaseException) -> dict[str, Any]:
    """Type, innermost frame in the user's code (not the standard library's, a package's, the runtime's;
    else the processor's) and traceback."""
    import os
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)[1:]
    others = (os.path.dirname(os.__file__), os.path.dirname(__file__))
    user = [f for f in frames if not f.filename.startswith(others) and "-packages" not in f.filename]
    where = (user or frames)[-1] if frames else None
    return {
        "error_type": type(exc).__name__,
        "error_location": f"{where.filename}:{where.lineno} in {where.name}" if where else None,
        "traceback": "".join(traceback.format_exception(exc, limit=-10))[-4000:],
    }


# The batch's counters by plain name (an enum's ``.value`` is a property: looked up once, not per record).
_OUTCOME_COUNTER = {outcome: metric.value for outcome, metric in OUTCOME_METRIC.items()}
_CONFLICTS = Metric.CONFLICTS.value
_MISCONFIGURED = Metric.MISCONFIGURED.value
# The level of a record's line by outcome (a conflict's is WARNING whatever its outcome): the common ones at
# DEBUG; a stale record at INFO, a line at the default level that says which version it lost to (stale
# deliveries are expected from standard queues: LOG_LEVEL=WARNING drops them, the metric still counts).
_LEVEL = {Outcome.PROCESSED: LogLevel.DEBUG, Outcome.DUPLICATE: LogLevel.DEBUG, Outcome.STALE: LogLevel.INFO}


class Consumer:
    """The Lambda handler for ``config``: ``consumer(event, context) -> {"batchItemFailures": [...]}``.

    ``process_batch(event, context)`` returns the per-record :class:`RecordResult` list instead (local runner,
    tests). Records are never lost: each ends processed, duplicate, quarantined (in the DLQ, once) or failed
    (reported to SQS, which delivers it again).

    Clients default to :func:`idempotent_runtime.clients.create_client` ones, made once on first use;
    ``processor`` overrides PROCESSOR; ``clock`` (epoch seconds) measures leases and TTLs; ``sleep`` is
    what retries wait with.
    """

    def __init__(
        self,
        config: Config,
        *,
        dynamodb_client: Any = None,
        sqs_client: Any = None,
        processor: Callable[[Message], Any] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        log_stream: TextIO | None = None,
    ) -> None:
        self.config = config
        self.log = Log(config.log_level, config.function_name, log_stream)
        self._debug = self.log.enabled(LogLevel.DEBUG)
        self.dynamodb = LazyClient(
            "dynamodb",
            dynamodb_client,
            max_pool_connections=max(10, config.max_workers),
            # transaction mode sends the processor's own entries: let botocore check them.
            parameter_validation=config.mode == "transaction",
        )
        self.sqs = LazyClient("sqs", sqs_client)
        self.calls = Retrier(sleep)
        # Config checked every rule but the processor's, known only here.
        check_settings({**config.settings(), PROCESSOR.name: processor or config.processor})
        if processor is None and config.processor is not None:
            processor = load_processor(config.processor)
        if processor is not None:
            processor = watched(processor)
        self.mode = make_mode(
            config, self.dynamodb, processor, clock=clock, calls=self.calls, warn=self.log.warn
        )
        self.mode_name = self.mode.name.value
        self.metric_names = tuple(metric.value for metric in metrics_of(self.mode.name))
        self.key_of = KeyBuilder(config, sort_reserve=self.mode.sort_reserve)
        self.quarantine = (
            Quarantine(config, self.sqs, self.dynamodb, calls=self.calls, clock=clock)
            if config.dlq_url
            else None
        )
        self.runner = BatchRunner(
            self.process_record, self.skip_record, config.max_workers, config.queue_type
        )

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        results = self.process_batch(event, context)
        return {"batchItemFailures": [{"itemIdentifier": r.message.message_id} for r in results if r.failed]}

    def process_batch(self, event: dict[str, Any], context: Any = None) -> list[RecordResult]:
        started = time.monotonic()
        records = event.get("Records") if isinstance(event, dict) else None
        if not isinstance(records, list):
            raise ValueError(
                f"event must be lambda's sqs event with a 'Records' list, got {type(event).__name__}"
            )
        messages = []
        for index, record in enumerate(records):
            if not isinstance(record, dict) or not isinstance(record.get("messageId"), str):
                raise ValueError(f"record {index} of the event has no messageId, got {record!r:.120}")
            messages.append(Message(record))
        if messages:
            self.dynamodb()  # create the shared client once, before groups fan out to threads
        results, groups = self.runner.run(messages, context)
        counts: Counter[str] = Counter()
        conflicts = misconfigured = 0
        for result in results:
            counts[_OUTCOME_COUNTER[result.outcome]] += 1
            conflicts += result.conflict
            misconfigured += result.misconfigured
        counts[_CONFLICTS] = conflicts
        counts[_MISCONFIGURED] = misconfigured
        hints = sorted({result.hint for result in results if result.hint})
        if hints:
            self.log.emit(
                LogLevel.ERROR,
                "records fail because the deployment looks misconfigured; they are retried, not quarantined",
                misconfigured=misconfigured,
                likely_misconfiguration=hints,
            )
        self.log.write(
            emf_line(
                self.config.metrics_namespace,
                self.config.function_name,
                counts,
                self.metric_names,
                records=len(results),
                groups=groups,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
                mode=self.mode_name,
            )
        )
        self.log.flush()
        return results

    def process_record(self, message: Message, context: Any = None) -> RecordResult:
        """Never raises an Exception: one record can never take the batch (and the other groups) down."""
        try:
            result = self._outcome(message, context)
        except Exception as exc:  # last resort: a bug in classifying or quarantining a failure
            result = RecordResult(
                message,
                Outcome.FAILED,
                f"retry later: unexpected error while handling the record: {safe_error_text(exc)}",
            )
        self._log(result)
        return result

    def _outcome(self, message: Message, context: Any) -> RecordResult:
        try:
            message.key = self.key_of(message)
            done = self.mode.process(message, context)
        except Exception as exc:
            return self._failure(message, exc)
        if done.conflict is not None:  # ON_CONFLICT=duplicate
            return RecordResult(message, Outcome.DUPLICATE, done.conflict.reason, conflict=True)
        return RecordResult(message, done.outcome, done.reason, result=done.result)

    def _failure(self, message: Message, exc: Exception) -> RecordResult:
        failure = classify(exc, Resource.TABLE)
        raised = getattr(exc, RAISED, None)
        if failure.permanent:
            conflict = exc if isinstance(exc, Conflict) else None
            return self._quarantine(message, failure.reason, failure.kind, conflict, raised)
        if failure.misconfigured:
            return RecordResult(
                message, Outcome.FAILED, f"retry later: {failure.reason}", hint=failure.hint, notes=raised
            )
        return self._transient(message, failure.reason, raised)

    def _last_receive(self, message: Message) -> str | None:
        """How far a record on its last receive, with a DLQ to go to, has come; None when not there."""
        limit = self.config.max_receive_count
        if limit is None or self.quarantine is None or message.receive_count < limit:
            return None
        return f"({message.receive_count} of MAX_RECEIVE_COUNT {limit})"

    def _transient(self, message: Message, reason: str, raised: dict[str, Any] | None = None) -> RecordResult:
        last = self._last_receive(message)
        if last is not None:
            reason = f"failed on its last receive {last}: {reason}"
            return self._quarantine(message, reason, DeadLetterKind.EXHAUSTED, raised=raised)
        return RecordResult(message, Outcome.FAILED, f"retry later: {reason}", notes=raised)

    def skip_record(self, message: Message, reason: str, blocker: RecordResult | None) -> RecordResult:
        """A record not attempted (an earlier record of its group failed, or no time is left): on its last
        receive to the DLQ while a send has time, unless the deployment failed the record before it."""
        left = deadline.seconds_left()
        last = self._last_receive(message)
        if (
            (blocker is None or not blocker.misconfigured)
            and last is not None
            and (left is None or left >= MIN_ATTEMPT_SECONDS)
        ):
            cause = f": {blocker.reason}" if blocker is not None else ""
            reason = f"{reason} on this record's last receive {last}{cause}"
            result = self._quarantine(message, reason, DeadLetterKind.EXHAUSTED)
        else:
            # Behind a record failed by the deployment, this one fails because of the deployment too.
            hint = blocker.hint if blocker is not None else None
            result = RecordResult(message, Outcome.FAILED, reason, hint=hint)
        self._log(result)
        return result

    def _quarantine(
        self,
        message: Message,
        reason: str,
        kind: DeadLetterKind,
        conflict: Conflict | None = None,
        raised: dict[str, Any] | None = None,
    ) -> RecordResult:
        is_conflict = conflict is not None
        failed = RecordResult(message, Outcome.FAILED, conflict=is_conflict, kind=kind, notes=raised)
        if self.quarantine is None:
            return failed._replace(reason=f"permanent, no DLQ_URL so retried until redrive: {reason}")
        details: dict[str, Any] = {}
        if conflict is not None:
            details.update(fingerprint=conflict.fingerprint, stored_fingerprint=conflict.stored_fingerprint)
        if raised is not None:
            details.update(error_type=raised["error_type"], error_location=raised["error_location"])
        try:
            sent = self.quarantine.send(message, reason, kind, details)
        except SendFailed as unsent:
            failure = classify(unsent.error, unsent.where)
            return failed._replace(
                reason=f"permanent: {reason}; sending to the dlq failed: {error_text(unsent.error)}",
                hint=failure.hint if failure.misconfigured else None,
            )
        # Said on the record's own line: one line per quarantined record.
        notes: dict[str, Any] = dict(raised or ())
        if sent.dropped:
            notes["dropped_attributes"] = sent.dropped
            notes["dropped_attributes_why"] = (
                "message attributes not copied to the dlq (sqs takes 10, two are the runtime's, and counts "
                "them in its size limit; idempotency.* names are the runtime's own)"
            )
        if sent.warnings:
            notes["warnings"] = [{"warning": text, **fields} for text, fields in sent.warnings]
        return RecordResult(
            message, Outcome.QUARANTINED, reason, conflict=is_conflict, kind=kind, notes=notes or None
        )

    def _log(self, result: RecordResult) -> None:
        level = LogLevel.WARNING if result.conflict else _LEVEL.get(result.outcome, LogLevel.WARNING)
        if level is LogLevel.DEBUG and not self._debug:
            return  # the common case: not logged at the default level
        if result.notes and RAISED_TRACEBACK in result.notes:
            level = LogLevel.ERROR
        # A log line that cannot be written must not change the record's outcome (nor raise into the batch).
        with contextlib.suppress(Exception):
            self._emit(result, level)

    def _emit(self, result: RecordResult, level: LogLevel) -> None:
        if not self.log.enabled(level):
            return
        message = result.message
        fields: dict[str, Any] = {
            "message_id": message.message_id,
            "group_id": message.group_id,
            "key": str(message.key) if message.key is not None else None,
            "mode": self.mode_name,
            "outcome": result.outcome.value,
        }
        if result.reason is not None:
            fields["reason"] = result.reason
        if result.kind is not None:
            fields["kind"] = result.kind.value
        if result.conflict:
            fields["conflict"] = True
        if result.misconfigured:
            fields["misconfigured"] = True
        if result.notes:
            fields.update(result.notes)
        self.log.emit(level, "record " + result.outcome.value, **fields)


# The documented way to build the handler: ``build_handler(config, *, dynamodb_client=None, ...)``.
build_handler = Consumer
