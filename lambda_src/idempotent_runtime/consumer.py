"""build_handler: the configured consumer, callable as a Lambda handler. Importing needs no environment."""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable
from typing import Any, TextIO

from idempotent_runtime.batch import DUPLICATE, FAILED, PROCESSED, QUARANTINED, BatchRunner, RecordResult
from idempotent_runtime.clients import LazyClient
from idempotent_runtime.config import Config
from idempotent_runtime.errors import ConfigurationError, describe, permanent_reason
from idempotent_runtime.keys import key_builder
from idempotent_runtime.message import Message
from idempotent_runtime.observability import Log, emf_line
from idempotent_runtime.quarantine import Quarantine

_METRIC_OF = {PROCESSED: "processed", DUPLICATE: "duplicates", FAILED: "failed", QUARANTINED: "quarantined"}


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


def make_mode(
    config: Config,
    dynamodb: Callable[[], Any],
    processor: Callable[[Message], Any] | None,
    clock: Callable[[], float],
    log: Log,
) -> Any:
    if config.mode == "document":
        from idempotent_runtime.document import DocumentMode

        return DocumentMode(config, dynamodb, processor, clock)
    if processor is None:
        raise ConfigurationError(f"PROCESSOR is required with IDEMPOTENCY_MODE={config.mode}, got nothing")
    if config.mode == "transaction":
        from idempotent_runtime.transaction import TransactionMode

        return TransactionMode(config, dynamodb, processor, clock)
    from idempotent_runtime.guarded import GuardedMode

    return GuardedMode(
        config, dynamodb, processor, clock, warn=lambda msg, **f: log.emit("WARNING", msg, **f)
    )


class Consumer:
    """The Lambda handler: ``consumer(event, context) -> {"batchItemFailures": [...]}``.

    ``process_batch(event, context)`` returns the per-record :class:`RecordResult` list instead (local runner,
    tests). Records are never lost: each ends processed, duplicate, quarantined (in the DLQ) or failed
    (reported to SQS, which delivers it again).
    """

    def __init__(
        self,
        config: Config,
        *,
        dynamodb_client: Any = None,
        sqs_client: Any = None,
        processor: Callable[[Message], Any] | None = None,
        clock: Callable[[], float] = time.time,
        log_stream: TextIO | None = None,
    ) -> None:
        self.config = config
        self.log = Log(config.log_level, config.function_name, log_stream)
        self.dynamodb = LazyClient(
            "dynamodb",
            dynamodb_client,
            max_pool_connections=max(10, config.max_workers),
            # transaction mode sends the processor's own entries: let botocore check them.
            parameter_validation=config.mode == "transaction",
        )
        self.sqs = LazyClient("sqs", sqs_client)
        if processor is None and config.processor is not None:
            processor = load_processor(config.processor)
        self.mode = make_mode(config, self.dynamodb, processor, clock, self.log)
        self.mode_name = self.mode.name
        self.key_of = key_builder(config, sort_reserve=self.mode.sort_reserve)
        self.quarantine = Quarantine(config.dlq_url, self.sqs) if config.dlq_url else None
        self.runner = BatchRunner(self.process_record, self.skip_record, config.max_workers)

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        results = self.process_batch(event, context)
        return {"batchItemFailures": [{"itemIdentifier": r.message.message_id} for r in results if r.failed]}

    def process_batch(self, event: dict[str, Any], context: Any = None) -> list[RecordResult]:
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
        results = self.runner.run(messages, context)
        counts = dict.fromkeys(_METRIC_OF.values(), 0)
        for result in results:
            counts[_METRIC_OF[result.outcome]] += 1
        self.log.write(emf_line(self.config.metrics_namespace, self.config.function_name, counts))
        self.log.flush()
        return results

    def process_record(self, message: Message, context: Any = None) -> RecordResult:
        """Never raises: one record can never take the batch (and the other groups) down with it."""
        try:
            result = self._outcome(message, context)
        except Exception as exc:  # last resort: a bug in classifying or quarantining a failure
            result = RecordResult(
                message, FAILED, f"retry later: unexpected error while handling the record: {_describe(exc)}"
            )
        self._log(result)
        return result

    def _outcome(self, message: Message, context: Any) -> RecordResult:
        try:
            message.key = self.key_of(message)
            outcome, value = self.mode.process(message, context)
            return RecordResult(message, outcome, result=value)
        except Exception as exc:
            reason = permanent_reason(exc)
            if reason is None:
                return RecordResult(message, FAILED, f"retry later: {describe(exc)}")
            return self._quarantine(message, reason)

    def skip_record(self, message: Message, reason: str) -> RecordResult:
        result = RecordResult(message, FAILED, reason)
        self._log(result)
        return result

    def _quarantine(self, message: Message, reason: str) -> RecordResult:
        if self.quarantine is None:
            return RecordResult(message, FAILED, f"permanent, no DLQ_URL so retried until redrive: {reason}")
        try:
            dropped = self.quarantine.send(message, reason)
        except Exception as exc:
            return RecordResult(
                message, FAILED, f"permanent: {reason}; sending to the dlq failed: {describe(exc)}"
            )
        if dropped:
            self.log.emit(
                "WARNING",
                "message attributes over sqs's limit of 10 not copied to the dlq",
                message_id=message.message_id,
                dropped=dropped,
            )
        return RecordResult(message, QUARANTINED, reason)

    def _log(self, result: RecordResult) -> None:
        # A log line that cannot be written must not change the record's outcome (nor raise into the batch).
        with contextlib.suppress(Exception):
            self._emit(result)

    def _emit(self, result: RecordResult) -> None:
        level = "INFO" if result.outcome in (PROCESSED, DUPLICATE) else "WARNING"
        if not self.log.enabled(level):
            return
        message = result.message
        fields: dict[str, Any] = {
            "message_id": message.message_id,
            "group_id": message.group_id,
            "key": str(message.key) if message.key is not None else None,
            "mode": self.mode_name,
            "outcome": result.outcome,
        }
        if result.reason is not None:
            fields["reason"] = result.reason
        self.log.emit(level, "record " + result.outcome, **fields)


def _describe(exc: BaseException) -> str:
    """``describe(exc)`` for the last resort, which must not raise itself."""
    try:
        return describe(exc)
    except Exception:
        return type(exc).__name__


def build_handler(
    config: Config,
    *,
    dynamodb_client: Any = None,
    sqs_client: Any = None,
    processor: Callable[[Message], Any] | None = None,
    clock: Callable[[], float] = time.time,
    log_stream: TextIO | None = None,
) -> Consumer:
    """The Lambda handler for ``config``: ``handler(event, context) -> {"batchItemFailures": [...]}``.

    Clients default to boto3 clients created on first use, once. ``processor`` overrides PROCESSOR (tests);
    ``clock`` (epoch seconds) is what leases and TTLs are measured with.
    """
    return Consumer(
        config,
        dynamodb_client=dynamodb_client,
        sqs_client=sqs_client,
        processor=processor,
        clock=clock,
        log_stream=log_stream,
    )
