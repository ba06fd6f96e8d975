"""Runtime benchmarks: DynamoDB requests per message, batch latency, CPU per record, cold init.

Every measurement alternates the contenders inside one run (the order rotates each round) and keeps every
sample; the caller takes medians. Nothing here asserts a target: that is the report's job.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from moto import mock_aws

from benchmarks.contenders import Contender, Handler
from benchmarks.events import fifo_batch, redelivery
from benchmarks.instruments import FakeLambdaContext, RequestCounter, StandingStubber
from benchmarks.report import in_repo

REGION = "us-east-1"


class BenchmarkError(RuntimeError):
    """A contender did not do the work it is being timed on (failed records, missing items)."""


@contextmanager
def _output_to(fd: int) -> Iterator[None]:
    """fds 1 and 2 written to ``fd`` meanwhile, then restored."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for each in saved:
            os.close(each)


@contextmanager
def quiet_output() -> Iterator[None]:
    """Send fds 1 and 2 to /dev/null: per-record JSON log lines are part of the cost, not of the report."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with _output_to(devnull):
            yield
    finally:
        os.close(devnull)


# Ambient AWS configuration that would send the measured clients somewhere other than moto, or fail them
# before they send: a shell with an endpoint exported for the local emulator's CLI calls
# (`http://localhost:PORT`, a connection refused once it is stopped), or a profile exported for `make deploy`.
_ENDPOINT_PREFIX = "AWS_ENDPOINT_URL"
_PROFILE_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE")


@contextmanager
def isolated_aws_environment() -> Iterator[None]:
    """Clients created inside see only the region and fake credentials: no endpoint, profile or config file.

    A measurement's clients must reach moto (or the Stubber) whatever the caller's shell exports; the
    environment is restored on exit.
    """
    ambient = [name for name in os.environ if name.startswith(_ENDPOINT_PREFIX) or name in _PROFILE_VARIABLES]
    isolated = {
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    }
    with mock.patch.dict(os.environ, isolated):
        for name in ambient:
            del os.environ[name]
        _ensure_region()
        yield


@contextmanager
def moto_backend() -> Iterator[None]:
    """moto in-process (`mock_aws`), answering one request at a time.

    moto's DynamoDB backend is not thread-safe (TransactWriteItems deep-copies every table for rollback while
    other threads insert: "dictionary changed size during iteration"). The lock covers only moto's own
    processing; the latency injected in `before-send` runs before it, so concurrent requests still overlap
    their waits, as they would against DynamoDB.
    """
    from moto.core.botocore_stubber import BotocoreStubber

    lock = threading.Lock()
    process_request = BotocoreStubber.process_request

    def serialized(self: Any, request: Any) -> Any:
        with lock:
            return process_request(self, request)

    with (
        isolated_aws_environment(),
        mock_aws(),
        mock.patch.object(BotocoreStubber, "process_request", serialized),
    ):
        yield


def _ensure_region() -> None:
    """Contenders create their clients as they do in Lambda, from the environment's region."""
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)


def rotated(items: Sequence[Any], round_index: int) -> list[Any]:
    """The contenders in a different order each round, so drift and warm caches favour nobody."""
    shift = round_index % len(items)
    return [*items[shift:], *items[:shift]]


def _check_all_succeeded(result: dict[str, Any], contender: str) -> None:
    failures = result.get("batchItemFailures")
    if failures:
        raise BenchmarkError(f"{contender} reported batch item failures on a clean batch: {failures!r}")


def _table_name(contender: Contender) -> str:
    return "bench-" + "".join(ch if ch.isalnum() else "-" for ch in contender.name.lower()).strip("-")


def item_count(client: Any, table_name: str) -> int:
    pages = client.get_paginator("scan").paginate(TableName=table_name, Select="COUNT")
    return sum(page["Count"] for page in pages)


# --- 1. DynamoDB requests per message -------------------------------------------------------------------


REQUEST_KINDS = ("new_message", "duplicate")


