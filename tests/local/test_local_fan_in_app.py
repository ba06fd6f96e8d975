"""Fan-in end to end, from an app made with `idempotent-pipeline init`: docs/runtime.md's three blocks
("Several pipelines feeding one") applied to a fresh init app — Orders and Returns, on two tables, both emit
to one Ledger keyed by the deduplication id — deployed by `local deploy` (the real CDK CLI) and run by the
event-source runner. The same order line and its return emit for the same key from two emitters: both reach
the ledger (0.3 gave them one deduplication id, and the second was dropped as a duplicate). Every message is
delivered twice; a line whose group id SNS and SQS refuse is dead-lettered with its reason between good ones,
which go on."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from stack_helpers import relay_of

from idempotent_cli.main import main as cli_main
from idempotent_local import emulator as emulators
from idempotent_local.runner import EventSourceRunner

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


def documented_blocks() -> list[str]:
    """The three code blocks of docs/runtime.md's fan-in section, in order."""
    docs = (ROOT / "docs" / "runtime.md").read_text()
    start = docs.index("### Several pipelines feeding one, from an `init` app")
    section = docs[start : docs.index("\n## ", start)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 3, "the section's three blocks: the new pipelines, Orders' options, src/ledger.py"
    return blocks


def fan_in_app(directory: Path) -> Path:
    """A fresh init app with the documented changes applied, as a user makes them."""
    assert cli_main(["init", str(directory)]) == 0
    new_pipelines, orders_options, ledger = documented_blocks()
    app = directory / "app.py"
    text = app.read_text()
    text = text.replace(
        "        pipeline = IdempotentPipeline(\n",
        new_pipelines + "        pipeline = IdempotentPipeline(\n",
        1,
    )
    # The Ledger and Returns blocks come first: the Orders pipeline's options are the last ConsumerOptions.
    last = list(
        re.finditer(r"            consumer_options=ConsumerOptions\(\n.*?\n            \),\n", text, re.S)
    )[-1]
    assert "orders:handle" in last.group(0)
    text = text[: last.start()] + orders_options + text[last.end() :]
    app.write_text(text)
    (directory / "src" / "ledger.py").write_text(ledger)
    return directory


def _items(emulator: Any, table: str) -> list[dict[str, Any]]:
    return emulator.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]


def _entries(emulator: Any, table: str) -> list[tuple[str, str, str, int]]:
    return sorted(
        (i["order_id"]["S"], i["line_id"]["S"], i["kind"]["S"], int(i["cents"]["N"]))
        for i in _items(emulator, table)
        if "kind" in i
    )


def _publish(sns: Any, topic: str, line: dict[str, Any], copy: int) -> None:
    sns.publish(
        TopicArn=topic,
        Message=json.dumps(line),
        MessageGroupId=line["order_id"],
        MessageDeduplicationId=f"{line['order_id']}-{line['line_id']}-{copy}",
    )


