#!/usr/bin/env python3
"""The reference stack: one IdempotentPipeline, configurable through CDK context, checked by cdk-nag.

    npx cdk synth                                   # templates into cdk.out/
    npx cdk synth -c mode=guarded -c processor=orders:handle -c code_directory=src
    npx cdk synth -c fifo=false -c dashboard=true -c tracing=true -c vpc=true -c customer_managed_keys=true
    npx cdk synth -c outbox=true                    # two hops: orders -> payments -> shipping
    npx cdk synth -c workflow=true                  # guarded mode starting a demo workflow once per message
    npx cdk synth -c durable=true                   # guarded mode starting a demo durable function once
    npx cdk synth -c fifo=false -c mode=versioned -c version_field=updated_at   # the latest state per entity

Every context key, the option it sets and its kind is in CONTEXT below (the runtime's settings come from their
declarations in the contract, parsed as the function's environment is); values from ``-c`` arrive as strings
and are parsed, values in cdk.json keep their JSON type. Keys left unset (or empty) take the constructs'
defaults.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from idempotent_runtime import contract
from idempotent_runtime.contract import NAME, FieldPaths, IntRange, Kind, Lifetime, Seconds
from idempotent_runtime.workflows import DURABLE_KEY_ACTIONS

from idempotent_pipeline import (
    AlarmOptions,
    ConfigurationError,
    ConsumerOptions,
    IdempotentPipeline,
    MessagingOptions,
    TableOptions,
)
from idempotent_pipeline.options import DEFAULT_RUNTIME


class Flag(Kind):
    """true or false (also 1/0, yes/no, in any case)."""

    WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

    def parse(self, name: str, text: str) -> bool:
        return self.coerce(name, self.WORDS.get(text.lower(), text))

    def coerce(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ConfigurationError(f"{name} must be true or false; got {value!r}")
        return value


@dataclass(frozen=True)
class Named(Kind):
    """One of a few names (any case), each standing for an object of aws-cdk-lib."""

    lookup: Callable[[str], Any]
    wanted: str

    def coerce(self, name: str, value: Any) -> Any:
        found = self.lookup(value.strip().lower()) if isinstance(value, str) else None
        if found is None:
            raise ConfigurationError(f"{name} must {self.wanted}; got {value!r}")
        return found


class Names(Kind):
    """Names of files or patterns: a list (cdk.json) or comma-separated (``-c include=a.json,b``)."""

    def coerce(self, name: str, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else value
        names = tuple(str(item).strip() for item in items) if isinstance(items, list | tuple) else ()
        if not names or not all(names):
            raise ConfigurationError(f"{name} must be a comma-separated list of names; got {value!r}")
        return names


@dataclass(frozen=True)
class Retired(Kind):
    """A key that no longer exists: refused with what replaced it, never ignored."""

    replacement: str

    def coerce(self, name: str, value: Any) -> Any:
        raise ConfigurationError(f"{name} is no longer read (got {value!r}): {self.replacement}")


def _runtime(text: str) -> lambda_.Runtime | None:
    """A Python runtime aws-cdk-lib names (``python3.13``: ``Runtime.PYTHON_3_13``)."""
    match = re.fullmatch(r"python3\.(\d+)", text)
    return getattr(lambda_.Runtime, f"PYTHON_3_{match[1]}", None) if match else None


@dataclass(frozen=True)
class Key:
    """A context key: where its value goes (an options block, ``pipeline``: an IdempotentPipeline argument,
    ``stack``: resources the reference stack makes for it), the option it sets and its kind."""

    where: str
    option: str
    kind: Kind


FLAG, INTEGER, SECONDS, NAMES = Flag(), IntRange(), Seconds(low=0), Names()
OPTIONS = {
    "messaging": MessagingOptions,
    "table": TableOptions,
    "consumer": ConsumerOptions,
    "alarm": AlarmOptions,
}
BLOCKS = {options.__name__: where for where, options in OPTIONS.items()}
# The runtime's settings, from their declarations: a key per option, named like it (a duration like its
# variable, in seconds: lease_duration is lease_seconds); parsed as the function's environment is.
SETTINGS: dict[str, Key] = {
    (variable.name.lower() if isinstance(variable.kind, Seconds) else option): Key(
        BLOCKS[block], option, variable.kind
    )
    for variable in contract.ENVIRONMENT
    if variable.option is not None
    for block, option in [variable.option.split(".")]
}
CONTEXT: dict[str, Key] = {
    **SETTINGS,
    "fifo": Key("messaging", "fifo", FLAG),
    "topic": Key("messaging", "with_topic", FLAG),
    "high_throughput": Key("messaging", "high_throughput", FLAG),
    "content_based_deduplication": Key("messaging", "content_based_deduplication", FLAG),
    "visibility_timeout_seconds": Key("messaging", "visibility_timeout", SECONDS),
    "retention_period_seconds": Key("messaging", "retention_period", SECONDS),
    "table_name": Key("table", "table_name", NAME),
    "removal_policy": Key(
        "table",
        "removal_policy",
        Named(
            {"retain": RemovalPolicy.RETAIN, "destroy": RemovalPolicy.DESTROY}.get,
            "be retain or destroy (DynamoDB tables have no snapshot policy)",
        ),
    ),
    "deletion_protection": Key("table", "deletion_protection", FLAG),
    "code_directory": Key("consumer", "code_directory", NAME),
    "include": Key("consumer", "include", NAMES),
    "exclude": Key("consumer", "exclude", NAMES),
    "timeout_seconds": Key("consumer", "timeout", SECONDS),
    "memory_size": Key("consumer", "memory_size", INTEGER),
    "architecture": Key(
        "consumer",
        "architecture",
        Named(
            {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}.get,
            "be arm64 or x86_64",
        ),
    ),
    "runtime": Key(
        "consumer", "runtime", Named(_runtime, "name a Python runtime of aws-cdk-lib, e.g. python3.14")
    ),
    "batch_size": Key("consumer", "batch_size", INTEGER),
    "max_batching_window_seconds": Key("consumer", "max_batching_window", SECONDS),
    "max_concurrency": Key("consumer", "max_concurrency", INTEGER),
    "reserved_concurrent_executions": Key("consumer", "reserved_concurrent_executions", INTEGER),
    "max_message_age_seconds": Key("alarm", "max_message_age", SECONDS),
    "failed_threshold": Key("alarm", "failed_threshold", INTEGER),
    "dashboard": Key("pipeline", "dashboard", FLAG),
    "tracing": Key("stack", "tracing", FLAG),
    "vpc": Key("stack", "vpc", FLAG),
    "customer_managed_keys": Key("stack", "customer_managed_keys", FLAG),
    "alarm_topic": Key("stack", "alarm_topic", FLAG),
    "outbox": Key("stack", "outbox", FLAG),
    "workflow": Key("stack", "workflow", FLAG),
    "durable": Key("stack", "durable", FLAG),
    "ttl_seconds": Key(
        "retired",
        "ttl_seconds",
        Retired(
            "use dedup_ttl_seconds (idempotency records, default 7 days) and document_ttl_seconds "
            "(documents, default never)"
        ),
    ),
}
# Keys of the app itself.
APP: dict[str, Kind] = {"stack_name": NAME, "nag": FLAG}
DEFAULT_STACK_NAME = "IdempotentPipeline"
# The processors of the two hops (``-c outbox=true``).
TWO_HOP_CODE = str(Path(__file__).resolve().parent / "examples" / "two_hop")
# What each hop after the first decides for itself (``-c outbox=true``): a FIFO topic and queue with no filter
# (the relay publishes with deduplication ids, which the hop keys by), its own table name, its own code and
# keys. Every other option - keys, retention, removal and deletion protection, the function's sizing, VPC and
# tracing, the alarms - is the first pipeline's, so data never leaves a protected, key-encrypted pipeline
# into a hop without.
HOP_OWN: dict[str, frozenset[str]] = {
    "messaging": frozenset({"fifo", "with_topic", "content_based_deduplication", "filter_policy"}),
    "table": frozenset({"table_name"}),
    "consumer": frozenset(
        {
            "mode",
            "key_source",
            "partition_key_field",
            "sort_key_field",
            "key_prefix",
            "fingerprint_fields",
            "fingerprint_exclude",
            "document_ttl",
            "lease_duration",
            "lease_margin",
            "version_field",
            "tombstone_ttl",
            "processor",
            "code_directory",
            "include",
            "exclude",
            "environment",
            "max_batching_window",  # a FIFO queue's mapping takes none
        }
    ),
    "alarm": frozenset(),
}
# The processor `-c workflow=true` ships unless `processor` names another.
WORKFLOW_CODE = Path(__file__).resolve().parent / "examples" / "workflow"


def _workflow_name(stack_name: str, limit: int = 80) -> str:
    """``<stack>-Workflow``, within Step Functions' 80 characters (a long stack name: cut, and its hash)."""
    name = f"{stack_name}-Workflow"
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(stack_name.encode()).hexdigest()[:8]
    return f"{stack_name[: limit - len('-Workflow') - 9]}-{digest}-Workflow"