@dataclass
class RequestCounts:
    contender: str
    records: int
    by_operation: dict[str, dict[str, int]]  # of REQUEST_KINDS: operation -> requests for the batch
    items_after: int

    def per_message(self, kind: str) -> float:
        return sum(self.by_operation[kind].values()) / self.records


def count_requests(contender: Contender, *, records: int = 10, groups: int = 10) -> RequestCounts:
    """Deliver a batch of new messages, then the same batch again; count the DynamoDB requests of each.

    moto in-process answers; the counter sits on the handler's own client (botocore `before-send`).
    """
    _ensure_region()
    with moto_backend():
        client = contender.make_client()
        table_name = _table_name(contender)
        contender.create_table(client, table_name)
        handler = contender.build(table_name, client)
        counter = RequestCounter(client)
        event = fifo_batch(records, groups)
        with quiet_output():
            _check_all_succeeded(handler(event, FakeLambdaContext()), contender.name)
        new = counter.snapshot()
        counter.reset()
        with quiet_output():
            _check_all_succeeded(handler(redelivery(event), FakeLambdaContext()), contender.name)
        duplicate = counter.snapshot()
        counter.detach()
        items = item_count(client, table_name)
    if items < records:
        raise BenchmarkError(f"{contender.name} stored {items} items for {records} new messages")
    return RequestCounts(contender.name, records, {"new_message": new, "duplicate": duplicate}, items)


@dataclass
class ConflictCounts:
    """Requests for a batch of conflicting messages (keys stored before, with other content)."""

    contender: str
    dynamodb_per_conflict: float
    dynamodb_by_operation: dict[str, int]
    sqs_by_operation: dict[str, int]
    outcome: str  # what the contender made of them


class _FifoSource:
    """A moto FIFO queue that delivers ``records`` messages (one per key, spread over ``groups``) to a
    handler with real receipt handles, then deletes what the event source would."""

    def __init__(self, sqs: Any, records: int, groups: int) -> None:
        self.sqs, self.records, self.groups = sqs, records, groups
        self.url = sqs.create_queue(
            QueueName="bench-source.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"]
        self.arn = attributes["QueueArn"]
        self.keys = [(str(uuid.uuid4()), str(uuid.uuid4())) for _ in range(records)]

    def deliver(
        self,
        name: str,
        handler: Any,
        amount_base: int,
        counters: Sequence[RequestCounter] = (),
        body: Callable[[str, str, int], str] | None = None,
    ) -> list[dict[str, int]]:
        """One batch of every key (amounts from ``amount_base``; ``body``: another message body of a key and
        its number), each a new SQS message: the requests each counter saw meanwhile."""
        from benchmarks.events import message_body
        from idempotent_local.events import lambda_sqs_event

        for i, (x, y) in enumerate(self.keys):
            self.sqs.send_message(
                QueueUrl=self.url,
                MessageBody=(body or message_body)(x, y, amount_base + i),
                MessageGroupId=f"g{i % self.groups}",
                MessageDeduplicationId=str(uuid.uuid4()),
            )
        messages: list[dict[str, Any]] = []
        while len(messages) < self.records:
            got = self.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=10,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not got:
                raise BenchmarkError(f"received {len(messages)} of {self.records} messages")
            messages += got
        for counter in counters:
            counter.reset()
        with quiet_output():
            result = handler(lambda_sqs_event(messages, self.arn), FakeLambdaContext())
        snapshots = [counter.snapshot() for counter in counters]
        _check_all_succeeded(result, name)
        for message in messages:  # the event source deletes the records that succeeded
            with contextlib.suppress(Exception):  # (the runtime deleted the quarantined ones itself)
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        return snapshots


