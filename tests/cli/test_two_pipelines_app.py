"""An operator with two pipelines in one stack: an `init` app given a second pipeline (Movies) and a plain
Lambda function (Notifier, on a queue subscribed to the orders topic), deployed once by `local deploy` (the
real CDK CLI), then every command with and without --function: `send`, `local run --drain`, `dlq list`,
`dlq show`, `trace`, `logs`, `dlq redrive`, `dlq purge`. --function takes the construct id (Orders), a path
(Shop/Movies, Shop/Orders/Consumer/Function) or the function's name. Without it, the commands that only read
cover both pipelines, each part saying whose; those that change something refuse, naming both (exit code 2).
The tests run in order on the one deployment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from idempotent_cli.main import main as cli_main
from idempotent_local import emulator as emulators

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
STACK = "Shop"
APP = '''#!/usr/bin/env python3
"""Shop: two pipelines, orders and movies, and a plain function that hears of every order."""

import os
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,19,20,21")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "18,19,20,21")

import aws_cdk as cdk  # noqa: E402
from aws_cdk import aws_lambda as lambda_  # noqa: E402
from aws_cdk import aws_lambda_event_sources as sources  # noqa: E402
from aws_cdk import aws_sns_subscriptions as subscriptions  # noqa: E402
from aws_cdk import aws_sqs as sqs  # noqa: E402

from idempotent_pipeline import (  # noqa: E402
    ConsumerOptions,
    IdempotentPipeline,
    MessagingOptions,
    TableOptions,
)

HERE = Path(__file__).resolve().parent
NOTIFIER = """
def handler(event, context):
    for record in event["Records"]:
        print("notified", record["body"])
"""


def pipeline(scope, id, partition, sort, processor):
    return IdempotentPipeline(
        scope,
        id,
        messaging_options=MessagingOptions(fifo=True, max_receive_count=2),
        table_options=TableOptions(partition_key_name=partition, sort_key_name=sort),
        consumer_options=ConsumerOptions(
            partition_key_field=partition,
            sort_key_field=sort,
            processor=processor,
            code_directory=str(HERE / "src"),
        ),
    )


class Shop(cdk.Stack):
    def __init__(self, scope, id):
        super().__init__(scope, id)
        orders = pipeline(self, "Orders", "order_id", "line_id", "orders:handle")
        movies = pipeline(self, "Movies", "title", "year", "movies:handle")
        notices = sqs.Queue(self, "Notices", fifo=True)
        orders.topic.add_subscription(subscriptions.SqsSubscription(notices, raw_message_delivery=True))
        notifier = lambda_.Function(
            self,
            "Notifier",
            runtime=lambda_.Runtime.PYTHON_3_12,
            handler="index.handler",
            code=lambda_.Code.from_inline(NOTIFIER),
        )
        notifier.add_event_source(sources.SqsEventSource(notices))
        functions = {"Orders": orders.function, "Movies": movies.function, "Notifier": notifier}
        for name, function in functions.items():
            cdk.CfnOutput(self, f"{name}Function", value=function.function_name)


app = cdk.App()
Shop(app, "Shop")
app.synth()
'''
MOVIES_PROCESSOR = """from idempotent_runtime import PermanentError


def handle(message):
    movie = message.json_object()
    if movie.get("rating") not in (1, 2, 3, 4, 5):
        raise PermanentError(f"rating must be 1 to 5, got {movie.get('rating')!r}")
    return movie
