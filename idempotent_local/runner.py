"""The event-source runner: what Lambda's event source mappings do, for functions in the emulator.

The emulator stores functions but cannot run them (moto needs Docker for that). The runner reads everything
back from the emulator, as Lambda's pollers would:

- the event source mappings: SQS queues (``BatchSize``, ``FunctionResponseTypes``, enabled) and DynamoDB
  streams (also ``StartingPosition``, ``FilterCriteria``, the retry, bisection and on-failure settings);
- each function's configuration (handler, environment, timeout) and its deployed code (the zip);
- it long-polls a queue for up to ``BatchSize`` messages with all attributes, builds Lambda's SQS event
  (:func:`idempotent_local.events.lambda_sqs_event`, the runtime's own model of it),
  invokes the handler in a worker process that imported the deployed code with the function's
  environment (one warm worker per function, restarted after a crash or a timeout), deletes the records
  that succeeded and leaves the rest on the queue;
- it reads a stream's shards in sequence order, drops the records the mapping's filters do not match,
  invokes the function with Lambda's DynamoDB stream event
  (:func:`idempotent_local.events.lambda_dynamodb_record`) one batch at a time per shard, and checkpoints,
  retries, bisects and discards as :mod:`idempotent_local.streams` describes.

Queue records that failed (``batchItemFailures``, an exception, a timeout) come back after the queue's
visibility timeout, and the queue's redrive policy moves them to the dead-letter queue after
``maxReceiveCount`` receives, exactly as in AWS. **One deliberate difference, off by default:** with
``retry_delay`` set, the runner makes failed records visible again after that many seconds instead of the
full visibility timeout (``ChangeMessageVisibility``), so a demo does not wait 6 x the function timeout per
retry. The number of receives before redrive is unchanged. A failed stream batch is retried after
``retry_delay`` too, or after :data:`idempotent_local.streams.STREAM_RETRY_SECONDS`.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import select
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from idempotent_runtime.contract import OUTCOME_METRIC, Outcome

from idempotent_local import streams
from idempotent_local.emulator import Emulator
from idempotent_local.errors import RunnerError
from idempotent_local.event_filter import matches
from idempotent_local.events import lambda_dynamodb_record, lambda_sqs_event, stream_invocation_record
from idempotent_local.mappings import Mapping, StreamMapping, plural, read
from idempotent_local.node import quiet_environment
from idempotent_local.wheels import foreign, this_python

__all__ = [
    "Batch",
    "EventSourceRunner",
    "Mapping",
    "RunnerError",
    "Stats",
    "StreamMapping",
    "Worker",
    "lambda_sqs_event",
]

WORKER = Path(__file__).with_name("worker.py")
TRIMMED = "TrimmedDataAccessException"  # DynamoDB Streams: the position asked for has left the stream


class Trimmed(Exception):
    """The records after a stream mapping's checkpoint have left the stream before it delivered them."""


CHECKPOINTS = (
    "stream-checkpoints.json"  # in the emulator's state directory: where stream mappings have read to
)