def test_an_order_line_and_its_return_from_two_pipelines_both_reach_the_ledger_once(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = fan_in_app(tmp_path / "fan-in")
    emulator, _ = emulators.start(state_dir)
    emulator.reset()  # other tests leave resources behind
    deploy = ["local", "deploy", "--state-dir", str(state_dir), "--app-dir", str(app)]
    assert cli_main([*deploy, "--output", str(tmp_path / "cdk.out")]) == 0
    ((stack, outputs),) = [
        (stack["StackName"], {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])})
        for stack in emulator.client("cloudformation").describe_stacks()["Stacks"]
        if any(o["OutputKey"] == "ReturnsTopicArn" for o in stack.get("Outputs", []))
    ]

    line = {"order_id": "o-1", "line_id": "1", "customer": "c-7", "quantity": 2, "unit_cents": 450}
    other = {"order_id": "o-2", "line_id": "1", "customer": "c-7", "quantity": 1, "unit_cents": 380}
    poison = {"order_id": "o-3", "line_id": "1", "customer": "ACME Corp", "quantity": 1, "unit_cents": 100}
    sns = emulator.client("sns")
    for copy in range(2):  # every message twice, each copy a new SNS message: the second is a duplicate
        for order in (line, poison, other):
            _publish(sns, outputs["TopicArn"], order, copy)
        _publish(sns, outputs["ReturnsTopicArn"], line, copy)

    with EventSourceRunner(emulator) as runner:
        runner.drain()
        runner.drain()  # what the relays published, through the ledger
        totals = runner.stats.totals()

    entries = _entries(emulator, outputs["LedgerTableName"])
    assert entries == [("o-1", "1", "charge", 900), ("o-1", "1", "refund", -900), ("o-2", "1", "charge", 380)]
    # The second copy of each good source message is a duplicate; the relays' messages each arrive once.
    assert totals["duplicate"] == 3, runner.stats.summary()
    # The poison line: in the orders dead-letter queue with the reason, nothing of it committed or emitted.
    dead = (
        emulator.client("sqs")
        .receive_message(
            QueueUrl=outputs["DeadLetterQueueUrl"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        )
        .get("Messages", [])
    )
    assert [json.loads(m["Body"])["order_id"] for m in dead] == [
        "o-3",
        "o-3",
    ]  # both copies: nothing committed
    reason = dead[0]["MessageAttributes"]["idempotency.reason"]["StringValue"]
    assert "group_id" in reason and "ACME Corp" in reason, reason
    orders = _items(emulator, outputs["TableName"])
    assert sorted((i["order_id"]["S"], int(i["cents"]["N"])) for i in orders if "cents" in i) == [
        ("o-1", 900),
        ("o-2", 380),
    ]

    # trace follows the order line from the first hop to the ledger.
    state = ["--local", "--state-dir", str(state_dir), "--wait-seconds", "0"]
    where = ["--function", "FunctionName", "--json", *state]
    capsys.readouterr()  # what the deploy printed
    assert cli_main(["trace", "o-1", "1", *where]) == 0
    (item,) = json.loads(capsys.readouterr().out)["emitted"]
    assert [(m["group_id"], m["state"]) for m in item["messages"]] == [("c-7", "stored")]

    # The orders relay is down longer than the stream keeps records (its records age past 24 hours): Lambda
    # gives the batch up to the relay's dead-letter queue and the ledger never hears of o-4. The returns
    # relay is up: its message goes through. `dlq redrive --function RELAY` publishes o-4's charge again
    # from the orders table, with its deduplication id; the ledger stores it once, and nothing else twice.
    relay = relay_of(emulator, outputs["TableName"])
    late = {"order_id": "o-4", "line_id": "1", "customer": "c-9", "quantity": 3, "unit_cents": 100}
    _publish(sns, outputs["TopicArn"], late, 0)
    _publish(sns, outputs["ReturnsTopicArn"], other, 0)
    with EventSourceRunner(emulator) as runner:
        runner.drain(mappings=[m for m in runner.mappings() if m.function_name != relay])
        runner.drain(mappings=[m for m in runner.mappings() if m.function_name != relay])
    assert cli_main(["local", "age-streams", "25h", "--state-dir", str(state_dir)]) == 0
    with EventSourceRunner(emulator) as runner:
        runner.drain()  # the relay is back: its records are too old, the batch is given up
    refunded = [*entries, ("o-2", "1", "refund", -380)]
    assert _entries(emulator, outputs["LedgerTableName"]) == sorted(refunded)
    on_relay = ["--stack", stack, "--function", relay, *state]
    capsys.readouterr()
    assert cli_main(["dlq", "list", *on_relay]) == 0
    listed = capsys.readouterr().out
    assert "RecordAgeExceeded" in listed and "1 batch" in listed, listed
    assert cli_main(["dlq", "redrive", *on_relay]) == 0
    redriven = capsys.readouterr().out
    assert "the stream no longer holds the batch" in redriven and "deleted" in redriven, redriven
    with EventSourceRunner(emulator) as runner:
        runner.drain()
        runner.drain()
        assert not runner.stats.discarded, runner.stats.summary()
    assert _entries(emulator, outputs["LedgerTableName"]) == sorted([*refunded, ("o-4", "1", "charge", 300)])
    assert cli_main(["trace", "o-4", "1", *where]) == 0
    (item,) = json.loads(capsys.readouterr().out)["emitted"]
    assert [(m["group_id"], m["state"]) for m in item["messages"]] == [("c-9", "stored")]
    assert cli_main(["dlq", "redrive", *on_relay]) == 0
    assert "no message" in capsys.readouterr().out
