"""The local cloud at volume: the reference stack deployed into a fresh emulator with the real CDK CLI, then
N messages published to its FIFO topic over 50 message groups (PublishBatch, through the runtime's
publisher) and drained through the event-source runner, which runs the deployed function on them; and
`dlq redrive` of 3,000 dead letters over 30 groups, before and after it batched (:func:`redrive_at_volume`).

Each run's messages have keys of their own; after the drain every key must have its item in the table, the
table must have grown by exactly N items, and both dead-letter queues must have gained nothing: a run that
loses or doubles a message raises instead of reporting a time. Sizes run in the order given (run.py: 1,000
before and after the 10,000, so drift over the run weighs on both sides).

What a machine's speed does not change is the ratio of CPU times measured in one run: the emulator's CPU
per message against plain moto's (:func:`plain_moto_cpu`: a moto server without the emulator's changes,
serving the same API calls per message — PublishBatch to a FIFO topic delivering to a FIFO queue, receive,
the consumer's conditional PutItem, DeleteMessageBatch — a hundred messages at a time, so that its queue
stays as shallow as a consumer keeps it), and its CPU per message at 10,000 against 1,000.

    .venv/bin/python benchmarks/run.py --only volume --output-dir /tmp/bench   # this row alone, ~3 minutes
    .venv/bin/python benchmarks/run.py --only redrive --output-dir /tmp/bench  # the redrive row
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.report import REPO_ROOT, in_repo
from benchmarks.runtime_bench import BenchmarkError, item_count

GROUPS = 50


@dataclass(frozen=True)
class Drained:
    """One run: ``messages`` published and drained, every one accounted for."""

    messages: int
    publish_s: float
    drain_s: float
    emulator_cpu_s: float | None  # user + system CPU of the emulator process over the run (Linux)
    deliveries: int

    @property
    def seconds(self) -> float:
        return self.publish_s + self.drain_s

    @property
    def ms_per_message(self) -> float:
        return self.seconds / self.messages * 1000

    @property
    def emulator_cpu_ms_per_message(self) -> float | None:
        return None if self.emulator_cpu_s is None else self.emulator_cpu_s / self.messages * 1000

    def as_json(self) -> dict[str, Any]:
        cpu = self.emulator_cpu_ms_per_message
        return {
            "messages": self.messages,
            "publish_s": round(self.publish_s, 2),
            "drain_s": round(self.drain_s, 2),
            "published_per_s": round(self.messages / self.publish_s, 1),
            "drained_per_s": round(self.messages / self.drain_s, 1),
            "ms_per_message": round(self.ms_per_message, 3),
            "emulator_cpu_ms_per_message": None if cpu is None else round(cpu, 3),
            "deliveries": self.deliveries,
        }


def _process_cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def bootstrapped_emulator(prefix: str) -> Iterator[tuple[Any, Any, Path]]:
    """A fresh emulator (its own process, as `local deploy` starts it) with the CDK bootstrapped in it:
    (emulator, its Cdk, its state directory). Stopped afterwards, however the benchmark ends."""
    from idempotent_local import emulator as emulators
    from idempotent_local.cdk import Cdk

    with tempfile.TemporaryDirectory(prefix=prefix) as directory:
        state = Path(directory)
        emulator, _ = emulators.start(state, owner=os.getpid())
        try:
            cdk = Cdk(emulator, REPO_ROOT, output=state / "cdk.out")
            cdk.bootstrap()
            yield emulator, cdk, state
        finally:
            emulators.stop(state)


@contextmanager
def deployed_reference_stack() -> Iterator[tuple[Any, Any]]:
    """A fresh emulator with app.py's stack: (emulator, pipeline). Stopped afterwards."""
    from idempotent_local.demo import find_pipelines
    from idempotent_local.runner import EventSourceRunner

    with bootstrapped_emulator("volume-bench-") as (emulator, cdk, state):
        cdk.deploy()
        with EventSourceRunner(emulator, work_dir=state / "functions") as runner:
            pipelines = find_pipelines(emulator, runner)
        if len(pipelines) != 1 or not pipelines[0].fifo:
            raise BenchmarkError(f"expected the reference stack's one FIFO pipeline, found {pipelines}")
        yield emulator, pipelines[0]


