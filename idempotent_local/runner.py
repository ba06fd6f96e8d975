"""The event-source runner: what Lambda's SQS event source mapping does, for functions in the emulator.

The emulator stores functions but cannot run them (moto needs Docker for that). The runner reads everything
back from the emulator, as Lambda's poller would:

- the event source mappings (queue, ``BatchSize``, ``FunctionResponseTypes``, enabled);
- each function's configuration (handler, environment, timeout) and its deployed code (the zip);
- it long-polls the queue for up to ``BatchSize`` messages with all attributes, builds Lambda's SQS event
  (:func:`idempotent_local.events.lambda_sqs_event`, the runtime's own model of it),
  invokes the handler in a worker process that imported the deployed code with the function's
  environment (one warm worker per function, restarted after a crash or a timeout), deletes the records
  that succeeded and leaves the rest on the queue.

Records that failed (``batchItemFailures``, an exception, a timeout) come back after the queue's visibility
timeout, and the queue's redrive policy moves them to the dead-letter queue after ``maxReceiveCount``
receives, exactly as in AWS. **One deliberate difference, off by default:** with ``retry_delay`` set, the
runner makes failed records visible again after that many seconds instead of the full visibility timeout
(``ChangeMessageVisibility``), so a demo does not wait 6 x the function timeout per retry. The number of
receives before redrive is unchanged.
"""

from __future__ import annotations

import contextlib
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
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from idempotent_runtime.contract import OUTCOME_METRIC, Outcome

from idempotent_local.emulator import Emulator
from idempotent_local.errors import RunnerError
from idempotent_local.events import lambda_sqs_event
from idempotent_local.node import quiet_environment
from idempotent_local.wheels import foreign, this_python

__all__ = ["Batch", "EventSourceRunner", "Mapping", "RunnerError", "Stats", "Worker", "lambda_sqs_event"]

WORKER = Path(__file__).with_name("worker.py")


def function_log_path(state_dir: str | Path, function: str) -> Path:
    """Where the runner appends what ``function`` prints: its log, as CloudWatch Logs would hold it."""
    return Path(state_dir).resolve() / "logs" / f"{function}.log"


@dataclass(frozen=True)
class Mapping:
    """An SQS event source mapping, as read back from the emulator."""

    uuid: str
    function_arn: str
    queue_arn: str
    queue_url: str
    batch_size: int
    report_batch_item_failures: bool
    enabled: bool
    max_receive_count: int | None = None  # the queue's redrive policy: after this many receives, the DLQ

    @property
    def function_name(self) -> str:
        return self.function_arn.rsplit(":", 1)[-1]


# A record's final outcome in the runner's accounts: the runtime's (contract.Outcome), or "succeeded" for a
# function that does not say (no Embedded Metric Format line).
OUTCOMES = (*(outcome.value for outcome in Outcome), "succeeded")
# The batch counters that name an outcome (a failed record is known from the batch item failures).
_METRIC_OUTCOME = {
    metric.value: outcome.value for outcome, metric in OUTCOME_METRIC.items() if outcome != Outcome.FAILED
}


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


