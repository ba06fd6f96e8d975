"""`make bench`: measure everything side by side and write results.json, results.md and results.png.

    .venv/bin/python benchmarks/run.py [--quick] [--skip-test-suite] [--skip-synth] [--only SECTION ...]

Sections: cpu, requests, outbox (what emitting costs), durable (starting a durable function once),
latency, logs, cold_init, synth (synth time + asset size), volume (the local cloud at 10,000 messages),
redrive (`dlq redrive` of 3,000 dead letters, before and after it batched), local_tools (local output and
status with three stacks), test_suite; the cost per million messages is
computed from the requests,
latency and logs sections when all three ran. A section that cannot run (e.g. a runtime mode not in this
checkout) leaves its metrics in the table as "not measured" with the reason; an unexpected error does the same
and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/run.py` puts benchmarks/, not the repo, on sys.path
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import contenders as cont  # noqa: E402
from benchmarks import cost_model  # noqa: E402
from benchmarks import durable_bench as db  # noqa: E402
from benchmarks import local_tools_bench as ltb  # noqa: E402
from benchmarks import outbox_bench as ob  # noqa: E402
from benchmarks import runtime_bench as rb  # noqa: E402
from benchmarks import volume_bench as vb  # noqa: E402
from benchmarks.report import (  # noqa: E402
    TIMES,
    Metric,
    Target,
    fmt,
    git_commit,
    in_repo,
    paired_ratio,
    recorded,
    render_chart,
    render_cost_chart,
    render_markdown,
    side_by_side,
    unmeasured,
    write_json,
)

OUT_DIR = Path(__file__).resolve().parent


class Settings:
    def __init__(self, quick: bool) -> None:
        self.latency_repeats = 2 if quick else 7
        # DynamoDB's round trip in the latency and CPU rows: a sleep before it answers.
        self.dynamodb_delay_s = 0.010
        self.cpu_rounds = 2 if quick else 15
        self.cpu_batches = 3 if quick else 6
        self.cold_runs = 3 if quick else 21
        self.synth_pairs = 1 if quick else 15
        # The emulator at volume: the small size before and after the large one (drift weighs on both).
        self.volume_sizes = (100, 1000, 100) if quick else (1000, 10000, 1000)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _available_modes() -> tuple[list[str], dict[str, str]]:
    """Modes our runtime can build a handler for in this checkout, and why the others cannot."""
    available, missing = [], {}
    for mode in cont.MODES:
        try:
            cont.build_ours(mode, "probe", dynamodb_client=object())
            available.append(mode)
        except cont.RuntimeUnavailable as error:
            missing[mode] = str(error)
    return available, missing


# --- sections ---------------------------------------------------------------------------------------------


def requests_section(settings: Settings) -> list[Metric]:
    available, missing = _available_modes()
    reference = rb.count_requests(cont.POWERTOOLS)
    metrics = []
    method = (
        "botocore `before-send` events counted on the handler's DynamoDB client; moto in-process "
        "(`mock_aws`); a 10-message batch over 10 groups, new keys, then the same batch redelivered"
    )
    for mode in cont.MODES:
        ours = rb.count_requests(cont.ours(mode)) if mode in available else None
        for kind in rb.REQUEST_KINDS:
            name = f"ddb_requests_per_{kind}_{mode}"
            text = "1 request (Powertools: 2)" if kind == "new_message" else "1 request"
            target = Target("value", 1, text) if mode == "document" else None
            if ours is None:
                metrics.append(unmeasured(name, "requests", "Powertools", method, missing[mode], target))
                continue
            metrics.append(
                Metric(
                    name,
                    "requests",
                    ours.per_message(kind),
                    reference.per_message(kind),
                    "Powertools",
                    method,
                    target,
                    {
                        "ours_by_operation": ours.by_operation[kind],
                        "reference_by_operation": reference.by_operation[kind],
                    },
                )
            )
    name = "ddb_requests_per_conflict_document"
    target = Target("value", 1, "1 request")
    conflict_method = (
        "DynamoDB requests the handler sent for a 10-message batch (10 groups) whose keys were stored before "
        "with other content, delivered through a moto FIFO queue (real receipt handles); ours with its "
        "defaults (ON_CONFLICT=quarantine, a FIFO DLQ): the conflict is found by the PutItem itself and the "
        "record sent to the DLQ and deleted from its queue (SQS requests in the details); Powertools without "
        "payload validation takes them for duplicates"
    )
    if "document" in available:
        ours_conflict, theirs_conflict = rb.count_conflict_requests(powertools=cont.POWERTOOLS)
        metrics.append(
            Metric(
                name,
                "requests",
                ours_conflict.dynamodb_per_conflict,
                theirs_conflict.dynamodb_per_conflict,
                "Powertools",
                conflict_method,
                target,
                {
                    "ours_by_operation": ours_conflict.dynamodb_by_operation,
                    "ours_sqs_by_operation": ours_conflict.sqs_by_operation,
                    "ours_outcome": ours_conflict.outcome,
                    "reference_by_operation": theirs_conflict.dynamodb_by_operation,
                    "reference_outcome": theirs_conflict.outcome,
                },
            )
        )
    else:
        metrics.append(
            unmeasured(name, "requests", "Powertools", conflict_method, missing["document"], target)
        )
    metrics += _versioned_requests()
    return metrics


def outbox_section(settings: Settings) -> list[Metric]:
    """Emitting (``message.emit``): write units the outbox adds to the consumer's transaction, and the
    relay's requests, per emitted message."""
    cost = ob.measure()
    method = (
        f"moto in-process: {cost.emitted} messages in transaction mode, each one Put and one emit to a FIFO "
        "topic, 10-message batches over 10 groups; the table's stream (filtered to outbox items, as the "
        f"relay's event filter does) handed to the relay in {ob.STREAM_BATCH}-record batches"
    )
    details = {
        "emitted": cost.emitted,
        "published": cost.published,
        "outbox_write_units": cost.outbox_write_units,
        "transaction_write_units_without_outbox": cost.transaction_write_units,
        "relay_publish_batch_requests": cost.relay_publish_requests,
        "relay_dynamodb_requests": cost.relay_dynamodb_requests,
    }
    return [
        recorded(
            "outbox_write_units_per_emitted_message",
            "write units",
            cost.write_units_per_emit,
            method + "; DynamoDB write units of the outbox items' Puts in the consumer's TransactWriteItems "
            "(2 per KB of item, transactional), beyond the transaction's own (the processor's writes and "
            "the marker)",
            Target("value", 2, "≤ 2"),
            details,
        ),
        Metric(
            "relay_sns_requests_per_emitted_message",
            "requests",
            cost.publish_requests_per_emit,
            1.0,
            "one Publish per message",
            method + "; SNS PublishBatch requests the relay sent (10 entries a request)",
            Target("value", 0.1, "≤ 0.1"),
            details,
        ),
        recorded(
            "relay_ddb_requests_per_emitted_message",
            "requests",
            cost.relay_dynamodb_per_emit,
            method + "; DynamoDB requests sent while the relay ran (botocore `before-send`, every client)",
            Target("value", 0, "0"),
            details,
        ),
        recorded(
            "outbox_one_downstream_group_ceiling_commits_per_second",
            "commits/s",
            ob.lane_ceiling(cost),
            f"a downstream group's outbox items share one partition key, which takes about "
            f"{ob.PARTITION_WRITE_UNITS_PER_SECOND:,} write units a second: that over the measured write "
            "units per emitted message (the row above); past it DynamoDB throttles, or splits the partition "
            "for heat. The way past it: more downstream groups (a group per entity), each its own partition",
            extra=details | {"partition_write_units_per_second": ob.PARTITION_WRITE_UNITS_PER_SECOND},
        ),
        outbox_contention(settings),
    ]


