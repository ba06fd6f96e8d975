"""Requests per message of guarded mode starting a Lambda durable function once per key
(``start_durable_execution_once``): DynamoDB's (the claim and the completion) and Lambda's (``Invoke``, and
the look-up of the execution that holds a name on a conflict Lambda finds)."""

from __future__ import annotations

import io
import time
import zipfile
from dataclasses import dataclass
from typing import Any

from benchmarks.instruments import RequestCounter
from benchmarks.runtime_bench import BenchmarkError, OurConsumer, _FifoSource, moto_backend

RECORDS = 10
GROUPS = 10
DAY = 24 * 3600
HANDLER = "def handler(event, context):\n    return {'Status': 'SUCCEEDED', 'Result': '{}'}\n"
# Each kind of message, in the order the rows are measured, and what the handler makes of it.
OUTCOMES = {
    "new_message": "processed: one durable execution started per key",
    "duplicate": "duplicate: the stored execution ARN, nothing invoked",
    "conflict": "quarantined: the key's record holds another payload, nothing invoked",
    "conflict_after_record_expired": "quarantined: Lambda refused the name (another payload), "
    "the execution's input read for both fingerprints",
}


@dataclass
class DurableCounts:
    """Requests per message of one kind, by service and operation."""

    kind: str
    per_message: float
    by_operation: dict[str, dict[str, int]]  # service -> operation -> requests for RECORDS messages
    outcome: str


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _durable_function(lam: Any, iam: Any) -> str:
    role = iam.create_role(RoleName="bench-durable", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("fulfil.py", HANDLER)
    lam.create_function(
        FunctionName="bench-fulfil",
        Runtime="python3.11",
        Role=role,
        Handler="fulfil.handler",
        Code={"ZipFile": buffer.getvalue()},
        DurableConfig={"ExecutionTimeout": 900, "RetentionPeriodInDays": 14},
    )
    return str(lam.publish_version(FunctionName="bench-fulfil")["FunctionArn"])


def count_durable_requests() -> list[DurableCounts]:
    """Deliver, through a moto FIFO queue (real receipt handles), a batch of new keys (after a warm-up batch:
    the environment's one GetFunctionConfiguration is not counted), the same batch again (duplicates), the
    keys with other content (conflicts: the key's record finds them), then other content again after the
    keys' records expired (conflicts Lambda's name check finds). moto in-process, taught durable functions
    by the emulator's patch; only the requests sent while the handler runs are counted."""
    from idempotent_runtime.clients import create_client
    from idempotent_runtime.durable import start_durable_execution_once

    from idempotent_local import durable_functions, patches

    durable_functions.install(None, patches._replace)
    try:
        with moto_backend():
            lam = create_client("lambda")
            function = _durable_function(lam, create_client("iam"))
            clock = _Clock()
            ours = OurConsumer(
                "bench-durable",
                {"mode": "guarded", "processor": "bench:durable"},
                processor=lambda m: start_durable_execution_once(m, function, m.json_object(), client=lam),
                clock=clock,
            )
            _FifoSource(ours.sqs, RECORDS, GROUPS).deliver("warm-up", ours.handler, 0)
            source = _FifoSource(ours.sqs, RECORDS, GROUPS)
            counters = [RequestCounter(ours.dynamodb), RequestCounter(lam, service="lambda")]
            counted = []
            for kind, amounts in zip(OUTCOMES, (0, 0, 1000, 2000), strict=True):
                if kind == "conflict_after_record_expired":
                    clock.now += 8 * DAY  # past DEDUP_TTL_SECONDS (7 days), within the retention (14)
                table, function_requests = source.deliver(kind, ours.handler, amounts, counters)
                counted.append((kind, {"dynamodb": table, "lambda": function_requests}))
            for counter in counters:
                counter.detach()
            if (dead := ours.dead_letters()) != 2 * RECORDS:
                raise BenchmarkError(f"expected {2 * RECORDS} conflicts in the DLQ, found {dead}")
            listed = lam.list_durable_executions_by_function(FunctionName=function)["DurableExecutions"]
            if len(listed) != 2 * RECORDS:  # the warm-up's and the measured batch's keys, once each
                raise BenchmarkError(f"{len(listed)} durable executions for {2 * RECORDS} keys")
    finally:
        durable_functions.EXECUTOR.stop()
        patches.revert()
    return [
        DurableCounts(kind, sum(sum(ops.values()) for ops in by.values()) / RECORDS, by, OUTCOMES[kind])
        for kind, by in counted
    ]
