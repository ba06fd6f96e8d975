"""A relay outage longer than the stream keeps records, and the way back, end to end on loopback.

The reference app with ``-c outbox=true`` (orders -> payments -> shipping) deployed by `idempotent-pipeline
local deploy` (the real CDK CLI). Orders commit while the orders relay is down; the stream's records then age
past 24 hours (`local age-streams`), so when the relay's mapping polls again Lambda gives the batch up to the
relay's dead-letter queue (``RecordAgeExceeded``) and nothing reaches payments. `dlq redrive --function
RELAY` publishes every committed payment request again from the orders table (the stream no longer holds
them), with its deduplication id; payments and shipping then store each exactly once, and a second redrive
changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stack_helpers import deploy_reference, paid_and_shipped, relay_of

from idempotent_cli.main import main as cli_main
from idempotent_local.emulator import Emulator
from idempotent_local.runner import EventSourceRunner

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
STACK = "IdempotentPipeline"
ORDERS = [{"x": "order-1", "y": "1", "cents": 2500}, {"x": "order-1", "y": "2", "cents": 5}]
ORDERS.append({"x": "order-2", "y": "1", "cents": 700})

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


def _items(emulator: Emulator, table: str) -> list[dict[str, Any]]:
    return emulator.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]


def _dlq(state_dir: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(["dlq", *argv, "--local", "--state-dir", str(state_dir), "--wait-seconds", "0"])
    return code, capsys.readouterr().out


def test_a_relay_down_longer_than_the_stream_is_brought_back_by_dlq_redrive(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator, outputs = deploy_reference(state_dir, tmp_path, "outbox=true")
    relay = relay_of(emulator, outputs["TableName"])
    for order in ORDERS:
        emulator.client("sns").publish(
            TopicArn=outputs["TopicArn"],
            Message=json.dumps(order),
            MessageGroupId=order["x"],
            MessageDeduplicationId=f"{order['x']}-{order['y']}",
        )

    with EventSourceRunner(emulator) as runner:
        runner.drain(mappings=[m for m in runner.mappings() if m.function_name != relay])  # the relay is down
        assert runner.stats.totals()["processed"] == 3, runner.stats.summary()
    assert cli_main(["local", "age-streams", "25h", "--state-dir", str(state_dir)]) == 0
    with EventSourceRunner(emulator) as runner:
        runner.drain()  # the relay is back: its records expired, the batch is given up
    assert _items(emulator, outputs["PaymentsTableName"]) == []
    where = ("--stack", STACK, "--function", relay)
    code, listed = _dlq(state_dir, capsys, "list", *where)
    assert code == 0 and "RecordAgeExceeded" in listed and "1 batch" in listed, listed

    code, redriven = _dlq(state_dir, capsys, "redrive", *where)
    assert code == 0, redriven
    assert "the stream no longer holds the batch" in redriven and "published 3; deleted" in redriven, redriven
    with EventSourceRunner(emulator) as runner:
        runner.drain()
        assert not runner.stats.discarded, runner.stats.summary()

    payments, shipments = paid_and_shipped(emulator, outputs)
    assert payments == [
        ("payment#order-1", "2500"),
        ("payment#order-1", "5"),
        ("payment#order-2", "700"),
    ]
    assert shipments == [5, 700, 2500]
    code, again = _dlq(state_dir, capsys, "redrive", *where)
    assert code == 0 and "no message" in again, again