def outbox_contention(settings: Settings) -> Metric:
    """Emitting consumers' commits per second when 10 source groups emit to ONE downstream group, against
    10 source groups emitting to 10 downstream groups, in the same run, with transaction conflicts."""
    found = ob.measure_contention(delay_s=settings.dynamodb_delay_s, rounds=settings.latency_repeats)
    one, ten = "one_downstream_group", "ten_downstream_groups"
    method = (
        f"transaction mode, MAX_WORKERS 10, batches of {ob.SOURCE_GROUPS} new messages over "
        f"{ob.SOURCE_GROUPS} source groups, each committing a Put, one emit to a FIFO topic and its marker; "
        f"the emit's group is one for all (ours) or the source group (reference). DynamoDB modelled: every "
        f"request answered after {settings.dynamodb_delay_s * 1000:g} ms (off the GIL), a transaction "
        "touching an item another in-flight transaction writes cancelled with TransactionConflict; failed "
        "records delivered again until all committed (the runtime's backoff counts); rounds alternate order"
    )
    details = {
        "commits": found.commits,
        "seconds": {lanes: round(value, 3) for lanes, value in found.seconds.items()},
        "transaction_conflicts": found.conflicts,
        "transaction_conflicts_per_commit": {lanes: found.conflicts_per_commit(lanes) for lanes in ob.LANES},
        "deliveries": found.invocations,
    }
    return Metric(
        "outbox_commits_per_second_one_downstream_group",
        "commits/s",
        found.commits_per_second(one),
        found.commits_per_second(ten),
        "10 downstream groups",
        method,
        Target("ratio", 0.5, f"≥ 0.5{TIMES} 10 downstream groups", at_least=True),
        details,
    )


# Starting a Lambda durable function once per key: the requests each kind of message costs, at most.
DURABLE_TARGETS = {
    "new_message": Target("value", 3, "3 requests: the claim, Invoke, the completion"),
    "duplicate": Target("value", 1, "1 request, no Invoke"),
    "conflict": Target("value", 1, "1 request, no Invoke"),
}