"""
ORDERS = [
    {"order_id": "o-1", "line_id": "1", "sku": "tea", "quantity": 2},
    {"order_id": "o-2", "line_id": "1", "sku": "tea", "quantity": -1},  # refused by the processor
]
MOVIES = [
    {"title": "Alien", "year": "1979", "rating": 5},
    {"title": "Heat", "year": "1995", "rating": 9},  # refused
    {"title": "Ran", "year": "1985", "rating": 0},  # refused
]
FAST = ("--wait-seconds", "0")

if not (REPO / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


@dataclass
class Shop:
    app: Path
    emulator: emulators.Emulator
    outputs: dict[str, str]
    steps: set[str] = field(default_factory=set)

    def after(self, step: str) -> None:
        assert step in self.steps, f"this test builds on {step!r}, which did not run before it here"

    def dead_letters(self, which: str) -> int:
        """How many messages the DLQ of the pipeline ``which`` (Orders, Movies) holds, as SQS counts them."""
        sqs = self.emulator.client("sqs")
        name = self.outputs[f"{which}Function"]
        environment = self.emulator.client("lambda").get_function_configuration(FunctionName=name)
        url = environment["Environment"]["Variables"]["DLQ_URL"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    work = tmp_path_factory.mktemp("operator")
    app = work / "shop"
    assert cli_main(["init", str(app)]) == 0
    (app / "app.py").write_text(APP)
    (app / "src" / "movies.py").write_text(MOVIES_PROCESSOR)
    (app / "node_modules").symlink_to(REPO / "node_modules")  # the pinned CDK CLI, as `npm install` puts it
    for name, lines in (("orders", ORDERS), ("movies", MOVIES)):
        (work / f"{name}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    try:
        assert cli_main(["local", "deploy", "--app-dir", str(app), "--output", str(work / "cdk.out")]) == 0
        emulator = emulators.find(app / ".local-cloud")
        assert emulator is not None
        stack = emulator.client("cloudformation").describe_stacks(StackName=STACK)["Stacks"][0]
        yield Shop(app, emulator, {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]})
    finally:
        emulators.stop(app / ".local-cloud")


def _run(shop: Shop, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``idempotent-pipeline ARGV --local`` in the app (``local ...``: without --local): exit code, stdout,
    stderr."""
    capsys.readouterr()
    code = cli_main([*argv, *(["--local"] if argv[0] != "local" else []), "--app-dir", str(shop.app)])
    out, err = capsys.readouterr()
    return code, out, err


def _sections(out: str) -> dict[str, str]:
    """`dlq list` of several pipelines: each part by the line that says whose it is."""
    parts: dict[str, str] = {}
    whose = None
    for line in out.splitlines():
        if line.startswith(("pipeline ", "outbox relay ")):
            whose = line.split(" ")[1]
            parts[whose] = ""
        elif whose is not None:
            parts[whose] += line + "\n"
    return parts


def test_send_refuses_without_function_naming_both_and_sends_to_the_one_named(shop: Shop, capsys) -> None:
    orders, movies = (str(shop.app.parent / f"{name}.jsonl") for name in ("orders", "movies"))

    code, out, err = _run(shop, capsys, "send", orders)
    assert code == 2, err
    assert err.startswith(f"error: stack {STACK} has 2 pipelines: {STACK}/Movies (")
    assert f", {STACK}/Orders (" in err and "choose one with --function NAME" in err
    assert "e.g. --function Movies" in err

    code, out, err = _run(shop, capsys, "send", orders, "--function", "Orders")  # the construct id
    assert code == 0, err
    assert out.startswith("2 messages in 2 groups: 2 published")
    code, out, err = _run(shop, capsys, "send", movies, "--function", f"{STACK}/Movies")  # its path
    assert code == 0, err
    assert out.startswith("3 messages in 3 groups: 3 published")
    shop.steps.add("send")


def test_local_run_drain_runs_both_pipelines_and_the_plain_function(shop: Shop, capsys) -> None:
    shop.after("send")

    code, out, err = _run(shop, capsys, "local", "run", "--drain")

    assert code == 1, out + err  # messages went to the dead-letter queues
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("7 messages: 2 processed, 0 duplicate, 3 quarantined, 0 failed, 2 succeeded")
    assert (shop.dead_letters("Orders"), shop.dead_letters("Movies")) == (1, 2)
    shop.steps.add("drain")


def test_dlq_list_without_function_lists_both_pipelines_saying_whose(shop: Shop, capsys) -> None:
    shop.after("drain")

    code, out, err = _run(shop, capsys, "dlq", "list", *FAST)
    assert code == 0, err
    parts = _sections(out)
    assert list(parts) == [f"{STACK}/Movies", f"{STACK}/Orders"]
    assert "2 message(s): 2 visible, 0 in flight" in parts[f"{STACK}/Movies"]
    assert "1 message(s): 1 visible, 0 in flight" in parts[f"{STACK}/Orders"]
    assert "rejected             1  rating must be 1 to 5, got 9" in parts[f"{STACK}/Movies"]
    assert "rejected             1  rating must be 1 to 5, got 0" in parts[f"{STACK}/Movies"]
    assert "quantity must be a non-negative integer, got -1" in parts[f"{STACK}/Orders"]
    assert err.startswith(f"stack {STACK} has 2 dead-letter queues: {STACK}/Movies (")

    code, out, err = _run(shop, capsys, "dlq", "list", "--messages", "--json", *FAST)
    assert code == 0, err
    listed = json.loads(out)["dead_letter_queues"]
    assert [(q["pipeline"], q["read"]) for q in listed] == [(f"{STACK}/Movies", 2), (f"{STACK}/Orders", 1)]
    whose = {m["pipeline"] for q in listed for m in q["message_list"]}
    assert whose == {f"{STACK}/Movies", f"{STACK}/Orders"}

    code, out, err = _run(shop, capsys, "dlq", "list", "--function", "Movies", "--json", *FAST)
    assert code == 0, err
    assert (json.loads(out)["read"], err) == (2, "")