def function_log_path(state_dir: str | Path, function: str) -> Path:
    """Where the runner appends what ``function`` prints: its log, as CloudWatch Logs would hold it."""
    return Path(state_dir).resolve() / "logs" / f"{function}.log"


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
    exhausted: set[str] = field(
        default_factory=set
    )  # failed on their last receive: SQS moves them to the DLQ
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
            exhausted, discarded = (
                len(self.exhausted.intersection(failed)),
                len(self.discarded.intersection(failed)),
            )
            said = (
                []
                if discarded and not exhausted
                else [
                    f"{exhausted} reached the queue's maxReceiveCount (SQS moves them to the dead-letter "
                    "queue)"
                ]
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
            directives = document["_aws"]["CloudWatchMetrics"]
            for directive in directives:
                for metric in directive["Metrics"]:
                    value = document.get(metric["Name"])
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        counts[metric["Name"]] = counts.get(metric["Name"], 0) + value
        except (KeyError, TypeError):
            continue
    return counts


class Worker:
    """A warm execution environment of one function (a subprocess, see ``worker.py``). One invocation at a
    time: a second mapping of the same function waits for the first, as a function with one environment
    would."""

    def __init__(self, name: str, code_dir: Path, handler: str, env: dict[str, str], log_path: Path) -> None:
        self.name, self.code_dir, self.handler, self.env = name, code_dir, handler, env
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()
        self._log_thread: threading.Thread | None = None

    def _pump_log(self, stream: io.TextIOBase) -> None:
        with open(self.log_path, "a") as log:
            for line in stream:
                log.write(line)
                log.flush()

    def start(self, abandon: threading.Event | None = None) -> None:
        """Start the worker and wait for its cold start (60 s at most, or until ``abandon`` is set)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(self.code_dir), self.handler],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.code_dir,
        )
        assert self.process.stderr is not None
        self._log_thread = threading.Thread(target=self._pump_log, args=(self.process.stderr,), daemon=True)
        self._log_thread.start()
        reply = self._read(timeout=60, abandon=abandon)
        if reply is None or "init_error" in reply:
            error = (reply or {}).get("init_error", {"errorMessage": "no answer within 60 s"})
            self.stop()
            raise RunnerError(
                f"function {self.name} failed its cold start: {error.get('errorType', 'Error')}: "
                f"{error.get('errorMessage')} (log: {self.log_path})"
            )

    def _read(self, timeout: float, abandon: threading.Event | None = None) -> dict[str, Any] | None:
        """The worker's next reply; None after ``timeout`` seconds, at its exit, or once ``abandon`` is
        set."""
        assert self.process is not None and self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (abandon is not None and abandon.is_set()):
                return None
            ready, _, _ = select.select([self.process.stdout], [], [], min(left, 0.2))
            if ready:
                break
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def invoke(self, event: dict[str, Any], timeout_s: float, request_id: str = "") -> dict[str, Any]:
        """``{"result": ...}``, ``{"error": ...}`` or ``{"timeout": True}`` / ``{"crash": ...}``; a reply of
        the worker also has ``"logs"`` (the EMF and outcome lines the function wrote meanwhile).
        ``request_id`` is the context's ``aws_request_id`` (a new one when empty)."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        assert self.process is not None and self.process.stdin is not None
        request = {"event": event, "timeout_ms": int(timeout_s * 1000), "request_id": request_id}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = self._read(timeout=timeout_s + 1)
        if reply is None:
            crashed = self.process.poll() is not None
            self.stop()
            return {"crash": "the worker exited"} if crashed else {"timeout": True}
        return reply

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()  # type: ignore[union-attr]
            self.process = None
        if self._log_thread is not None:
            self._log_thread.join(5)
            self._log_thread = None


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


def _record_outcomes(ids: list[str], failed_ids: set[str], logs: list[dict[str, Any]]) -> list[str]:
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
        self.work_dir = Path(
            work_dir if work_dir is not None else Path(emulator.state_dir) / "functions"
        ).resolve()
        self.stats = Stats()
        self.report = report
        self.clock = clock
        self.checkpoints = streams.Checkpoints(Path(emulator.state_dir).resolve() / CHECKPOINTS)
        self._workers: dict[str, Worker] = {}
        self._workers_lock = threading.Lock()
        self._timeouts: dict[str, float] = {}
        self._shards: dict[tuple[str, str], streams.Shard] = {}  # (mapping uuid, shard id) -> state
        self._stream_locks: dict[str, threading.Lock] = {}  # one poller per stream mapping at a time

    # The emulator's clients, made when first used (``local status`` lists mappings and needs no other).
    @property
    def _sqs(self) -> Any:
        return self.emulator.client("sqs")

    @property
    def _lambda(self) -> Any:
        return self.emulator.client("lambda")

    @property
    def _s3(self) -> Any:
        return self.emulator.client("s3")

    @property
    def _streams(self) -> Any:
        return self.emulator.client("dynamodbstreams")

    # --- reading back what is deployed -------------------------------------------------------------
    def mappings(self, *, resolve: bool = True) -> list[Mapping | StreamMapping]:
        """Every SQS and DynamoDB stream event source mapping (other sources are not run); see
        :func:`idempotent_local.mappings.read`."""
        found = self._lambda.get_paginator("list_event_source_mappings").paginate()
        return read(
            (esm for page in found for esm in page["EventSourceMappings"]), self._sqs if resolve else None
        )

    def _download(self, location: str) -> bytes:
        parsed = urllib.parse.urlparse(location)
        served = f"{parsed.scheme}://{parsed.netloc}" == self.emulator.endpoint
        if served and not parsed.path.startswith("/moto-api/"):  # a bucket's object, not the control API's
            bucket, _, key = parsed.path.lstrip("/").partition("/")
            return self._s3.get_object(Bucket=bucket, Key=urllib.parse.unquote(key))["Body"].read()
        with urllib.request.urlopen(location, timeout=30) as response:
            return response.read()

    def _worker(self, function_arn: str) -> Worker:
        with self._workers_lock:
            return self._worker_locked(function_arn)

    def _worker_locked(self, function_arn: str) -> Worker:
        worker = self._workers.get(function_arn)
        configuration = self._lambda.get_function_configuration(FunctionName=function_arn)
        sha = configuration.get("CodeSha256", "")
        if worker is not None and worker.env.get("LOCAL_CLOUD_CODE_SHA256") == sha:
            return worker
        if worker is not None:
            with worker.lock:
                worker.stop()
        function = self._lambda.get_function(FunctionName=function_arn)
        name = configuration["FunctionName"]
        code_dir = self.work_dir / f"{name}-{sha.replace('/', '_').replace('+', '-')[:16]}"
        if not code_dir.exists():
            location = function.get("Code", {}).get("Location")
            if not location:
                raise RunnerError(f"function {name} has no downloadable code: {function.get('Code')}")
            staging = code_dir.with_suffix(".partial")
            with zipfile.ZipFile(io.BytesIO(self._download(location))) as archive:
                archive.extractall(staging)
            staging.replace(code_dir)
        mismatched = foreign(code_dir)
        if mismatched:
            raise RunnerError(
                f"function {name} cannot run on this machine: its code holds {'; '.join(mismatched)}, "
                f"which {this_python()} (the Python `local run` uses) cannot import: its requirements were "
                "installed for the function's runtime in AWS. Redeploy with `idempotent-pipeline local "
                "deploy`, which installs them for this Python; the function's messages wait in the queue "
                "until then"
            )
        path = os.environ.get("PATH", "")
        env = self.emulator.client_environment(base={"PATH": path, "LANG": "C.UTF-8"})
        env.update(quiet_environment(path))
        env.update(configuration.get("Environment", {}).get("Variables", {}))
        env.update(
            {
                "AWS_LAMBDA_FUNCTION_NAME": name,
                "AWS_LAMBDA_FUNCTION_VERSION": configuration.get("Version", "$LATEST"),
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(configuration.get("MemorySize", 128)),
                "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
                "AWS_LAMBDA_LOG_STREAM_NAME": "local-cloud",
                "AWS_EXECUTION_ENV": f"AWS_Lambda_{configuration.get('Runtime', 'python')}",
                "LAMBDA_TASK_ROOT": str(code_dir),
                "_HANDLER": configuration["Handler"],
                "LOCAL_CLOUD_FUNCTION_ARN": function_arn,
                "LOCAL_CLOUD_CODE_SHA256": sha,
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        worker = Worker(
            name,
            code_dir,
            configuration["Handler"],
            env,
            function_log_path(self.emulator.state_dir, name),
        )
        self._workers[function_arn] = worker
        self._timeouts[function_arn] = float(configuration.get("Timeout", 3))
        return worker

    # --- polling ------------------------------------------------------------------------------------
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
        worker = self._started_worker(mapping.function_arn, abandon)
        if isinstance(mapping, StreamMapping):
            return self._poll_stream(mapping, worker, wait_seconds, abandon)
        return self._poll_queue(mapping, worker, wait_seconds)

    def invoke(self, function_arn: str, event: dict[str, Any]) -> dict[str, Any]:
        """Invoke a function once with ``event`` and return its reply, as Lambda's synchronous ``Invoke``
        would (what API Gateway's proxy integration does: ``local request``): ``{"result": ...}``, or
        ``{"error": ...}``, ``{"timeout": True}``, ``{"crash": ...}``; ``"logs"`` beside. A function that
        cannot start raises :class:`RunnerError`."""
        worker = self._started_worker(function_arn, None)
        reply, cold_start = self._invoke(worker, function_arn, event)
        if cold_start is not None:
            raise cold_start
        return reply

    def _started_worker(self, function_arn: str, abandon: threading.Event | None) -> Worker:
        worker = self._worker(function_arn)
        with worker.lock:
            if worker.process is None:
                worker.start(abandon)
        return worker

    def _invoke(
        self, worker: Worker, function_arn: str, event: dict[str, Any], request_id: str = ""
    ) -> tuple[dict[str, Any], RunnerError | None]:
        """The worker's reply, and the error of a worker that died and could not start again (its reply
        then says so: the batch failed)."""
        try:
            with worker.lock:
                return worker.invoke(event, self._timeouts[function_arn], request_id), None
        except RunnerError as exc:
            return {"cold_start": str(exc)}, exc

    def _account(
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
            line = f"{batch.describe()} | {stats.describe_totals()}"
        if self.report is not None:
            self.report(line)

    def _failures(
        self, mapping: Mapping | StreamMapping, ids: list[str], reply: dict[str, Any]
    ) -> tuple[set[str], bool]:
        """The ids of the batch's records that failed, and whether the invocation itself failed (an error,
        a timeout, a malformed response: every record) rather than the function naming some."""
        everything = set(ids)
        if "result" not in reply:
            with self.stats.lock:
                self.stats.whole_batch_failures += 1
            return everything, True
        if not mapping.report_batch_item_failures:
            return set(), False
        result = reply["result"]
        if result is None:
            return set(), False
        failures = result.get("batchItemFailures") if isinstance(result, dict) else None
        if failures is None:
            return set(), False
        found = set()
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if not identifier or identifier not in everything:
                # Lambda treats a malformed response as a failure of the whole batch.
                with self.stats.lock:
                    self.stats.whole_batch_failures += 1
                return everything, True
            found.add(identifier)
        return found, False

    # --- SQS queues ---------------------------------------------------------------------------------
    def _poll_queue(self, mapping: Mapping, worker: Worker, wait_seconds: int | None) -> int:
        """Receive up to ``BatchSize`` messages (long-polling ``wait_seconds``), invoke, settle."""
        response = self._sqs.receive_message(
            QueueUrl=mapping.queue_url,
            MaxNumberOfMessages=min(mapping.batch_size, 10),
            WaitTimeSeconds=self.wait_seconds if wait_seconds is None else wait_seconds,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = response.get("Messages", [])
        if not messages:
            return 0
        reply, cold_start = self._invoke(
            worker, mapping.function_arn, lambda_sqs_event(messages, mapping.queue_arn)
        )
        self._settle(mapping, messages, reply)
        if cold_start is not None:
            raise cold_start
        return len(messages)

    def _settle(self, mapping: Mapping, messages: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        """Delete what succeeded, retry what failed (after ``retry_delay``), count, report."""
        ids = [m["MessageId"] for m in messages]
        failed_ids, _ = self._failures(mapping, ids, reply)
        succeeded = [m for m in messages if m["MessageId"] not in failed_ids]
        failed = [m for m in messages if m["MessageId"] in failed_ids]
        for start in range(0, len(succeeded), 10):
            chunk = succeeded[start : start + 10]
            self._sqs.delete_message_batch(
                QueueUrl=mapping.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
        if failed and self.retry_delay is not None:
            for start in range(0, len(failed), 10):
                self._sqs.change_message_visibility_batch(
                    QueueUrl=mapping.queue_url,
                    Entries=[
                        {
                            "Id": str(i),
                            "ReceiptHandle": m["ReceiptHandle"],
                            "VisibilityTimeout": int(self.retry_delay),
                        }
                        for i, m in enumerate(failed[start : start + 10])
                    ],
                )
        logs = reply.get("logs") or []
        groups = sorted({m.get("Attributes", {}).get("MessageGroupId") for m in messages} - {None})
        batch = Batch(
            function=mapping.function_name,
            message_ids=tuple(ids),
            groups=tuple(groups),
            outcomes=tuple(_record_outcomes(ids, failed_ids, logs)),
            error=_batch_error(reply),
        )
        last_receive = {
            m["MessageId"]
            for m in messages
            if mapping.max_receive_count
            and int(m.get("Attributes", {}).get("ApproximateReceiveCount", 1)) >= mapping.max_receive_count
        }
        self._account(batch, logs, failed=len(failed), given_up=last_receive)

    # --- DynamoDB streams ---------------------------------------------------------------------------
    def _poll_stream(
        self,
        mapping: StreamMapping,
        worker: Worker,
        wait_seconds: int | None,
        abandon: threading.Event | None,
    ) -> int:
        """One step of each shard (read, filter, invoke, checkpoint): the stream records handled, delivered,
        read past or discarded. Idle, it waits a quarter of a second, as Lambda polls a shard four times a
        second (not with ``wait_seconds`` 0)."""
        handled = 0
        with self._stream_locks.setdefault(mapping.uuid, threading.Lock()):
            for shard_id in self._shard_ids(mapping):
                handled += self._step(mapping, shard_id, worker)
        if not handled and (self.wait_seconds if wait_seconds is None else wait_seconds):
            (abandon or threading.Event()).wait(streams.POLL_SECONDS)
        return handled

    def _shard_ids(self, mapping: StreamMapping) -> list[str]:
        described = self._streams.describe_stream(StreamArn=mapping.stream_arn)["StreamDescription"]
        return [shard["ShardId"] for shard in described["Shards"]]

    def _unread(self, mapping: StreamMapping, shard_id: str) -> list[dict[str, Any]]:
        """The shard's records after the mapping's checkpoint (from its start without one), a read's worth."""
        position = self.checkpoints.get(mapping.uuid, shard_id)
        where = (
            {"ShardIteratorType": position.iterator_type, "SequenceNumber": position.sequence_number}
            if position
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        if position is None and self._expired_for(mapping, shard_id, None):
            raise Trimmed(shard_id)  # written after the mapping, gone before its first read
        try:
            iterator = self._streams.get_shard_iterator(
                StreamArn=mapping.stream_arn, ShardId=shard_id, **where
            )
            page = self._streams.get_records(
                ShardIterator=iterator["ShardIterator"], Limit=streams.MAX_RECORDS_PER_READ
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == TRIMMED:
                raise Trimmed(shard_id) from None
            raise
        return list(page["Records"])

    def _step(self, mapping: StreamMapping, shard_id: str, worker: Worker) -> int:
        state = self._shards.setdefault((mapping.uuid, shard_id), streams.Shard())
        if not state.pending:
            try:
                passed = self._read(mapping, shard_id, state)
            except Trimmed:
                return self._give_up_expired(mapping, shard_id)
            if passed or not state.pending:
                return passed
        batch, now = state.pending[0], self.clock()
        if now < batch.not_before:
            return 0
        horizon = self._trim_horizon(mapping, shard_id, batch)
        old = streams.expired(batch, mapping.maximum_record_age, now, horizon)
        if old:
            self._discard_old(mapping, shard_id, state, old)
            return old
        return self._invoke_stream_batch(mapping, shard_id, state, worker)

    def _trim_horizon(self, mapping: StreamMapping, shard_id: str, batch: streams.Pending) -> int | None:
        """The sequence number of the shard's oldest record still held, when the stream no longer holds the
        batch's first record (it waited for a retry past the stream's 24 hours), else None."""
        first = streams.sequence_number(batch.records[0])
        try:
            self._streams.get_shard_iterator(
                StreamArn=mapping.stream_arn,
                ShardId=shard_id,
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=first,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != TRIMMED:
                raise
            horizon = self.emulator.control.expired_records(mapping.stream_arn, shard_id, None)["TrimHorizon"]
            # None: the stream holds none of the shard's records, the batch's included
            return int(horizon if horizon is not None else streams.sequence_number(batch.records[-1])) + (
                0 if horizon is not None else 1
            )
        return None

    def _expired_for(
        self, mapping: StreamMapping, shard_id: str, after: str | None, found: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The shard's records after ``after`` that left the stream and were the mapping's to deliver (for
        a LATEST mapping, those written after it), as Lambda records."""
        if found is None:
            found = self.emulator.control.expired_records(mapping.stream_arn, shard_id, after)
        records = [lambda_dynamodb_record(raw, mapping.stream_arn) for raw in found["Records"]]
        if mapping.starting_position == "LATEST" and after is None:
            records = [
                r for r in records if r["dynamodb"]["ApproximateCreationDateTime"] >= int(mapping.created)
            ]
        return records

    def _give_up_expired(self, mapping: StreamMapping, shard_id: str) -> int:
        """The records after the mapping's checkpoint left the stream (24 hours) before it delivered them:
        give them up as Lambda does, one batch of up to ``BatchSize`` at a time, the invocation record of
        each to the on-failure destination (``RecordAgeExceeded``, never invoked); the checkpoint moves past
        them. In AWS Lambda's poller had read them while they were held; the runner, which polls only while
        ``local run`` runs, reads them from the emulator (its control API)."""
        position = self.checkpoints.get(mapping.uuid, shard_id)
        after = None
        if position is not None:
            number = int(position.sequence_number)
            after = str(number if position.iterator_type == "AFTER_SEQUENCE_NUMBER" else number - 1)
        found = self.emulator.control.expired_records(mapping.stream_arn, shard_id, after)
        records = self._expired_for(mapping, shard_id, after, found)
        delivered = [r for r in records if matches(mapping.filters, r)]
        with self.stats.lock:
            self.stats.filtered += len(records) - len(delivered)
        for start in range(0, len(delivered), mapping.batch_size):
            chunk = delivered[start : start + mapping.batch_size]
            pending = streams.Pending(chunk, streams.sequence_number(chunk[-1]))
            then = self._discard(mapping, shard_id, chunk, streams.RECORD_AGE_EXCEEDED, pending)
            self._account(
                self._stream_batch(mapping, shard_id, chunk, ["failed"] * len(chunk), {}, then),
                [],
                failed=len(chunk),
                given_up={r["eventID"] for r in chunk},
                invoked=False,
                stream=True,
            )
        if records:
            last = streams.sequence_number(records[-1])
            self.checkpoints.set(mapping.uuid, shard_id, streams.Position.after(last))
        elif found["TrimHorizon"] is not None:
            self.checkpoints.set(mapping.uuid, shard_id, streams.Position.at(found["TrimHorizon"]))
        return len(records) or 1

    def _read(self, mapping: StreamMapping, shard_id: str, state: streams.Shard) -> int:
        """Read the shard past its checkpoint. Up to ``BatchSize`` records the filters match become the
        pending batch, once it is full or the batching window has closed; records no filter matches are
        dropped with it (or, without a batch, read past at once: the count returned), as are, for a LATEST
        mapping without a checkpoint yet, the records written before the mapping."""
        starting = (
            self.checkpoints.get(mapping.uuid, shard_id) is None and mapping.starting_position == "LATEST"
        )
        records: list[dict[str, Any]] = []
        through, passed, filtered = None, 0, 0
        for raw in self._unread(mapping, shard_id):
            record = lambda_dynamodb_record(raw, mapping.stream_arn)
            if starting and raw["dynamodb"]["ApproximateCreationDateTime"].timestamp() < mapping.created:
                passed += 1
            elif not matches(mapping.filters, record):
                passed, filtered = passed + 1, filtered + 1
            elif len(records) == mapping.batch_size:
                break
            else:
                records.append(record)
            through = streams.sequence_number(record)
        if records and len(records) < mapping.batch_size and mapping.batching_window:
            state.window_opened = state.window_opened or self.clock()
            if self.clock() - state.window_opened < mapping.batching_window:
                return 0  # gathering: read again on the next poll
        with self.stats.lock:
            self.stats.filtered += filtered
        if records:
            state.window_opened = None
            state.pending.append(streams.Pending(records, str(through)))
            return 0
        if through is not None:
            self.checkpoints.set(mapping.uuid, shard_id, streams.Position.after(through))
        return passed

    def _invoke_stream_batch(
        self, mapping: StreamMapping, shard_id: str, state: streams.Shard, worker: Worker
    ) -> int:
        """Invoke the shard's pending batch, then checkpoint, retry, bisect or discard as Lambda does."""
        batch = state.pending[0]
        batch.invocations, batch.request_id = batch.invocations + 1, str(uuid.uuid4())
        reply, cold_start = self._invoke(
            worker, mapping.function_arn, {"Records": batch.records}, batch.request_id
        )
        sequence_numbers = [streams.sequence_number(r) for r in batch.records]
        failed_ids, whole = self._failures(mapping, sequence_numbers, reply)
        batch.function_error = "Unhandled" if "result" not in reply else None
        failed_from = min((sequence_numbers.index(i) for i in failed_ids), default=None)
        delay = self.retry_delay if self.retry_delay is not None else streams.STREAM_RETRY_SECONDS
        settled = streams.settle(
            batch,
            failed_from,
            whole=whole,
            maximum_retry_attempts=mapping.maximum_retry_attempts,
            bisect=mapping.bisect,
            retry_at=self.clock() + delay,
        )
        then = ""
        if settled.discarded:
            then = self._discard(mapping, shard_id, settled.discarded, str(settled.condition), batch)
        elif settled.pending:
            then = _retrying(settled.pending, batch.invocations, mapping.maximum_retry_attempts)
        if settled.checkpoint is not None:
            self.checkpoints.set(mapping.uuid, shard_id, settled.checkpoint)
        state.pending[:1] = settled.pending
        logs = reply.get("logs") or []
        self._account(
            self._stream_batch(
                mapping,
                shard_id,
                batch.records,
                _record_outcomes(sequence_numbers, failed_ids, logs),
                reply,
                then,
            ),
            logs,
            failed=len(failed_ids),
            given_up={r["eventID"] for r in settled.discarded},
            stream=True,
        )
        if cold_start is not None:
            raise cold_start
        return len(batch.records)

    def _discard_old(self, mapping: StreamMapping, shard_id: str, state: streams.Shard, count: int) -> None:
        """Discard the pending batch's first ``count`` records, older than ``MaximumRecordAgeInSeconds``,
        without invoking the function; the checkpoint moves past them."""
        batch = state.pending[0]
        old, batch.records = batch.records[:count], batch.records[count:]
        then = self._discard(mapping, shard_id, old, streams.RECORD_AGE_EXCEEDED, batch)
        if batch.records:
            self.checkpoints.set(
                mapping.uuid, shard_id, streams.Position.at(streams.sequence_number(batch.records[0]))
            )
        else:
            state.pending.pop(0)
            self.checkpoints.set(mapping.uuid, shard_id, streams.Position.after(batch.through))
        outcomes = ["failed"] * len(old)
        self._account(
            self._stream_batch(mapping, shard_id, old, outcomes, {}, then),
            [],
            failed=len(old),
            given_up={r["eventID"] for r in old},
            invoked=False,
            stream=True,
        )

    def _discard(
        self,
        mapping: StreamMapping,
        shard_id: str,
        records: list[dict[str, Any]],
        condition: str,
        batch: streams.Pending,
    ) -> str:
        """Send the on-failure destination the invocation record of the discarded ``records``; what
        happened, for the batch's line."""
        why = (
            f"older than MaximumRecordAgeInSeconds {mapping.maximum_record_age}"
            if condition == streams.RECORD_AGE_EXCEEDED
            else f"MaximumRetryAttempts {mapping.maximum_retry_attempts} reached"
        )
        discarded = f"{plural(len(records), 'record')} discarded ({why})"
        destination = mapping.on_failure
        if not destination:
            return f"{discarded}, no on-failure destination"
        record = stream_invocation_record(
            records,
            shard_id=shard_id,
            condition=condition,
            function_arn=mapping.function_arn,
            invocations=batch.invocations,
            request_id=batch.request_id or str(uuid.uuid4()),
            function_error=batch.function_error,
            at=datetime.datetime.fromtimestamp(self.clock(), datetime.UTC),
        )
        service = destination.split(":")[2]
        if service == "sqs":
            _, _, _, _, account, name = destination.split(":", 5)
            url = self._sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
            self._sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))
        elif service == "sns":
            self.emulator.client("sns").publish(TopicArn=destination, Message=json.dumps(record))
        else:
            raise RunnerError(
                f"{mapping.function_name}'s stream mapping has the on-failure destination {destination}: the "
                "runner sends to SQS queues and SNS topics"
            )
        return f"{discarded}, invocation record sent to {destination}"

    @staticmethod
    def _stream_batch(
        mapping: StreamMapping,
        shard_id: str,
        records: list[dict[str, Any]],
        outcomes: list[str],
        reply: dict[str, Any],
        then: str,
    ) -> Batch:
        first, last = streams.sequence_number(records[0]), streams.sequence_number(records[-1])
        span = first if first == last else f"{first}-{last}"
        return Batch(
            function=mapping.function_name,
            message_ids=tuple(r["eventID"] for r in records),
            groups=(),
            outcomes=tuple(outcomes),
            error=_batch_error(reply),
            source=f"shard {shard_id}, {span}",
            then=then,
        )

    # --- until everything is handled ---------------------------------------------------------------
    def backlog(self, mapping: Mapping | StreamMapping) -> int:
        """What the mapping has yet to hand over: the queue's messages (visible, in flight or delayed), or
        the stream's records after the mapping's checkpoints (a batch waiting for its retry included)."""
        if isinstance(mapping, StreamMapping):
            left = 0
            for shard_id in self._shard_ids(mapping):
                try:
                    left += len(self._unread(mapping, shard_id))
                except Trimmed:  # records it has yet to give up
                    left += 1
            return left
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=mapping.queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

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
        with self._workers_lock:
            for worker in self._workers.values():
                with worker.lock:
                    worker.stop()
            self._workers.clear()

    def __enter__(self) -> EventSourceRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _retrying(pending: list[streams.Pending], retry: int, limit: int) -> str:
    """What a stream mapping does with a batch that failed: its batch line's last words."""
    split = "split in two, " if len(pending) > 1 else ""
    records = pending[0].records
    return (
        f"{split}retrying {plural(len(records), 'record')} from {streams.sequence_number(records[0])} "
        f"(retry {retry} of {limit if limit >= 0 else 'unlimited'})"
    )


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


def _batch_error(reply: dict[str, Any]) -> str | None:
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
