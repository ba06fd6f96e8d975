#!/usr/bin/env python3
"""The reference stack: one IdempotentPipeline, configurable through CDK context, checked by cdk-nag.

    npx cdk synth                                   # templates into cdk.out/
    npx cdk synth -c mode=guarded -c processor=orders:handle -c code_directory=src
    npx cdk synth -c fifo=false -c dashboard=true -c tracing=true -c vpc=true -c customer_managed_keys=true
    npx cdk synth -c workflow=true                  # guarded mode starting a demo workflow once per message

Every context key, the option it sets and its parser is in CONTEXT below; values from ``-c`` arrive as strings
and are parsed, values in cdk.json keep their JSON type. Keys left unset take the constructs' defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from idempotent_pipeline import (
    AlarmOptions,
    ConfigurationError,
    ConsumerOptions,
    IdempotentPipeline,
    MessagingOptions,
    TableOptions,
)


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"context {key} must be a non-empty string; got {value!r}")
    return value


def _optional_text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"context {key} must be a string; got {value!r}")
    return value


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigurationError(f"context {key} must be an integer; got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigurationError(f"context {key} must be an integer; got {value!r}") from None


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigurationError(f"context {key} must be true or false; got {value!r}")


def _names(key: str, value: Any) -> list[str]:
    """A comma-separated list (``-c fingerprint_exclude=sent_at,trace.id``) or a JSON list from cdk.json."""
    items = value if isinstance(value, list) else str(value).split(",")
    names = [str(item).strip() for item in items]
    if not names or not all(names):
        raise ConfigurationError(f"context {key} must be a comma-separated list of names; got {value!r}")
    return names


def _removal_policy(key: str, value: Any) -> RemovalPolicy:
    policies = {"retain": RemovalPolicy.RETAIN, "destroy": RemovalPolicy.DESTROY}
    text = str(value).strip().lower()
    if text not in policies:
        raise ConfigurationError(
            f"context {key} must be retain or destroy (DynamoDB tables have no snapshot policy); got "
            f"{value!r}"
        )
    return policies[text]


def _seconds(key: str, value: Any) -> Duration:
    return Duration.seconds(_integer(key, value))


def _lifetime(key: str, value: Any) -> Duration | None:
    """Seconds, or ``0`` / ``never``: never expire."""
    if str(value).strip().lower() == "never":
        return None
    seconds = _integer(key, value)
    if seconds < 0:
        raise ConfigurationError(f"context {key} must be a number of seconds, 0 or never; got {value!r}")
    return Duration.seconds(seconds) if seconds else None


def _tracing(key: str, value: Any) -> lambda_.Tracing | None:
    return lambda_.Tracing.ACTIVE if _boolean(key, value) else None


def _architecture(key: str, value: Any) -> lambda_.Architecture:
    text = str(value).strip().lower()
    if text == "arm64":
        return lambda_.Architecture.ARM_64
    if text == "x86_64":
        return lambda_.Architecture.X86_64
    raise ConfigurationError(f"context {key} must be arm64 or x86_64; got {value!r}")


def _runtime(key: str, value: Any) -> lambda_.Runtime:
    """A Python runtime aws-cdk-lib names (``python3.13``: ``Runtime.PYTHON_3_13``)."""
    match = re.fullmatch(r"python3\.(\d+)", str(value).strip())
    runtime = getattr(lambda_.Runtime, f"PYTHON_3_{match.group(1)}", None) if match else None
    if runtime is None:
        raise ConfigurationError(
            f"context {key} must name a Python runtime of aws-cdk-lib, e.g. python3.14; got {value!r}"
        )
    return runtime


def _retired(replacement: str) -> Callable[[str, Any], Any]:
    def parse(key: str, value: Any) -> Any:
        raise ConfigurationError(f"context {key} is no longer read (got {value!r}): {replacement}")

    return parse


Parser = Callable[[str, Any], Any]

# context key -> (where it goes, option, parser). Where: an options block, "pipeline" (an IdempotentPipeline
# argument) or "stack" (resources the reference stack makes for the option).
CONTEXT: dict[str, tuple[str, str, Parser]] = {
    # messaging
    "fifo": ("messaging", "fifo", _boolean),
    "topic": ("messaging", "with_topic", _boolean),
    "high_throughput": ("messaging", "high_throughput", _boolean),
    "content_based_deduplication": ("messaging", "content_based_deduplication", _boolean),
    "visibility_timeout_seconds": ("messaging", "visibility_timeout", _seconds),
    "retention_period_seconds": ("messaging", "retention_period", _seconds),
    "max_receive_count": ("messaging", "max_receive_count", _integer),
    # table
    "table_name": ("table", "table_name", _text),
    "partition_key_name": ("table", "partition_key_name", _text),
    "sort_key_name": ("table", "sort_key_name", _text),
    "time_to_live_attribute": ("table", "time_to_live_attribute", _text),
    "removal_policy": ("table", "removal_policy", _removal_policy),
    "deletion_protection": ("table", "deletion_protection", _boolean),
    # consumer
    "mode": ("consumer", "mode", _text),
    "key_source": ("consumer", "key_source", _text),
    "partition_key_field": ("consumer", "partition_key_field", _text),
    "sort_key_field": ("consumer", "sort_key_field", _text),
    "key_prefix": ("consumer", "key_prefix", _optional_text),
    "fingerprint_fields": ("consumer", "fingerprint_fields", _names),
    "fingerprint_exclude": ("consumer", "fingerprint_exclude", _names),
    "on_conflict": ("consumer", "on_conflict", _text),
    "dedup_ttl_seconds": ("consumer", "dedup_ttl", _lifetime),
    "document_ttl_seconds": ("consumer", "document_ttl", _lifetime),
    "lease_seconds": ("consumer", "lease_duration", _seconds),
    "lease_margin_seconds": ("consumer", "lease_margin", _seconds),
    "processor": ("consumer", "processor", _text),
    "code_directory": ("consumer", "code_directory", _text),
    "include": ("consumer", "include", _names),
    "exclude": ("consumer", "exclude", _names),
    "timeout_seconds": ("consumer", "timeout", _seconds),
    "memory_size": ("consumer", "memory_size", _integer),
    "architecture": ("consumer", "architecture", _architecture),
    "runtime": ("consumer", "runtime", _runtime),
    "batch_size": ("consumer", "batch_size", _integer),
    "max_batching_window_seconds": ("consumer", "max_batching_window", _seconds),
    "max_concurrency": ("consumer", "max_concurrency", _integer),
    "reserved_concurrent_executions": ("consumer", "reserved_concurrent_executions", _integer),
    "max_workers": ("consumer", "max_workers", _integer),
    "log_level": ("consumer", "log_level", _text),
    "metrics_namespace": ("consumer", "metrics_namespace", _text),
    "tracing": ("consumer", "tracing", _tracing),
    # alarms
    "max_message_age_seconds": ("alarm", "max_message_age", _seconds),
    "failed_threshold": ("alarm", "failed_threshold", _integer),
    # the pipeline and the stack
    "dashboard": ("pipeline", "dashboard", _boolean),
    "vpc": ("stack", "vpc", _boolean),
    "customer_managed_keys": ("stack", "customer_managed_keys", _boolean),
    "alarm_topic": ("stack", "alarm_topic", _boolean),
    "workflow": ("stack", "workflow", _boolean),
    # removed options: refused with what replaced them, never ignored
    "ttl_seconds": (
        "retired",
        "ttl_seconds",
        _retired(
            "use dedup_ttl_seconds (idempotency records, default 7 days) and document_ttl_seconds "
            "(documents, "
            "default never)"
        ),
    ),
}
OPTIONS = {
    "messaging": MessagingOptions,
    "table": TableOptions,
    "consumer": ConsumerOptions,
    "alarm": AlarmOptions,
}
DEFAULT_STACK_NAME = "IdempotentPipeline"
# The processor `-c workflow=true` ships unless `processor` names another.
WORKFLOW_CODE = Path(__file__).resolve().parent / "examples" / "workflow"
WORKFLOW_PROCESSOR = "order_workflow:start"


def settings_from(context: Callable[[str], Any]) -> dict[str, dict[str, Any]]:
    """Where -> {option: value} for the context keys that are set.

    ``context`` looks a key up, e.g. ``app.node.get_all_context().get``.
    """
    settings: dict[str, dict[str, Any]] = {where: {} for where, _, _ in CONTEXT.values()}
    for key, (where, option, parse) in CONTEXT.items():
        value = context(key)
        if value is not None:
            settings[where][option] = parse(key, value)
    return settings


class ReferenceStack(cdk.Stack):
    """One IdempotentPipeline and outputs naming what a publisher and an operator need."""

    def __init__(
        self, scope: Construct, id: str, *, settings: Mapping[str, Mapping[str, Any]], **kwargs: Any
    ) -> None:
        super().__init__(scope, id, description="idempotent-pipeline reference stack", **kwargs)
        options = {where: dict(settings.get(where, {})) for where in OPTIONS}
        stack = settings.get("stack", {})
        keys = stack.get("customer_managed_keys")
        if keys:
            # One key for the queues and the table; the topic needs its own (the queue key's policy names the
            # topic: one key for both would be a dependency cycle).
            data_key = kms.Key(self, "DataKey", enable_key_rotation=True, description="queues and table")
            options["messaging"].update(encryption_key=data_key)
            options["table"].update(encryption_key=data_key)
            if options["messaging"].get("with_topic", True):
                topic_key = kms.Key(self, "TopicKey", enable_key_rotation=True, description="topic")
                options["messaging"].update(topic_encryption_key=topic_key)
        if stack.get("alarm_topic"):
            # The alarm topic's key has its own policy: CloudWatch, which may use it for every alarm of the
            # account, gets nothing on the key of the pipeline's messages.
            alarm_key = (
                kms.Key(self, "AlarmTopicKey", enable_key_rotation=True, description="alarm topic")
                if keys
                else None
            )
            self.alarm_topic = sns.Topic(self, "AlarmTopic", enforce_ssl=True, master_key=alarm_key)
            options["alarm"].update(alarm_topic=self.alarm_topic)
        if stack.get("vpc"):
            vpc, security_group = self._vpc(workflow=bool(stack.get("workflow")))
            options["consumer"].update(vpc=vpc, security_groups=[security_group])
        workflow = self._workflow(options["consumer"]) if stack.get("workflow") else None
        self.pipeline = IdempotentPipeline(
            self,
            "Pipeline",
            messaging_options=MessagingOptions(**options["messaging"]),
            table_options=TableOptions(**options["table"]),
            consumer_options=ConsumerOptions(**options["consumer"]),
            alarm_options=AlarmOptions(**options["alarm"]),
            **settings.get("pipeline", {}),
        )
        outputs = {
            "TopicArn": self.pipeline.topic.topic_arn if self.pipeline.topic is not None else None,
            "QueueUrl": self.pipeline.queue.queue_url,
            "DeadLetterQueueUrl": self.pipeline.dead_letter_queue.queue_url,
            "SubscriptionDeadLetterQueueUrl": (
                self.pipeline.subscription_dead_letter_queue.queue_url
                if self.pipeline.subscription_dead_letter_queue is not None
                else None
            ),
            "TableName": self.pipeline.table.table_name,
            "FunctionName": self.pipeline.function.function_name,
            "StateMachineArn": workflow.state_machine_arn if workflow is not None else None,
        }
        if workflow is not None:
            self.pipeline.consumer.grant_start_execution(workflow)
        for name, value in outputs.items():
            if value is not None:
                cdk.CfnOutput(self, name, value=value)

    def _workflow(self, consumer: dict[str, Any]) -> sfn.StateMachine:
        """A STANDARD demo workflow, logged and traced, that guarded mode starts once per message: with the
        shipped processor (examples/workflow) unless ``processor`` names another, which reads the state
        machine's ARN from ``STATE_MACHINE_ARN``."""
        mode = consumer.setdefault("mode", "guarded")
        if mode != "guarded":
            raise ConfigurationError(
                f"context workflow=true starts the workflow from guarded mode; got mode={mode!r}: leave mode "
                "unset or set mode=guarded"
            )
        if "processor" not in consumer:
            consumer.update(processor=WORKFLOW_PROCESSOR, code_directory=str(WORKFLOW_CODE))
        workflow = sfn.StateMachine(
            self,
            "Workflow",
            definition_body=sfn.DefinitionBody.from_chainable(sfn.Pass(self, "ShipOrder")),
            logs=sfn.LogOptions(
                destination=logs.LogGroup(self, "WorkflowLogs", retention=logs.RetentionDays.ONE_MONTH),
                level=sfn.LogLevel.ALL,
            ),
            tracing_enabled=True,
        )
        cdk.Validations.of(workflow).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Step Functions delivers logs and X-Ray traces with actions that take no resource "
                "(CDK grants them on * for a logged, traced state machine)",
            )
        )
        environment = dict(consumer.get("environment") or {})
        environment["STATE_MACHINE_ARN"] = workflow.state_machine_arn
        consumer["environment"] = environment
        return workflow

    def _vpc(self, workflow: bool) -> tuple[ec2.Vpc, ec2.SecurityGroup]:
        """Private subnets without internet access: the function reaches DynamoDB through a gateway endpoint
        and SQS (and with ``workflow``, Step Functions) through interface endpoints that admit only the
        function's security group."""
        flow_logs = logs.LogGroup(self, "VpcFlowLogs", retention=logs.RetentionDays.ONE_MONTH)
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                )
            ],
            flow_logs={
                "FlowLogs": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
                )
            },
        )
        vpc.add_gateway_endpoint("DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)
        function_group = ec2.SecurityGroup(
            self, "FunctionSecurityGroup", vpc=vpc, description="the consumer function"
        )
        endpoint_group = ec2.SecurityGroup(
            self,
            "SqsEndpointSecurityGroup",
            vpc=vpc,
            description="the SQS endpoint: HTTPS from the consumer function only",
            allow_all_outbound=False,
        )
        endpoint_group.add_ingress_rule(function_group, ec2.Port.tcp(443), "HTTPS from the consumer")
        vpc.add_interface_endpoint(
            "Sqs",
            service=ec2.InterfaceVpcEndpointAwsService.SQS,
            security_groups=[endpoint_group],
            open=False,
        )
        if workflow:
            states_group = ec2.SecurityGroup(
                self,
                "StepFunctionsEndpointSecurityGroup",
                vpc=vpc,
                description="the Step Functions endpoint: HTTPS from the consumer function only",
                allow_all_outbound=False,
            )
            states_group.add_ingress_rule(function_group, ec2.Port.tcp(443), "HTTPS from the consumer")
            vpc.add_interface_endpoint(
                "StepFunctions",
                service=ec2.InterfaceVpcEndpointAwsService.STEP_FUNCTIONS,
                security_groups=[states_group],
                open=False,
            )
        return vpc, function_group


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """The reference app: ``context`` adds to what the CDK CLI passes (cdk.json and ``-c``)."""
    app = cdk.App(context=dict(context or {}), outdir=outdir)
    # One read of the whole context (cdk.json, -c and the argument): each lookup is a jsii round trip.
    context_values = app.node.get_all_context()
    stack_name = context_values.get("stack_name") or DEFAULT_STACK_NAME
    ReferenceStack(app, _text("stack_name", stack_name), settings=settings_from(context_values.get))
    nag = context_values.get("nag")
    if _boolean("nag", True if nag is None else nag):
        # cdk-nag is a development dependency: imported only when the checks are on.
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    build_app().synth()
