"""Lambda durable functions in the local cloud, row by row of AWS's table ("Idempotency" for durable
execution, Developer Guide): Invoke with or without ``DurableExecutionName`` against an execution that never
existed, one that is running and one that is closed, with the identical payload or another. The function's
handler runs once per execution. Plain boto3 calls against the emulator: no runtime of ours involved.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from stack_helpers import deploy

from idempotent_local.emulator import Emulator

# The handler counts its runs (a line per execution in RUNS_FILE) and holds its execution RUNNING until the
# test writes RELEASE_FILE; it succeeds with the payload's order, or fails when the payload says so.
HANDLER = """
import json, os, time
def handler(event, context):
    with open(os.environ["RUNS_FILE"], "a") as runs:
        runs.write(event["DurableExecutionArn"] + "\\n")
    while not os.path.exists(os.environ["RELEASE_FILE"]):
        time.sleep(0.05)
    order = json.loads(event["InitialExecutionState"]["Operations"][0]["ExecutionDetails"]["InputPayload"])
    if order.get("fail"):
        return {"Status": "FAILED", "Error": {"ErrorType": "OutOfStock", "ErrorMessage": order["y"]}}
    return {"Status": "SUCCEEDED", "Result": json.dumps({"shipped": order["y"]})}
"""
ORDER = b'{"x":"cust-7","y":"order-1"}'
OTHER = b'{"x":"cust-7","y":"order-2"}'
FAILING = b'{"x":"cust-7","y":"order-9","fail":true}'


def _zip(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("orders.py", text)
    return buffer.getvalue()


@pytest.fixture
def lam(clean_emulator: Emulator):
    return clean_emulator.client("lambda")


@pytest.fixture
def role(clean_emulator: Emulator) -> str:
    trust = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}]}
    iam = clean_emulator.client("iam")
    return iam.create_role(RoleName="orders", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]


@pytest.fixture
def function(lam, role: str, tmp_path: Path) -> str:
    """A durable function's version 1 (qualified ARN)."""
    lam.create_function(
        FunctionName="orders",
        Runtime="python3.11",
        Role=role,
        Handler="orders.handler",
        Code={"ZipFile": _zip(HANDLER)},
        Timeout=60,
        Environment={
            "Variables": {"RUNS_FILE": str(tmp_path / "runs"), "RELEASE_FILE": str(tmp_path / "release")}
        },
        DurableConfig={"ExecutionTimeout": 3600, "RetentionPeriodInDays": 14},
    )
    return lam.publish_version(FunctionName="orders")["FunctionArn"]


def _start(lam, function: str, payload: bytes, name: str | None = "order-1", **extra: Any) -> dict[str, Any]:
    named = {"DurableExecutionName": name} if name is not None else {}
    return lam.invoke(FunctionName=function, InvocationType="Event", Payload=payload, **named, **extra)


def _status(lam, arn: str, wanted: str | None = None) -> str:
    deadline = time.monotonic() + 30
    while True:
        status = lam.get_durable_execution(DurableExecutionArn=arn)["Status"]
        if wanted is None or status == wanted or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def _runs(tmp_path: Path) -> list[str]:
    runs = tmp_path / "runs"
    return runs.read_text().splitlines() if runs.exists() else []


def _listed(lam) -> list[tuple[str, str]]:
    found = lam.list_durable_executions_by_function(FunctionName="orders", Qualifier="1")["DurableExecutions"]
    return sorted((e["DurableExecutionName"], e["Status"]) for e in found)


def test_without_a_name_every_invoke_starts_a_new_execution(lam, function, tmp_path):  # scenario 1
    (tmp_path / "release").touch()
    first, second = _start(lam, function, ORDER, None), _start(lam, function, ORDER, None)
    assert first["DurableExecutionArn"] != second["DurableExecutionArn"]
    assert [_status(lam, r["DurableExecutionArn"], "SUCCEEDED") for r in (first, second)] == ["SUCCEEDED"] * 2
    assert sorted(_runs(tmp_path)) == sorted([first["DurableExecutionArn"], second["DurableExecutionArn"]])


