"""End to end on loopback: the reference app with ``-c workflow=true`` deployed by `idempotent-pipeline local
deploy` (the real CDK CLI), messages published to its topic and run through the event-source runner: one
execution of the demo workflow per key, named for it, whatever the number of deliveries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stack_helpers import deploy_reference

from idempotent_local.runner import EventSourceRunner

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
STACK = "IdempotentPipeline"

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


def test_the_reference_workflow_starts_one_execution_per_key(state_dir: Path, tmp_path: Path) -> None:
    emulator, outputs = deploy_reference(state_dir, tmp_path, "workflow=true")
    sns, sfn = emulator.client("sns"), emulator.client("stepfunctions")

    orders = [{"x": "cust-7", "y": "order-1", "cents": 2500}, {"x": "cust#8", "y": "order 1", "cents": 5}]
    for copy in range(2):  # every order twice, each copy a new SNS message: the second is a duplicate
        for order in orders:
            sns.publish(
                TopicArn=outputs["TopicArn"],
                Message=json.dumps(order),
                MessageGroupId=order["x"],
                MessageDeduplicationId=f"{order['y']}-{copy}",
            )
    with EventSourceRunner(emulator) as runner:
        stats = runner.drain()
    assert stats.totals()["processed"] == 2 and stats.totals()["duplicate"] == 2, stats.summary()

    executions = sfn.list_executions(stateMachineArn=outputs["StateMachineArn"])["executions"]
    inputs = {
        e["name"]: json.loads(sfn.describe_execution(executionArn=e["executionArn"])["input"])
        for e in executions
    }
    assert sorted(inputs.values(), key=lambda order: order["y"]) == sorted(
        orders, key=lambda order: order["y"]
    )
    assert "cust-7_order-1" in inputs  # the other key holds `#` and a space: its name is its SHA-256
