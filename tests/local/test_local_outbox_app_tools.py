"""The operator tools on the reference app with ``-c outbox=true`` (orders -> payments -> shipping, three
consumers and two relays in one stack), deployed by `idempotent-pipeline local deploy` (the real CDK CLI):
each of `dlq`, `trace`, `logs` reaches each consumer by its function's name and by the stack output naming
it; without --function, `trace` finds a key in the consumer that holds it and `dlq list` lists the dead-letter
queues of all three and of both relays, each under its construct path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idempotent_cli.main import main as cli_main
from idempotent_local import emulator as emulators
from idempotent_local.emulator import Emulator
from idempotent_local.runner import EventSourceRunner

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
STACK = "IdempotentPipeline"
CONSUMERS = {"orders": "FunctionName", "payments": "PaymentsFunctionName", "shipping": "ShippingFunctionName"}
# The emulator answers a receive at once: no long poll.
FAST = ("--wait-seconds", "0")
TABLES = {"orders": "TableName", "payments": "PaymentsTableName", "shipping": "ShippingTableName"}

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


@pytest.fixture(scope="module")
def deployed(state_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The app deployed and one order run through all three hops; its outputs, plus the emulator."""
    emulator, _ = emulators.start(state_dir)
    emulator.reset()  # other tests leave resources behind
    out = tmp_path_factory.mktemp("cdk.out")
    deploy = ["local", "deploy", "--state-dir", str(state_dir), "--app-dir", str(ROOT), "--output", str(out)]
    assert cli_main([*deploy, "-c", "outbox=true"]) == 0
    stack = emulator.client("cloudformation").describe_stacks(StackName=STACK)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    emulator.client("sns").publish(
        TopicArn=outputs["TopicArn"],
        Message=json.dumps({"x": "order-1", "y": "1", "cents": 2500}),
        MessageGroupId="order-1",
        MessageDeduplicationId="order-1-1",
    )
    with EventSourceRunner(emulator) as runner:
        runner.drain()
        assert not runner.stats.discarded, runner.stats.summary()
    yield {"outputs": outputs, "emulator": emulator, "state_dir": state_dir}


def _run(deployed: dict[str, Any], capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli_main([*argv, "--local", "--state-dir", str(deployed["state_dir"])])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _items(emulator: Emulator, table: str) -> list[dict[str, Any]]:
    return emulator.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]


def _name(deployed: dict[str, Any], consumer: str, by: str) -> str:
    output = CONSUMERS[consumer]
    return output if by == "output" else deployed["outputs"][output]


@pytest.mark.parametrize("by", ["output", "function"])
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_each_consumer_is_reached_by_its_function_and_its_output(deployed, capsys, consumer, by):
    function = deployed["outputs"][CONSUMERS[consumer]]
    where = ("--stack", STACK, "--function", _name(deployed, consumer, by))

    code, out, err = _run(deployed, capsys, "dlq", "list", *where, "--json", *FAST)
    assert code == 0, err
    assert json.loads(out)["read"] == 0 and err == ""

    code, out, err = _run(deployed, capsys, "logs", *where)
    assert code == 0, err
    assert err.startswith(f"{STACK}/{function}: lines the local runner wrote to ")
    assert '"outcome": "processed"' in out or "batch" in out  # the runner's lines of this function

    table = deployed["outputs"][TABLES[consumer]]
    code, out, err = _run(deployed, capsys, "trace", "--dedup-id", "d", *where, "--json", *FAST)
    if consumer == "orders":  # keyed by its fields: a deduplication id is not its key
        assert code == 1 and "the consumer keys messages by the fields x, y" in err
    else:
        assert code == 0, err
        assert json.loads(out)["pipeline"]["table"] == table


def test_trace_without_function_finds_an_emitted_message_in_the_consumer_that_stored_it(deployed, capsys):
    emulator, outputs = deployed["emulator"], deployed["outputs"]
    # Payments keys the payment request orders emitted by the deduplication id the relay published it with:
    # its transaction marker sits at that id.
    [dedup_id] = [
        item["pk"]["S"]
        for item in _items(emulator, outputs["PaymentsTableName"])
        if item["sk"]["S"] == "idempotency#dedup_id"
    ]

    code, out, err = _run(
        deployed, capsys, "trace", "--dedup-id", dedup_id, "--stack", STACK, "--json", *FAST
    )

    assert code == 0, err
    document = json.loads(out)
    assert document["found_in"] == [outputs["PaymentsFunctionName"]]
    looked = {c["function"]: (c["traced"], c["found"]) for c in document["consumers"]}
    assert looked == {
        outputs["FunctionName"]: (False, False),  # keyed by its fields: cannot key a deduplication id
        outputs["PaymentsFunctionName"]: (True, True),
        outputs["ShippingFunctionName"]: (True, False),
    }
    [payments] = [
        t for t in document["traces"] if t["pipeline"]["function"] == outputs["PaymentsFunctionName"]
    ]
    assert payments["table"]["state"] == "stored"


