"""IdempotentConsumer.grant_start_durable_execution: what start_durable_execution_once asks of a Lambda
durable function, granted exactly (the qualified function it invokes, its executions, its customer managed
key through Lambda); refused at synth: an unqualified or non-durable function, a consumer not in guarded
mode. The reference app's demo durable function (``-c durable=true``), refused on an aws-cdk-lib without
durable functions."""

from __future__ import annotations

import importlib
import importlib.metadata

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs_helpers import (
    actions_of,
    files_under,
    function_asset_dir,
    nag_findings,
    needs_reference_app,
    new_stack,
    policy_statements,
    reference_stack,
    resources,
    synth_with_nag,
    template_of,
    warnings_of,
)
from idempotent_runtime.workflows import (
    DURABLE_EXECUTION_ACTIONS,
    DURABLE_FUNCTION_ACTIONS,
    DURABLE_KEY_ACTIONS,
    DURABLE_LIST_ACTIONS,
)

import app as reference_app
from idempotent_pipeline import ConfigurationError, ConsumerOptions, IdempotentPipeline

AWS, REGION, ACCOUNT = cdk.Aws.PARTITION, cdk.Aws.REGION, cdk.Aws.ACCOUNT_ID
HAS_DURABLE = hasattr(lambda_, "DurableConfig")  # aws-cdk-lib 2.232.0 on; the floor (2.156.0) has none
needs_durable = pytest.mark.skipif(not HAS_DURABLE, reason="this aws-cdk-lib has no durable functions")
ARN = "arn:aws:lambda:us-east-1:123456789012:function:fulfil"


def _pipeline(stack: cdk.Stack, user_code, mode: str = "guarded") -> IdempotentPipeline:
    options = ConsumerOptions(mode=mode, processor="orders:handle", code_directory=str(user_code))
    return IdempotentPipeline(stack, "Pipeline", consumer_options=options)


def _function(stack: cdk.Stack, durable: bool = True, name: str = "Fulfil") -> lambda_.Function:
    extra = (
        {"durable_config": lambda_.DurableConfig(execution_timeout=cdk.Duration.minutes(15))}
        if durable
        else {}
    )
    return lambda_.Function(
        stack,
        name,
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        **extra,
    )


def _lambda_statements(stack: cdk.Stack) -> list[tuple[list[str], object]]:
    return [
        (sorted(actions_of(s)), s["Resource"])
        for s in policy_statements(template_of(stack))
        if any(a.startswith("lambda:") for a in actions_of(s))
    ]


def _of(stack: cdk.Stack, qualified: str) -> tuple[object, object]:
    """The function's unqualified ARN and its executions, as the grant writes them from ``qualified``."""
    unqualified = stack.resolve(
        cdk.Stack.of(stack).format_arn(
            service="lambda",
            resource="function",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            resource_name=cdk.Fn.select(6, cdk.Fn.split(":", qualified)),
        )
    )
    executions = stack.resolve(
        cdk.Stack.of(stack).format_arn(
            service="lambda",
            resource="function",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            resource_name=f"{cdk.Fn.select(6, cdk.Fn.split(':', qualified))}:*",
        )
    )
    return unqualified, executions


@needs_durable
def test_grant_start_durable_execution_grants_exactly_what_the_dispatcher_asks(user_code):
    stack = new_stack()
    version = _function(stack).current_version
    _pipeline(stack, user_code).consumer.grant_start_durable_execution(version)
    unqualified, executions = _of(stack, version.function_arn)
    assert _lambda_statements(stack) == [
        (sorted(DURABLE_FUNCTION_ACTIONS), stack.resolve(version.function_arn)),
        (sorted(DURABLE_LIST_ACTIONS), unqualified),
        (sorted(DURABLE_EXECUTION_ACTIONS), executions),
    ]