def publish_and_drain(emulator: Any, pipeline: Any, messages: int, groups: int = GROUPS) -> Drained:
    """Publish ``messages`` new keys over ``groups`` message groups, drain them, account for every one."""
    from idempotent_runtime.publisher import ConsumerKeys, publish

    from idempotent_local.demo import items_with_keys, messages_in
    from idempotent_local.runner import EventSourceRunner

    fields = (pipeline.partition_key_field, pipeline.sort_key_field)
    if any("." in name for name in fields):
        raise BenchmarkError(f"the benchmark writes top-level key fields; the pipeline reads {fields}")
    run = uuid.uuid4().hex[:8]
    bodies = [{fields[0]: f"{run}-{n}", fields[1]: "1", "n": n} for n in range(messages)]
    dead_letter_queues = (pipeline.dead_letter_queue_url, pipeline.subscription_dead_letter_queue_url)
    dead_before = sum(messages_in(emulator, url) for url in dead_letter_queues)
    items_before = item_count(emulator.client("dynamodb"), pipeline.table_name)
    with EventSourceRunner(emulator) as runner:
        runner.drain(timeout=600, mappings=[pipeline.mapping])  # a warm worker; nothing left from before
        cpu_start, start = _process_cpu_s(emulator.pid), time.perf_counter()
        published = publish(
            emulator.client("sns"),
            pipeline.topic_arn,
            bodies,
            group_id=lambda body: f"{run}-g{body['n'] % groups}",
            keys=ConsumerKeys(key_fields=fields),
        )
        publish_s = time.perf_counter() - start
        stats = runner.drain(timeout=3600, mappings=[pipeline.mapping])
        drain_s = time.perf_counter() - start - publish_s
        cpu_end = _process_cpu_s(emulator.pid)
    published.raise_for_failures()
    keys = {(str(body[fields[0]]), str(body[fields[1]])) for body in bodies}
    found = len(items_with_keys(emulator, pipeline, keys))
    grown = item_count(emulator.client("dynamodb"), pipeline.table_name) - items_before
    dead = sum(messages_in(emulator, url) for url in dead_letter_queues) - dead_before
    if (found, grown, dead, stats.delivered) != (messages, messages, 0, messages):
        raise BenchmarkError(
            f"{messages} messages published: {stats.delivered} delivered, {found} of their keys in the "
            f"table, the table grew by {grown}, {dead} new dead letters"
        )
    return Drained(
        messages=messages,
        publish_s=publish_s,
        drain_s=drain_s,
        emulator_cpu_s=None if cpu_start is None or cpu_end is None else cpu_end - cpu_start,
        deliveries=stats.records,
    )


def measure(sizes: Sequence[int]) -> list[Drained]:
    """Deploy once, then publish and drain each size in turn."""
    with deployed_reference_stack() as (emulator, pipeline):
        return [publish_and_drain(emulator, pipeline, size) for size in sizes]


PLAIN_MOTO = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()  # until the benchmark closes it
server.stop()
"""


@contextmanager
def plain_moto_server() -> Iterator[tuple[str, int]]:
    """A moto server with none of the emulator's changes, in its own process: (endpoint, pid)."""
    env = {**os.environ, "MOTO_ACCOUNT_ID": "000000000000"}
    process = subprocess.Popen(
        [sys.executable, "-c", PLAIN_MOTO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # its request log
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://localhost:{port}", process.pid
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _plain_clients(endpoint: str) -> tuple[Any, Any, Any]:
    import botocore.session

    session = botocore.session.get_session()
    return tuple(  # type: ignore[return-value]
        session.create_client(
            service,
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id="plain",
            aws_secret_access_key="plain",
        )
        for service in ("sns", "sqs", "dynamodb")
    )


def plain_moto_cpu(messages: int, groups: int = GROUPS, chunk: int = 100) -> float | None:
    """CPU seconds of a plain moto server serving, for ``messages`` messages, the calls the local cloud's
    pipeline makes per message: PublishBatch (10 a call) to a FIFO topic subscribed by a FIFO queue (raw
    delivery), ReceiveMessage (10 at most), one conditional PutItem per message as the consumer writes it
    (``attribute_not_exists``), DeleteMessageBatch; ``chunk`` messages published, then drained, at a time."""
    from benchmarks.contenders import create_our_table

    with plain_moto_server() as (endpoint, pid):
        sns, sqs, dynamodb = _plain_clients(endpoint)
        topic = sns.create_topic(
            Name="plain.fifo", Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "false"}
        )["TopicArn"]
        queue = sqs.create_queue(QueueName="plain.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
        )
        create_our_table(dynamodb, "plain")
        run = uuid.uuid4().hex[:8]
        start = _process_cpu_s(pid)
        for first in range(0, messages, chunk):
            numbers = range(first, min(first + chunk, messages))
            for tens in range(numbers.start, numbers.stop, 10):
                entries = _entries(
                    run, range(tens, min(tens + 10, numbers.stop)), groups, ("id", "line"), "Message"
                )
                sns.publish_batch(TopicArn=topic, PublishBatchRequestEntries=entries)
            left = len(numbers)
            while left:
                received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
                for message in received:
                    body = json.loads(message["Body"])
                    dynamodb.put_item(
                        TableName="plain",
                        Item={
                            "pk": {"S": body["id"]},
                            "sk": {"S": body["line"]},
                            "n": {"N": str(body["n"])},
                            "fingerprint": {"S": hashlib.sha256(message["Body"].encode()).hexdigest()},
                        },
                        ConditionExpression="attribute_not_exists(pk)",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    )
                if received:
                    sqs.delete_message_batch(
                        QueueUrl=queue,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                            for i, m in enumerate(received)
                        ],
                    )
                left -= len(received)
        end = _process_cpu_s(pid)
        stored = item_count(dynamodb, "plain")
        if stored != messages:
            raise BenchmarkError(f"plain moto stored {stored} of {messages} messages")
    return None if start is None or end is None else end - start


