"""A new user's path, outside the checkout: the built wheel with the `local` extra in a fresh venv,
`idempotent-pipeline init shop`, `local deploy` (with a compiled dependency in src/requirements.txt),
messages published, `local run --drain`, the DLQ tool, `local destroy`.

The wheel goes into a fresh venv with --no-deps (as `pip install "<wheel>[local]"` names it); aws-cdk-lib,
moto and the other dependencies come from the project's venv through a .pth file (fast, no download). The
pinned CDK CLI comes from the tool's cache, pre-filled from the checkout's node_modules: nothing is
downloaded. The tests of this module run in order and share one app.
"""

from __future__ import annotations

import json
import subprocess
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from idempotent_local import emulator as emulators
from tests.wheelhouse import (
    assert_destroyed,
    build_wheel,
    install_wheel,
    this_python_tag,
    user_environment,
    write_wheel,
)

# One app shared by the module's tests, in order: they run on one xdist worker (make test: --dist loadfile).
pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

if not (REPO / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


@dataclass
class Shop:
    work: Path
    venv: Path
    wheel: Path
    app: Path
    env: dict[str, str]
    deployed: subprocess.CompletedProcess[str]
    steps: set[str] = field(default_factory=set)  # the steps of the path done so far, in this process
    found: dict[str, str] = field(default_factory=dict)  # what the tool printed, for later steps

    def after(self, step: str) -> None:
        """Fail clearly when a test runs without the step it builds on (e.g. split across workers)."""
        if step not in self.steps:
            pytest.fail(f"this test builds on {step!r}, which did not run before it in this process")

    def command(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "idempotent-pipeline"), *args],
            cwd=cwd or self.app,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )

    @property
    def emulator(self) -> emulators.Emulator:
        found = emulators.find(self.app / ".local-cloud")
        assert found is not None, "the shop's emulator is not running"
        return found

    def outputs(self) -> dict[str, str]:
        stack = self.emulator.client("cloudformation").describe_stacks(StackName="Shop")["Stacks"][0]
        return {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    work = tmp_path_factory.mktemp("new-user")
    wheel = build_wheel(work)
    venv = install_wheel(wheel, work / "venv", [Path(sysconfig.get_paths()["purelib"])])
    # The processor's own dependency, a compiled one: a wheel for the function's runtime in AWS and one for
    # this machine's Python, in a directory pip reads instead of an index.
    wheelhouse = work / "wheelhouse"
    wheelhouse.mkdir()
    for tag, built_for in (("cp314-cp314-manylinux2014_aarch64", "lambda"), (this_python_tag(), "here")):
        write_wheel(
            wheelhouse, "nativeonly", "1.0", tag, {"nativeonly/__init__.py": f"BUILT_FOR = {built_for!r}\n"}
        )
    env = user_environment(venv, work, PIP_FIND_LINKS=str(wheelhouse), PIP_NO_INDEX="1")
    init = subprocess.run(
        [str(venv / "bin" / "idempotent-pipeline"), "init", "shop"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stdout + init.stderr
    app = work / "shop"
    (app / "src" / "requirements.txt").write_text("nativeonly\n")
    processor = app / "src" / "orders.py"
    processor.write_text(
        "import nativeonly\n"
        + processor.read_text().replace(
            '"total_cents": quantity * unit_cents}',
            '"total_cents": quantity * unit_cents, "built_for": nativeonly.BUILT_FOR}',
        )
    )
    shop = Shop(work, venv, wheel, app, env, deployed=subprocess.CompletedProcess([], 0))
    shop.deployed = shop.command("local", "deploy")
    try:
        yield shop
    finally:
        emulators.stop(app / ".local-cloud")


def test_the_tool_runs_from_the_installed_wheel(shop: Shop) -> None:
    probe = "import idempotent_cli, idempotent_local, idempotent_runtime as r; print(r.__file__)"
    result = subprocess.run(
        [str(shop.venv / "bin" / "python"), "-c", probe],
        env=shop.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(result.stdout.strip()).resolve().is_relative_to(shop.venv.resolve())
    requirements = (shop.app / "requirements.txt").read_text()
    assert f"installed from the wheel {shop.wheel.name}." in requirements
    assert "file:" not in requirements and str(shop.work) not in requirements  # portable


def test_local_deploy_deploys_the_new_app_and_publishes_nothing(shop: Shop) -> None:
    printed = shop.deployed.stdout
    assert shop.deployed.returncode == 0, printed + shop.deployed.stderr
    assert f"state in {shop.app / '.local-cloud'}/" in printed
    assert "    Shop: CREATE_COMPLETE," in printed
    assert "running the pipeline" not in printed  # no demo traffic into the user's pipeline
    assert "make " not in printed
    assert "    idempotent-pipeline local run " in printed
    outputs = shop.outputs()
    sqs, dynamodb = shop.emulator.client("sqs"), shop.emulator.client("dynamodb")
    attributes = sqs.get_queue_attributes(QueueUrl=outputs["QueueUrl"], AttributeNames=["All"])["Attributes"]
    assert (
        attributes["ApproximateNumberOfMessages"]
        == attributes["ApproximateNumberOfMessagesNotVisible"]
        == "0"
    )
    assert dynamodb.scan(TableName=outputs["TableName"])["Items"] == []


def test_no_node_banner_reached_the_cdk_output(shop: Shop) -> None:
    for log in (shop.app / ".local-cloud").glob("cdk-*.log"):
        text = log.read_text()
        assert "NodeVersionSupportWarning" not in text, log.name
        assert "end-of-life" not in text, log.name


def _send(shop: Shop, lines: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """As the README: the lines in a file, `idempotent-pipeline send FILE --local` from inside the app."""
    path = shop.app / "orders.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return shop.command("send", "orders.jsonl", "--local")


def test_send_publishes_the_users_lines_and_local_run_processes_them(shop: Shop) -> None:
    tea = {"order_id": "o-1", "line_id": "1", "sku": "tea", "quantity": 2, "unit_cents": 450}
    lines = [
        tea,
        {**tea, "quantity": 3},  # a conflict: new content under a used key
        {"order_id": "o-2", "line_id": "1", "quantity": -1, "unit_cents": 450},  # rejected
        {"order_id": "o-3", "line_id": "1", "sku": "coffee", "quantity": 1},  # priced
        {"order_id": "o-4", "line_id": "1", "sku": "cocoa", "quantity": 1},  # transient: no price
    ]
    sent = _send(shop, lines)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert sent.stdout.startswith("5 messages in 4 groups: 5 published (")
    topic = shop.outputs()["TopicArn"]
    assert f"to the topic {topic} (FIFO; keys as the consumer Shop-" in sent.stderr
    again = _send(shop, lines)  # the same file again: SNS drops every line (the same ids within 5 minutes)
    assert again.returncode == 0, again.stdout + again.stderr
    # As a script would: process everything published, then stop (exit code 1: messages reached the DLQ).
    ran = shop.command("local", "run", "--drain", "--wait", "1", "--retry-delay", "0", cwd=shop.app / "src")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    out = ran.stdout
    outputs = shop.outputs()
    dynamodb, sqs = shop.emulator.client("dynamodb"), shop.emulator.client("sqs")
    scanned = dynamodb.scan(TableName=outputs["TableName"])["Items"]
    # The order lines, beside the runtime's own records (keys in its reserved namespace).
    items = {
        item["order_id"]["S"]: item
        for item in scanned
        if not item["order_id"]["S"].startswith("idempotency#")
    }
    assert set(items) == {"o-1", "o-3"}
    assert (items["o-1"]["total_cents"], items["o-3"]["total_cents"]) == ({"N": "900"}, {"N": "380"})
    # The compiled dependency the function imports: installed for this machine by `local deploy`.
    assert items["o-1"]["built_for"] == {"S": "here"}
    letters = sqs.receive_message(
        QueueUrl=outputs["DeadLetterQueueUrl"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    for letter in letters:  # looked at, left for the operator (the next test reads them with the DLQ tool)
        sqs.change_message_visibility(
            QueueUrl=outputs["DeadLetterQueueUrl"], ReceiptHandle=letter["ReceiptHandle"], VisibilityTimeout=0
        )
    kinds = {
        json.loads(m["Body"])["order_id"]: json.loads(
            m["MessageAttributes"]["idempotency.details"]["StringValue"]
        )["kind"]
        for m in letters
    }
    assert kinds == {"o-1": "conflict", "o-2": "rejected", "o-4": "exhausted"}
    batches = [line for line in out.splitlines() if " -> " in line and " | " in line]
    assert batches and all(line.startswith("Shop-") for line in batches), out
    # One final outcome per message: the transient one failed four times before it was quarantined.
    assert (
        out.strip()
        .splitlines()[-1]
        .startswith(
            "5 messages: 2 processed, 0 duplicate, 3 quarantined, 0 failed (1 conflict); 9 deliveries"
        )
    )
    shop.steps.add("published")


def test_dlq_list_shows_why_each_message_is_there(shop: Shop) -> None:
    shop.after("published")
    listed = shop.command("dlq", "list", "--local", cwd=shop.app / "src")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    text = listed.stdout
    assert "3 message(s)" in text
    assert "conflict" in text and "is already done with another payload" in text
    assert "rejected" in text and "quantity must be a non-negative integer, got -1" in text
    assert "exhausted" in text and "no price for sku 'cocoa' yet" in text


def test_after_a_fix_dlq_redrive_processes_the_transient_message_exactly_once(shop: Shop) -> None:
    shop.after("published")
    # The fix: the price exists now. Redeploy the function, then put the message back.
    processor = shop.app / "src" / "orders.py"
    processor.write_text(processor.read_text().replace('"coffee": 380}', '"coffee": 380, "cocoa": 300}'))
    redeployed = shop.command("local", "deploy")
    assert redeployed.returncode == 0, redeployed.stdout + redeployed.stderr
    dry = shop.command("dlq", "redrive", "--local", "--reason", "exhausted", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "dry run: 1 new; 1 would be redriven; nothing was changed" in dry.stdout
    redriven = shop.command("dlq", "redrive", "--local", "--reason", "exhausted", "--yes")
    assert redriven.returncode == 0, redriven.stdout + redriven.stderr
    outputs = shop.outputs()
    dynamodb = shop.emulator.client("dynamodb")

    def lines(order_id: str) -> list[dict[str, Any]]:
        return [
            item
            for item in dynamodb.scan(TableName=outputs["TableName"])["Items"]
            if item["order_id"]["S"] == order_id
        ]

    ran = shop.command("local", "run", "--drain", "--wait", "1", "--retry-delay", "0")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    (cocoa,) = lines("o-4")
    assert (cocoa["total_cents"], cocoa["unit_cents"]) == ({"N": "300"}, {"N": "300"})
    assert out.strip().splitlines()[-1].startswith("1 message: 1 processed, 0 duplicate, 0 quarantined")
    left = shop.command("dlq", "list", "--local", "--json")
    assert left.returncode == 0, left.stderr
    kinds = sorted(reason["kind"] for reason in json.loads(left.stdout)["reasons"])
    assert kinds == ["conflict", "rejected"]  # the other two stay, with their reasons
    # Nothing is left to redrive for that reason.
    again = shop.command("dlq", "redrive", "--local", "--reason", "exhausted", "--dry-run")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "dry run: no message; nothing was changed" in again.stdout


def test_the_app_switched_to_versioned_mode_keeps_the_newest_state_and_counts_older_ones_stale(
    shop: Shop,
) -> None:
    """As a user would: edit the generated app to versioned mode on a standard queue, deploy, send."""
    app_py = shop.app / "app.py"
    original = app_py.read_text()
    app_py.write_text(
        original.replace("MessagingOptions(fifo=True,", "MessagingOptions(fifo=False,").replace(
            'processor="orders:handle",',
            'processor="orders:handle", mode="versioned", version_field="version",',
        )
    )
    try:
        deployed = shop.command("local", "deploy")
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        line = {"order_id": "o-9", "line_id": "1", "sku": "tea", "unit_cents": 450}
        drains = []
        for version, quantity in ((3, 3), (1, 1)):  # the newer first, then an older one arriving late
            sent = _send(shop, [{**line, "quantity": quantity, "version": version}])
            assert sent.returncode == 0, sent.stdout + sent.stderr
            drains.append(shop.command("local", "run", "--drain", "--wait", "1", "--retry-delay", "0"))
        assert [d.returncode for d in drains] == [0, 0], [d.stdout + d.stderr for d in drains]
        assert "1 processed" in drains[0].stdout and "1 stale" in drains[1].stdout, drains[1].stdout
        item = shop.emulator.client("dynamodb").get_item(
            TableName=shop.outputs()["TableName"], Key={"order_id": {"S": "o-9"}, "line_id": {"S": "1"}}
        )["Item"]
        assert (item["quantity"], item["version"], item["total_cents"]) == (
            {"N": "3"},
            {"N": "3"},
            {"N": "1350"},
        )
    finally:
        app_py.write_text(original)


# The worked example of docs/local-cloud.md, "An init app that starts a durable function": the dispatcher and
# the durable function's code as the user writes them, and the lines app.py gains.
DISPATCHER = """import os

from idempotent_runtime.durable import start_durable_execution_once


def start(message):
    return start_durable_execution_once(message, os.environ["DURABLE_FUNCTION_ARN"], message.json_object())
"""
FULFILMENT = """import json


def handler(event, context):
    line = json.loads(event["InitialExecutionState"]["Operations"][0]["ExecutionDetails"]["InputPayload"])
    print(json.dumps({"fulfilling": line}))
    return {"Status": "SUCCEEDED", "Result": json.dumps({"packed": line["sku"]})}
"""
DURABLE_FUNCTION = """        fulfil = lambda_.Function(
            self,
            "Fulfil",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="fulfil.handler",
            code=lambda_.Code.from_asset(str(HERE / "fulfilment")),
            durable_config=lambda_.DurableConfig(
                execution_timeout=cdk.Duration.minutes(15), retention_period=cdk.Duration.days(14)
            ),
        )
        pipeline = IdempotentPipeline("""


def test_the_app_switched_to_a_durable_function_starts_one_execution_per_key_and_dead_letters_a_conflict(
    shop: Shop,
) -> None:
    """As a user would: the generated app switched to a durable function (guarded mode, a dispatcher),
    deployed, every line delivered twice, then another payload for a used key."""
    app_py, dispatcher = shop.app / "app.py", shop.app / "src" / "dispatch.py"
    original = app_py.read_text()
    dispatcher.write_text(DISPATCHER)
    (shop.app / "fulfilment").mkdir()
    (shop.app / "fulfilment" / "fulfil.py").write_text(FULFILMENT)
    app_py.write_text(
        original.replace(
            "import aws_cdk as cdk  # noqa: E402",
            "import aws_cdk as cdk  # noqa: E402\nfrom aws_cdk import aws_lambda as lambda_  # noqa: E402",
        )
        .replace("        pipeline = IdempotentPipeline(", DURABLE_FUNCTION)
        .replace(
            'processor="orders:handle",',
            'processor="dispatch:start", mode="guarded",\n'
            '                environment={"DURABLE_FUNCTION_ARN": fulfil.current_version.function_arn},',
        )
        .replace(
            "        outputs = {",
            "        pipeline.consumer.grant_start_durable_execution(fulfil.current_version)\n"
            "        outputs = {",
        )
    )
    try:
        deployed = shop.command("local", "deploy")
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        outputs, emulator = shop.outputs(), shop.emulator
        sns, lam = emulator.client("sns"), emulator.client("lambda")
        lines = [
            {"order_id": "o-21", "line_id": "1", "sku": "tea", "quantity": 2},
            {"order_id": "o-22", "line_id": "1", "sku": "coffee", "quantity": 1},
        ]
        for copy, line in [(copy, line) for copy in range(2) for line in lines]:  # each line delivered twice
            sns.publish(
                TopicArn=outputs["TopicArn"],
                Message=json.dumps(line),
                MessageGroupId=line["order_id"],
                MessageDeduplicationId=f"{line['order_id']}-{copy}",
            )
        ran = shop.command("local", "run", "--drain", "--wait", "1", "--retry-delay", "0")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout.strip().splitlines()[-1].startswith("4 messages: 2 processed, 2 duplicate"), (
            ran.stdout
        )
        function = next(
            f["FunctionName"] for f in lam.list_functions()["Functions"] if "Fulfil" in f["FunctionName"]
        )
        version_one = {"FunctionName": function, "Qualifier": "1"}  # the version app.py deployed
        executions = lam.list_durable_executions_by_function(**version_one)["DurableExecutions"]
        assert sorted(e["DurableExecutionName"] for e in executions) == ["o-21_1", "o-22_1"]

        sent = _send(shop, [{**lines[0], "quantity": 5}])  # the same key, another payload
        assert sent.returncode == 0, sent.stdout + sent.stderr
        ran = shop.command("local", "run", "--drain", "--wait", "1", "--retry-delay", "0")
        assert ran.returncode == 1, ran.stdout + ran.stderr  # a message reached the DLQ
        assert "1 quarantined" in ran.stdout and "(1 conflict)" in ran.stdout, ran.stdout
        listed = shop.command("dlq", "list", "--local", "--json")
        reasons = json.loads(listed.stdout)["reasons"]
        assert any(r["kind"] == "conflict" and "o-21#1" in json.dumps(r) for r in reasons), reasons
        assert len(lam.list_durable_executions_by_function(**version_one)["DurableExecutions"]) == 2
    finally:
        app_py.write_text(original)
        dispatcher.unlink()


def test_outside_the_app_the_tool_refuses_instead_of_starting_another_emulator(shop: Shop) -> None:
    refused = shop.command("local", "deploy", cwd=shop.work)
    assert refused.returncode == 1
    assert "no CDK app here" in refused.stderr and f"Emulator state found for: {shop.app}" in refused.stderr
    assert not (shop.work / ".local-cloud").exists()
    named = shop.command("local", "status", "--app-dir", "shop", cwd=shop.work)
    assert named.returncode == 0 and f"emulator: {shop.emulator.endpoint}" in named.stdout
    assert "    TopicArn = arn:aws:sns:" in named.stdout
    assert "BootstrapVersion" not in named.stdout  # the bootstrap stack's outputs are not the user's


def test_local_destroy_removes_the_stack_and_stops_the_emulator(shop: Shop) -> None:
    pid = shop.emulator.pid
    assert_destroyed(shop.command("local", "destroy"), shop.app, pid)