WORKFLOW_PROCESSOR = "order_workflow:start"
# `-c durable=true`: the dispatcher the consumer ships unless `processor` names another, and the durable
# function's code; durable functions are in aws-cdk-lib from this version (lambda_.DurableConfig).
DURABLE_CODE = Path(__file__).resolve().parent / "examples" / "durable"
DURABLE_PROCESSOR = "order_dispatch:start"
DURABLE_FUNCTION_CODE = Path(__file__).resolve().parent / "examples" / "durable_function"
DURABLE_CDK = "2.232.0"


def read(key: str, kind: Kind, value: Any) -> Any:
    """A context value by its kind, as the function's environment is parsed: text from ``-c``, JSON types
    from cdk.json; a list may also be written comma-separated (text that is not JSON). A duration becomes
    an ``aws_cdk.Duration`` (a lifetime of 0 or never: None)."""
    name = f"context {key}"
    if isinstance(kind, FieldPaths) and isinstance(value, str) and value.lstrip()[:1] not in ("[", "{", '"'):
        value = [item.strip() for item in value.split(",")]
    parsed = kind.parse(name, value) if isinstance(value, str) else kind.coerce(name, value)
    if isinstance(kind, Lifetime) and parsed == contract.NEVER:
        return None  # the options' never
    return Duration.seconds(parsed) if isinstance(kind, Seconds) else parsed