def test_a_new_name_starts_an_execution_pinned_to_the_version_and_runs_its_handler_once(
    lam, function, tmp_path
):  # scenario 2
    started = _start(lam, function, ORDER)
    arn = started["DurableExecutionArn"]
    assert started["StatusCode"] == 202 and arn.startswith(f"{function}/durable-execution/order-1/")
    assert _status(lam, arn) == "RUNNING"
    (tmp_path / "release").touch()
    assert _status(lam, arn, "SUCCEEDED") == "SUCCEEDED"
    described = lam.get_durable_execution(DurableExecutionArn=arn, IncludeExecutionData=True)
    assert (described["InputPayload"], json.loads(described["Result"])) == (
        ORDER.decode(),
        {"shipped": "order-1"},
    )
    assert "InputPayload" not in lam.get_durable_execution(DurableExecutionArn=arn)  # data only when asked
    assert _runs(tmp_path) == [arn]


def test_a_running_execution_is_returned_for_the_same_payload_and_refused_for_another(
    lam, function, tmp_path
):  # scenarios 3 and 4
    arn = _start(lam, function, ORDER)["DurableExecutionArn"]
    assert _start(lam, function, ORDER)["DurableExecutionArn"] == arn
    with pytest.raises(ClientError) as refused:
        _start(lam, function, OTHER)
    assert refused.value.response["Error"]["Code"] == "DurableExecutionAlreadyStartedException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    assert _listed(lam) == [("order-1", "RUNNING")]
    (tmp_path / "release").touch()  # a synchronous invoke re-attaches: the running execution's result
    reattached = lam.invoke(FunctionName=function, DurableExecutionName="order-1", Payload=ORDER)
    assert json.loads(reattached["Payload"].read()) == {"shipped": "order-1"}
    assert _runs(tmp_path) == [arn]


def test_a_closed_execution_is_returned_for_the_same_payload_and_refused_for_another(
    lam, function, tmp_path
):  # scenarios 5 and 6
    (tmp_path / "release").touch()
    failed = _start(lam, function, FAILING, "order-9")
    succeeded = _start(lam, function, ORDER)
    for started, status in ((failed, "FAILED"), (succeeded, "SUCCEEDED")):
        assert _status(lam, started["DurableExecutionArn"], status) == status
    assert _start(lam, function, ORDER)["DurableExecutionArn"] == succeeded["DurableExecutionArn"]
    again = lam.invoke(FunctionName=function, DurableExecutionName="order-9", Payload=FAILING)
    assert (again["FunctionError"], json.loads(again["Payload"].read())["ErrorType"]) == (
        "Unhandled",
        "OutOfStock",
    )
    for name in ("order-1", "order-9"):
        with pytest.raises(ClientError, match="DurableExecutionAlreadyStartedException"):
            _start(lam, function, OTHER, name)
    assert _listed(lam) == [("order-1", "SUCCEEDED"), ("order-9", "FAILED")]
    assert len(_runs(tmp_path)) == 2


def test_names_are_unique_per_account_and_region_across_functions(lam, role, function, tmp_path):
    (tmp_path / "release").touch()
    lam.create_function(
        FunctionName="invoices",
        Runtime="python3.11",
        Role=role,
        Handler="orders.handler",
        Code={"ZipFile": _zip(HANDLER)},
        DurableConfig={"ExecutionTimeout": 3600},
    )
    arn = _start(lam, function, ORDER)["DurableExecutionArn"]
    with pytest.raises(ClientError, match="DurableExecutionAlreadyStartedException"):
        _start(lam, "invoices:$LATEST", OTHER)
    assert _start(lam, "invoices:$LATEST", ORDER)["DurableExecutionArn"] == arn


def test_executions_are_listed_one_version_at_a_time_as_aws_lists_them(lam, function, tmp_path):
    """ListDurableExecutionsByFunction: the Qualifier's version (an alias: the version it points to),
    $LATEST's without one; the name filter keeps the names that contain it."""
    (tmp_path / "release").touch()
    first = _start(lam, function, ORDER)["DurableExecutionArn"]
    lam.update_function_configuration(FunctionName="orders", Description="the second version")
    lam.get_waiter("function_updated_v2").wait(FunctionName="orders")
    second = lam.publish_version(FunctionName="orders")["FunctionArn"]
    lam.create_alias(FunctionName="orders", Name="live", FunctionVersion="2")
    later = _start(lam, "orders:live", OTHER, "order-10")["DurableExecutionArn"]
    assert later.startswith(f"{second}/durable-execution/order-10/")

    def listed(**request: Any) -> list[str]:
        found = lam.list_durable_executions_by_function(FunctionName="orders", **request)
        return sorted(e["DurableExecutionArn"] for e in found["DurableExecutions"])

    assert listed() == []  # $LATEST started none
    assert listed(Qualifier="1") == [first]
    assert listed(Qualifier="2") == listed(Qualifier="live") == [later]
    by_arn = lam.list_durable_executions_by_function(FunctionName=function)["DurableExecutions"]
    assert [e["DurableExecutionArn"] for e in by_arn] == [first]  # a qualified ARN names its version
    assert listed(Qualifier="1", DurableExecutionName="order") == [first]  # "order-1" contains "order"
    versions = lam.list_versions_by_function(FunctionName=function.rsplit(":", 1)[0])["Versions"]
    assert [v["Version"] for v in versions] == ["$LATEST", "1", "2"]  # by ARN as by name
    assert listed(Qualifier="2", DurableExecutionName="order-1") == [later]  # "order-10" contains it too


