"""The local cloud at volume: the reference stack deployed into a fresh emulator with the real CDK CLI, then
N messages published to its FIFO topic over 50 message groups (PublishBatch, through the runtime's
publisher) and drained through the event-source runner, which runs the deployed function on them.

Each run's messages have keys of their own; after the drain every key must have its item in the table, the
table must have grown by exactly N items, and both dead-letter queues must have gained nothing: a run that
loses or doubles a message raises instead of reporting a time. Sizes run in the order given (run.py: 1,000
before and after the 10,000, so drift over the run weighs on both sides).

    .venv/bin/python benchmarks/run.py --only volume --output-dir /tmp/bench   # this row alone, ~3 minutes
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.runtime_bench import REPO_ROOT, BenchmarkError

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
        return {
            "messages": self.messages,
            "publish_s": round(self.publish_s, 2),
            "drain_s": round(self.drain_s, 2),
            "published_per_s": round(self.messages / self.publish_s, 1),
            "drained_per_s": round(self.messages / self.drain_s, 1),
            "ms_per_message": round(self.ms_per_message, 3),
            "emulator_cpu_ms_per_message": _rounded(self.emulator_cpu_ms_per_message),
            "deliveries": self.deliveries,
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _process_cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _table_items(emulator: Any, table: str) -> int:
    dynamodb, count, request = emulator.client("dynamodb"), 0, {"TableName": table, "Select": "COUNT"}
    while True:
        page = dynamodb.scan(**request)
        count += page["Count"]
        if "LastEvaluatedKey" not in page:
            return count
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@contextmanager
def deployed_reference_stack() -> Iterator[tuple[Any, Any]]:
    """A fresh emulator (its own process, as `local deploy` starts it) with app.py's stack: (emulator,
    pipeline). Stopped afterwards."""
    from idempotent_local import emulator as emulators
    from idempotent_local.cdk import Cdk
    from idempotent_local.demo import find_pipelines
    from idempotent_local.runner import EventSourceRunner

    with tempfile.TemporaryDirectory(prefix="volume-bench-") as directory:
        state = Path(directory)
        emulator, _ = emulators.start(state)
        try:
            cdk = Cdk(emulator, REPO_ROOT, output=state / "cdk.out")
            cdk.bootstrap()
            cdk.deploy()
            with EventSourceRunner(emulator, work_dir=state / "functions") as runner:
                pipelines = find_pipelines(emulator, runner)
            if len(pipelines) != 1 or not pipelines[0].fifo:
                raise BenchmarkError(f"expected the reference stack's one FIFO pipeline, found {pipelines}")
            yield emulator, pipelines[0]
        finally:
            emulators.stop(state)


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
    items_before = _table_items(emulator, pipeline.table_name)
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
    grown = _table_items(emulator, pipeline.table_name) - items_before
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


__all__ = ["GROUPS", "Drained", "deployed_reference_stack", "measure", "publish_and_drain"]