@needs_durable
def test_an_alias_is_granted_as_the_alias_it_is(user_code):
    stack = new_stack()
    alias = lambda_.Alias(stack, "Live", alias_name="live", version=_function(stack).current_version)
    _pipeline(stack, user_code).consumer.grant_start_durable_execution(alias)
    assert _lambda_statements(stack)[0] == (
        sorted(DURABLE_FUNCTION_ACTIONS),
        stack.resolve(alias.function_arn),
    )


def test_an_imported_qualified_function_is_granted_by_its_arn(user_code):
    stack = new_stack()
    imported = lambda_.Function.from_function_arn(stack, "Imported", f"{ARN}:live")
    _pipeline(stack, user_code).consumer.grant_start_durable_execution(imported)
    statements = _lambda_statements(stack)
    assert statements[0] == (sorted(DURABLE_FUNCTION_ACTIONS), f"{ARN}:live")
    # Lambda lists one version's executions at a time: the function's versions, then each one's executions.
    assert statements[1:] == [
        (
            ["lambda:ListDurableExecutionsByFunction", "lambda:ListVersionsByFunction"],
            stack.resolve(f"arn:{AWS}:lambda:{REGION}:{ACCOUNT}:function:fulfil"),
        ),
        (
            ["lambda:GetDurableExecution", "lambda:ListDurableExecutionsByFunction"],
            stack.resolve(f"arn:{AWS}:lambda:{REGION}:{ACCOUNT}:function:fulfil:*"),
        ),
    ]


@pytest.mark.parametrize("how", ["defined", "imported"])
def test_an_unqualified_function_is_refused_at_synth(user_code, how):
    stack = new_stack()
    function = (
        _function(stack, durable=HAS_DURABLE)
        if how == "defined"
        else lambda_.Function.from_function_arn(stack, "Imported", ARN)
    )
    with pytest.raises(
        ConfigurationError, match=r"is unqualified; Lambda invokes durable functions by version"
    ):
        _pipeline(stack, user_code).consumer.grant_start_durable_execution(function)


@needs_durable
def test_a_function_without_durable_config_is_refused_at_synth(user_code):
    stack = new_stack()
    plain = _function(stack, durable=False).current_version
    with pytest.raises(ConfigurationError, match=r"is not durable \(no durable_config\)"):
        _pipeline(stack, user_code).consumer.grant_start_durable_execution(plain)


def test_a_consumer_not_in_guarded_mode_is_refused_at_synth(user_code):
    stack = new_stack()
    imported = lambda_.Function.from_function_arn(stack, "Imported", f"{ARN}:1")
    with pytest.raises(
        ConfigurationError, match=r"run in guarded mode .* the consumer's mode is 'transaction'"
    ):
        _pipeline(stack, user_code, mode="transaction").consumer.grant_start_durable_execution(imported)


def test_the_function_s_customer_managed_key_is_granted_through_lambda(user_code):
    """Lambda encrypts each Invoke's input with the key of the durable execution data (DurableConfig's):
    the consumer starts an execution with kms:GenerateDataKey and reads one with kms:Decrypt (AWS,
    "Encrypting AWS Lambda durable execution data")."""
    stack = new_stack()
    key = kms.Key(stack, "DurableKey", enable_key_rotation=True)
    imported = lambda_.Function.from_function_arn(stack, "Imported", f"{ARN}:1")
    _pipeline(stack, user_code).consumer.grant_start_durable_execution(imported, key=key)
    (statement,) = [s for s in policy_statements(template_of(stack)) if "kms:Decrypt" in actions_of(s)]
    assert (sorted(actions_of(statement)), statement["Resource"]) == (
        ["kms:Decrypt", "kms:GenerateDataKey"],
        stack.resolve(key.key_arn),
    )
    assert sorted(DURABLE_KEY_ACTIONS) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert statement["Condition"] == {
        "StringEquals": {"kms:ViaService": stack.resolve(f"lambda.{REGION}.{cdk.Aws.URL_SUFFIX}")}
    }