def test_a_durable_function_is_invoked_qualified_only_and_by_valid_names(
    clean_emulator, lam, function, tmp_path
):
    with pytest.raises(ClientError, match="invoke it with a qualified identifier"):
        _start(lam, "orders", ORDER)
    # Names botocore itself would refuse, sent anyway: the emulator refuses them as Lambda does.
    unchecked = boto3.session.Session(
        aws_access_key_id="local-cloud", aws_secret_access_key="local-cloud", region_name=lam.meta.region_name
    ).client("lambda", endpoint_url=clean_emulator.endpoint, config=Config(parameter_validation=False))
    for name in ("order 1", "o" * 65, "order/1", "commande-é"):
        with pytest.raises(ClientError, match="InvalidParameterValueException"):
            _start(unchecked, function, ORDER, name)
    assert _listed(lam) == [] and _runs(tmp_path) == []


def test_a_dry_run_with_a_name_only_validates_and_a_real_invoke_then_runs_the_handler(
    lam, function, tmp_path
):
    (tmp_path / "release").touch()
    dry = lam.invoke(
        FunctionName=function, InvocationType="DryRun", DurableExecutionName="order-1", Payload=ORDER
    )
    assert dry["StatusCode"] == 204 and "DurableExecutionArn" not in dry
    assert _listed(lam) == [] and _runs(tmp_path) == []  # nothing started, nothing ran
    with pytest.raises(ClientError, match="invoke it with a qualified identifier"):  # still validated
        lam.invoke(
            FunctionName="orders", InvocationType="DryRun", DurableExecutionName="order-1", Payload=ORDER
        )
    done = lam.invoke(FunctionName=function, DurableExecutionName="order-1", Payload=ORDER)
    assert json.loads(done["Payload"].read()) == {"shipped": "order-1"}
    assert _listed(lam) == [("order-1", "SUCCEEDED")] and len(_runs(tmp_path)) == 1


def test_a_template_s_durable_config_and_version_deploy_as_in_aws(clean_emulator: Emulator):
    trust = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}]}
    template = {
        "Resources": {
            "FulfilRole": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}},
            "Fulfil": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Code": {"ZipFile": "def handler(event, context):\n    return {'Status': 'SUCCEEDED'}\n"},
                    "Handler": "index.handler",
                    "Role": {"Fn::GetAtt": ["FulfilRole", "Arn"]},
                    "Runtime": "python3.11",
                    "DurableConfig": {"ExecutionTimeout": 900, "RetentionPeriodInDays": 14},
                },
            },
            "FulfilVersion": {
                "Type": "AWS::Lambda::Version",
                "Properties": {"FunctionName": {"Ref": "Fulfil"}},
            },
        },
        "Outputs": {
            "Version": {"Value": {"Fn::GetAtt": ["FulfilVersion", "Version"]}},
            "FunctionArn": {"Value": {"Fn::GetAtt": ["FulfilVersion", "FunctionArn"]}},
        },
    }
    ids = deploy(clean_emulator, template, stack="Durable")
    lam = clean_emulator.client("lambda")
    # A version's Ref is its ARN (what a consumer invokes), its attributes AWS's.
    arn = lam.get_function_configuration(FunctionName=ids["Fulfil"])["FunctionArn"]
    assert ids["FulfilVersion"] == f"{arn}:1"
    stack = clean_emulator.client("cloudformation").describe_stacks(StackName="Durable")["Stacks"][0]
    assert {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]} == {
        "Version": "1",
        "FunctionArn": f"{arn}:1",
    }
    for qualified in (ids["Fulfil"], f"{ids['Fulfil']}:1"):
        configuration = lam.get_function_configuration(FunctionName=qualified)
        assert configuration["DurableConfig"] == {"ExecutionTimeout": 900, "RetentionPeriodInDays": 14}
