"""A workflow started exactly once in the local cloud: the emulator creates a CDK state machine from its
template (of its type: moto alone makes every one STANDARD), and ``start_execution_once`` runs against it as
against AWS."""

from __future__ import annotations

import json
from typing import Any

import pytest
from idempotent_runtime.errors import Misconfiguration
from idempotent_runtime.testing import message
from idempotent_runtime.workflows import start_execution_once
from stack_helpers import deploy

from idempotent_local.emulator import Emulator


def _template(kind: str | None = None) -> dict[str, Any]:
    """The resources CDK writes for a logged, traced ``sfn.StateMachine`` (the reference app's demo)."""
    machine: dict[str, Any] = {
        "DefinitionString": json.dumps(
            {"StartAt": "Ship", "States": {"Ship": {"Type": "Pass", "End": True}}}
        ),
        "RoleArn": {"Fn::GetAtt": ["WorkflowRole", "Arn"]},
        "LoggingConfiguration": {
            "Destinations": [
                {"CloudWatchLogsLogGroup": {"LogGroupArn": {"Fn::GetAtt": ["WorkflowLogs", "Arn"]}}}
            ],
            "Level": "ALL",
        },
        "TracingConfiguration": {"Enabled": True},
    }
    if kind is not None:
        machine["StateMachineType"] = kind
    return {
        "Resources": {
            "WorkflowLogs": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 30}},
            "WorkflowRole": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "states.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ],
                    }
                },
            },
            "Workflow": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": machine,
                "DependsOn": ["WorkflowRole"],
            },
        },
        "Outputs": {"StateMachineArn": {"Value": {"Ref": "Workflow"}}},
    }


def test_a_deployed_state_machine_starts_one_execution_per_key(clean_emulator: Emulator) -> None:
    arn = deploy(clean_emulator, _template())["Workflow"]
    sfn = clean_emulator.client("stepfunctions")
    assert sfn.describe_state_machine(stateMachineArn=arn)["type"] == "STANDARD"
    delivery = message({"x": "cust-7", "y": "order-1"}, mode="guarded")
    started = start_execution_once(delivery, arn, delivery.json_object(), client=sfn)
    sfn.stop_execution(executionArn=started)
    assert start_execution_once(delivery, arn, delivery.json_object(), client=sfn) == started
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=arn)["executions"]] == ["cust-7_order-1"]


def test_a_deployed_express_state_machine_is_express(clean_emulator: Emulator) -> None:
    arn = deploy(clean_emulator, _template("EXPRESS"))["Workflow"]
    sfn = clean_emulator.client("stepfunctions")
    assert sfn.describe_state_machine(stateMachineArn=arn)["type"] == "EXPRESS"


def test_an_express_state_machine_is_refused_before_anything_starts(clean_emulator: Emulator) -> None:
    arn = deploy(clean_emulator, _template("EXPRESS"))["Workflow"]
    sfn = clean_emulator.client("stepfunctions")
    delivery = message({"x": "cust-7", "y": "order-1"}, mode="guarded")
    with pytest.raises(Misconfiguration, match="is EXPRESS"):
        start_execution_once(delivery, arn, delivery.json_object(), client=sfn)
    assert sfn.list_executions(stateMachineArn=arn)["executions"] == []


def test_changing_the_type_replaces_the_state_machine(clean_emulator: Emulator) -> None:
    standard = deploy(clean_emulator, _template())["Workflow"]
    express = deploy(clean_emulator, _template("EXPRESS"))["Workflow"]
    sfn = clean_emulator.client("stepfunctions")
    assert express != standard
    assert [m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]] == [express]
