"""Start a Lambda durable function exactly once per key: guarded mode with
``idempotent_runtime.durable.start_durable_execution_once`` through the bundled handler, against moto's Lambda
taught durable functions as AWS documents them (the emulator's patch ``lambda-durable-executions``, applied
to this process's moto): an execution per name, the same name and payload return it (running or closed),
another payload is ``DurableExecutionAlreadyStartedException``, the handler runs once per execution.

The dispatcher and the durable function are the reference app's (examples/durable, examples/durable_function).
"""

from __future__ import annotations

import importlib
import io
import json
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from idempotent_runtime import durable, workflows
from idempotent_runtime.durable import durable_execution_name, start_durable_execution_once
from idempotent_runtime.message import Key
from idempotent_runtime.payload import sha256_hex
from idempotent_runtime.testing import message
from idempotent_runtime.workflows import PermanentError, execution_input
from runtime_helpers import (
    REGION,
    Clock,
    die_before_completion,
    dlq_details,
    dlq_reason,
    drain,
    event,
    log_lines,
    record,
    scan,
)

ROOT = Path(__file__).resolve().parents[2]
# The reference app's dispatcher, imported as a code asset holds it.
sys.path.insert(0, str(ROOT / "examples" / "durable"))

DAY = 24 * 3600
ORDER = {"x": "cust-7", "y": "order-1", "cents": 2500}
ACCOUNT = "123456789012"
# A durable function whose handler holds its execution RUNNING until the test writes RELEASE_FILE.
HELD = """
import json, os, time
def handler(event, context):
    with open(os.environ["RUNS_FILE"], "a") as runs:
        runs.write(event["DurableExecutionArn"] + "\\n")
    while not os.path.exists(os.environ["RELEASE_FILE"]):
        time.sleep(0.05)
    return {"Status": "SUCCEEDED", "Result": "{}"}
"""


@pytest.fixture(autouse=True)
def durable_lambda() -> Iterator[None]:
    """This process's moto taught durable functions (the emulator's patch), plain again afterwards."""
    from idempotent_local import durable_functions, patches

    durable_functions.install(None, patches._replace)
    workflows._durable.clear()
    yield
    durable_functions.EXECUTOR.stop()
    patches.revert()