def settings_from(context: Callable[[str], Any]) -> dict[str, dict[str, Any]]:
    """Where -> {option: value} for the context keys that are set; an empty value counts as unset, as in
    the function's environment.

    ``context`` looks a key up, e.g. ``app.node.get_all_context().get``.
    """
    settings: dict[str, dict[str, Any]] = {key.where: {} for key in CONTEXT.values()}
    for name, key in CONTEXT.items():
        value = context(name)
        if value is not None and value != "":
            settings[key.where][key.option] = read(name, key.kind, value)
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
        # Where a message's data rests beside the pipeline's queues and table (the workflow's executions, the
        # durable function's, the log groups), under the same key: None without customer_managed_keys.
        self.data_key: kms.Key | None = None
        if keys:
            # One key for the queues, the table and the logs (the consumer's log group gives CloudWatch Logs
            # its statement, for every log group of the stack); the topic needs its own (the queue key's
            # policy names the topic: one key for both would be a dependency cycle).
            data_key = kms.Key(self, "DataKey", enable_key_rotation=True, description="queues and table")
            self.data_key = data_key
            options["messaging"].update(encryption_key=data_key)
            options["table"].update(encryption_key=data_key)
            options["consumer"].update(log_encryption_key=data_key)
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
        else:
            cdk.Annotations.of(self).acknowledge_warning(
                "idempotent-pipeline:alarms-without-action",
                "the reference stack's alarms notify nobody unless -c alarm_topic=true gives them a topic to "
                "subscribe to (README: deploying to a real account)",
            )
        if stack.get("tracing"):
            options["consumer"].update(tracing=lambda_.Tracing.ACTIVE)
        if stack.get("vpc"):
            self._vpc(options["consumer"], stack)
        pipeline = dict(settings.get("pipeline", {}))
        if stack.get("outbox"):
            pipeline["emit_target"] = self._downstream(options)
        workflow = self._workflow(options["consumer"]) if stack.get("workflow") else None
        durable = self._durable(options["consumer"]) if stack.get("durable") else None
        self.pipeline = IdempotentPipeline(self, "Pipeline", **_blocks(options), **pipeline)
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
            "DurableFunctionArn": durable.function_arn if durable is not None else None,
            "DurableFunctionName": durable.lambda_.function_name if durable is not None else None,
        }
        if workflow is not None:
            self.pipeline.consumer.grant_start_execution(workflow)
        if durable is not None:
            self.pipeline.consumer.grant_start_durable_execution(durable, key=self.data_key)
        for name, value in outputs.items():
            if value is not None:
                cdk.CfnOutput(self, name, value=value)

    def _downstream(self, options: dict[str, dict[str, Any]]) -> sns.ITopic:
        """The two hops after this pipeline (orders): payments, which emits to shipping, each consumer keyed
        by the deduplication id the relay publishes with. This pipeline runs ``hops:order`` in transaction
        mode unless the context names another processor. Returns the payments topic."""
        options["consumer"].setdefault("mode", contract.Mode.TRANSACTION)
        if "processor" not in options["consumer"]:
            options["consumer"].update(processor="hops:order", code_directory=TWO_HOP_CODE)
        by_dedup_id = {"key_source": contract.KeySource.DEDUP_ID}
        self.shipping = IdempotentPipeline(self, "Shipping", **_hop(options, "shipping", by_dedup_id))
        payment = dict(mode=contract.Mode.TRANSACTION, processor="hops:payment", code_directory=TWO_HOP_CODE)
        self.payments = IdempotentPipeline(
            self,
            "Payments",
            **_hop(options, "payments", payment | by_dedup_id),
            emit_target=self.shipping.topic,
        )
        for name, hop in (("Payments", self.payments), ("Shipping", self.shipping)):
            cdk.CfnOutput(self, f"{name}TopicArn", value=hop.topic.topic_arn)  # type: ignore[union-attr]
            cdk.CfnOutput(self, f"{name}TableName", value=hop.table.table_name)
            cdk.CfnOutput(self, f"{name}FunctionName", value=hop.function.function_name)
        assert self.payments.topic is not None
        return self.payments.topic

    def _workflow(self, consumer: dict[str, Any]) -> sfn.StateMachine:
        """A STANDARD demo workflow, logged and traced, that guarded mode starts once per message: with the
        shipped processor (examples/workflow) unless ``processor`` names another, which reads the state
        machine's ARN from ``STATE_MACHINE_ARN``."""
        _started_from_guarded(consumer, "workflow", WORKFLOW_PROCESSOR, WORKFLOW_CODE)
        workflow = sfn.StateMachine(
            self,
            "Workflow",
            # Named under the data key: CDK conditions the role's use of the key on the state machine's ARN,
            # which it can only build from a given name (unnamed: an ARN ending in ":", matching nothing).
            state_machine_name=_workflow_name(self.stack_name) if self.data_key is not None else None,
            definition_body=sfn.DefinitionBody.from_chainable(sfn.Pass(self, "ShipOrder")),
            logs=sfn.LogOptions(destination=self._log_group("WorkflowLogs"), level=sfn.LogLevel.ALL),
            tracing_enabled=True,
            # Execution history and input (each order) under the data key.
            encryption_configuration=(
                sfn.CustomerManagedEncryptionConfiguration(self.data_key)
                if self.data_key is not None
                else None
            ),
        )
        cdk.Validations.of(workflow).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Step Functions delivers logs and X-Ray traces with actions that take no resource "
                "(CDK grants them on * for a logged, traced state machine)",
            )
        )
        _tell(consumer, "STATE_MACHINE_ARN", workflow.state_machine_arn)
        return workflow

    def _durable(self, consumer: dict[str, Any]) -> lambda_.IVersion:
        """A demo durable function (its version, which the dispatcher invokes) that guarded mode starts once
        per message: with the shipped dispatcher (examples/durable) unless ``processor`` names another, which
        reads the version's ARN from ``DURABLE_FUNCTION_ARN``. Refused on an aws-cdk-lib without durable
        functions, and in another mode."""
        if not hasattr(lambda_, "DurableConfig"):
            raise ConfigurationError(
                f"context durable=true needs aws-cdk-lib {DURABLE_CDK} or later (lambda_.DurableConfig); "
                f"this is aws-cdk-lib {importlib.metadata.version('aws-cdk-lib')}: upgrade it, or leave "
                "durable unset"
            )
        _started_from_guarded(consumer, "durable function", DURABLE_PROCESSOR, DURABLE_CODE)
        function = lambda_.Function(
            self,
            "Fulfilment",
            runtime=DEFAULT_RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler="fulfilment.handler",
            code=lambda_.Code.from_asset(str(DURABLE_FUNCTION_CODE)),
            description="Demo durable function: one execution per order, started by the consumer",
            durable_config=lambda_.DurableConfig(
                execution_timeout=Duration.minutes(15), retention_period=Duration.days(14)
            ),
            log_group=self._log_group("FulfilmentLogs"),
        )
        if self.data_key is not None:
            # Each execution's input (the order), checkpoints and result under the data key:
            # DurableConfig.KMSKeyArn, which aws-cdk-lib's DurableConfig does not take yet. The function
            # checkpoints with its role, through Lambda.
            cast(lambda_.CfnFunction, function.node.default_child).add_property_override(
                "DurableConfig.KMSKeyArn", self.data_key.key_arn
            )
            self.data_key.grant(function, *DURABLE_KEY_ACTIONS)
        cdk.Validations.of(function).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicDurableExecutionRolePolicy]",
                reason="AWS's managed policy for durable functions: checkpoints and state of the function's "
                "own executions, and its logs (what CDK attaches to a durable function's role)",
            )
        )
        version = function.current_version
        _tell(consumer, "DURABLE_FUNCTION_ARN", version.function_arn)
        return version

    def _log_group(self, id: str) -> logs.LogGroup:
        """A log group of the reference stack, under the data key when there is one."""
        return logs.LogGroup(self, id, retention=logs.RetentionDays.ONE_MONTH, encryption_key=self.data_key)

    def _vpc(self, consumer: dict[str, Any], stack: Mapping[str, Any]) -> None:
        """The consumer in private subnets without internet access: it reaches DynamoDB through a gateway
        endpoint and SQS (with ``workflow``, Step Functions; with ``durable``, Lambda) through interface
        endpoints that admit only the function's security group."""
        flow_logs = self._log_group("VpcFlowLogs")
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
        endpoints = {"Sqs": ("SQS", ec2.InterfaceVpcEndpointAwsService.SQS)}
        if stack.get("workflow"):
            endpoints["StepFunctions"] = ("Step Functions", ec2.InterfaceVpcEndpointAwsService.STEP_FUNCTIONS)
        if stack.get("durable"):
            endpoints["Lambda"] = ("Lambda", ec2.InterfaceVpcEndpointAwsService.LAMBDA_)
        for name, (service_name, service) in endpoints.items():
            endpoint_group = ec2.SecurityGroup(
                self,
                f"{name}EndpointSecurityGroup",
                vpc=vpc,
                description=f"the {service_name} endpoint: HTTPS from the consumer function only",
                allow_all_outbound=False,
            )
            endpoint_group.add_ingress_rule(function_group, ec2.Port.tcp(443), "HTTPS from the consumer")
            vpc.add_interface_endpoint(name, service=service, security_groups=[endpoint_group], open=False)
        consumer.update(vpc=vpc, security_groups=[function_group])