def test_dlq_list_without_function_lists_every_pipeline_and_relay_saying_whose(deployed, capsys):
    outputs = deployed["outputs"]

    code, out, err = _run(deployed, capsys, "dlq", "list", "--json", *FAST)

    assert code == 0, err
    listed = json.loads(out)["dead_letter_queues"]
    assert [(q["pipeline"], q["function"]) for q in listed[:3]] == [
        (f"{STACK}/Pipeline", outputs["FunctionName"]),
        (f"{STACK}/Payments", outputs["PaymentsFunctionName"]),
        (f"{STACK}/Shipping", outputs["ShippingFunctionName"]),
    ]
    assert listed[0]["queue"].endswith(outputs["DeadLetterQueueUrl"].rsplit("/", 1)[1])
    assert [q["kind"] for q in listed] == ["pipeline"] * 3 + ["outbox relay"] * 2
    assert err.startswith(f"stack {STACK} has 5 dead-letter queues: {STACK}/Pipeline (")


def test_trace_follows_an_order_from_the_first_hop_to_the_last(deployed, capsys):
    outputs = deployed["outputs"]
    where = ("--stack", STACK, "--function", "FunctionName", *FAST)

    code, out, err = _run(deployed, capsys, "trace", "order-1", "1", *where, "--json")

    assert code == 0, err
    document = json.loads(out)
    (item,) = document["emitted"]
    assert item["target"] == outputs["PaymentsTopicArn"] and item["state"] == "in the outbox"
    (payment,) = item["messages"]
    assert payment["group_id"] == "order-1"
    assert payment["dedup_id"] == f"{outputs['TableName']}#order-1#1#000"
    assert (payment["consumer"], payment["state"]) == (f"{STACK}/{outputs['PaymentsFunctionName']}", "stored")
    (shipping_item,) = payment["emitted"]
    assert shipping_item["target"] == outputs["ShippingTopicArn"]
    (shipment,) = shipping_item["messages"]
    assert (shipment["consumer"], shipment["state"]) == (
        f"{STACK}/{outputs['ShippingFunctionName']}",
        "stored",
    )
    assert shipment["emitted"] == []  # shipping emits nothing: the last hop

    code, out, err = _run(deployed, capsys, "trace", "order-1", "1", *where)
    assert code == 0, err
    assert f"-> {STACK}/{outputs['PaymentsFunctionName']}: stored" in out
    assert f"-> {STACK}/{outputs['ShippingFunctionName']}: stored" in out


def test_trace_shows_an_emitted_message_not_yet_arrived_and_one_in_conflict(deployed, capsys):
    """Last in this module: it leaves messages in flight."""
    emulator, outputs = deployed["emulator"], deployed["outputs"]
    sns = emulator.client("sns")
    for order in ("order-2", "order-3"):
        sns.publish(
            TopicArn=outputs["TopicArn"],
            Message=json.dumps({"x": order, "y": "1", "cents": 300}),
            MessageGroupId=order,
            MessageDeduplicationId=f"{order}-1",
        )
    # Another payload already stored under order-3's payment request's deduplication id.
    sns.publish(
        TopicArn=outputs["PaymentsTopicArn"],
        Message=json.dumps({"order": "order-3", "line": "1", "cents": 999}),
        MessageGroupId="order-3",
        MessageDeduplicationId=f"{outputs['TableName']}#order-3#1#000",
    )
    with EventSourceRunner(emulator) as runner:
        consumers = {outputs[output] for output in CONSUMERS.values()}
        runner.drain(mappings=[m for m in runner.mappings() if m.function_name in consumers])  # relays down

    where = ("--stack", STACK, "--function", "FunctionName", "--json", *FAST)
    code, out, err = _run(deployed, capsys, "trace", "order-2", "1", *where)
    assert code == 0, err
    assert [m["state"] for i in json.loads(out)["emitted"] for m in i["messages"]] == ["not yet arrived"]
    code, out, err = _run(deployed, capsys, "trace", "order-3", "1", *where)
    assert code == 0, err
    assert [m["state"] for i in json.loads(out)["emitted"] for m in i["messages"]] == ["conflict"]