def _entries(
    run: str, numbers: range, groups: int, fields: tuple[str, str], body: str = "MessageBody"
) -> list[dict[str, Any]]:
    """Batch entries (SendMessageBatch; PublishBatch with ``body="Message"``) of the messages ``numbers`` of
    ``run``: message n is ``{fields[0]: "RUN-n", fields[1]: "1", "n": n}``, in group ``RUN-g(n % groups)``."""
    return [
        {
            "Id": str(n),
            body: json.dumps({fields[0]: f"{run}-{n}", fields[1]: "1", "n": n}),
            "MessageGroupId": f"{run}-g{n % groups}",
            "MessageDeduplicationId": f"{run}-{n}",
        }
        for n in numbers
    ]


# --- redrive at volume ------------------------------------------------------------------------------------

REDRIVE_LETTERS, REDRIVE_GROUPS = 3000, 30
# The redrive as it was before it batched (a GetItem, a SendMessage and a DeleteMessage per message).
ONE_AT_A_TIME = "49c065e"


class Redriven(NamedTuple):
    """One `dlq redrive` of ``letters`` dead letters over ``groups`` FIFO groups, every one accounted for."""

    code: str  # what ran: "batched" (this checkout) or the commit of the redrive one message at a time
    letters: int
    groups: int
    seconds: float


def redrive_at_volume(letters: int = REDRIVE_LETTERS, groups: int = REDRIVE_GROUPS) -> list[Redriven]:
    """The reference stack in a fresh emulator; its DLQ filled with ``letters`` dead letters over ``groups``
    groups (interleaved, as SQS moves them from a busy queue), then moved back with `dlq redrive` (its own
    process, from start to exit): first by the code of :data:`ONE_AT_A_TIME` (when git can give it), then by
    this checkout's. The source queue must then hold every one once, each group in order."""
    with deployed_reference_stack() as (emulator, pipeline), tempfile.TemporaryDirectory() as before:
        # Run from its own directory, the old code comes first (Python puts the working directory first).
        archive = f"git -C {REPO_ROOT} archive {ONE_AT_A_TIME} idempotent_cli lambda_src | tar -x -C {before}"
        old = subprocess.run(["sh", "-c", archive], capture_output=True, check=False).returncode == 0
        runs = [(ONE_AT_A_TIME, Path(before))] if old else []
        return [
            _redrive(emulator, pipeline, code, path, letters, groups)
            for code, path in (*runs, ("batched", REPO_ROOT))
        ]


def _redrive(emulator: Any, pipeline: Any, code: str, where: Path, letters: int, groups: int) -> Redriven:
    sqs, run = emulator.client("sqs"), uuid.uuid4().hex[:8]
    fields = (pipeline.partition_key_field, pipeline.sort_key_field)
    for tens in range(0, letters, 10):
        entries = _entries(run, range(tens, min(tens + 10, letters)), groups, fields)
        sqs.send_message_batch(QueueUrl=pipeline.dead_letter_queue_url, Entries=entries)
    env = emulator.client_environment()
    env["PYTHONPATH"] = os.pathsep.join((str(where), str(where / "lambda_src")))
    command = [sys.executable, "-m", "idempotent_cli.dlq", "redrive", "--queue-url"]
    start = time.perf_counter()
    done = in_repo([*command, pipeline.dead_letter_queue_url], cwd=where, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or f"{letters} redriven" not in done.stdout.splitlines():
        raise BenchmarkError(
            f"{code}: `dlq redrive` answered {done.returncode}: {done.stdout[-2000:]}{done.stderr}"
        )
    arrived: dict[str, list[int]] = {}  # the numbers of the messages in the source queue, by group
    while batch := sqs.receive_message(
        QueueUrl=pipeline.mapping.queue_url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"]
    ).get("Messages", []):
        for message in batch:
            group = arrived.setdefault(message["Attributes"]["MessageGroupId"], [])
            group.append(json.loads(message["Body"])["n"])
        handles = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(batch)]
        sqs.delete_message_batch(QueueUrl=pipeline.mapping.queue_url, Entries=handles)
    numbers = sorted(n for group in arrived.values() for n in group)
    if numbers != list(range(letters)) or any(group != sorted(group) for group in arrived.values()):
        raise BenchmarkError(
            f"{code}: {len(numbers)} arrived of {letters}, not each once in its group's order"
        )
    return Redriven(code, letters, groups, seconds)