def durable_section(settings: Settings) -> list[Metric]:
    """guarded mode + ``start_durable_execution_once``: DynamoDB and Lambda requests per new message,
    duplicate, conflict, and conflict after the key's record expired (Lambda's name check decides)."""
    method = (
        "requests the handler sent (botocore `before-send` on its DynamoDB and Lambda clients) for a "
        f"{db.RECORDS}-message batch over {db.GROUPS} groups, through a moto FIFO queue with real receipt "
        "handles, moto taught durable functions by the emulator's patch; a warm-up batch first (the "
        "environment's one GetFunctionConfiguration is not counted); conflicts go to a FIFO DLQ (its SQS "
        "requests are not counted)"
    )
    return [
        Metric(
            f"durable_requests_per_{counts.kind}",
            "requests",
            counts.per_message,
            None,
            "none",
            method,
            DURABLE_TARGETS.get(counts.kind),
            {"by_operation": counts.by_operation, "outcome": counts.outcome},
        )
        for counts in db.count_durable_requests()
    ]


def _versioned_requests() -> list[Metric]:
    """versioned: DynamoDB requests per new / stale / duplicate / conflicting message (no reference: no
    peer keeps the latest state per entity)."""
    method = (
        "DynamoDB requests the handler sent (botocore `before-send`) for a 10-message batch (10 groups) of "
        "each kind, through a moto FIFO queue with real receipt handles; VERSION_FIELD=v, ON_CONFLICT="
        "quarantine with a FIFO DLQ: new entities at version 2, then version 1 (stale), version 2 again "
        "(duplicate), version 2 with other content (conflict, to the DLQ). From a standard queue a "
        "quarantined conflict adds one PutItem (the quarantine record)"
    )
    target = Target("value", 1, "1 request")
    names = [f"ddb_requests_per_{kind}_versioned" for kind in rb.VERSIONED_KINDS]
    counts = rb.count_versioned_requests()
    return [
        Metric(
            name, "requests", sum(by.values()) / 10, None, "none", method, target, {"ours_by_operation": by}
        )
        for name, by in zip(names, counts.values(), strict=True)
    ]


# Batch latency at 10 groups: guarded mode (a claim and a completion per record) and document mode (one
# PutItem) against Powertools (a PutItem and an UpdateItem).
LATENCY_TARGETS = {
    ("document", 10): Target("ratio", 0.3, f"≤ 0.3{TIMES} Powertools"),
    ("guarded", 10): Target("ratio", 0.5, f"≤ 0.5{TIMES} Powertools"),
}


def latency_section(settings: Settings) -> tuple[list[Metric], dict[str, dict[int, float]]]:
    available, missing = _available_modes()
    delay_ms = settings.dynamodb_delay_s * 1000
    method = (
        "wall time of one handler call on a 10-record FIFO batch of new messages spread over N groups; "
        f"DynamoDB answered as in the CPU rows: a standing botocore Stubber returns the validated response "
        f"after {delay_ms:.0f} ms (a sleep: the round trip, off the GIL), no moto in the process; "
        f"contenders alternated, median of {settings.latency_repeats}"
    )
    contenders = [cont.POWERTOOLS] + [cont.ours(mode) for mode in available]
    group_counts = (1, 5, 10)
    samples = rb.batch_latency(
        contenders, group_counts, delay_s=settings.dynamodb_delay_s, repeats=settings.latency_repeats
    )
    metrics = []
    for mode in cont.MODES:
        for groups in group_counts if mode == "document" else (10,):
            name = f"batch_latency_{groups}_groups" + ("" if mode == "document" else f"_{mode}")
            target = LATENCY_TARGETS.get((mode, groups))
            if mode not in available:
                metrics.append(unmeasured(name, "ms", "Powertools", method, missing[mode], target))
                continue
            ours_name = cont.ours(mode).name
            metrics.append(
                Metric(
                    name,
                    "ms",
                    samples.median(ours_name, groups) * 1000,
                    samples.median("Powertools", groups) * 1000,
                    "Powertools",
                    method,
                    target,
                    {
                        "mode": mode,
                        "injected_latency_ms": delay_ms,
                        "ours_samples_ms": [round(s * 1000, 2) for s in samples.samples[ours_name][groups]],
                        "reference_samples_ms": [
                            round(s * 1000, 2) for s in samples.samples["Powertools"][groups]
                        ],
                    },
                )
            )
    chart = {
        name: {g: statistics.median(values) for g, values in per_group.items()}
        for name, per_group in samples.samples.items()
        if name in ("Powertools", "ours (document)")
    }
    return metrics, chart


def _cpu_metric(
    name: str,
    mode: str,
    samples: rb.CpuSamples,
    method: str,
    target: Target | None,
    reference: tuple[str, str] = ("Powertools", "Powertools"),  # its series, and its name in the table
) -> Metric:
    ours_name = cont.ours(mode).name
    ours, theirs = samples.samples[ours_name], samples.samples[reference[0]]
    return Metric(
        name,
        "µs",
        samples.median(ours_name),
        samples.median(reference[0]),
        reference[1],
        method,
        target,
        {
            "mode": mode,
            "paired_ratio_median": paired_ratio(ours, theirs),
            "ours_samples_us": [round(s, 1) for s in ours],
            "reference_samples_us": [round(s, 1) for s in theirs],
        },
    )


