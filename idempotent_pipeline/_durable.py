"""What ``idempotent_runtime.durable.start_durable_execution_once`` asks of a Lambda durable function, granted
exactly, and the checks at synth (IdempotentConsumer.grant_start_durable_execution)."""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Fn, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from idempotent_runtime.contract import ConfigurationError
from idempotent_runtime.workflows import (
    DURABLE_EXECUTION_ACTIONS,
    DURABLE_FUNCTION_ACTIONS,
    DURABLE_KEY_ACTIONS,
    DURABLE_LIST_ACTIONS,
)

from idempotent_pipeline import _keys
from idempotent_pipeline._rules import warn

KEY_UNNAMED = "idempotent-pipeline:durable-key-not-granted"
EXECUTIONS_REASON = (
    "start_durable_execution_once finds and reads the input of the execution that holds a key's name (a "
    "conflict): lambda:ListDurableExecutionsByFunction and lambda:GetDurableExecution on the versions and "
    "executions of this one durable function, whose ARNs hold the version and the execution's name and id"
)


def qualified(function: lambda_.IFunction, method: str) -> tuple[lambda_.IFunction | None, str]:
    """The function a version or alias stands for (None when imported by ARN) and the qualified ARN Lambda
    is invoked with; an unqualified function is refused (Lambda invokes durable functions by version, alias
    or $LATEST only)."""
    version = getattr(function, "version", None)  # IVersion: the version's number; IAlias: its IVersion
    if version is not None:  # a version's function, or an alias's version's
        holder = function if isinstance(version, str) else version
        return getattr(holder, "lambda_", None), function.function_arn
    arn = function.function_arn
    if not Token.is_unresolved(arn) and len(arn.split(":")) == 8:  # Function.from_function_arn("...:fn:1")
        return None, arn
    raise ConfigurationError(
        f"{method}: function {function.node.path!r} is unqualified; Lambda invokes durable functions by "
        "version, alias or $LATEST only: pass function.current_version, a lambda_.Alias or "
        "function.latest_version"
    )


def durable_config(function: lambda_.IFunction | None) -> Any:
    """The CloudFormation DurableConfig of a function defined in the app; ``...`` when it cannot be told (an
    imported function, an aws-cdk-lib without durable functions)."""
    cfn = function.node.default_child if function is not None else None
    if not isinstance(cfn, lambda_.CfnFunction) or not hasattr(cfn, "durable_config"):
        return ...
    return cfn.durable_config


def grant(
    grantee: lambda_.IFunction, scope: Any, function: lambda_.IFunction, key: kms.IKey | None, method: str
) -> iam.Grant:
    """What :meth:`IdempotentConsumer.grant_start_durable_execution` grants ``grantee`` (its docstring lists
    the actions); its versions' executions are ``function:NAME:*``."""
    underlying, arn = qualified(function, method)
    config = durable_config(underlying)
    if config is None:
        raise ConfigurationError(
            f"{method}: function {function.node.path!r} is not durable (no durable_config): Lambda does not "
            "name its invocations, so every delivery would run it again; give it "
            "durable_config=lambda_.DurableConfig(...)"
        )
    if key is None and getattr(config, "kms_key_arn", None) is not None:
        warn(
            scope,
            KEY_UNNAMED,
            f"{method}: durable function {function.node.path!r} has a customer managed key: pass it as key= "
            "so the consumer may start an execution (kms:GenerateDataKey through Lambda) and read its input "
            "on a conflict (kms:Decrypt)",
        )
    unqualified = Stack.of(function).format_arn(
        service="lambda",
        resource="function",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
        resource_name=Fn.select(6, Fn.split(":", arn)),
    )
    result = _keys.grant(grantee, DURABLE_FUNCTION_ACTIONS, arn)
    result = result.combine(_keys.grant(grantee, DURABLE_LIST_ACTIONS, unqualified))
    executions = f"{unqualified}:*"
    return result.combine(
        _keys.grant(grantee, DURABLE_EXECUTION_ACTIONS, executions, key, DURABLE_KEY_ACTIONS, "lambda")
    )