def _client():
    return boto3.client(
        "lambda", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture
def lam():
    return _client()


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _shipped() -> dict[str, str]:
    return {p.name: p.read_text() for p in (ROOT / "examples" / "durable_function").glob("*.py")}


def _function(
    lam,
    tmp_path: Path,
    name: str = "fulfil",
    files: dict[str, str] | None = None,
    durable_config: bool = True,
) -> str:
    """A durable function (the shipped one unless ``files``), published: its version 1's ARN."""
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName=f"{name}-role", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    extra: dict[str, Any] = (
        {"DurableConfig": {"ExecutionTimeout": 900, "RetentionPeriodInDays": 14}} if durable_config else {}
    )
    lam.create_function(
        FunctionName=name,
        Runtime="python3.11",
        Role=role,
        Handler="fulfilment.handler" if files is None else "held.handler",
        Code={"ZipFile": _zip(files if files is not None else _shipped())},
        Environment={
            "Variables": {"RUNS_FILE": str(tmp_path / "runs"), "RELEASE_FILE": str(tmp_path / "release")}
        },
        Timeout=30,
        **extra,
    )
    return lam.publish_version(FunctionName=name)["FunctionArn"]


@pytest.fixture
def function(lam, tmp_path, monkeypatch) -> str:
    arn = _function(lam, tmp_path)
    monkeypatch.setenv("DURABLE_FUNCTION_ARN", arn)  # what the shipped order_dispatch.start reads
    return arn


def _executions(lam, function_name: str = "fulfil", wait: bool = True) -> list[dict[str, Any]]:
    """The executions of the function's version 1 (name, status, input), once none is RUNNING (``wait``)."""
    deadline = time.monotonic() + 30
    while True:
        listed = lam.list_durable_executions_by_function(FunctionName=function_name, Qualifier="1")[
            "DurableExecutions"
        ]
        if not wait or all(e["Status"] != "RUNNING" for e in listed) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return [
        {
            "name": e["DurableExecutionName"],
            "status": e["Status"],
            "input": lam.get_durable_execution(
                DurableExecutionArn=e["DurableExecutionArn"], IncludeExecutionData=True
            )["InputPayload"],
        }
        for e in listed
    ]


def _guarded(make_handler, clock=None, **config):
    config.setdefault("processor", "order_dispatch:start")
    return make_handler(clock=clock or Clock(), mode="guarded", **config)


def _result(dynamodb) -> tuple[str, Any]:
    (item,) = [i for i in scan(dynamodb) if (i["pk"]["S"], i["sk"]["S"]) == ("cust-7", "order-1")]
    return item["idempotency:status"]["S"], json.loads(item["idempotency:result"]["S"])


def test_a_new_key_starts_one_execution_named_for_the_key_its_handler_runs_and_its_arn_is_stored(
    make_handler, lam, function, dynamodb
):
    handler, _ = _guarded(make_handler)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    prefix = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:fulfil:1/durable-execution/cust-7_order-1/"
    assert result.outcome == "processed" and result.result.startswith(prefix)
    assert _executions(lam) == [
        {"name": "cust-7_order-1", "status": "SUCCEEDED", "input": execution_input(ORDER)}
    ]
    described = lam.get_durable_execution(DurableExecutionArn=result.result, IncludeExecutionData=True)
    assert json.loads(described["Result"]) == {"fulfilled": "order-1", "customer": "cust-7"}
    assert _result(dynamodb) == ("COMPLETED", result.result)


def test_a_duplicate_delivery_while_the_execution_runs_and_after_it_closed_returns_its_arn(
    make_handler, lam, tmp_path, monkeypatch
):
    monkeypatch.setenv("DURABLE_FUNCTION_ARN", _function(lam, tmp_path, files={"held.py": HELD}))
    handler, _ = _guarded(make_handler)
    (first,) = handler.process_batch(event(record(ORDER)), None)
    (running,) = handler.process_batch(event(record(ORDER)), None)
    assert lam.get_durable_execution(DurableExecutionArn=first.result)["Status"] == "RUNNING"
    (tmp_path / "release").touch()
    assert [e["status"] for e in _executions(lam)] == ["SUCCEEDED"]
    (closed,) = handler.process_batch(event(record(ORDER)), None)
    assert [(r.outcome, r.result) for r in (running, closed)] == [("duplicate", first.result)] * 2
    assert (tmp_path / "runs").read_text().splitlines() == [first.result]  # the handler ran once


def test_a_crash_between_the_invoke_and_the_completion_starts_nothing_new_on_redelivery(
    make_handler, lam, function, fresh_dynamodb, tmp_path
):
    clock = Clock()
    handler, _ = _guarded(make_handler, clock, client=fresh_dynamodb, lease_seconds=30)
    delivery = record(ORDER)
    die_before_completion(handler, fresh_dynamodb, delivery)
    (started,) = lam.list_durable_executions_by_function(FunctionName="fulfil", Qualifier="1")[
        "DurableExecutions"
    ]

    clock.now += 30 + 10 + 1  # the claim's lease (and its margin) expires; SQS delivers the message again
    delivery["attributes"]["ApproximateReceiveCount"] = "2"
    (again,) = handler.process_batch(event(delivery), None)
    assert (again.outcome, again.result) == ("processed", started["DurableExecutionArn"])
    assert len(_executions(lam)) == 1
    assert _result(fresh_dynamodb) == ("COMPLETED", started["DurableExecutionArn"])


def test_a_delivery_after_the_key_record_expired_finds_the_execution_lambda_keeps(
    make_handler, lam, function
):
    clock = Clock()
    handler, _ = _guarded(make_handler, clock)
    (first,) = handler.process_batch(event(record(ORDER)), None)
    clock.now += 8 * DAY  # past DEDUP_TTL_SECONDS (7 days), within the function's retention (14 days)
    (late,) = handler.process_batch(event(record(ORDER)), None)
    assert (late.outcome, late.result) == ("processed", first.result)
    assert len(_executions(lam)) == 1


def test_the_same_key_with_another_payload_is_a_conflict_quarantined_naming_both_and_starts_nothing(
    make_handler, lam, function, sqs, dlq_url
):
    clock = Clock()
    handler, stream = _guarded(make_handler, clock, dlq_url=dlq_url)
    (first,) = handler.process_batch(event(record(ORDER)), None)
    clock.now += 8 * DAY  # the key's record expired: only the execution remembers the first order
    other = {**ORDER, "cents": 9999}
    (result,) = handler.process_batch(event(record(other)), None)
    assert (result.outcome, result.conflict) == ("quarantined", True)
    assert _executions(lam) == [
        {"name": "cust-7_order-1", "status": "SUCCEEDED", "input": execution_input(ORDER)}
    ]
    (dead,) = drain(sqs, dlq_url)
    ours = sha256_hex(execution_input(other).encode())
    theirs = sha256_hex(execution_input(ORDER).encode())
    details = dlq_details(dead)
    assert (details["kind"], details["fingerprint"], details["stored_fingerprint"]) == (
        "conflict",
        ours,
        theirs,
    )
    assert dlq_reason(dead) == (
        f"conflict: execution {first.result} of key cust-7#order-1 exists with another input (fingerprint "
        f"{theirs}), this message's input fingerprint is {ours}"
    )
    assert log_lines(stream)[-1]["conflicts"] == 1


def test_a_conflict_after_a_deploy_finds_the_execution_an_older_version_started(
    make_handler, lam, function, sqs, dlq_url, monkeypatch
):
    """Lambda lists one version's executions at a time: the name the new version is refused is held by
    version 1's execution, and version 2 holds a longer name that contains it."""
    clock = Clock()
    handler, _ = _guarded(make_handler, clock, dlq_url=dlq_url)
    (first,) = handler.process_batch(event(record(ORDER)), None)
    lam.update_function_configuration(FunctionName="fulfil", Description="deployed again")
    second = lam.publish_version(FunctionName="fulfil")["FunctionArn"]
    monkeypatch.setenv("DURABLE_FUNCTION_ARN", second)
    (longer,) = handler.process_batch(event(record({**ORDER, "y": "order-10"})), None)
    assert longer.result.startswith(f"{second}/durable-execution/cust-7_order-10/")

    clock.now += 8 * DAY  # the key's record expired; version 2 is invoked now
    other = {**ORDER, "cents": 9999}
    asked: list[str] = []  # the Lambda operations the dispatcher sends: each one granted by the construct

    def ask(model, **_):
        asked.append("lambda:InvokeFunction" if model.name == "Invoke" else f"lambda:{model.name}")

    events = workflows.DURABLE_FUNCTIONS.client().meta.events
    events.register("before-call.lambda", ask)
    try:
        (result,) = handler.process_batch(event(record(other)), None)
    finally:
        events.unregister("before-call.lambda", ask)
    assert (result.outcome, result.conflict) == ("quarantined", True), result.reason
    granted = {*workflows.DURABLE_FUNCTION_ACTIONS, *workflows.DURABLE_LIST_ACTIONS}
    assert set(asked) <= granted | set(workflows.DURABLE_EXECUTION_ACTIONS), asked
    assert "lambda:ListVersionsByFunction" in asked  # version 2 holds no such execution: the others looked at
    (dead,) = drain(sqs, dlq_url)
    theirs = sha256_hex(execution_input(ORDER).encode())
    assert dlq_reason(dead) == (
        f"conflict: execution {first.result} of key cust-7#order-1 exists with another input (fingerprint "
        f"{theirs}), this message's input fingerprint is {sha256_hex(execution_input(other).encode())}"
    )
    assert [e["name"] for e in _executions(lam)] == ["cust-7_order-1"]  # version 1: nothing new started


def test_an_execution_started_with_other_json_text_of_the_same_value_counts_as_the_same(lam, function):
    delivery = message(ORDER, mode="guarded")
    text = b'{ "cents": 2500.0, "y": "order-1", "x": "cust-7" }'  # started by another tool, say
    started = lam.invoke(
        FunctionName=function,
        InvocationType="Event",
        DurableExecutionName=durable_execution_name(delivery.key),
        Payload=text,
    )["DurableExecutionArn"]
    assert start_durable_execution_once(delivery, function, ORDER, client=lam) == started
    assert len(_executions(lam)) == 1


def refused_by_lambda(name: str) -> str | None:
    """Why Invoke would refuse ``name`` as a DurableExecutionName, by the API reference's rules: 1-64
    characters of ``[a-zA-Z0-9-_]``."""
    if not 1 <= len(name) <= 64:
        return f"{len(name)} characters"
    wrong = [c for c in name if not (c.isascii() and (c.isalnum() or c in "-_"))]
    return f"holds {wrong!r}" if wrong else None


# Keys Lambda would refuse as names, and pairs that would share one if joined naively.
KEYS = [
    ("cust-7", "order-1"),
    ("c" * 40, "o" * 30),  # over 64 characters joined
    ("cust 7", "order-1"),
    ("cust#7", "order-1"),
    ("cust/7", "order:1"),
    ("café", "order-1"),
    ("顧客", "注文"),
    ("cust-7", "order-1\n"),  # a trailing newline
    ("cust-7\t", "order-1"),
    ("cust-7", "\x00order"),
    ("cust-7", "\u0085order"),
    ("cust.7", "order-1"),
    ("cust,7", "order-1"),  # differs from the one above only in a refused character
    ("a_b", "c"),
    ("a", "b_c"),
    ("A", "b"),
    ("a", "b"),
]


def test_names_are_valid_deterministic_and_distinct_for_every_key(make_handler, lam, function):
    handler, _ = _guarded(make_handler)
    results = handler.process_batch(event(*(record({**ORDER, "x": x, "y": y}) for x, y in KEYS)), None)
    assert [r.outcome for r in results] == ["processed"] * len(KEYS)
    names = [durable_execution_name(Key(x, y)) for x, y in KEYS]
    assert [refused_by_lambda(name) for name in names] == [None] * len(KEYS)
    assert len(set(names)) == len(KEYS)
    assert sorted(e["name"] for e in _executions(lam)) == sorted(names)
    assert [r.result.split("/")[2] for r in results] == names
    assert names[0] == "cust-7_order-1"
    assert names[1] == sha256_hex(json.dumps(["c" * 40, "o" * 30]).encode())  # the key's SHA-256
    assert [durable_execution_name(Key(x, y)) for x, y in KEYS] == names  # the same key, the same name


def test_the_function_must_be_qualified_and_nothing_is_invoked_otherwise(
    make_handler, lam, function, monkeypatch
):
    monkeypatch.setenv("DURABLE_FUNCTION_ARN", function.rsplit(":", 1)[0])
    handler, stream = _guarded(make_handler)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "Lambda invokes durable functions by version, alias or $LATEST only" in result.reason
    assert _executions(lam, wait=False) == []
    assert next(line for line in log_lines(stream) if line["level"] == "ERROR")["misconfigured"] == 1


def test_a_function_that_is_not_durable_is_a_misconfiguration_and_is_not_invoked(
    make_handler, lam, tmp_path, monkeypatch, dlq_url, sqs
):
    monkeypatch.setenv("DURABLE_FUNCTION_ARN", _function(lam, tmp_path, durable_config=False))
    handler, _ = _guarded(make_handler, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "has no DurableConfig, so Lambda does not name its invocations" in result.hint
    assert not (tmp_path / "runs").exists() and drain(sqs, dlq_url) == []


def test_a_missing_function_is_a_misconfiguration_naming_the_grant(make_handler, monkeypatch, dlq_url):
    monkeypatch.setenv("DURABLE_FUNCTION_ARN", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:gone:1")
    handler, _ = _guarded(make_handler, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "grant_start_durable_execution" in result.hint


def test_an_execution_of_another_function_holding_the_name_is_refused_not_taken_for_ours(
    make_handler, lam, function, tmp_path, monkeypatch, dlq_url, sqs
):
    """Lambda's guide says execution names are unique per account and region: the same name and payload
    sent to another function returns the first function's execution, which must not count as started."""
    other = _function(lam, tmp_path, name="invoice")
    start_durable_execution_once(message(ORDER, mode="guarded"), other, ORDER, client=lam)
    handler, _ = _guarded(make_handler, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record(ORDER)), None)
    assert (result.outcome, result.kind) == ("quarantined", "rejected")
    assert "is held by arn:aws:lambda:" in result.reason and ":function:invoice:1/" in result.reason
    assert _executions(lam) == [] and len(drain(sqs, dlq_url)) == 1


def test_an_alias_starts_the_version_it_points_to(lam, tmp_path):
    version = _function(lam, tmp_path)
    alias = lam.create_alias(FunctionName="fulfil", Name="live", FunctionVersion="1")["AliasArn"]
    arn = start_durable_execution_once(message(ORDER, mode="guarded"), alias, ORDER, client=lam)
    assert arn.startswith(f"{version}/durable-execution/cust-7_order-1/")


def test_a_payload_over_lambdas_limit_is_rejected_before_the_request(lam, function):
    """A payload the processor builds larger than the message (SQS's own limit is about Lambda's)."""
    big = {**ORDER, "note": "n" * workflows.MAX_DURABLE_PAYLOAD_BYTES}
    with pytest.raises(PermanentError, match=r"over Lambda's asynchronous invocation limit, 1048576$"):
        start_durable_execution_once(message(ORDER, mode="guarded"), function, big, client=lam)
    assert _executions(lam, wait=False) == []


def test_throttling_is_retried_then_left_to_sqs_and_the_retry_starts_one_execution(
    make_handler, function, monkeypatch, dynamodb
):
    from botocore.awsrequest import AWSResponse

    monkeypatch.setattr(workflows, "_calls", workflows.Retrier(sleep=lambda seconds: None))
    client, throttled = _client(), []

    def throttle(**_):
        if len(throttled) < 4:
            throttled.append(1)
            error = {"Error": {"Code": "TooManyRequestsException", "Message": "injected"}}
            return AWSResponse("https://lambda.invalid", 429, {}, None), {
                **error,
                "ResponseMetadata": {"HTTPStatusCode": 429},
            }
        return None

    client.meta.events.register("before-call.lambda.Invoke", throttle)
    handler, _ = _guarded(
        make_handler,
        processor=None,
        fn=lambda m: start_durable_execution_once(m, function, m.json_object(), client=client),
    )
    delivery = record(ORDER)
    (result,) = handler.process_batch(event(delivery), None)
    assert (result.outcome, result.misconfigured) == ("failed", False)
    assert "lambda Invoke of " in result.reason and "TooManyRequestsException" in result.reason
    assert len(throttled) == 4 and scan(dynamodb) == []  # the claim was released: the next delivery runs
    (again,) = handler.process_batch(event(delivery), None)
    assert again.outcome == "processed" and len(_executions(_client())) == 1


# -- an SDK that does not know DurableExecutionName ------------------------------------------------------


def _old_sdk_session() -> botocore.session.Session:
    """A botocore session whose Lambda model predates durable functions (no DurableExecutionName)."""
    session = botocore.session.get_session()
    loader = session.get_component("data_loader")
    load = loader.load_service_model

    def load_service_model(service_name, type_name, api_version=None):
        model = load(service_name, type_name, api_version)
        if service_name == "lambda" and type_name == "service-2":
            model = json.loads(json.dumps(model))
            model["shapes"]["InvocationRequest"]["members"].pop("DurableExecutionName")
        return model

    loader.load_service_model = load_service_model
    return session


def test_an_sdk_without_durable_execution_names_is_a_misconfiguration_never_a_quarantine(
    make_handler, function, dlq_url, sqs, tmp_path
):
    old = boto3.Session(botocore_session=_old_sdk_session(), region_name=REGION).client(
        "lambda", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    handler, _ = _guarded(
        make_handler,
        dlq_url=dlq_url,
        processor=None,
        fn=lambda m: start_durable_execution_once(m, function, m.json_object(), client=old),
    )
    (result,) = handler.process_batch(event(record(ORDER)), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "does not know Lambda Invoke's DurableExecutionName" in result.reason
    assert "bundle boto3>=1.42.1 with the function" in result.hint
    assert drain(sqs, dlq_url) == [] and _executions(_client(), wait=False) == []


def test_importing_the_dispatcher_with_such_an_sdk_writes_one_error_line_at_cold_start(monkeypatch, capsys):
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", boto3.Session(botocore_session=_old_sdk_session()))
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-consumer")
    try:
        importlib.reload(durable)
        (line,) = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    finally:
        monkeypatch.undo()
        importlib.reload(durable)
    assert (line["level"], line["function"]) == ("ERROR", "orders-consumer")
    assert "durable executions cannot be started at all" in line["message"]
    assert "bundle boto3>=1.42.1" in line["hint"]


def test_importing_the_dispatcher_with_a_current_sdk_writes_nothing(capsys):
    importlib.reload(durable)
    assert capsys.readouterr().out == ""