@dataclass
class Stats:
    """What the runner did. ``records`` counts deliveries (a redelivered message counts again);
    ``outcomes`` holds each message's *last* outcome, so a message that failed twice and was then processed
    counts once, as processed."""

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
    unable: dict[str, str] = field(default_factory=dict)  # function -> why it cannot run (until it runs)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def delivered(self) -> int:
        """Distinct messages the queue handed to the function."""
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
        text = f"{_plural(len(self.outcomes), 'message')}: " + ", ".join(parts)
        if conflicts:
            text += f" ({conflicts} conflict{'s' if conflicts != 1 else ''})"
        return text

    def summary(self) -> str:
        """The final outcome of every message the runner saw (one per message, not per attempt)."""
        deliveries = _plural(self.records, "delivery", "deliveries")
        text = f"{self.describe_totals()}; {deliveries} in {_plural(self.invocations, 'invocation')}"
        failed = [m for m, outcome in self.outcomes.items() if outcome == "failed"]
        if failed:
            exhausted = len(self.exhausted.intersection(failed))
            text += (
                f"; of the {len(failed)} failed, {exhausted} reached the queue's maxReceiveCount (SQS moves "
                f"them to the dead-letter queue) and {len(failed) - exhausted} will be delivered again"
            )
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

    def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """``{"result": ...}``, ``{"error": ...}`` or ``{"timeout": True}`` / ``{"crash": ...}``; a reply of
        the worker also has ``"logs"`` (the EMF and outcome lines the function wrote meanwhile)."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(json.dumps({"event": event, "timeout_ms": int(timeout_s * 1000)}) + "\n")
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

    def describe(self) -> str:
        counts = {name: self.outcomes.count(name) for name in OUTCOMES if name in self.outcomes}
        groups = (
            f" (group{'s' if len(self.groups) != 1 else ''} {', '.join(self.groups)})" if self.groups else ""
        )
        outcome = ", ".join(f"{n} {name}" for name, n in counts.items())
        if self.error:
            outcome += f": {self.error}"
        records = f"{len(self.message_ids)} record{'s' if len(self.message_ids) != 1 else ''}"
        return f"{self.function}: {records}{groups} -> {outcome}"


def _record_outcomes(
    messages: list[dict[str, Any]], failed_ids: set[str], logs: list[dict[str, Any]]
) -> list[str]:
    """Each record's outcome: what the function logged for it, else failed (a batch item failure), else
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
    for message in messages:
        message_id = message["MessageId"]
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
    """Polls every enabled SQS event source mapping of the emulator and invokes the mapped functions.

    ``report``, when given, receives one line per batch: the function, its records and message groups, each
    record's outcome, and the running totals per message.
    """

    def __init__(
        self,
        emulator: Emulator,
        *,
        retry_delay: float | None = None,
        wait_seconds: int = 1,
        work_dir: Path | str | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.emulator = emulator
        self.retry_delay = retry_delay
        self.wait_seconds = wait_seconds
        self.work_dir = Path(
            work_dir if work_dir is not None else Path(emulator.state_dir) / "functions"
        ).resolve()
        self.stats = Stats()
        self.report = report
        self._sqs = emulator.client("sqs")
        self._lambda = emulator.client("lambda")
        self._s3 = emulator.client("s3")
        self._workers: dict[str, Worker] = {}
        self._workers_lock = threading.Lock()
        self._timeouts: dict[str, float] = {}

    # --- reading back what is deployed -------------------------------------------------------------
    def mappings(self) -> list[Mapping]:
        found = []
        for page in self._lambda.get_paginator("list_event_source_mappings").paginate():
            for esm in page["EventSourceMappings"]:
                arn = esm["EventSourceArn"]
                if arn.split(":")[2] != "sqs":
                    continue
                _, _, _, _, account, name = arn.split(":", 5)
                url = self._sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
                redrive = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
                policy = redrive.get("Attributes", {}).get("RedrivePolicy")
                found.append(
                    Mapping(
                        uuid=esm["UUID"],
                        function_arn=esm["FunctionArn"],
                        queue_arn=arn,
                        queue_url=url,
                        batch_size=int(esm.get("BatchSize", 10)),
                        report_batch_item_failures="ReportBatchItemFailures"
                        in (esm.get("FunctionResponseTypes") or []),
                        enabled=esm.get("State", "Enabled") == "Enabled",
                        max_receive_count=int(json.loads(policy)["maxReceiveCount"]) if policy else None,
                    )
                )
        return found

    def _download(self, location: str) -> bytes:
        parsed = urllib.parse.urlparse(location)
        if f"{parsed.scheme}://{parsed.netloc}" == self.emulator.endpoint:
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
        self, mapping: Mapping, wait_seconds: int | None = None, abandon: threading.Event | None = None
    ) -> int:
        """One receive + invoke + delete cycle for one mapping; returns the number of records handled.

        The function's worker starts before anything is received: a function that cannot run here (code
        bundled for another Python, a failing cold start) raises :class:`RunnerError` and its messages stay
        in the queue untouched, instead of being received until the queue moves them to the DLQ without a
        reason. A worker that dies and cannot start again mid-batch fails that batch and raises too. A cold
        start is abandoned (RunnerError) once ``abandon`` is set.
        """
        worker = self._worker(mapping.function_arn)
        with worker.lock:
            if worker.process is None:
                worker.start(abandon)
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
        try:
            with worker.lock:
                reply = worker.invoke(
                    lambda_sqs_event(messages, mapping.queue_arn), self._timeouts[mapping.function_arn]
                )
        except RunnerError as exc:
            self._settle(mapping, messages, {"cold_start": str(exc)})
            raise
        self._settle(mapping, messages, reply)
        return len(messages)

    def _settle(self, mapping: Mapping, messages: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        """Delete what succeeded, retry what failed (after ``retry_delay``), count, report."""
        failed_ids = self._failed_ids(mapping, messages, reply)
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
        outcomes = _record_outcomes(messages, failed_ids, logs)
        groups = sorted({m.get("Attributes", {}).get("MessageGroupId") for m in messages} - {None})
        batch = Batch(
            function=mapping.function_name,
            message_ids=tuple(m["MessageId"] for m in messages),
            groups=tuple(groups),
            outcomes=tuple(outcomes),
            error=_batch_error(reply),
        )
        with self.stats.lock:
            stats = self.stats
            stats.invocations += 1
            stats.records += len(messages)
            stats.succeeded += len(succeeded)
            stats.failed += len(failed)
            stats.message_ids.update(batch.message_ids)
            for name, value in emf_counts([line for line in logs if "_aws" in line]).items():
                stats.metrics[name] = stats.metrics.get(name, 0) + value
            for message, outcome in zip(messages, outcomes, strict=True):
                message_id = message["MessageId"]
                stats.outcomes[message_id] = outcome
                receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
                if (
                    outcome == "failed"
                    and mapping.max_receive_count
                    and receives >= mapping.max_receive_count
                ):
                    stats.exhausted.add(message_id)
                else:
                    stats.exhausted.discard(message_id)
            line = f"{batch.describe()} | {stats.describe_totals()}"
        if self.report is not None:
            self.report(line)

    def _failed_ids(
        self, mapping: Mapping, messages: list[dict[str, Any]], reply: dict[str, Any]
    ) -> set[str]:
        everything = {m["MessageId"] for m in messages}
        if "result" not in reply:
            with self.stats.lock:
                self.stats.whole_batch_failures += 1
            return everything
        if not mapping.report_batch_item_failures:
            return set()
        result = reply["result"]
        if result is None:
            return set()
        failures = result.get("batchItemFailures") if isinstance(result, dict) else None
        if failures is None:
            return set()
        ids = set()
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if not identifier or identifier not in everything:
                # Lambda treats a malformed response as a failure of the whole batch.
                with self.stats.lock:
                    self.stats.whole_batch_failures += 1
                return everything
            ids.add(identifier)
        return ids

    def backlog(self, mapping: Mapping) -> int:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=mapping.queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def drain(self, timeout: float = 120.0, mappings: list[Mapping] | None = None) -> Stats:
        """Poll until every mapped queue is empty (no visible, in-flight or delayed message)."""
        mappings = [m for m in (mappings if mappings is not None else self.mappings()) if m.enabled]
        deadline = time.monotonic() + timeout
        while True:
            handled = sum(self.poll(m, wait_seconds=0) for m in mappings)
            if handled:
                continue
            if all(self.backlog(m) == 0 for m in mappings):
                return self.stats
            if time.monotonic() > deadline:
                left = ", ".join(f"{self.backlog(m)} in {m.queue_arn.rsplit(':', 1)[-1]}" for m in mappings)
                hint = (
                    "; a failed message comes back only after the queue's visibility timeout "
                    "(--retry-delay S shortens it)"
                    if self.retry_delay is None
                    else ""
                )
                raise RunnerError(f"queues not drained within {timeout:.0f} s: {left}{hint}")
            time.sleep(0.2)

    def _poll_until(self, mapping: Mapping, stop: threading.Event, gone: threading.Event) -> None:
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
        pollers: dict[Mapping, tuple[threading.Thread, threading.Event]] = {}
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