def cpu_section(settings: Settings) -> list[Metric]:
    available, missing = _available_modes()
    contenders = [cont.POWERTOOLS] + [cont.ours(mode) for mode in available]
    floor_of = cont.ours("document") if "document" in available else None
    delay_s = settings.dynamodb_delay_s
    samples = rb.cpu_per_record(
        contenders,
        rounds=settings.cpu_rounds,
        batches=settings.cpu_batches,
        floor_of=floor_of,
        delay_s=delay_s,
    )

    def method(groups: int) -> str:
        return (
            f"process CPU time (all threads) per record over {samples.records_per_round} new records "
            f"(10-record batches over {groups} group{'s' if groups > 1 else ''}) per round; DynamoDB "
            f"answered by a botocore Stubber after {delay_s * 1000:.0f} ms, as in the latency rows (no "
            f"network, no moto); contenders alternated, median of {settings.cpu_rounds} rounds"
        )

    metrics = []
    for mode in cont.MODES:
        name = "cpu_us_per_record" + ("" if mode == "document" else f"_{mode}")
        target = Target("ratio", 0.5, f"≤ 0.5{TIMES} Powertools") if mode == "document" else None
        if mode not in available:
            metrics.append(unmeasured(name, "µs", "Powertools", method(10), missing[mode], target))
            continue
        metrics.append(_cpu_metric(name, mode, samples, method(10), target))
    floor_name = "cpu_us_per_record_vs_floor"
    floor_target = Target("ratio", 1.5, f"≤ 1.5{TIMES} floor")
    floor_method = (
        method(10) + "; floor = the very put_item requests our runtime sent for the same round's batches "
        "(recorded on a client of its own, untimed), replayed in a bare loop on a client created and "
        "stubbed the same way, delay included: the calls without the runtime around them"
    )
    if floor_of is None:
        metrics.append(unmeasured(floor_name, "µs", "floor", floor_method, missing["document"], floor_target))
    else:
        reference = (rb.FLOOR, "floor: the same put_item calls in a bare loop")
        metrics.append(_cpu_metric(floor_name, "document", samples, floor_method, floor_target, reference))
    if "document" in available:
        # One group: every record one after another, as the floor's calls are, so this isolates the
        # per-record work from the cost (and the overlapped waits) of running groups concurrently.
        sequential = rb.cpu_per_record(
            [cont.POWERTOOLS, cont.ours("document")],
            rounds=settings.cpu_rounds,
            batches=settings.cpu_batches,
            groups=1,
            floor_of=floor_of,
            delay_s=delay_s,
        )
        metric = _cpu_metric("cpu_us_per_record_1_group", "document", sequential, method(1), None)
        ours, floor = sequential.samples["ours (document)"], sequential.samples[rb.FLOOR]
        metric.extra["floor_us"] = round(sequential.median(rb.FLOOR), 1)
        metric.extra["vs_floor_paired_ratio_median"] = paired_ratio(ours, floor)
        metrics.append(metric)
    return metrics


def logs_section(settings: Settings) -> list[Metric]:
    from benchmarks.powertools_peer import build_powertools_handler

    available, missing = _available_modes()
    method = (
        f"bytes written to stdout and stderr (what Lambda ingests into CloudWatch Logs, besides its own "
        f"START/END/REPORT lines) per record over {settings.cpu_batches * 4} 10-record batches of new "
        "messages over 10 groups, each handler at its default log level, DynamoDB stubbed; reference = the "
        "Powertools peer publishing the batch's counters with Powertools Metrics (one EMF line per "
        "invocation), as a Powertools consumer reporting what ours reports would"
    )
    if "document" not in available:
        return [unmeasured("log_bytes_per_record", "bytes", "Powertools", method, missing["document"])]
    results = {
        r.contender: r
        for r in rb.log_bytes_per_record(
            {
                "ours (document)": lambda client: cont.build_ours("document", "bench-table", client),
                "Powertools + Metrics": lambda client: build_powertools_handler(
                    "bench-table", dynamodb_client=client, metrics_namespace="IdempotentPipeline"
                ),
                "Powertools": lambda client: build_powertools_handler("bench-table", dynamodb_client=client),
            },
            batches=settings.cpu_batches * 4,
        )
    }
    ours, theirs = results["ours (document)"], results["Powertools + Metrics"]
    return [
        Metric(
            "log_bytes_per_record",
            "bytes",
            ours.bytes_per_record,
            theirs.bytes_per_record,
            "Powertools + Metrics",
            method,
            None,
            {
                "ours_lines_per_batch": ours.lines_per_batch,
                "reference_lines_per_batch": theirs.lines_per_batch,
                "powertools_without_metrics_bytes_per_record": results["Powertools"].bytes_per_record,
            },
        )
    ]


