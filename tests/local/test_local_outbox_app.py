"""End to end on loopback: the reference app with ``-c outbox=true`` (orders -> payments -> shipping) deployed
by `idempotent-pipeline local deploy` (the real CDK CLI) and run through the event-source runner, SQS and
DynamoDB stream mappings alike. Orders are published twice, the orders relay is down while orders commit (a
crash between commit and publish), and the relays run again over what they published already (their
retries): every emitted message has exactly one effect downstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import stack_helpers

from idempotent_local.emulator import Emulator
from idempotent_local.events import lambda_dynamodb_event
from idempotent_local.runner import EventSourceRunner

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
STACK = "IdempotentPipeline"

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


def _items(emulator: Emulator, table: str) -> list[dict[str, Any]]:
    return emulator.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]


def _stream_event(emulator: Emulator, table: str) -> dict[str, Any]:
    """Every outbox write of ``table``'s stream, from its start, as Lambda hands them to the relay."""
    streams = emulator.client("dynamodbstreams")
    arn = emulator.client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    records = []
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    outbox = [
        r
        for r in records
        if r["eventName"] in ("INSERT", "MODIFY")
        and "idempotency#outbox#" in r["dynamodb"]["Keys"]["pk"]["S"]
    ]
    return lambda_dynamodb_event(outbox, arn)


def test_two_hops_give_one_downstream_effect_per_emitted_message(state_dir: Path, tmp_path: Path) -> None:
    emulator, outputs = stack_helpers.deploy_reference(state_dir, tmp_path, "outbox=true")
    relays = stack_helpers.relays(emulator)
    assert set(relays) == {outputs["TableName"], outputs["PaymentsTableName"]}

    orders = [{"x": "order-1", "y": "1", "cents": 2500}, {"x": "order-1", "y": "2", "cents": 5}]
    orders.append({"x": "order#2", "y": "1", "cents": 700})
    sns = emulator.client("sns")
    for copy in range(2):  # every order twice, each copy a new SNS message: the second is a duplicate
        for order in orders:
            sns.publish(
                TopicArn=outputs["TopicArn"],
                Message=json.dumps(order),
                MessageGroupId=order["x"],
                MessageDeduplicationId=f"{order['x']}-{order['y']}-{copy}".replace("#", "_"),
            )

    with EventSourceRunner(emulator) as runner:
        orders_relay = relays[outputs["TableName"]]["function"]["FunctionName"]
        # The orders relay is down: the orders commit with their outbox items, nothing is published.
        running = [m for m in runner.mappings() if m.function_name != orders_relay]
        runner.drain(mappings=running)
        totals = runner.stats.totals()
        assert (totals["processed"], totals["duplicate"]) == (3, 3), runner.stats.summary()
        assert _items(emulator, outputs["PaymentsTableName"]) == []
        # It is back: everything committed is published, and flows on through payments to shipping.
        runner.drain()
        # The relays run again over everything they published (a retry after a crash before they
        # answered): the same deduplication ids again.
        for table, relay in relays.items():
            arn = relay["function"]["FunctionArn"]
            worker = runner.invoker.worker(arn)
            reply, error = runner.invoker.invoke(worker, arn, _stream_event(emulator, table))
            assert error is None and reply["result"] == {"batchItemFailures": []}, reply
        runner.drain()
        assert not runner.stats.discarded, runner.stats.summary()

    lines = [i for i in _items(emulator, outputs["TableName"]) if i["sk"]["S"].startswith("line#")]
    assert sorted((i["pk"]["S"], i["sk"]["S"]) for i in lines) == [
        ("order#order#2", "line#1"),
        ("order#order-1", "line#1"),
        ("order#order-1", "line#2"),
    ]
    payments, shipments = stack_helpers.paid_and_shipped(emulator, outputs)
    assert payments == [
        ("payment#order#2", "700"),
        ("payment#order-1", "2500"),
        ("payment#order-1", "5"),
    ]
    # Shipping stores each shipment as its document, keyed by the deduplication id payments emitted it with.
    assert shipments == [5, 700, 2500], shipments
