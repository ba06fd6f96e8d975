"""IdempotentConsumer: the Lambda that drains the queue into the table through the bundled runtime."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from aws_cdk import Acknowledgment, Names, Stack, Token, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from idempotent_runtime import contract
from idempotent_runtime.contract import (
    ConfigurationError,
    KeySource,
    LogLevel,
    Metric,
    Mode,
    OnConflict,
    QueueType,
)
from idempotent_runtime.workflows import EXECUTION_ACTIONS, STATE_MACHINE_ACTIONS

from idempotent_pipeline import _keys
from idempotent_pipeline._alarms import ONE_MINUTE, Alarms
from idempotent_pipeline._asset import HANDLER, Target, check_processor, left_out_note, stage_asset
from idempotent_pipeline._facts import describe_queue
from idempotent_pipeline._rules import (
    TOKEN,
    Rule,
    choice,
    describe,
    enforce,
    instance,
    instances,
    integer,
    is_token,
    lazy,
    options_of,
    outside,
    seconds,
    text,
    texts,
    warn,
)
from idempotent_pipeline.options import (
    DEFAULT_LEASE_MARGIN,
    DEFAULT_PYTHON_VERSION,
    DEFAULT_RUNTIME,
    AlarmOptions,
    ConsumerOptions,
)
from idempotent_pipeline.table import IdempotencyTable

# AWS guidance for SQS event sources: visibility timeout at least 6 x the function timeout, so a message is
# not redelivered while retries of the same batch are still running
# (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html). Plus the batching window: the
# event source receives records (making them invisible) and then holds them for up to
# MaximumBatchingWindowInSeconds before it invokes the function.
VISIBILITY_FACTOR = 6
MAX_BATCHING_WINDOW_SECONDS = 300
# Lambda: all environment variables of a function together hold at most 4 KB.
MAX_ENVIRONMENT_BYTES = 4096
# Lambda creates and deletes the function's network interfaces with its role; the Describe actions take no
# resource, and Lambda checks for these actions on "*" when the function is created.
NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)
NETWORK_INTERFACE_REASON = (
    "Lambda attaches the function to the VPC through network interfaces it manages with this role: "
    "ec2:Describe* take no resource and Lambda requires these actions on * (the statement of AWS's "
    "AWSLambdaVPCAccessExecutionRole, without the managed policy)"
)
XRAY_REASON = (
    "X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords take no resource (CDK adds "
    "them on * for a traced function)"
)
EXECUTIONS_REASON = (
    "start_execution_once names each execution for its message's key and reads it back: "
    "states:DescribeExecution on the executions of this one state machine"
)
SHORT_TTL = "idempotent-pipeline:short-ttl"
ASSET_LEFT_OUT = "idempotent-pipeline:asset-left-out"
# What Lambda's SQS poller does with the function's role (CDK's SqsEventSource grants the same).
CONSUME_ACTIONS = (
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
)
CONSUME_KEY_ACTIONS = ("kms:Decrypt",)


def needed_visibility(timeout: int, window: int | None) -> int:
    """The shortest visibility timeout for a function timeout and a batching window (whole seconds)."""
    return VISIBILITY_FACTOR * timeout + (window or 0)


def _path_error(value: object) -> bool:
    try:
        contract.field_path(value)  # type: ignore[arg-type]
    except ConfigurationError:
        return True
    return False


# Environment variables the Lambda runtime sets itself (Lambda refuses a function that sets them).
LAMBDA_RESERVED_VARIABLES = frozenset(
    {
        "_HANDLER",
        "_X_AMZN_TRACE_ID",
        "AWS_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_DEFAULT_REGION",
        "AWS_EXECUTION_ENV",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
        "AWS_LAMBDA_FUNCTION_NAME",
        "AWS_LAMBDA_FUNCTION_VERSION",
        "AWS_LAMBDA_INITIALIZATION_TYPE",
        "AWS_LAMBDA_LOG_GROUP_NAME",
        "AWS_LAMBDA_LOG_STREAM_NAME",
        "AWS_LAMBDA_RUNTIME_API",
        "AWS_REGION",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "LAMBDA_RUNTIME_DIR",
        "LAMBDA_TASK_ROOT",
    }
)

# How the constructs name the settings the contract's cross-setting rules read (contract.SETTINGS_RULES);
# QUEUE_TYPE is the consumed queue's, named per consumer.
SETTING_NAMES = {
    contract.IDEMPOTENCY_MODE.name: "ConsumerOptions.mode",
    contract.KEY_SOURCE.name: "ConsumerOptions.key_source",
    contract.PARTITION_KEY_FIELD.name: "ConsumerOptions.partition_key_field",
    contract.SORT_KEY_FIELD.name: "ConsumerOptions.sort_key_field",
    contract.KEY_PREFIX.name: "ConsumerOptions.key_prefix",
    contract.PROCESSOR.name: "ConsumerOptions.processor",
    contract.FINGERPRINT_FIELDS.name: "ConsumerOptions.fingerprint_fields",
    contract.FINGERPRINT_EXCLUDE.name: "ConsumerOptions.fingerprint_exclude",
    contract.PARTITION_KEY.name: "TableOptions.partition_key_name",
    contract.SORT_KEY.name: "TableOptions.sort_key_name",
    contract.TTL_ATTRIBUTE.name: "TableOptions.time_to_live_attribute",
}


RULES = (
    Rule(
        ("fifo", "dead_letter_queue_fifo"),
        lambda fifo, dlq_fifo: None not in (fifo, dlq_fifo) and fifo != dlq_fifo,
        "dead_letter_queue must be a {queue_kind} queue like the queue it serves; got a {dlq_kind} queue: "
        "{dead_letter_queue_name}",
    ),
    Rule(
        ("key_source", "partition_key_field", "sort_key_field"),
        lambda source, pk, sk: source != KeySource.FIELDS and (pk is not None or sk is not None),
        "ConsumerOptions.partition_key_field and sort_key_field apply only to key_source 'fields'; got "
        "key_source {key_source.value!r} with fields {partition_key_field!r}, {sort_key_field!r}",
    ),
    Rule(
        ("key_source", "partition_key_field"),
        lambda source, field: source == KeySource.FIELDS and field is not None and _path_error(field),
        "ConsumerOptions.partition_key_field must be a field path such as 'order.id' (no empty segment); "
        "got {partition_key_field!r}",
    ),
    Rule(
        ("key_source", "sort_key_field"),
        lambda source, field: source == KeySource.FIELDS and field is not None and _path_error(field),
        "ConsumerOptions.sort_key_field must be a field path such as 'order.line' (no empty segment); "
        "got {sort_key_field!r}",
    ),
    Rule(
        ("key_source", "partition_field", "sort_field"),
        lambda source, pk, sk: source == KeySource.FIELDS and pk == sk,
        "ConsumerOptions.partition_key_field and sort_key_field must differ; both are {partition_field!r}",
    ),
    Rule(
        ("fingerprint_fields",),
        lambda fields: fields is not None and not fields,
        "ConsumerOptions.fingerprint_fields must name at least one field (None: the whole body); got []",
    ),
    Rule(
        ("fingerprint_fields",),
        lambda fields: fields is not None and any(_path_error(f) for f in fields),
        "ConsumerOptions.fingerprint_fields must be field paths such as 'order.id'; got "
        "{fingerprint_fields!r}",
    ),
    Rule(
        ("fingerprint_exclude",),
        lambda fields: fields is not None and any(_path_error(f) for f in fields),
        "ConsumerOptions.fingerprint_exclude must be field paths such as 'sent_at'; got "
        "{fingerprint_exclude!r}",
    ),
    Rule(
        ("dedup_ttl",),
        lambda ttl: ttl is not None and ttl <= 0,
        "ConsumerOptions.dedup_ttl must be greater than 0 seconds (None: never expire); got {dedup_ttl} "
        "seconds",
    ),
    Rule(
        ("document_ttl",),
        lambda ttl: ttl is not None and ttl <= 0,
        "ConsumerOptions.document_ttl must be greater than 0 seconds (None: never expire); "
        "got {document_ttl} seconds",
    ),
    Rule(
        ("mode", "document_ttl_set"),
        lambda mode, document_ttl: mode != Mode.DOCUMENT and document_ttl,
        "ConsumerOptions.document_ttl applies only to mode 'document'; got mode {mode.value!r}",
    ),
    Rule(
        ("mode", "lease_duration_set"),
        lambda mode, lease: mode != Mode.GUARDED and lease,
        "ConsumerOptions.lease_duration applies only to mode 'guarded'; got mode {mode.value!r}",
    ),
    Rule(
        ("mode", "lease_margin_set"),
        lambda mode, margin: mode != Mode.GUARDED and margin,
        "ConsumerOptions.lease_margin applies only to mode 'guarded'; got mode {mode.value!r}",
    ),
    Rule(
        ("lease_duration",),
        lambda lease: lease is not None and lease <= 0,
        "ConsumerOptions.lease_duration must be greater than 0 seconds; got {lease_duration} seconds",
    ),
    Rule(
        ("timeout",),
        outside(*contract.TIMEOUT_SECONDS_RANGE),
        "ConsumerOptions.timeout must be between 1 and 900 seconds; got {timeout} seconds",
    ),
    Rule(
        ("memory_size",),
        outside(*contract.MEMORY_SIZE_RANGE),
        "ConsumerOptions.memory_size must be between {memory_range[0]} and {memory_range[1]}; got "
        "{memory_size}",
    ),
    Rule(
        ("batch_size", "max_batch_size"),
        lambda size, most: size is not None and not 1 <= size <= most,
        "ConsumerOptions.batch_size must be between 1 and {max_batch_size} ({queue_kind} queue); "
        "got {batch_size}",
    ),
    Rule(
        ("fifo", "max_batching_window"),
        lambda fifo, window: fifo is not False and window is not None,
        "ConsumerOptions.max_batching_window applies only to standard queues (SQS does not batch FIFO "
        "queues over time); got {max_batching_window} seconds with a FIFO queue",
    ),
    Rule(
        ("max_batching_window",),
        outside(0, MAX_BATCHING_WINDOW_SECONDS),
        "ConsumerOptions.max_batching_window must be at most 300 seconds; got {max_batching_window} seconds",
    ),
    Rule(
        ("batch_size", "max_batching_window"),
        lambda size, window: size is not None and size > contract.FIFO_MAX_BATCH_SIZE and not window,
        "ConsumerOptions.batch_size above 10 needs max_batching_window of at least 1 second (an SQS event "
        "source rule); got batch_size {batch_size} without one",
    ),
    Rule(
        ("max_concurrency",),
        outside(*contract.MAX_CONCURRENCY_RANGE),
        "ConsumerOptions.max_concurrency must be between 2 and 1000; got {max_concurrency}",
    ),
    Rule(
        ("reserved_concurrent_executions",),
        outside(1),
        "ConsumerOptions.reserved_concurrent_executions must be at least 1; got "
        "{reserved_concurrent_executions}",
    ),
    Rule(
        ("max_workers",),
        outside(*contract.MAX_WORKERS_RANGE),
        "ConsumerOptions.max_workers must be between 1 and 64; got {max_workers}",
    ),
    Rule(
        ("metrics_namespace",),
        lambda namespace: namespace is None or not contract.METRICS_NAMESPACE_PATTERN.match(namespace),
        "ConsumerOptions.metrics_namespace must be 1 to 255 characters without ':' or a leading space, "
        "not beginning with 'AWS/' (the namespaces of AWS services); got {metrics_namespace!r}",
    ),
    Rule(
        ("lambda_reserved",),
        bool,
        "ConsumerOptions.environment may not set variables Lambda reserves for itself; got "
        "{lambda_reserved_names}",
    ),
    Rule(
        ("dead_letter_queue_is_queue",),
        bool,
        "dead_letter_queue must be another queue than the one the consumer reads ({queue_path}): records "
        "it rejects would come back to it forever",
    ),
    Rule(
        ("overridden",),
        bool,
        "ConsumerOptions.environment may not set the runtime's own variables (use the matching options); "
        "got {overridden_names}",
    ),
    Rule(
        ("visibility", "timeout", "max_batching_window"),
        lambda visibility, timeout, window: (
            visibility is not None and visibility < needed_visibility(timeout, window)
        ),
        "visibility_timeout of queue {queue_path} must be at least 6 x the function timeout ({timeout} "
        "seconds){window_text} = {needed_visibility} seconds; got {visibility} seconds",
    ),
    Rule(
        ("own_age_alarm", "queue_retention"),
        lambda age, retention: None not in (age, retention) and age >= retention,
        "AlarmOptions.max_message_age ({own_age_alarm} seconds) must be shorter than the retention period "
        "of queue {queue_path} ({queue_retention} seconds): no message gets that old before it expires, so "
        "the message-age alarm could never fire",
    ),
    Rule(
        ("vpc", "vpc_subnets"),
        lambda vpc, subnets: subnets and not vpc,
        "ConsumerOptions.vpc_subnets needs vpc; got subnets without a VPC",
    ),
    Rule(
        ("vpc", "security_groups"),
        lambda vpc, groups: groups and not vpc,
        "ConsumerOptions.security_groups needs vpc; got security groups without a VPC",
    ),
    Rule(
        ("environment_bytes",),
        lambda size: size > MAX_ENVIRONMENT_BYTES,
        "the function's environment variables hold {environment_bytes} bytes, over Lambda's 4 KB; shorten "
        "fingerprint_fields / fingerprint_exclude or ConsumerOptions.environment",
    ),
    # -- warnings ---------------------------------------------------------------------------------------
    Rule(
        ("fifo",),
        lambda fifo: fifo is None,
        "queue {queue_path} is imported from a deploy-time ARN, so its type is unknown: treated as FIFO. "
        "Import it with sqs.Queue.from_queue_attributes(..., fifo=True) (or a standard queue by its ARN "
        "text) to say which",
        warning="idempotent-pipeline:queue-type-unknown",
    ),
    Rule(
        ("reserved_concurrent_executions", "max_concurrency"),
        lambda reserved, most: reserved is not None and most is not None and reserved < most,
        "ConsumerOptions.reserved_concurrent_executions ({reserved_concurrent_executions}) is below "
        "max_concurrency ({max_concurrency}): the event source will be throttled",
        warning="idempotent-pipeline:throttling",
    ),
    Rule(
        ("reserved_concurrent_executions", "max_concurrency"),
        lambda reserved, most: reserved is not None and most is None,
        "ConsumerOptions.reserved_concurrent_executions ({reserved_concurrent_executions}) is set without "
        "max_concurrency: the event source's pollers invoke beyond the reserved concurrency, and throttled "
        "receives count toward the queue's max receives, so messages can reach the DLQ unprocessed; set "
        "max_concurrency (at most the reserved concurrency) instead, or as well",
        warning="idempotent-pipeline:reserved-concurrency",
    ),
    Rule(
        ("reserved_concurrent_executions", "max_receive_count"),
        lambda reserved, receives: reserved is not None and receives is not None and receives < 5,
        "the queue's max_receive_count is {max_receive_count} with reserved concurrency: a few throttled "
        "receives move a message to the DLQ unprocessed; AWS advises at least 5",
        warning="idempotent-pipeline:low-max-receive-count",
    ),
    Rule(
        ("lifetime", "arrival_window"),
        lambda lifetime, window: lifetime is not None and window is not None and lifetime < window,
        "{lifetime_prop} ({lifetime} seconds) is shorter than the time a duplicate can still arrive from "
        "queue "
        "{queue_path} ({arrival_text}): a redelivery after its record expired is processed again; make it at "
        "least {arrival_window} seconds, or None (never expire)",
        warning=SHORT_TTL,
    ),
)


# Python runtimes from 3.12 on run on Amazon Linux 2023 (glibc 2.34), the platform the asset's wheels are for.
OLDEST_PYTHON_MINOR = 12


def python_runtime(runtime: object) -> tuple[lambda_.Runtime, str]:
    """``ConsumerOptions.runtime`` and its Python version ("3.14"), which chooses the wheels of
    requirements.txt. The default is known without asking jsii."""
    if runtime is None or runtime is DEFAULT_RUNTIME:
        return DEFAULT_RUNTIME, DEFAULT_PYTHON_VERSION
    chosen: lambda_.Runtime = instance(
        "ConsumerOptions.runtime", runtime, lambda_.Runtime, "a lambda_.Runtime (e.g. Runtime.PYTHON_3_14)"
    )
    name = chosen.name
    match = re.fullmatch(r"python3\.(\d+)", name)
    if (
        chosen.family != lambda_.RuntimeFamily.PYTHON
        or match is None
        or int(match.group(1)) < OLDEST_PYTHON_MINOR
    ):
        raise ConfigurationError(
            f"ConsumerOptions.runtime must be a Python runtime from python3.{OLDEST_PYTHON_MINOR} on (Amazon "
            f"Linux 2023, for which the asset's wheels are installed), e.g. Runtime.PYTHON_3_14; got {name}"
        )
    return chosen, f"3.{match.group(1)}"


class IdempotentConsumer(Construct):
    """A Lambda function running the bundled idempotent runtime on an SQS queue (FIFO or standard).

    The code asset is the ``idempotent_runtime`` package plus the Python sources of ``code_directory`` and
    what ``ConsumerOptions.include`` names, and the wheels of its ``requirements.txt``, staged without Docker;
    handler ``idempotent_runtime.handler.handler`` on ``ConsumerOptions.runtime`` (pinned by default). The
    SQS event source reports batch item failures. The function gets its own role with exactly the actions
    the runtime uses and an explicit log group; its environment follows the runtime contract.

    Alarms (``alarm_options``): failed records over a window, quarantined ≥ 1, conflicts ≥ 1,
    misconfigured ≥ 1, invocation errors ≥ 1; and the queue's oldest message and the DLQ's depth when no
    :class:`Messaging` alarms on them already.

    :param queue: the SQS queue to consume (FIFO or standard). Required.
    :param table: the :class:`IdempotencyTable` the runtime writes (``IdempotencyTable.from_table`` for an
        existing one); its key names travel with it. Required.
    :param dead_letter_queue: where the runtime sends a record it rejects, at once and with a reason
        (``DLQ_URL``). Default: the queue's own dead-letter queue when it comes from :class:`Messaging` or is
        an ``sqs.Queue`` with one; else none (rejected records reach a DLQ only through redrive).
    :param options: :class:`ConsumerOptions`. Default: ``ConsumerOptions()``.
    :param alarm_options: :class:`AlarmOptions`. Default: ``AlarmOptions()``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue: sqs.IQueue,
        table: IdempotencyTable,
        dead_letter_queue: sqs.IQueue | None = None,
        options: ConsumerOptions | None = None,
        alarm_options: AlarmOptions | None = None,
    ) -> None:
        super().__init__(scope, id)
        o = options_of("options", options, ConsumerOptions)
        queue = instance("queue", queue, sqs.IQueue, "an sqs.IQueue")
        if queue is None:
            raise ConfigurationError("queue is required: the SQS queue the consumer reads")
        if not isinstance(table, IdempotencyTable):
            raise ConfigurationError(
                "table must be an IdempotencyTable (IdempotencyTable.from_table(...) for an existing "
                "table, so "
                f"its key names travel with it); got {type(table).__name__} {table!r}"
            )
        dead_letter_queue = instance("dead_letter_queue", dead_letter_queue, sqs.IQueue, "an sqs.IQueue")
        facts = describe_queue(queue)
        if dead_letter_queue is None:
            dead_letter_queue = facts.dead_letter_queue
        dlq_facts = describe_queue(dead_letter_queue) if dead_letter_queue is not None else None

        mode = choice("ConsumerOptions.mode", o.mode, Mode)
        key_source = choice("ConsumerOptions.key_source", o.key_source, KeySource)
        on_conflict = choice("ConsumerOptions.on_conflict", o.on_conflict, OnConflict)
        level = o.log_level.upper() if isinstance(o.log_level, str) else o.log_level
        log_level = choice("ConsumerOptions.log_level", level, LogLevel) if level is not None else None
        queue_type = QueueType.STANDARD if facts.fifo is False else QueueType.FIFO
        partition_field = text("ConsumerOptions.partition_key_field", o.partition_key_field)
        sort_field = text("ConsumerOptions.sort_key_field", o.sort_key_field)
        if key_source == KeySource.FIELDS:
            pk_field = contract.DEFAULT_PARTITION_KEY_FIELD if partition_field is None else partition_field
            sk_field = contract.DEFAULT_SORT_KEY_FIELD if sort_field is None else sort_field
        else:
            pk_field = sk_field = None
        instance(
            "ConsumerOptions.log_retention",
            o.log_retention,
            logs.RetentionDays,
            "a logs.RetentionDays (e.g. RetentionDays.ONE_MONTH)",
        )
        instance(
            "ConsumerOptions.tracing", o.tracing, lambda_.Tracing, "a lambda_.Tracing (e.g. Tracing.ACTIVE)"
        )
        instance(
            "ConsumerOptions.architecture",
            o.architecture,
            lambda_.Architecture,
            "a lambda_.Architecture (Architecture.ARM_64 or Architecture.X86_64)",
        )
        instances("ConsumerOptions.layers", o.layers, lambda_.ILayerVersion, "lambda_.ILayerVersion")
        instance("ConsumerOptions.vpc", o.vpc, ec2.IVpc, "an ec2.IVpc")
        instance("ConsumerOptions.vpc_subnets", o.vpc_subnets, ec2.SubnetSelection, "an ec2.SubnetSelection")
        instances(
            "ConsumerOptions.security_groups", o.security_groups, ec2.ISecurityGroup, "ec2.ISecurityGroup"
        )
        extra = dict(instance("ConsumerOptions.environment", o.environment, Mapping, "a mapping") or {})
        if not all(isinstance(name, str) and isinstance(value, str) for name, value in extra.items()):
            raise ConfigurationError(
                f"ConsumerOptions.environment must map names to strings; got {o.environment!r}"
            )
        overridden = sorted((contract.VARIABLE_NAMES | contract.RETIRED_VARIABLES.keys()).intersection(extra))
        lambda_reserved = sorted(LAMBDA_RESERVED_VARIABLES.intersection(extra))
        dedup_ttl = seconds("ConsumerOptions.dedup_ttl", o.dedup_ttl)
        document_ttl = seconds("ConsumerOptions.document_ttl", o.document_ttl)
        timeout = seconds("ConsumerOptions.timeout", o.timeout)
        values: dict[str, Any] = {
            "mode": mode,
            "key_source": key_source,
            "fifo": facts.fifo,
            "queue_kind": "FIFO" if queue_type == QueueType.FIFO else "standard",
            "queue_name": lazy(lambda: describe(queue, queue.queue_name)),
            "queue_path": lazy(lambda: queue.node.path),
            "dead_letter_queue_fifo": dlq_facts.fifo if dlq_facts is not None else None,
            "dlq_kind": "FIFO" if dlq_facts is not None and dlq_facts.fifo else "standard",
            "dead_letter_queue_name": lazy(
                lambda: describe(dead_letter_queue, dead_letter_queue.queue_name) if dead_letter_queue else ""
            ),
            "partition_key_field": partition_field,
            "sort_key_field": sort_field,
            "partition_field": pk_field,
            "sort_field": sk_field,
            "processor": text("ConsumerOptions.processor", o.processor),
            "key_prefix": text("ConsumerOptions.key_prefix", o.key_prefix),
            "fingerprint_fields": texts("ConsumerOptions.fingerprint_fields", o.fingerprint_fields),
            "fingerprint_exclude": texts("ConsumerOptions.fingerprint_exclude", o.fingerprint_exclude),
            "dedup_ttl": dedup_ttl,
            "document_ttl": document_ttl,
            "document_ttl_set": o.document_ttl is not None,
            "lease_duration": seconds("ConsumerOptions.lease_duration", o.lease_duration),
            "lease_duration_set": o.lease_duration is not None,
            "lease_margin": seconds("ConsumerOptions.lease_margin", o.lease_margin),
            "lease_margin_set": o.lease_margin is not DEFAULT_LEASE_MARGIN,
            "timeout": timeout,
            "needed_visibility": lazy(lambda: needed_visibility(timeout, values["max_batching_window"])),
            "window_text": lazy(
                lambda: (
                    f" + the batching window ({values['max_batching_window']} seconds)"
                    if values["max_batching_window"]
                    else ""
                )
            ),
            "memory_size": integer("ConsumerOptions.memory_size", o.memory_size),
            "memory_range": contract.MEMORY_SIZE_RANGE,
            "batch_size": integer("ConsumerOptions.batch_size", o.batch_size),
            "max_batch_size": (
                contract.STANDARD_MAX_BATCH_SIZE
                if queue_type == QueueType.STANDARD
                else contract.FIFO_MAX_BATCH_SIZE
            ),
            "max_batching_window": seconds("ConsumerOptions.max_batching_window", o.max_batching_window),
            "max_concurrency": integer("ConsumerOptions.max_concurrency", o.max_concurrency),
            "reserved_concurrent_executions": integer(
                "ConsumerOptions.reserved_concurrent_executions", o.reserved_concurrent_executions
            ),
            "max_workers": integer("ConsumerOptions.max_workers", o.max_workers),
            "metrics_namespace": text("ConsumerOptions.metrics_namespace", o.metrics_namespace),
            "overridden": overridden,
            "overridden_names": ", ".join(overridden),
            "lambda_reserved": lambda_reserved,
            "lambda_reserved_names": ", ".join(lambda_reserved),
            # Two queues of the app are two constructs; two imports of one queue share its ARN.
            "dead_letter_queue_is_queue": dead_letter_queue is queue
            or (
                dead_letter_queue is not None
                and not isinstance(queue, sqs.Queue)
                and not isinstance(dead_letter_queue, sqs.Queue)
                and dead_letter_queue.queue_arn == queue.queue_arn
            ),
            "visibility": facts.visibility_seconds,
            "max_receive_count": facts.max_receive_count,
            "vpc": o.vpc is not None,
            "vpc_subnets": o.vpc_subnets is not None,
            "security_groups": bool(o.security_groups),
        }
        # Both decide what the asset holds: known at synth, never deploy-time values.
        code_directory = o.code_directory
        if isinstance(code_directory, os.PathLike):
            code_directory = os.fspath(code_directory)
        if text("ConsumerOptions.code_directory", code_directory) is TOKEN:
            raise ConfigurationError(
                f"ConsumerOptions.code_directory must be known at synth (it is bundled then); got the "
                f"deploy-time value {code_directory!r}"
            )
        patterns = {
            prop: texts(f"ConsumerOptions.{prop}", getattr(o, prop)) for prop in ("include", "exclude")
        }
        for prop, value in patterns.items():
            if value is TOKEN:
                raise ConfigurationError(
                    f"ConsumerOptions.{prop} must be known at synth (it decides what the asset holds); got a "
                    f"deploy-time value in {getattr(o, prop)!r}"
                )
        _lifetime(values, mode, facts)

        # -- environment: the runtime contract ----------------------------------------------------------
        env: dict[str, Any] = {
            **extra,
            contract.TABLE_NAME.name: table.table.table_name,
            contract.PARTITION_KEY.name: table.partition_key_name,
            contract.SORT_KEY.name: table.sort_key_name,
            contract.TTL_ATTRIBUTE.name: table.time_to_live_attribute,
            contract.DEDUP_TTL_SECONDS.name: _seconds_text(o.dedup_ttl, dedup_ttl),
            contract.IDEMPOTENCY_MODE.name: mode.value,
            contract.KEY_SOURCE.name: key_source.value,
            contract.QUEUE_TYPE.name: queue_type.value,
            contract.ON_CONFLICT.name: on_conflict.value,
            contract.METRICS_NAMESPACE.name: o.metrics_namespace,
        }
        if mode == Mode.DOCUMENT:
            env[contract.DOCUMENT_TTL_SECONDS.name] = _seconds_text(o.document_ttl, document_ttl)
        if key_source == KeySource.FIELDS:  # a deploy-time value goes as it is: the runtime checks it
            env[contract.PARTITION_KEY_FIELD.name] = o.partition_key_field if pk_field is TOKEN else pk_field
            env[contract.SORT_KEY_FIELD.name] = o.sort_key_field if sk_field is TOKEN else sk_field
        optional = {
            contract.KEY_PREFIX.name: o.key_prefix or None,
            contract.FINGERPRINT_FIELDS.name: _json_list(o.fingerprint_fields),
            contract.FINGERPRINT_EXCLUDE.name: _json_list(o.fingerprint_exclude),
            contract.PROCESSOR.name: o.processor,
            contract.DLQ_URL.name: dead_letter_queue.queue_url if dead_letter_queue is not None else None,
            contract.LEASE_SECONDS.name: _seconds_text(o.lease_duration, values["lease_duration"])
            if o.lease_duration is not None
            else None,
            contract.LEASE_MARGIN_SECONDS.name: _seconds_text(o.lease_margin, values["lease_margin"])
            if mode == Mode.GUARDED
            else None,
            contract.MAX_WORKERS.name: str(o.max_workers) if o.max_workers is not None else None,
            contract.LOG_LEVEL.name: log_level.value if log_level is not None else None,
        }
        if dead_letter_queue is not None and facts.max_receive_count not in (None, TOKEN):
            # A record failing on its last receive goes to DLQ_URL with its reason, not silently by redrive.
            optional[contract.MAX_RECEIVE_COUNT.name] = str(facts.max_receive_count)
        env.update({name: value for name, value in optional.items() if value is not None})
        values["environment_bytes"] = sum(
            len(name.encode()) + len(value.encode())
            for name, value in env.items()
            if isinstance(value, str) and not is_token(value)
        )
        alarms = Alarms.read(self, alarm_options)
        # The consumer alarms on the queue's age itself only when no Messaging does.
        values["own_age_alarm"] = (
            alarms.max_message_age_seconds if alarms.enabled and not facts.alarmed else None
        )
        values["queue_retention"] = facts.retention_seconds
        enforce(self, RULES, values)
        _check_settings(
            values,
            queue,
            table,
            {contract.PARTITION_KEY_FIELD.name: pk_field, contract.SORT_KEY_FIELD.name: sk_field},
        )
        user_code, unchecked = check_processor(o.processor, code_directory, patterns["exclude"] or ())
        if unchecked is not None:
            warn(self, "idempotent-pipeline:processor-unchecked", unchecked)

        self.mode: Mode = mode
        self.queue_type: QueueType = queue_type
        self.queue = queue
        self.table = table
        self.dead_letter_queue = dead_letter_queue
        self.metrics_namespace: str = o.metrics_namespace

        # -- resources ----------------------------------------------------------------------------------
        runtime, python_version = python_runtime(o.runtime)
        architecture = o.architecture or lambda_.Architecture.ARM_64
        target = Target(
            python_version=python_version,
            architecture="arm64" if o.architecture is None else str(architecture.name),
        )
        asset, left_out = stage_asset(user_code, patterns["include"] or (), patterns["exclude"] or (), target)
        note = left_out_note(left_out)
        if note is not None:
            warn(self, ASSET_LEFT_OUT, note)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Idempotent consumer: reads the queue, writes the idempotency table",
        )
        self.log_group = logs.LogGroup(self, "LogGroup", retention=o.log_retention)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=runtime,
            handler=HANDLER,
            code=lambda_.Code.from_asset(asset),
            role=self.role,
            log_group=self.log_group,
            timeout=o.timeout,
            memory_size=o.memory_size,
            architecture=architecture,
            reserved_concurrent_executions=o.reserved_concurrent_executions,
            environment=env,
            description=f"Idempotent consumer ({mode.value} mode)",
            vpc=o.vpc,
            vpc_subnets=o.vpc_subnets,
            security_groups=list(o.security_groups) if o.security_groups else None,
            tracing=o.tracing,
            layers=list(o.layers) if o.layers else None,
        )
        self.log_group.grant_write(self.role)
        if o.tracing is not None and o.tracing != lambda_.Tracing.DISABLED:
            Validations.of(self.role).acknowledge(
                Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=XRAY_REASON)
            )
        self.network_interface_policy: iam.Policy | None = None
        if o.vpc is not None:
            self.network_interface_policy = iam.Policy(
                self,
                "NetworkInterfacePolicy",
                roles=[self.role],
                statements=[iam.PolicyStatement(actions=list(NETWORK_INTERFACE_ACTIONS), resources=["*"])],
            )
            # Lambda checks these permissions when it creates the function.
            self.function.node.add_dependency(self.network_interface_policy)
            Validations.of(self.network_interface_policy).acknowledge(
                Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=NETWORK_INTERFACE_REASON)
            )

        self.table_grant = table.table.grant(self.function, *contract.TABLE_ACTIONS[mode])
        if table.encryption_key is not None:
            _keys.grant_through(self.function, table.encryption_key, contract.TABLE_KEY_ACTIONS, "dynamodb")
        if dead_letter_queue is not None:
            self._grant_dead_letter_queue(
                dead_letter_queue,
                dlq_facts.encryption_key
                if dlq_facts is not None and dlq_facts.encryption_key_known
                else dead_letter_queue.encryption_master_key,
            )
        self.event_source = self._consume(
            queue,
            facts.encryption_key if facts.encryption_key_known else queue.encryption_master_key,
            o,
        )

        # -- alarms -------------------------------------------------------------------------------------
        self._function_name = self.function.function_name
        self.failed_alarm: cloudwatch.Alarm | None = None
        self.quarantined_alarm: cloudwatch.Alarm | None = None
        self.conflicts_alarm: cloudwatch.Alarm | None = None
        self.misconfigured_alarm: cloudwatch.Alarm | None = None
        self.errors_alarm: cloudwatch.Alarm | None = None
        self.message_age_alarm: cloudwatch.Alarm | None = None
        self.dead_letter_queue_alarm: cloudwatch.Alarm | None = None
        if alarms.enabled:
            self.failed_alarm = alarms.alarm(
                self,
                "FailedAlarm",
                self.metric_failed(period=alarms.failed_period),
                threshold=alarms.failed_threshold or 1,
                description="records failed and were left for SQS to retry (throttling, timeouts, or a "
                "deployment that cannot work): see the function's logs",
            )
            self.quarantined_alarm = alarms.alarm(
                self,
                "QuarantinedAlarm",
                self.metric_quarantined(),
                threshold=1,
                description="records were rejected and sent to the dead-letter queue with a reason",
            )
            self.conflicts_alarm = alarms.alarm(
                self,
                "ConflictsAlarm",
                self.metric_conflicts(),
                threshold=1,
                description="messages arrived whose key was already done with different content",
            )
            self.misconfigured_alarm = alarms.alarm(
                self,
                "MisconfiguredAlarm",
                self.metric_misconfigured(),
                threshold=1,
                description="records failed because the deployment is wrong (table, keys, permissions, KMS): "
                "they are retried, not quarantined; see the function's ERROR log lines",
            )
            self.errors_alarm = alarms.alarm(
                self,
                "ErrorsAlarm",
                self.function.metric_errors(period=ONE_MINUTE, statistic="Sum"),
                threshold=1,
                description=(
                    "whole invocations failed (timeout, crash, a configuration refused at start): the "
                    "runtime's own metrics do not see these"
                ),
            )
            if not facts.alarmed:
                self.message_age_alarm = alarms.alarm(
                    self,
                    "MessageAgeAlarm",
                    queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, statistic="Maximum"),
                    threshold=alarms.max_message_age,
                    description="the oldest message in the queue is older than expected: the consumer lags",
                )
            if dead_letter_queue is not None and not (dlq_facts is not None and dlq_facts.alarmed):
                self.dead_letter_queue_alarm = alarms.alarm(
                    self,
                    "DeadLetterQueueAlarm",
                    dead_letter_queue.metric_approximate_number_of_messages_visible(
                        period=ONE_MINUTE, statistic="Maximum"
                    ),
                    threshold=1,
                    description=(
                        "messages the pipeline could not process are waiting in the dead-letter queue"
                    ),
                )
        self.alarms: tuple[cloudwatch.Alarm, ...] = tuple(
            alarm
            for alarm in (
                self.failed_alarm,
                self.quarantined_alarm,
                self.conflicts_alarm,
                self.misconfigured_alarm,
                self.errors_alarm,
                self.message_age_alarm,
                self.dead_letter_queue_alarm,
            )
            if alarm is not None
        )

    # -- grants ---------------------------------------------------------------------------------------------

    def _consume(self, queue: sqs.IQueue, key: Any, o: ConsumerOptions) -> lambda_.EventSourceMapping:
        """The SQS event source as CDK's SqsEventSource makes it (the same construct id, so the same
        mapping), whose key grant is limited to use through SQS: SqsEventSource grants the key outright."""
        mapping = self.function.add_event_source_mapping(
            f"SqsEventSource:{Names.node_unique_id(queue.node)}",
            event_source_arn=queue.queue_arn,
            batch_size=o.batch_size,
            max_batching_window=o.max_batching_window,
            max_concurrency=o.max_concurrency,
            report_batch_item_failures=True,
        )
        iam.Grant.add_to_principal(
            grantee=self.function, actions=list(CONSUME_ACTIONS), resource_arns=[queue.queue_arn]
        )
        if key is not None:
            _keys.grant_through(self.function, key, CONSUME_KEY_ACTIONS, "sqs")
        return mapping

    def _grant_dead_letter_queue(self, dead_letter_queue: sqs.IQueue, key: Any) -> iam.Grant:
        grant = iam.Grant.add_to_principal(
            grantee=self.function,
            actions=list(contract.DLQ_ACTIONS),
            resource_arns=[dead_letter_queue.queue_arn],
        )
        if key is not None:
            _keys.grant_through(self.function, key, contract.DLQ_KEY_ACTIONS, "sqs")
        return grant

    def grant_send_to_dead_letter_queue(self, dead_letter_queue: sqs.IQueue) -> iam.Grant:
        """``sqs:SendMessage`` on a queue (+ ``kms:GenerateDataKey``/``kms:Decrypt`` on its customer key)."""
        return self._grant_dead_letter_queue(dead_letter_queue, dead_letter_queue.encryption_master_key)

    def grant_start_execution(self, state_machine: sfn.IStateMachine) -> iam.Grant:
        """What ``idempotent_runtime.workflows.start_execution_once`` asks of ``state_machine`` (a STANDARD
        workflow): ``states:StartExecution`` and ``states:DescribeStateMachine`` on it (with its customer
        managed key, as CDK grants a start), ``states:DescribeExecution`` on its executions. An Express state
        machine is refused: Step Functions does not check its execution names."""
        kind = getattr(state_machine, "state_machine_type", None)  # known for a StateMachine defined here
        if kind is not None and kind != sfn.StateMachineType.STANDARD:
            raise ConfigurationError(
                f"grant_start_execution: state machine {state_machine.node.path!r} is {kind.value}; "
                "start_execution_once starts STANDARD workflows only (Step Functions does not check Express "
                "execution names): use state_machine_type=StateMachineType.STANDARD"
            )
        grant = state_machine.grant_start_execution(self.function)
        grant = grant.combine(state_machine.grant(self.function, *STATE_MACHINE_ACTIONS))
        executions = state_machine.grant_execution(self.function, *EXECUTION_ACTIONS)
        for statement in executions.principal_statements:
            for resource in statement.resources:
                Validations.of(self.role).acknowledge(
                    Acknowledgment(id=_wildcard_finding(self, resource), reason=EXECUTIONS_REASON)
                )
        return grant.combine(executions)

    # -- metrics: the runtime's Embedded Metric Format counters ---------------------------------------------

    def metric(self, metric_name: Metric | str, **options: Any) -> cloudwatch.Metric:
        """One of the runtime's counters (``contract.Metric``) for this function: Sum per minute unless
        ``options`` (``cloudwatch.MetricOptions`` fields: period, statistic, label, ...) say otherwise."""
        options.setdefault("period", ONE_MINUTE)
        options.setdefault("statistic", "Sum")
        return cloudwatch.Metric(
            namespace=self.metrics_namespace,
            metric_name=Metric(metric_name).value,
            dimensions_map={contract.METRICS_DIMENSION: self._function_name},
            **options,
        )

    def metric_processed(self, **options: Any) -> cloudwatch.IMetric:
        """Records whose effect this function applied."""
        return self.metric(Metric.PROCESSED, **options)

    def metric_duplicates(self, **options: Any) -> cloudwatch.IMetric:
        """Records whose key was already done with the same content (or conflicts treated as duplicates)."""
        return self.metric(Metric.DUPLICATES, **options)

    def metric_conflicts(self, **options: Any) -> cloudwatch.IMetric:
        """Records whose key was done with different content (quarantined, or duplicates by choice)."""
        return self.metric(Metric.CONFLICTS, **options)

    def metric_failed(self, **options: Any) -> cloudwatch.IMetric:
        """Records left for SQS to deliver again."""
        return self.metric(Metric.FAILED, **options)

    def metric_quarantined(self, **options: Any) -> cloudwatch.IMetric:
        """Records sent to the dead-letter queue with a reason."""
        return self.metric(Metric.QUARANTINED, **options)

    def metric_misconfigured(self, **options: Any) -> cloudwatch.IMetric:
        """Records failed because the deployment is wrong (counted within ``failed``)."""
        return self.metric(Metric.MISCONFIGURED, **options)

    def metric_duplicate_rate(self, **options: Any) -> cloudwatch.IMetric:
        """Duplicates as a percentage of processed + duplicates (a math expression)."""
        period = options.pop("period", ONE_MINUTE)
        return cloudwatch.MathExpression(
            expression="100 * duplicates / (processed + duplicates)",
            using_metrics={
                "duplicates": self.metric_duplicates(period=period),
                "processed": self.metric_processed(period=period),
            },
            label=options.pop("label", "duplicate rate (%)"),
            period=period,
            **options,
        )