def _per_message(operations: dict[str, int], records: int = 10) -> dict[str, float]:
    """Requests per message by operation, from the requests section's counts for a 10-record batch."""
    return {operation: count / records for operation, count in operations.items()}


def _cost_inputs(metrics: list[Metric]) -> dict[str, cost_model.Inputs] | str:
    """The measured inputs of the cost model, per contender, from this run's metrics (or why not)."""
    by_name = {m.name: m for m in metrics}
    logs = by_name.get("log_bytes_per_record")
    if logs is None or logs.ours is None or logs.reference is None:
        return "needs the logs section"
    inputs = {}
    for mode in cont.MODES:
        new, dup = (
            by_name.get(f"ddb_requests_per_new_message_{mode}"),
            by_name.get(f"ddb_requests_per_duplicate_{mode}"),
        )
        latency = by_name.get("batch_latency_10_groups" + ("" if mode == "document" else f"_{mode}"))
        if new is None or dup is None or latency is None or None in (new.ours, dup.ours, latency.ours):
            return f"needs the requests and latency sections for {mode} mode"
        inputs[mode] = cost_model.Inputs(
            f"ours ({mode})",
            _per_message(new.extra["ours_by_operation"]),
            _per_message(dup.extra["ours_by_operation"]),
            latency.ours / 1000,
            logs.ours,
        )
        if "Powertools" not in inputs:
            inputs["Powertools"] = cost_model.Inputs(
                "Powertools",
                _per_message(new.extra["reference_by_operation"]),
                _per_message(dup.extra["reference_by_operation"]),
                latency.reference / 1000,
                logs.reference,
            )
    return inputs


def cost_section(metrics: list[Metric]) -> tuple[list[Metric], dict[str, cost_model.Cost]]:
    inputs = _cost_inputs(metrics)
    method = cost_model.method()
    if isinstance(inputs, str):
        return [
            unmeasured(f"cost_per_million_{mode}", "USD", "Powertools", method, inputs) for mode in cont.MODES
        ], {}
    order = [*cont.MODES, "Powertools"]
    costs = {name: cost_model.cost_per_million(inputs[name]) for name in order}
    theirs = costs["Powertools"]
    out = []
    for mode in cont.MODES:
        ours = costs[mode]
        out.append(
            Metric(
                f"cost_per_million_{mode}",
                "USD",
                ours.total,
                theirs.total,
                "Powertools consumer, same work",
                method,
                None,
                {
                    "ours_components": {k: round(v, 5) for k, v in ours.components.items()},
                    "reference_components": {k: round(v, 5) for k, v in theirs.components.items()},
                },
            )
        )
    return out, {cost.name: cost for cost in costs.values()}


OURS_IMPORT_PROGRAM = "import idempotent_runtime.handler\n"
# The runtime creates its DynamoDB client lazily, on the first record; a cold start that handles a message
# pays for it, so it is created here exactly as the runtime does it.
OURS_COLD_PROGRAM = (
    "import idempotent_runtime.handler\n"
    "from idempotent_runtime.clients import LazyClient\n"
    "LazyClient('dynamodb')()\n"
)


FLOOR_NAME = "floor: import boto3; boto3.client('dynamodb')"


def cold_init_section(settings: Settings) -> list[Metric]:
    env = rb.cold_init_environment(cont.our_environment("document", "bench-table"))
    programs = {
        "ours": OURS_COLD_PROGRAM,
        "floor": rb.FLOOR_PROGRAM,
        "Powertools": rb.POWERTOOLS_PROGRAM,
        "ours_import_only": OURS_IMPORT_PROGRAM,
    }
    method_tail = (
        "CPU time of the program inside a fresh `python -c` interpreter (the import and the client, not the "
        "interpreter's own start), same Lambda-like environment; one warm-up each (bytecode caches), then "
        f"{settings.cold_runs} rounds in rotating order, median (whole-process CPU and wall alongside)"
    )
    target = Target("ratio", 1.05, f"≤ 1.05{TIMES} floor")
    try:
        rb.run_program(OURS_COLD_PROGRAM, env)
    except rb.BenchmarkError as error:
        reason = f"our handler module does not start: {str(error).splitlines()[-1]}"
        return [
            unmeasured("cold_init_s", "s", FLOOR_NAME, method_tail, reason, target),
            unmeasured("cold_init_s_vs_powertools", "s", "Powertools handler module", method_tail, reason),
        ]
    samples = rb.cold_init(programs, env, runs=settings.cold_runs)

    def extra(reference: str) -> dict[str, Any]:
        cpu = samples.samples["cpu"]
        out: dict[str, Any] = {
            "paired_ratio_median": paired_ratio(cpu["ours"], cpu[reference]),
            "min_s": side_by_side(min(cpu["ours"]), min(cpu[reference])),
        }
        for kind in ("wall", "process_cpu", "process_wall"):
            out[f"{kind}_s"] = side_by_side(samples.median("ours", kind), samples.median(reference, kind))
        out["samples_cpu_s"] = {name: [round(v, 4) for v in cpu[name]] for name in ("ours", reference)}
        return out

    floor_extra = extra("floor")
    floor_extra["ours_import_only_s"] = round(samples.median("ours_import_only"), 4)
    floor_extra["imports_beyond_floor"] = rb.import_difference(
        rb.import_profile(OURS_COLD_PROGRAM, env), rb.import_profile(rb.FLOOR_PROGRAM, env)
    )
    metrics = [
        Metric(
            "cold_init_s",
            "s",
            samples.median("ours"),
            samples.median("floor"),
            FLOOR_NAME,
            "ours = `import idempotent_runtime.handler` + its DynamoDB client (which the runtime creates "
            "lazily, on the first batch; created here up front); " + method_tail,
            target,
            floor_extra,
        ),
        Metric(
            "cold_init_s_vs_powertools",
            "s",
            samples.median("ours"),
            samples.median("Powertools"),
            "Powertools handler module",
            "Powertools = importing a module that builds the idempotency + FIFO batch handler and its "
            "persistence layer (client included); " + method_tail,
            None,
            extra("Powertools"),
        ),
    ]
    return metrics