def _started_from_guarded(consumer: dict[str, Any], what: str, processor: str, code: Path) -> None:
    """``-c workflow=true`` / ``durable=true``: guarded mode (the starters run there), and the shipped
    processor that starts the ``what`` unless ``processor`` names another."""
    mode = consumer.setdefault("mode", "guarded")
    if mode != "guarded":
        key = what.split()[0]
        raise ConfigurationError(
            f"context {key}=true starts the {what} from guarded mode; got mode={mode!r}: leave mode unset or "
            "set mode=guarded"
        )
    if "processor" not in consumer:
        consumer.update(processor=processor, code_directory=str(code))


def _tell(consumer: dict[str, Any], variable: str, value: str) -> None:
    """The consumer's processor reads ``value`` from the environment variable ``variable``."""
    consumer["environment"] = {**(consumer.get("environment") or {}), variable: value}


def _hop(options: Mapping[str, Mapping[str, Any]], name: str, consumer: Mapping[str, Any]) -> dict[str, Any]:
    """IdempotentPipeline's options for the hop ``name``: the first pipeline's but what :data:`HOP_OWN` says
    a hop decides itself (its table named after the first's, when that has a name), and ``consumer``."""
    mine = {where: {k: v for k, v in options[where].items() if k not in HOP_OWN[where]} for where in OPTIONS}
    if "table_name" in options["table"]:
        mine["table"]["table_name"] = f"{options['table']['table_name']}-{name}"
    mine["consumer"].update(consumer)
    return _blocks(mine)


def _blocks(options: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """IdempotentPipeline's options objects, of each block's options by name."""
    return {f"{where}_options": OPTIONS[where](**values) for where, values in options.items()}


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """The reference app: ``context`` adds to what the CDK CLI passes (cdk.json and ``-c``)."""
    app = cdk.App(context=dict(context or {}), outdir=outdir)
    # One read of the whole context (cdk.json, -c and the argument): each lookup is a jsii round trip.
    values = app.node.get_all_context()
    own = {
        key: read(key, kind, values[key]) for key, kind in APP.items() if values.get(key) not in (None, "")
    }
    ReferenceStack(app, own.get("stack_name", DEFAULT_STACK_NAME), settings=settings_from(values.get))
    if own.get("nag", True):
        # cdk-nag is a development dependency: imported only when the checks are on.
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    build_app().synth()
