"""IdempotentConsumer.grant_start_execution: what start_execution_once asks of a state machine, granted
exactly; Express refused at synth; no cdk-nag finding left for the executions' wildcard. The reference app's
demo workflow (``-c workflow=true``)."""

from __future__ import annotations

import importlib
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs_helpers import (
    actions_of,
    env_of,
    files_under,
    function_asset_dir,
    nag_findings,
    needs_reference_app,
    new_stack,
    only,
    policy_statements,
    reference_stack,
    resources,
    synth_with_nag,
    template_of,
)
from idempotent_runtime.workflows import EXECUTION_ACTIONS, STATE_MACHINE_ACTIONS

import app as reference_app
from idempotent_pipeline import ConfigurationError, ConsumerOptions, IdempotentPipeline, _compat

AWS, REGION, ACCOUNT = cdk.Aws.PARTITION, cdk.Aws.REGION, cdk.Aws.ACCOUNT_ID


def _pipeline(stack: cdk.Stack, user_code: Path) -> IdempotentPipeline:
    options = ConsumerOptions(mode="guarded", processor="orders:handle", code_directory=str(user_code))
    return IdempotentPipeline(stack, "Pipeline", consumer_options=options)


def _state_machine(
    stack: cdk.Stack, kind: sfn.StateMachineType = sfn.StateMachineType.STANDARD
) -> sfn.StateMachine:
    """A logged, traced state machine (cdk-nag's SF1 and SF2)."""
    machine = sfn.StateMachine(
        stack,
        f"Workflow{kind.value.title()}",
        definition_body=sfn.DefinitionBody.from_chainable(sfn.Pass(stack, f"Ship{kind.value}")),
        state_machine_type=kind,
        logs=sfn.LogOptions(destination=logs.LogGroup(stack, f"Logs{kind.value}"), level=sfn.LogLevel.ALL),
        tracing_enabled=True,
    )
    _compat.acknowledge(machine, "AwsSolutions-IAM5[Resource::*]", "X-Ray and log delivery take no resource")
    return machine


def _states_statements(stack: cdk.Stack) -> list[tuple[list[str], object]]:
    return [
        (sorted(actions_of(s)), s["Resource"])
        for s in policy_statements(template_of(stack))
        if any(a.startswith("states:") for a in actions_of(s))
    ]


def test_grant_start_execution_grants_exactly_what_start_execution_once_asks(user_code):
    stack = new_stack()
    machine = _state_machine(stack)
    _pipeline(stack, user_code).consumer.grant_start_execution(machine)
    executions = stack.resolve(
        cdk.Stack.of(machine).format_arn(
            service="states",
            resource="execution",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            resource_name=f"{cdk.Fn.select(6, cdk.Fn.split(':', machine.state_machine_arn))}:*",
        )
    )
    assert _states_statements(stack) == [
        (sorted(STATE_MACHINE_ACTIONS), stack.resolve(machine.state_machine_arn)),
        (list(EXECUTION_ACTIONS), executions),
    ]


def test_an_imported_state_machine_is_granted_by_its_arn(user_code):
    stack = new_stack()
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:orders"
    imported = sfn.StateMachine.from_state_machine_arn(stack, "Imported", arn)
    _pipeline(stack, user_code).consumer.grant_start_execution(imported)
    assert _states_statements(stack) == [
        (sorted(STATE_MACHINE_ACTIONS), arn),
        # CDK writes the executions in the stack's account and region: Step Functions has no resource
        # policies, so a state machine of another account is started with that account's role anyway.
        (list(EXECUTION_ACTIONS), stack.resolve(f"arn:{AWS}:states:{REGION}:{ACCOUNT}:execution:orders:*")),
    ]


def _key_statements(stack: cdk.Stack, consumer) -> list[dict]:
    """The consumer role's statements on KMS keys."""
    role = stack.resolve(consumer.role.role_name)
    found = []
    for policy in resources(template_of(stack), "AWS::IAM::Policy").values():
        if role in policy["Properties"]["Roles"]:
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            found += [s for s in statements if any(a.startswith("kms:") for a in actions_of(s))]
    return found


def _through_step_functions(machine_arn: object, stack: cdk.Stack) -> dict:
    return {
        "StringEquals": {
            "kms:ViaService": stack.resolve(f"states.{REGION}.{cdk.Aws.URL_SUFFIX}"),
            "kms:EncryptionContext:aws:states:stateMachineArn": stack.resolve(machine_arn),
        }
    }