class OurConsumer:
    """Our runtime on moto (inside :func:`moto_backend`): the constructs' table, a FIFO DLQ, and a handler
    built on them with ``config`` (more :class:`Config` fields) and ``build`` (``build_handler``'s other
    arguments)."""

    def __init__(self, table_name: str, config: Mapping[str, Any] | None = None, **build: Any) -> None:
        from idempotent_runtime.clients import create_client
        from idempotent_runtime.config import Config
        from idempotent_runtime.flow import build_handler

        from benchmarks.contenders import create_our_table

        self.sqs, self.dynamodb = create_client("sqs"), create_client("dynamodb")
        fifo = {"FifoQueue": "true"}
        self.dlq = self.sqs.create_queue(QueueName="bench-dlq.fifo", Attributes=fifo)["QueueUrl"]
        create_our_table(self.dynamodb, table_name)
        settings = Config(
            table_name=table_name, dlq_url=self.dlq, function_name="bench-consumer", **(config or {})
        )
        self.handler = build_handler(settings, dynamodb_client=self.dynamodb, sqs_client=self.sqs, **build)

    def dead_letters(self) -> int:
        dead = self.sqs.get_queue_attributes(
            QueueUrl=self.dlq, AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(dead["Attributes"]["ApproximateNumberOfMessages"])


def count_conflict_requests(
    *, records: int = 10, groups: int = 10, powertools: Contender | None = None
) -> list[ConflictCounts]:
    """Deliver new messages, then messages with the same keys and other content, through a FIFO queue.

    Ours runs in document mode with its defaults (``ON_CONFLICT=quarantine``, a FIFO DLQ): each conflict is
    found by its one PutItem and sent to the DLQ. The messages really travel through a moto FIFO queue, so
    the receipt handles are real (the runtime deletes a quarantined record from its source queue right after
    the DLQ send). Only the requests the handler sends while it runs are counted. ``powertools``: the peer
    on the same messages (without payload validation it treats them as duplicates).
    """
    with moto_backend():
        ours = OurConsumer("bench-ours")
        deliver = _FifoSource(ours.sqs, records, groups).deliver
        name = "ours (document)"
        deliver(name, ours.handler, 0)
        counters = [RequestCounter(ours.dynamodb), RequestCounter(ours.sqs, service="sqs")]
        table_requests, queue_requests = deliver(name, ours.handler, 1000, counters)
        for counter in counters:
            counter.detach()
        if (in_dlq := ours.dead_letters()) != records:
            raise BenchmarkError(f"ours quarantined {in_dlq} of {records} conflicting messages")
        out = [
            ConflictCounts(
                name,
                sum(table_requests.values()) / records,
                table_requests,
                queue_requests,
                "quarantined (to the DLQ, with both fingerprints)",
            )
        ]
        if powertools is not None:
            client = powertools.make_client()
            powertools.create_table(client, "bench-powertools")
            handler = powertools.build("bench-powertools", client)
            deliver(powertools.name, handler, 0)
            counter = RequestCounter(client)
            (by_operation,) = deliver(powertools.name, handler, 1000, [counter])
            counter.detach()
            out.append(
                ConflictCounts(
                    powertools.name,
                    sum(by_operation.values()) / records,
                    by_operation,
                    {},
                    "duplicate (the first result returned; no payload validation configured)",
                )
            )
    return out


VERSIONED_KINDS = ("new_message", "stale", "duplicate", "conflict")


def count_versioned_requests(*, records: int = 10, groups: int = 10) -> dict[str, dict[str, int]]:
    """Versioned mode (``VERSION_FIELD=v``, a FIFO DLQ, ``ON_CONFLICT=quarantine``): the DynamoDB requests of
    a batch of each kind of :data:`VERSIONED_KINDS` through a moto FIFO queue - new entities at version 2,
    then version 1 (stale), version 2 again (duplicates), version 2 with other content (conflicts,
    quarantined). Raises BenchmarkError unless each batch has the expected outcome in the table and DLQ."""

    def state(name: str, version: int) -> Callable[[str, str, int], str]:
        return lambda x, y, _: json.dumps({"x": x, "y": y, "v": version, "name": name})

    with moto_backend():
        ours = OurConsumer("bench-versioned", {"mode": "versioned", "version_field": "v"})
        source = _FifoSource(ours.sqs, records, groups)
        counter = RequestCounter(ours.dynamodb)
        counts = {}
        for kind, body in zip(
            VERSIONED_KINDS, (state("a", 2), state("b", 1), state("a", 2), state("c", 2)), strict=True
        ):
            (counts[kind],) = source.deliver(f"ours (versioned, {kind})", ours.handler, 0, [counter], body)
        counter.detach()
        items = ours.dynamodb.scan(TableName="bench-versioned")["Items"]
        in_dlq = ours.dead_letters()
    if sorted(item["name"]["S"] + item["v"]["N"] for item in items) != ["a2"] * records or in_dlq != records:
        raise BenchmarkError(f"versioned mode left {len(items)} items and {in_dlq} DLQ messages")
    return counts


# --- 2. batch latency with a fixed injected latency per request ----------------------------------------


@dataclass
class LatencySamples:
    samples: dict[str, dict[int, list[float]]] = field(default_factory=dict)  # contender -> groups -> seconds

    def median(self, contender: str, groups: int) -> float:
        return statistics.median(self.samples[contender][groups])


def batch_latency(
    contenders: Sequence[Contender],
    group_counts: Sequence[int] = (1, 5, 10),
    *,
    records: int = 10,
    delay_s: float = 0.010,
    repeats: int = 7,
) -> LatencySamples:
    """Wall time of one handler call on a `records`-message batch over N groups of new messages.

    DynamoDB answers as in the CPU rows: a standing botocore Stubber returns the validated response of each
    operation after ``delay_s`` (a sleep, which releases the GIL as DynamoDB's round trip does). No moto in
    the measured process: its CPU, behind one lock, would be counted as DynamoDB's latency. Contenders are
    alternated within every repeat.
    """
    _ensure_region()
    out = LatencySamples()
    handlers = {}
    with isolated_aws_environment():
        for contender in contenders:
            client = contender.make_client()
            StandingStubber(client, contender.new_record_responses, delay_s).activate()
            handlers[contender.name] = contender.build(_table_name(contender), client)
            out.samples[contender.name] = {groups: [] for groups in group_counts}
    with quiet_output():
        for name, handler in handlers.items():  # warm-up: lazy imports, first client use, thread pools
            for _ in range(2):
                _check_all_succeeded(handler(fifo_batch(records, records), FakeLambdaContext()), name)
        for repeat in range(repeats):
            for groups in group_counts:
                for name in rotated(list(handlers), repeat):
                    event = fifo_batch(records, groups)
                    context = FakeLambdaContext()
                    start = time.perf_counter()
                    result = handlers[name](event, context)
                    elapsed = time.perf_counter() - start
                    _check_all_succeeded(result, name)
                    out.samples[name][groups].append(elapsed)
    return out


# --- 3. CPU per record, DynamoDB answered by a Stubber after a delay --------------------------------------


@dataclass
class CpuSamples:
    records_per_round: int
    samples: dict[str, list[float]] = field(default_factory=dict)  # contender -> microseconds per record

    def median(self, contender: str) -> float:
        return statistics.median(self.samples[contender])


FLOOR = "floor"


def cpu_per_record(
    contenders: Sequence[Contender],
    *,
    rounds: int = 5,
    batches: int = 20,
    records: int = 10,
    groups: int = 10,
    floor_of: Contender | None = None,
    delay_s: float = 0.0,
) -> CpuSamples:
    """Process CPU time (all threads) per record over `batches` batches of new messages, per round.

    DynamoDB is a botocore Stubber answering success from memory after ``delay_s`` (a sleep, which releases
    the GIL as DynamoDB's round trip does): no network, no moto, so what is left is the handler's own work
    plus botocore's request building and response parsing, on the path production takes (concurrent
    groups overlap their waits).

    With ``floor_of`` (a contender whose only DynamoDB call per new record is ``put_item``) a series named
    :data:`FLOOR` is measured in the same rotation: the very ``put_item`` requests that contender sent for
    this round's batches (recorded, untimed, on a client of its own) replayed in a bare loop on a client
    created and stubbed the same way - the calls without the runtime around them.
    """
    _ensure_region()
    handlers = {}
    recorded: list[dict[str, Any]] = []  # the floor's put_item parameters (the handler's threads append)
    replay_client = recording_handler = None
    with isolated_aws_environment():
        for contender in contenders:
            client = contender.make_client()
            StandingStubber(client, contender.new_record_responses, delay_s).activate()
            handlers[contender.name] = contender.build(_table_name(contender), client)
        if floor_of is not None:
            recording_client = floor_of.make_client()
            StandingStubber(recording_client, floor_of.new_record_responses).activate()
            recording_client.meta.events.register(
                "provide-client-params.dynamodb.PutItem", lambda params, **_: recorded.append(dict(params))
            )
            recording_handler = floor_of.build(_table_name(floor_of), recording_client)
            replay_client = floor_of.make_client()
            StandingStubber(replay_client, {"put_item": {}}, delay_s).activate()
    names = list(handlers) + ([FLOOR] if floor_of is not None else [])
    out = CpuSamples(records_per_round=batches * records, samples={name: [] for name in names})
    with quiet_output():
        for name, handler in handlers.items():
            for _ in range(2):
                _check_all_succeeded(handler(fifo_batch(records, groups), FakeLambdaContext()), name)
        for round_index in range(rounds):
            for name in rotated(names, round_index):
                events = [fifo_batch(records, groups) for _ in range(batches)]
                if name == FLOOR:
                    assert recording_handler is not None
                    for event in events:
                        _check_all_succeeded(recording_handler(event, FakeLambdaContext()), FLOOR)
                    requests = recorded.copy()
                    recorded.clear()
                    if len(requests) != batches * records:
                        raise BenchmarkError(
                            f"the floor recorded {len(requests)} put_item calls for "
                            f"{batches * records} records"
                        )
                    put_item = replay_client.put_item  # type: ignore[union-attr]
                    gc.collect()
                    start = time.process_time()
                    for request in requests:
                        put_item(**request)
                    elapsed = time.process_time() - start
                    out.samples[FLOOR].append(elapsed / len(requests) * 1e6)
                    continue
                handler = handlers[name]
                results = []
                gc.collect()  # the previous contender's garbage is not collected on this one's clock
                start = time.process_time()
                for event in events:
                    results.append(handler(event, FakeLambdaContext()))
                elapsed = time.process_time() - start
                for result in results:
                    _check_all_succeeded(result, name)
                out.samples[name].append(elapsed / (batches * records) * 1e6)
    return out


# --- 3b. log bytes per record ---------------------------------------------------------------------------


@dataclass
class LogBytes:
    contender: str
    bytes_per_record: float
    lines_per_batch: float


def log_bytes_per_record(
    handlers: dict[str, Callable[[Any, Any], Handler]],
    *,
    batches: int = 20,
    records: int = 10,
    groups: int = 10,
) -> list[LogBytes]:
    """Bytes each handler writes to stdout and stderr (what Lambda sends to CloudWatch Logs, besides its own
    START/END/REPORT lines) per record over ``batches`` batches of new messages, at its default log level.

    ``handlers`` maps a name to ``build(client) -> handler``; DynamoDB is a Stubber answering every put_item
    and update_item with success, from memory.
    """
    from idempotent_runtime.clients import create_client

    _ensure_region()
    out = []
    for name, build in handlers.items():
        with isolated_aws_environment():
            client = create_client("dynamodb")
            StandingStubber(client, {"put_item": {}, "update_item": {}}).activate()
            handler = build(client)
        with tempfile.TemporaryFile() as sink:
            # Python-level writers too (the handlers print through sys.stdout, which a test runner replaces).
            with (
                _output_to(sink.fileno()),
                open(os.dup(sink.fileno()), "w", buffering=1) as text,
                contextlib.redirect_stdout(text),
                contextlib.redirect_stderr(text),
            ):
                for _ in range(batches):
                    result = handler(fifo_batch(records, groups), FakeLambdaContext())
                    _check_all_succeeded(result, name)
            sink.seek(0)
            written = sink.read()
        out.append(LogBytes(name, len(written) / (batches * records), written.count(b"\n") / batches))
    return out


# --- 4. cold init: fresh interpreters ------------------------------------------------------------------

FLOOR_PROGRAM = "import boto3\nboto3.client('dynamodb')\n"
POWERTOOLS_PROGRAM = "import benchmarks.powertools_lambda\n"


def cold_init_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """One environment for every cold-init process: a Lambda-like one, no AWS config files."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_LAMBDA_FUNCTION_NAME": "bench-consumer",
        "TABLE_NAME": "bench-table",
    }
    env.update(extra or {})
    return env


# What a cold-init sample records, from one fresh interpreter.
COLD_INIT_KINDS = (
    "cpu",  # CPU time of the program itself (import the handler module, create its clients), in-process
    "wall",  # wall time of the same
    "process_cpu",  # user + system CPU of the whole process, interpreter start and exit included
    "process_wall",  # wall time from spawn to exit
)
_MEASURED = (
    "import time as _bench_time\n"
    "_bench_cpu, _bench_wall = _bench_time.process_time(), _bench_time.perf_counter()\n"
    "{program}\n"
    "print(_bench_time.process_time() - _bench_cpu, _bench_time.perf_counter() - _bench_wall)\n"
)


@dataclass
class ColdInitSamples:
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # kind -> program -> seconds

    def median(self, name: str, kind: str = "cpu") -> float:
        return statistics.median(self.samples[kind][name])


def run_program(program: str, env: dict[str, str], python: str = sys.executable) -> dict[str, float]:
    """Seconds of each COLD_INIT_KINDS for a fresh interpreter running `program`.

    The in-process CPU time is the headline: it is exactly the handler module's import and client creation,
    and of all four it is the one a loaded machine disturbs least (no run-queue waits, no interpreter start).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = in_repo([python, "-c", _MEASURED.format(program=program)], env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise BenchmarkError(
            f"cold-init program failed ({completed.returncode}): {program!r}\n{completed.stderr}"
        )
    cpu, wall = (float(value) for value in completed.stdout.split()[-2:])
    process_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall, "process_cpu": process_cpu, "process_wall": elapsed}


def cold_init(programs: dict[str, str], env: dict[str, str], *, runs: int = 11) -> ColdInitSamples:
    """Median-ready samples: one warm-up each (writes bytecode caches), then `runs` rotated rounds."""
    out = ColdInitSamples({kind: {name: [] for name in programs} for kind in COLD_INIT_KINDS})
    for program in programs.values():
        run_program(program, env)
    for round_index in range(runs):
        for name in rotated(list(programs), round_index):
            for kind, value in run_program(programs[name], env).items():
                out.samples[kind][name].append(value)
    return out


def import_profile(program: str, env: dict[str, str]) -> dict[str, float]:
    """Self time (seconds) of every module `program` imports, from `python -X importtime`."""
    completed = in_repo([sys.executable, "-X", "importtime", "-c", program], env=env, check=True)
    modules: dict[str, float] = {}
    for line in completed.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue  # the header line
        modules[parts[2].strip()] = int(parts[0]) / 1e6
    return modules


def import_difference(ours: dict[str, float], floor: dict[str, float], top: int = 8) -> dict[str, Any]:
    """What a handler imports beyond the floor: module count, their summed self time, the heaviest ones."""
    extra = {name: seconds for name, seconds in ours.items() if name not in floor}
    heaviest = sorted(extra.items(), key=lambda item: item[1], reverse=True)[:top]
    return {
        "extra_modules": len(extra),
        "extra_self_s": round(sum(extra.values()), 4),
        "heaviest": [{"module": name, "self_s": round(seconds, 4)} for name, seconds in heaviest],
    }