@needs_durable
def test_a_durable_function_with_a_key_the_grant_is_not_given_is_warned_about(user_code):
    stack = new_stack()
    function = _function(stack)
    cfn = function.node.default_child
    assert isinstance(cfn, lambda_.CfnFunction)
    cfn.durable_config = lambda_.CfnFunction.DurableConfigProperty(
        execution_timeout=900, kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/k"
    )
    _pipeline(stack, user_code).consumer.grant_start_durable_execution(function.current_version)
    assert any("has a customer managed key: pass it as key=" in text for _, text in warnings_of(stack))


def test_the_executions_wildcard_leaves_no_cdk_nag_finding(tmp_path, user_code):
    def build(stack: cdk.Stack) -> None:
        consumer = _pipeline(stack, user_code).consumer
        consumer.grant_start_durable_execution(
            lambda_.Function.from_function_arn(stack, "Imported", f"{ARN}:1")
        )

    synth_with_nag(tmp_path, build)
    assert nag_findings(tmp_path) == []


# -- the reference app: `-c durable=true` ---------------------------------------------------------------


def _reference(context: dict[str, str]) -> cdk.Stack:
    return reference_stack(context, "Durable")


@needs_reference_app
@needs_durable
def test_the_reference_app_starts_its_demo_durable_function_from_guarded_mode_with_the_shipped_dispatcher():
    stack = _reference({"durable": "true"})
    template = template_of(stack)
    functions = resources(template, "AWS::Lambda::Function")
    (durable_id,) = [i for i, f in functions.items() if "DurableConfig" in f["Properties"]]
    assert functions[durable_id]["Properties"]["DurableConfig"] == {
        "ExecutionTimeout": 900,
        "RetentionPeriodInDays": 14,
    }
    (version_id,) = resources(template, "AWS::Lambda::Version")
    consumer = next(f for f in functions.values() if "Environment" in f["Properties"])
    env = consumer["Properties"]["Environment"]["Variables"]
    assert (env["IDEMPOTENCY_MODE"], env["PROCESSOR"]) == ("guarded", reference_app.DURABLE_PROCESSOR)
    assert env["DURABLE_FUNCTION_ARN"] == {"Ref": version_id}
    assert template.to_json()["Outputs"]["DurableFunctionArn"]["Value"] == {"Ref": version_id}
    granted = [(sorted(actions_of(s)), s["Resource"]) for s in policy_statements(template)]
    assert (sorted(DURABLE_FUNCTION_ACTIONS), {"Ref": version_id}) in granted
    shipped = files_under(function_asset_dir(stack, handler="idempotent_runtime.handler.handler"))
    assert {
        "order_dispatch.py",
        "idempotent_runtime/durable.py",
        "idempotent_runtime/workflows.py",
    } <= shipped


def test_the_shipped_dispatcher_names_the_module_the_function_imports(monkeypatch):
    monkeypatch.syspath_prepend(str(reference_app.DURABLE_CODE))
    module, function = reference_app.DURABLE_PROCESSOR.split(":")
    assert callable(getattr(importlib.import_module(module), function))


@needs_reference_app
@needs_durable
def test_the_reference_durable_function_is_refused_in_another_mode():
    with pytest.raises(
        ConfigurationError, match=r"durable=true starts the durable function from guarded mode"
    ):
        _reference({"durable": "true", "mode": "document"})


@needs_reference_app
def test_the_reference_durable_function_is_refused_on_an_aws_cdk_lib_without_durable_functions(monkeypatch):
    """As on aws-cdk-lib 2.231.0, the last without lambda_.DurableConfig (the library's floor, 2.156.0, cannot
    run the reference app at all): refused at synth, naming the installed version."""
    version = importlib.metadata.version
    monkeypatch.delattr(lambda_, "DurableConfig", raising=False)
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "2.231.0" if name == "aws-cdk-lib" else version(name)
    )
    with pytest.raises(
        ConfigurationError,
        match=r"^context durable=true needs aws-cdk-lib 2\.232\.0 or later \(lambda_\.DurableConfig\); "
        r"this is aws-cdk-lib 2\.231\.0: upgrade it, or leave durable unset$",
    ):
        _reference({"durable": "true"})