@pytest.mark.skipif(
    not hasattr(sfn, "CustomerManagedEncryptionConfiguration"),
    reason="this aws-cdk-lib has no state machine key",
)
def test_a_state_machine_with_a_customer_managed_key_grants_the_key_for_start_and_describe(user_code):
    from aws_cdk import aws_kms as kms

    stack = new_stack()
    key = kms.Key(stack, "WorkflowKey", enable_key_rotation=True)
    machine = sfn.StateMachine(
        stack,
        "Encrypted",
        definition_body=sfn.DefinitionBody.from_chainable(sfn.Pass(stack, "Ship")),
        encryption_configuration=sfn.CustomerManagedEncryptionConfiguration(key),
    )
    consumer = _pipeline(stack, user_code).consumer
    consumer.grant_start_execution(machine)
    (statement,) = _key_statements(stack, consumer)  # on main: none, and every start was refused
    assert sorted(actions_of(statement)) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert statement["Resource"] == stack.resolve(key.key_arn)
    assert statement["Condition"] == _through_step_functions(machine.state_machine_arn, stack)


def test_an_imported_state_machine_is_granted_the_key_it_is_given(user_code):
    from aws_cdk import aws_kms as kms

    stack = new_stack()
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:orders"
    key_arn = "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d-0000-4000-8000-000000000000"
    consumer = _pipeline(stack, user_code).consumer
    consumer.grant_start_execution(
        sfn.StateMachine.from_state_machine_arn(stack, "Imported", arn),
        key=kms.Key.from_key_arn(stack, "ImportedKey", key_arn),
    )
    (statement,) = _key_statements(stack, consumer)
    assert (statement["Resource"], statement["Condition"]) == (key_arn, _through_step_functions(arn, stack))


def test_a_state_machine_without_a_customer_managed_key_is_granted_no_key(user_code):
    stack = new_stack()
    consumer = _pipeline(stack, user_code).consumer
    consumer.grant_start_execution(_state_machine(stack))
    assert _key_statements(stack, consumer) == []


def test_an_express_state_machine_is_refused_at_synth(user_code):
    stack = new_stack()
    express = _state_machine(stack, sfn.StateMachineType.EXPRESS)
    with pytest.raises(ConfigurationError, match=r"is EXPRESS; start_execution_once starts STANDARD"):
        _pipeline(stack, user_code).consumer.grant_start_execution(express)


def test_the_executions_wildcard_leaves_no_cdk_nag_finding(tmp_path, user_code):
    def build(stack: cdk.Stack) -> None:
        consumer = _pipeline(stack, user_code).consumer
        consumer.grant_start_execution(_state_machine(stack))
        arn = "arn:aws:states:us-east-1:123456789012:stateMachine:orders"
        consumer.grant_start_execution(sfn.StateMachine.from_state_machine_arn(stack, "Imported", arn))

    synth_with_nag(tmp_path, build)
    assert nag_findings(tmp_path) == []


# -- the reference app: `-c workflow=true` -------------------------------------------------------------


def _reference(context: dict[str, str]) -> cdk.Stack:
    return reference_stack(context, "Workflow")


@needs_reference_app
def test_the_reference_app_starts_its_demo_workflow_from_guarded_mode_with_the_shipped_processor():
    stack = _reference({"workflow": "true"})
    template = template_of(stack)
    machine = only(template, "AWS::StepFunctions::StateMachine")["Properties"]
    assert machine.get("StateMachineType", "STANDARD") == "STANDARD"
    (machine_id,) = resources(template, "AWS::StepFunctions::StateMachine")
    env = env_of(template)
    assert (env["IDEMPOTENCY_MODE"], env["PROCESSOR"]) == ("guarded", reference_app.WORKFLOW_PROCESSOR)
    assert env["STATE_MACHINE_ARN"] == {"Ref": machine_id}
    assert template.to_json()["Outputs"]["StateMachineArn"]["Value"] == {"Ref": machine_id}
    assert (sorted(STATE_MACHINE_ACTIONS), {"Ref": machine_id}) in _states_statements(stack)
    shipped = files_under(function_asset_dir(stack))
    assert {"order_workflow.py", "idempotent_runtime/workflows.py"} <= shipped


def test_the_shipped_processor_names_the_module_the_function_imports(monkeypatch):
    monkeypatch.syspath_prepend(str(reference_app.WORKFLOW_CODE))
    module, function = reference_app.WORKFLOW_PROCESSOR.split(":")
    assert callable(getattr(importlib.import_module(module), function))


@needs_reference_app
def test_the_reference_workflow_keeps_a_processor_of_your_own(user_code):
    stack = _reference({"workflow": "true", "processor": "orders:handle", "code_directory": str(user_code)})
    env = env_of(template_of(stack))
    assert (env["PROCESSOR"], "STATE_MACHINE_ARN" in env) == ("orders:handle", True)


@needs_reference_app
def test_the_reference_workflow_is_refused_in_another_mode():
    with pytest.raises(
        ConfigurationError, match=r"workflow=true starts the workflow from guarded mode; got "
    ):
        _reference({"workflow": "true", "mode": "document"})
