"""End to end on loopback: the reference app with ``-c durable=true`` deployed by `idempotent-pipeline local
deploy` (the real CDK CLI), orders published to its topic twice and run through the event-source runner:
one durable execution per key, named for it, its handler run once; then another order for a used key goes to
the dead-letter queue as a conflict, and nothing new starts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from stack_helpers import deploy_reference

from idempotent_local import emulator as emulators
from idempotent_local.runner import EventSourceRunner

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
STACK = "IdempotentPipeline"

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


def _closed(lam, function: str) -> list[dict]:
    """The function's executions once none is RUNNING (its handler runs in the emulator's worker)."""
    deadline = time.monotonic() + 60
    while True:
        found = lam.list_durable_executions_by_function(FunctionName=function, Qualifier="1")[
            "DurableExecutions"
        ]
        if all(e["Status"] != "RUNNING" for e in found) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_the_reference_durable_function_starts_once_per_key_and_a_conflict_reaches_the_dlq(
    state_dir: Path, tmp_path: Path
) -> None:
    emulator, outputs = deploy_reference(state_dir, tmp_path, "durable=true")
    sns, lam, sqs = emulator.client("sns"), emulator.client("lambda"), emulator.client("sqs")
    assert outputs["DurableFunctionArn"].endswith(f"function:{outputs['DurableFunctionName']}:1")

    def publish(order: dict, copy: int) -> None:
        sns.publish(
            TopicArn=outputs["TopicArn"],
            Message=json.dumps(order),
            MessageGroupId=order["x"],
            MessageDeduplicationId=f"{order['y']}-{copy}-{order['cents']}",
        )

    orders = [{"x": "cust-7", "y": "order-1", "cents": 2500}, {"x": "cust#8", "y": "order 1", "cents": 5}]
    for copy in range(2):  # every order twice, each copy a new SNS message: the second is a duplicate
        for order in orders:
            publish(order, copy)
    with EventSourceRunner(emulator) as runner:
        stats = runner.drain()
    assert stats.totals()["processed"] == 2 and stats.totals()["duplicate"] == 2, stats.summary()
    executions = _closed(lam, outputs["DurableFunctionName"])
    assert [e["Status"] for e in executions] == ["SUCCEEDED"] * 2
    inputs = {
        e["DurableExecutionName"]: json.loads(
            lam.get_durable_execution(
                DurableExecutionArn=e["DurableExecutionArn"], IncludeExecutionData=True
            )["InputPayload"]
        )
        for e in executions
    }
    assert sorted(inputs.values(), key=lambda o: o["y"]) == sorted(orders, key=lambda o: o["y"])
    assert "cust-7_order-1" in inputs  # the other key holds `#` and a space: its name is its SHA-256
    log = emulators.Path(state_dir) / "logs" / f"{outputs['DurableFunctionName']}.log"
    assert log.read_text().count('"message": "fulfilling order"') == 2  # the handler ran once per execution

    publish({**orders[0], "cents": 9999}, 2)  # the same key, another payload
    with EventSourceRunner(emulator) as runner:
        stats = runner.drain()
    assert stats.totals()["quarantined"] == 1, stats.summary()
    (letter,) = sqs.receive_message(
        QueueUrl=outputs["DeadLetterQueueUrl"], MessageAttributeNames=["All"], MaxNumberOfMessages=10
    )["Messages"]
    # The key's record recognises it before Lambda is asked (Lambda's name check would, after the record
    # expired: tests/runtime/test_runtime_durable.py).
    reason = letter["MessageAttributes"]["idempotency.reason"]["StringValue"]
    assert reason.startswith("conflict: key cust-7#order-1 is already done with another payload"), reason
    assert len(_closed(lam, outputs["DurableFunctionName"])) == 2