def synth_section(settings: Settings) -> list[Metric]:
    # synth_bench silences jsii's Node version warnings itself
    completed = in_repo(
        [sys.executable, "-m", "benchmarks.synth_bench", "--pairs", str(settings.synth_pairs)]
    )
    if completed.returncode != 0:
        raise RuntimeError(f"synth benchmark failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    data = json.loads(completed.stdout.strip().splitlines()[-1])
    medians = data["synth_median_s"]["wall"]
    cpu_medians = data["synth_median_s"].get("cpu") or {}
    asset, peer_asset = data["asset"], data["powertools_asset"]
    metrics = [
        Metric(
            "asset_bytes",
            "bytes",
            asset["zip_bytes"],
            peer_asset["zip_bytes"],
            "Powertools peer bundled as code",
            "the consumer function's asset directory from the reference stack's cloud assembly, zipped with "
            "deflate; reference = the peer's handler + aws_lambda_powertools + jmespath + typing_extensions "
            "zipped the same way (a Powertools layer would move, not remove, those bytes)",
            Target("value", 65536, "≤ 64 KB"),
            {"ours_asset": asset, "reference_asset": peer_asset},
        ),
        Metric(
            "synth_s",
            "s",
            medians["reference"],
            medians["plain"],
            "plain aws-cdk-lib stack, same resources",
            "build + `app.synth()` of app.py's reference app (cdk.json context, cdk-nag off) vs "
            "benchmarks/plain_stack.py (same resource types and counts), one process, asset cache cleared "
            f"before each, one untimed synth each, then {settings.synth_pairs} alternating rounds, median",
            Target("ratio", 1.15, f"≤ 1.15{TIMES} plain CDK"),
            {
                "reference_with_cdk_nag_s": round(medians["reference_with_nag"], 4),
                "paired_ratio_median": round(data["paired_ratio_median"]["wall"], 4),
                "cpu_s": {
                    **side_by_side(cpu_medians["reference"], cpu_medians["plain"]),
                    "paired_ratio_median": round(data["paired_ratio_median"]["cpu"], 4),
                    "method": "CPU time of the Python process plus the jsii Node process (all threads, "
                    "/proc schedstat) per synth, median",
                }
                if cpu_medians
                else "unavailable",
                "jsii_round_trips_per_synth": data["jsii_round_trips"],
                "samples_wall_s": {k: [round(v, 4) for v in vs] for k, vs in data["synth_s"]["wall"].items()},
            },
        ),
    ]
    return metrics


def volume_metrics(runs: list[vb.Drained], plain_cpu_s: float | None, plain_messages: int) -> list[Metric]:
    """The volume rows from the local cloud's runs and plain moto's CPU for ``plain_messages`` messages: wall
    times recorded; the machine-independent targets on CPU ratios measured in this run — the emulator's CPU
    per message against plain moto's for the same API calls (at the smallest size), and at the largest size
    against the smallest (the mean of its runs)."""
    largest, smallest = max(r.messages for r in runs), min(r.messages for r in runs)
    large = [r for r in runs if r.messages == largest]
    small = [r for r in runs if r.messages == smallest]
    method = (
        f"app.py's stack deployed by the CDK CLI into a fresh emulator; {largest:,} messages with new keys "
        f"published to its FIFO topic over {vb.GROUPS} message groups (PublishBatch) and drained by the "
        "event-source runner running the deployed function (10-message batches); every key's item counted "
        f"in the table, no dead letter; sizes in the order {', '.join(f'{r.messages:,}' for r in runs)}"
    )

    def cpu(of: list[vb.Drained]) -> float | None:
        values = [r.emulator_cpu_ms_per_message for r in of]
        return None if None in values else statistics.mean(v for v in values if v is not None)

    large_cpu, small_cpu = cpu(large), cpu(small)
    plain = None if plain_cpu_s is None else plain_cpu_s / plain_messages * 1000
    runs_json = [r.as_json() for r in runs]
    log("volume: " + "; ".join(f"{r['messages']} in {r['publish_s']}+{r['drain_s']} s" for r in runs_json))
    plain_method = (
        f"plain moto server (no emulator change, its own process) serving the same API calls for "
        f"{plain_messages:,} messages: PublishBatch to a FIFO topic delivering to a FIFO queue, "
        "ReceiveMessage, one conditional PutItem per message, DeleteMessageBatch, 100 messages at a time"
    )
    return [
        recorded(
            "volume_publish_and_drain_s",
            "s",
            statistics.mean(r.seconds for r in large),
            f"wall time to publish and drain {largest:,} messages (recorded: it depends on the machine); "
            + method,
            extra={"runs": runs_json},
        ),
        Metric(
            "volume_ms_per_message",
            "ms",
            statistics.mean(r.ms_per_message for r in large),
            statistics.mean(r.ms_per_message for r in small),
            f"the same at {smallest:,} messages",
            f"wall time per message (publish + drain) at {largest:,} against {smallest:,} (recorded); "
            + method,
            None,
        ),
        Metric(
            "volume_cpu_ms_per_message_vs_moto",
            "ms",
            small_cpu,
            plain,
            "plain moto server, the same API calls",
            f"the emulator process's CPU (user + system) per message at {smallest:,} messages, publish and "
            f"drain, against {plain_method}; measured in the same run. " + method,
            Target("ratio", 1.5, f"≤ 1.5{TIMES} plain moto"),
            {"plain_moto_cpu_s": plain_cpu_s, "plain_moto_messages": plain_messages},
        ),
        Metric(
            "volume_cpu_ms_per_message_at_scale",
            "ms",
            large_cpu,
            small_cpu,
            f"the same at {smallest:,} messages",
            f"the emulator process's CPU (user + system) per message at {largest:,} against {smallest:,}; "
            + method,
            Target("ratio", 1.5, f"≤ 1.5{TIMES} at {smallest:,}"),
        ),
    ]


def volume_section(settings: Settings) -> list[Metric]:
    runs = vb.measure(settings.volume_sizes)
    plain_messages = min(settings.volume_sizes)
    return volume_metrics(runs, vb.plain_moto_cpu(plain_messages), plain_messages)


def redrive_metrics(runs: list[vb.Redriven]) -> list[Metric]:
    """Messages a second of `dlq redrive` at volume, against the redrive one message at a time (the code of
    ``vb.ONE_AT_A_TIME``, measured in the same run when git could give it)."""
    batched = next(run for run in runs if run.code == "batched")
    before = next((run for run in runs if run.code != "batched"), None)
    return [
        Metric(
            "redrive_messages_per_s",
            "messages/s",
            batched.letters / batched.seconds,
            None if before is None else before.letters / before.seconds,
            f"one message at a time ({vb.ONE_AT_A_TIME})",
            f"`idempotent-pipeline dlq redrive --queue-url` (its own process, start to exit) of "
            f"{batched.letters:,} dead letters over {batched.groups} FIFO groups, interleaved, in the DLQ of "
            "app.py's stack deployed into a fresh emulator, with the consumer known (keys read); the source "
            "queue then holds every one once, each group in order",
            Target("ratio", 3.0, f"≥ 3{TIMES} one message at a time", at_least=True),
            {"runs": [run._asdict() for run in runs]},
        )
    ]


def redrive_section(settings: Settings) -> list[Metric]:
    return redrive_metrics(vb.redrive_at_volume())


def local_tools_metrics(timed: list[ltb.Timed]) -> list[Metric]:
    """``local output`` and ``local status`` with three stacks deployed: the median of their runs."""
    names = {"local output": "local_output_s", "local status": "local_status_s"}
    return [
        recorded(
            next(metric for prefix, metric in names.items() if each.command.startswith(prefix)),
            "s",
            each.median_s,
            f"wall time of `idempotent-pipeline {each.command}` from start to exit (a new process, the "
            f"console script), median of {len(each.samples_s)} runs, with {each.stacks} stacks of app.py "
            f"-c outbox=true deployed ({each.resources} resources)",
            Target("value", 1.0, "≤ 1 s with three stacks"),
            each.as_json(),
        )
        for each in timed
    ]


def local_tools_section(settings: Settings) -> list[Metric]:
    return local_tools_metrics(ltb.measure())


def test_suite_section(settings: Settings) -> list[Metric]:
    command = ["make", "test"]  # as users run it: the Makefile's two workers
    start = time.perf_counter()
    completed = in_repo(command)
    elapsed = time.perf_counter() - start
    summary = next(
        (
            line.strip("= ")
            for line in reversed(completed.stdout.splitlines())
            if re.search(r"\d+ (passed|failed)", line)
        ),
        "no pytest summary line",
    )
    log(f"test suite: {elapsed:.1f}s, exit {completed.returncode}, {summary}")
    return [
        recorded(
            "test_suite_s",
            "s",
            elapsed,
            f"wall time of `{' '.join(command)}` (recorded, not compared)",
            extra={"exit_code": completed.returncode, "pytest_summary": summary},
        )
    ]


# --- main -------------------------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("boto3", "botocore", "moto", "aws-lambda-powertools", "aws-cdk-lib"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _carried_over(previous: Path, names: set[str]) -> list[Metric]:
    """Metrics of a skipped section, kept from the previous results file and marked as such."""
    if not previous.exists():
        return []
    kept = []
    old = json.loads(previous.read_text())
    for entry in old.get("metrics", []):
        if entry["name"] in names and entry.get("ours") is not None:
            when = entry.get("measured_utc") or old.get("run", {}).get("finished_utc", "an earlier run")
            extra = {
                k: v
                for k, v in entry.items()
                if k not in Metric.__dataclass_fields__
                and k not in ("ratio", "met", "target", "carried_over")
            }
            extra["carried_over"] = f"not rerun; measured {when}"
            extra["measured_utc"] = when
            columns = ("name", "unit", "ours", "reference", "reference_name", "method")
            kept.append(Metric(**{column: entry[column] for column in columns}, extra=extra))
    return kept


# CPU first: it is the most sensitive to what earlier sections leave in the process (moto state, threads).
RUNNERS: dict[str, Callable[[Settings], Any]] = {
    "cpu": cpu_section,
    "requests": requests_section,
    "outbox": outbox_section,
    "durable": durable_section,
    "latency": latency_section,
    "logs": logs_section,
    "cold_init": cold_init_section,
    "synth": synth_section,
    "volume": volume_section,
    "redrive": redrive_section,
    "local_tools": local_tools_section,
    "test_suite": test_suite_section,
}
SECTIONS = tuple(RUNNERS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the benchmarks and write results.{json,md,png}.")
    parser.add_argument(
        "--quick", action="store_true", help="few repeats: checks the harness, not the numbers"
    )
    parser.add_argument("--skip-test-suite", action="store_true", help="do not time `make test` (slow)")
    parser.add_argument(
        "--skip-synth", action="store_true", help="skip synth time and asset size (needs jsii)"
    )
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument(
        "--output-dir", type=Path, default=OUT_DIR, help="where results.* go (default benchmarks/)"
    )
    args = parser.parse_args(argv)
    skipped = {
        name for name, skip in (("test_suite", args.skip_test_suite), ("synth", args.skip_synth)) if skip
    }

    for name, value in (
        ("AWS_DEFAULT_REGION", rb.REGION),
        ("AWS_ACCESS_KEY_ID", "bench"),
        ("AWS_SECRET_ACCESS_KEY", "bench"),
    ):
        os.environ.setdefault(name, value)
    sections = [name for name in SECTIONS if (not args.only or name in args.only) and name not in skipped]

    settings = Settings(args.quick)
    started = time.time()
    load_start = os.getloadavg()
    metrics: list[Metric] = []
    charts: dict[str, Any] = {}  # the latency section's by group count, the cost model's by contender
    errors = []
    # The cost model is computed from the requests, latency and logs sections' rows, after them.
    for section in [*sections, *(["cost"] if {"requests", "latency", "logs"} <= set(sections) else [])]:
        log(f"{section} ...")
        try:
            produced = cost_section(metrics) if section == "cost" else RUNNERS[section](settings)
        except Exception as error:  # keep the other sections' numbers; the failure is reported, not hidden
            errors.append(section)
            traceback.print_exc()
            metrics.append(
                unmeasured(f"{section}_section", "", "", f"section {section}", f"error: {error!r}")
            )
            continue
        if isinstance(produced, tuple):
            produced, charts[section] = produced
        metrics.extend(produced)
        log(
            f"{section}: "
            + ", ".join(f"{m.name}={fmt(m.ours, m.unit)}/{fmt(m.reference, m.unit)}" for m in produced)
        )

    output_dir = args.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    results_json = output_dir / "results.json"
    if "test_suite" not in sections and not args.only:
        metrics.extend(_carried_over(results_json, {"test_suite_s"}))
    finished = dt.datetime.now(dt.UTC)
    run_info = {
        "finished_utc": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": round(time.time() - started, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        "load_average_start": round(load_start[0], 2),
        "load_average_end": round(os.getloadavg()[0], 2),
        "commit": git_commit(),
        "quick": args.quick,
        "sections": sections,
        "versions": _versions(),
    }
    for metric in metrics:
        metric.extra.setdefault("measured_utc", run_info["finished_utc"])
    write_json(metrics, run_info, results_json)
    (output_dir / "results.md").write_text(render_markdown(metrics, run_info))
    render_chart(metrics, charts.get("latency"), output_dir / "results.png")
    if charts.get("cost"):
        render_cost_chart(list(charts["cost"].values()), output_dir / "cost.png")
    log(f"wrote {results_json}, results.md, results.png in {run_info['duration_s']} s")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