def _wildcard_finding(scope: Construct, resource: str) -> str:
    """cdk-nag's id of the IAM5 finding a wildcard ``resource`` raises: the resolved ARN written as cdk-nag
    writes it (a Ref as ``<Name>``, the parts of a Fn::Join joined, other functions as compact JSON)."""

    def flat(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and "Fn::Join" in value:
            delimiter, parts = value["Fn::Join"]
            return str(delimiter).join(flat(part) for part in parts)
        if isinstance(value, dict) and "Ref" in value:
            return f"<{value['Ref']}>"
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            return f"<{'.'.join(value['Fn::GetAtt'])}>"
        return json.dumps(value, separators=(",", ":"))

    return f"AwsSolutions-IAM5[Resource::{flat(Stack.of(scope).resolve(resource))}]"


def _check_settings(
    values: dict[str, Any], queue: sqs.IQueue, table: IdempotencyTable, fields: dict[str, Any]
) -> None:
    """The contract's cross-setting rules on the settings as the function will get them (``fields``: the
    key fields, defaults applied), in the options' names; a deploy-time value skips the rules reading it."""
    table_names = {
        contract.PARTITION_KEY.name: table.partition_key_name,
        contract.SORT_KEY.name: table.sort_key_name,
        contract.TTL_ATTRIBUTE.name: table.time_to_live_attribute,
    }
    settings = {
        **fields,
        **{name: text(SETTING_NAMES[name], value) for name, value in table_names.items()},
        contract.IDEMPOTENCY_MODE.name: values["mode"],
        contract.KEY_SOURCE.name: values["key_source"],
        contract.QUEUE_TYPE.name: QueueType.STANDARD if values["fifo"] is False else QueueType.FIFO,
        contract.KEY_PREFIX.name: values["key_prefix"] or "",
        contract.PROCESSOR.name: values["processor"],
        contract.FINGERPRINT_FIELDS.name: values["fingerprint_fields"],
        contract.FINGERPRINT_EXCLUDE.name: values["fingerprint_exclude"],
    }
    names = {**SETTING_NAMES, contract.QUEUE_TYPE.name: lazy(lambda: f"queue {queue.node.path}, of type")}
    contract.check_settings(settings, names, TOKEN)


def _lifetime(values: dict[str, Any], mode: Mode, facts: Any) -> None:
    """The short-TTL warning's inputs: the lifetime that recognises duplicates, and how late one can "
    "arrive."""
    prop = "ConsumerOptions.document_ttl" if mode == Mode.DOCUMENT else "ConsumerOptions.dedup_ttl"
    lifetime = values["document_ttl"] if mode == Mode.DOCUMENT else values["dedup_ttl"]
    retention, visibility, receives = (
        facts.retention_seconds,
        facts.visibility_seconds,
        facts.max_receive_count,
    )
    parts, window = [], None
    if isinstance(retention, int):
        parts.append(f"retention {retention} s")
        window = retention
    if isinstance(visibility, int) and isinstance(receives, int):
        parts.append(f"{receives} receives x {visibility} s visibility = {receives * visibility} s")
        window = max(window or 0, receives * visibility)
    if TOKEN in (retention, visibility, receives):
        window = TOKEN
    values.update(
        lifetime=lifetime,
        lifetime_prop=prop,
        arrival_window=window,
        arrival_text="; ".join(parts),
    )


def _seconds_text(duration: Any, whole_seconds: Any) -> str:
    """Whole seconds as the runtime parses them ("604800", never "604800.0"); None: "0" (never expire);
    tokens pass through."""
    if duration is None:
        return str(contract.NEVER)
    if whole_seconds is not TOKEN:
        return str(whole_seconds)
    return Token.as_string(duration.to_seconds())


def _json_list(paths: Any) -> str | None:
    return None if paths is None else json.dumps(list(paths), separators=(",", ":"))