def test_dlq_show_finds_a_dead_letter_of_either_pipeline_and_says_whose(shop: Shop, capsys) -> None:
    shop.after("drain")
    code, out, err = _run(shop, capsys, "dlq", "list", "--messages", "--json", *FAST)
    heat = next(
        m["message_id"]
        for q in json.loads(out)["dead_letter_queues"]
        for m in q["message_list"]
        if "rating must be 1 to 5, got 9" in m["reason"]
    )

    code, out, err = _run(shop, capsys, "dlq", "show", heat, *FAST)
    assert code == 0, err
    assert '  {"title": "Heat", "year": "1995", "rating": 9}' in out.splitlines()
    assert err.endswith(f"{heat} is in the dead-letter queue of {STACK}/Movies\n")

    code, out, err = _run(shop, capsys, "dlq", "show", heat, "--function", "Orders", *FAST)
    assert code == 1 and f"error: no message {heat} " in err


def test_trace_looks_in_both_pipelines_or_in_the_one_named(shop: Shop, capsys) -> None:
    shop.after("drain")

    code, out, err = _run(shop, capsys, "trace", "o-1", "1", *FAST)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == f"the key was looked for in each that can key it (2): found in {STACK}/Orders"
    assert f"  {STACK}/Movies: not there (no record, no dead letter)" in lines
    assert any(line.startswith("table         stored: ") for line in lines)

    code, out, err = _run(shop, capsys, "trace", "Alien", "1979", "--function", f"{STACK}/Movies", *FAST)
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"key Alien#1979 (title 'Alien', year '1979') of {STACK}/")
    assert out.splitlines()[2].startswith("table         stored: ")

    movies = shop.outputs["MoviesFunction"]
    code, out, err = _run(shop, capsys, "trace", "Heat", "1995", "--function", movies, "--json", *FAST)
    assert code == 0, err
    traced = json.loads(out)
    assert (traced["pipeline"]["function"], traced["table"]["state"]) == (movies, "absent")
    assert [d["kind"] for d in traced["dead_letters"]] == ["rejected"]


def test_logs_cover_both_pipelines_or_any_function_named(shop: Shop, capsys) -> None:
    shop.after("drain")

    code, out, err = _run(shop, capsys, "logs")
    assert code == 0, err
    refused = [line for line in out.splitlines() if "record rejected" in line or "WARNING" in line]
    assert {line.split("  ")[0] for line in refused} == {f"{STACK}/Movies", f"{STACK}/Orders"}

    code, out, err = _run(shop, capsys, "logs", "--function", "Orders", "--key", "o-2#1")
    assert code == 0, err
    [line] = out.splitlines()
    assert "key=o-2#1" in line and "quantity must be a non-negative integer, got -1" in line

    code, out, err = _run(shop, capsys, "logs", "--function", "Notifier")  # a plain Lambda of the stack
    assert code == 0, err
    notified = [line for line in out.splitlines() if "notified" in line]
    assert [json.loads(line.split("notified ", 1)[1])["order_id"] for line in notified] == ["o-1", "o-2"]
    assert err.startswith(f"{STACK}/{shop.outputs['NotifierFunction']}: lines the local runner wrote to ")


def test_redrive_and_purge_refuse_without_function_and_change_only_the_one_named(shop: Shop, capsys) -> None:
    shop.after("drain")
    for command in (("dlq", "redrive"), ("dlq", "purge", "--yes")):
        code, out, err = _run(shop, capsys, *command, *FAST)
        assert (code, out) == (2, ""), err
        assert err.startswith(f"error: stack {STACK} has 2 pipelines: {STACK}/Movies (")
    assert (shop.dead_letters("Orders"), shop.dead_letters("Movies")) == (1, 2)

    path = f"{STACK}/Orders/Consumer/Function"  # a path down to the function
    code, out, err = _run(shop, capsys, "dlq", "redrive", "--function", path, *FAST)
    assert code == 0, err
    assert "1 redriven" in out
    assert (shop.dead_letters("Orders"), shop.dead_letters("Movies")) == (0, 2)

    movies = shop.outputs["MoviesFunction"]  # its function's name
    code, out, err = _run(shop, capsys, "dlq", "purge", "--function", movies, "--yes", *FAST)
    assert code == 0, err
    assert "deleted 2; 0 left in the queue" in out
    assert (shop.dead_letters("Orders"), shop.dead_letters("Movies")) == (0, 0)
