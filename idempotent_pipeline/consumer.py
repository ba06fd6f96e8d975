"""IdempotentConsumer: the Lambda that drains the queue into the table through the bundled runtime."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Names, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from idempotent_runtime import contract
from idempotent_runtime.contract import (
    ConfigurationError,
    IntRange,
    Metric,
    Mode,
    QueueType,
    Seconds,
)
from idempotent_runtime.workflows import EXECUTION_ACTIONS, STATE_MACHINE_ACTIONS, STATE_MACHINE_KEY_ACTIONS

from idempotent_pipeline import _compat, _durable, _keys
from idempotent_pipeline._alarms import (
    ONE_MINUTE,
    AlarmDefinition,
    Alarms,
    Counters,
    counter,
    dead_letters,
    message_age,
)
from idempotent_pipeline._asset import HANDLER, Target, check_processor, left_out_note, stage_asset
from idempotent_pipeline._facts import LAMBDA_MIN_MAX_RECEIVE_COUNT, QueueFacts, describe_queue
from idempotent_pipeline._rules import (
    TOKEN,
    Rule,
    describe,
    enforce,
    instance,
    instances,
    is_token,
    options_of,
    outside,
    read,
    seconds,
    text,
    texts,
    warn,
)
from idempotent_pipeline.options import (
    DEFAULT_ARCHITECTURE,
    DEFAULT_PYTHON_VERSION,
    DEFAULT_RUNTIME,
    AlarmOptions,
    ConsumerOptions,
)
from idempotent_pipeline.relay import OutboxRelay, target_arn
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
# Lambda's limits on options the runtime never reads (the runtime's own settings are declared in the
# contract).
LAMBDA_LIMITS = {
    "timeout": Seconds(1, 900),
    "memory_size": IntRange(128, 10240),
    "max_concurrency": IntRange(2, 1000),
    "reserved_concurrent_executions": IntRange(1),
    "batch_size": IntRange(),  # 1 to 10 on FIFO, to 10,000 on standard: a rule, once the queue is known
}
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
# Python runtimes from 3.12 on run on Amazon Linux 2023 (glibc 2.34), the platform the asset's wheels are for.
OLDEST_PYTHON_MINOR = 12

_OPTIONS = "ConsumerOptions."
# The options that set the runtime's settings, each with its declaration in the contract.
SETTINGS = {
    v.option.removeprefix(_OPTIONS): v
    for v in contract.ENVIRONMENT
    if v.option and v.option.startswith(_OPTIONS)
}
# How the constructs name the settings in errors (QUEUE_TYPE is the consumed queue's, named per consumer).
SETTING_NAMES = {v.name: v.option for v in contract.ENVIRONMENT if v.option}
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ConsumerOptions)}


def needed_visibility(timeout: int, window: int | None) -> int:
    """The shortest visibility timeout for a function timeout and a batching window (whole seconds)."""
    return VISIBILITY_FACTOR * timeout + (window or 0)


def arrival_window(facts: QueueFacts) -> tuple[Any, str]:
    """How long after its first delivery a duplicate can still arrive from a queue (seconds, TOKEN, or None:
    unknown): its retention, or max receives x visibility timeout, whichever is longer; and that in words."""
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
    return (TOKEN if TOKEN in (retention, visibility, receives) else window), "; ".join(parts)


def short_lifetime(lifetime: int | None, window: int | None) -> bool:
    """A lifetime (None: never) shorter than the time a duplicate can still arrive."""
    return lifetime is not None and window is not None and lifetime < window


@dataclass(frozen=True)
class ConsumerProps:
    """A consumer's configuration as plain values, read once (TOKEN: only known at deploy time)."""

    options: ConsumerOptions
    queue: sqs.IQueue
    table: IdempotencyTable
    dead_letter_queue: sqs.IQueue | None
    facts: QueueFacts
    dlq_facts: QueueFacts | None
    alarms: Alarms
    settings: Mapping[str, Any]  # the runtime's, by variable, as the function gets them (None: unset)
    environment: Mapping[str, str]  # the function's
    given: frozenset[str]  # the options set to something else than their default
    mode: Mode
    queue_type: QueueType
    fifo: bool | None  # the queue's; None: unknown (imported from a deploy-time ARN)
    dead_letter_queue_fifo: bool | None
    dead_letter_queue_is_queue: bool
    timeout: Any
    memory_size: Any
    batch_size: Any
    max_batching_window: Any
    max_concurrency: Any
    reserved_concurrent_executions: Any
    overridden: tuple[str, ...]  # the runtime's own variables in ConsumerOptions.environment
    lambda_reserved: tuple[str, ...]  # variables Lambda sets itself, in ConsumerOptions.environment
    emit_target: sns.ITopic | sqs.IQueue | None
    code_directory: str | None
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    own_age_alarm: Any  # the message-age alarm this consumer makes itself, in seconds

    @property
    def lifetime(self) -> Any:
        """The lifetime that recognises duplicates in this mode (None: never)."""
        return self.settings[contract.recognising_lifetime(self.mode).name] or None

    @property
    def arrival_window(self) -> Any:
        return arrival_window(self.facts)[0]

    @property
    def max_batch_size(self) -> int:
        fifo = self.queue_type == QueueType.FIFO
        return contract.FIFO_MAX_BATCH_SIZE if fifo else contract.STANDARD_MAX_BATCH_SIZE

    @property
    def environment_bytes(self) -> int:
        return sum(len(n.encode()) + len(v.encode()) for n, v in self.environment.items() if not is_token(v))


def _kind(fifo: bool | None) -> str:
    return "standard" if fifo is False else "FIFO"


def _applies_only(variable: contract.Variable) -> Rule[ConsumerProps]:
    """An option the runtime reads only with another setting's value (``Variable.only``) is refused
    without it."""
    assert variable.only is not None
    on, *values = variable.only
    name = SETTING_NAMES[on].removeprefix(_OPTIONS)
    option = (variable.option or "").removeprefix(_OPTIONS)
    return Rule(
        lambda p: option in p.given and not variable.read_beside(p.settings),
        lambda p: (
            f"{_OPTIONS}{option} applies only to {name} {' or '.join(repr(v.value) for v in values)}; got "
            f"{name} {p.settings[on].value!r}"
        ),
    )


def python_runtime(runtime: object) -> tuple[lambda_.Runtime, str]:
    """``ConsumerOptions.runtime`` and its Python version ("3.14"), which chooses the wheels of
    requirements.txt. The default is known without asking jsii."""
    if runtime is None or runtime is DEFAULT_RUNTIME:
        return DEFAULT_RUNTIME, DEFAULT_PYTHON_VERSION
    chosen: lambda_.Runtime = instance(
        "ConsumerOptions.runtime", runtime, lambda_.Runtime, "a lambda_.Runtime (e.g. Runtime.PYTHON_3_14)"
    )
    match = re.fullmatch(r"python3\.(\d+)", chosen.name)
    if chosen.family != lambda_.RuntimeFamily.PYTHON or match is None or int(match[1]) < OLDEST_PYTHON_MINOR:
        raise ConfigurationError(
            f"ConsumerOptions.runtime must be a Python runtime from python3.{OLDEST_PYTHON_MINOR} on (Amazon "
            f"Linux 2023, for which the asset's wheels are installed), e.g. Runtime.PYTHON_3_14; got "
            f"{chosen.name}"
        )
    return chosen, f"3.{match[1]}"


RULES: tuple[Rule[ConsumerProps], ...] = (
    Rule(
        lambda p: None not in (p.fifo, p.dead_letter_queue_fifo) and p.fifo != p.dead_letter_queue_fifo,
        lambda p: (
            f"dead_letter_queue must be a {_kind(p.fifo)} queue like the queue it serves; got a "
            f"{_kind(p.dead_letter_queue_fifo)} queue: " + describe(p.dead_letter_queue, "queue_name")
        ),
    ),
    *(_applies_only(variable) for variable in SETTINGS.values() if variable.only),
    Rule(
        lambda p: outside(p.batch_size, 1, p.max_batch_size),
        lambda p: (
            f"ConsumerOptions.batch_size must be between 1 and {p.max_batch_size} "
            f"({_kind(p.fifo)} queue); got {p.batch_size}"
        ),
    ),
    Rule(
        lambda p: p.fifo is not False and p.max_batching_window is not None,
        lambda p: (
            "ConsumerOptions.max_batching_window applies only to standard queues (SQS does not batch "
            f"FIFO queues over time); got {p.max_batching_window} seconds with a FIFO queue"
        ),
    ),
    Rule(
        lambda p: outside(p.max_batching_window, 0, MAX_BATCHING_WINDOW_SECONDS),
        lambda p: (
            f"ConsumerOptions.max_batching_window must be at most {MAX_BATCHING_WINDOW_SECONDS} seconds; "
            f"got {p.max_batching_window} seconds"
        ),
    ),
    Rule(
        lambda p: (
            p.batch_size is not None
            and p.batch_size > contract.FIFO_MAX_BATCH_SIZE
            and not p.max_batching_window
        ),
        lambda p: (
            "ConsumerOptions.batch_size above 10 needs max_batching_window of at least 1 second (an SQS "
            f"event source rule); got batch_size {p.batch_size} without one"
        ),
    ),
    Rule(
        lambda p: p.lambda_reserved,
        lambda p: (
            "ConsumerOptions.environment may not set variables Lambda reserves for itself; got "
            + ", ".join(p.lambda_reserved)
        ),
    ),
    Rule(
        lambda p: p.dead_letter_queue_is_queue,
        lambda p: (
            f"dead_letter_queue must be another queue than the one the consumer reads "
            f"({p.queue.node.path}): records it rejects would come back to it forever"
        ),
    ),
    Rule(
        lambda p: p.overridden,
        lambda p: (
            "ConsumerOptions.environment may not set the runtime's own variables (use the matching "
            "options); got " + ", ".join(p.overridden)
        ),
    ),
    Rule(
        lambda p: (
            p.facts.visibility_seconds is not None
            and p.facts.visibility_seconds < needed_visibility(p.timeout, p.max_batching_window)
        ),
        lambda p: (
            f"visibility_timeout of queue {p.queue.node.path} must be at least 6 x the function timeout "
            f"({p.timeout} seconds)"
            + (f" + the batching window ({p.max_batching_window} seconds)" if p.max_batching_window else "")
            + f" = {needed_visibility(p.timeout, p.max_batching_window)} seconds; got "
            f"{p.facts.visibility_seconds} seconds"
        ),
    ),
    Rule(
        lambda p: (
            None not in (p.own_age_alarm, p.facts.retention_seconds)
            and p.own_age_alarm >= p.facts.retention_seconds
        ),
        lambda p: (
            f"AlarmOptions.max_message_age ({p.own_age_alarm} seconds) must be shorter than the "
            f"retention period of queue {p.queue.node.path} ({p.facts.retention_seconds} seconds): no "
            "message gets that old before it expires, so the message-age alarm could never fire"
        ),
    ),
    Rule(
        lambda p: p.code_directory is None and (p.include or p.exclude),
        lambda p: (
            f"ConsumerOptions.{'include' if p.include else 'exclude'} needs code_directory (its patterns "
            f"choose files of it); got {list(p.include or p.exclude)!r} without one"
        ),
    ),
    Rule(
        lambda p: p.options.vpc_subnets is not None and p.options.vpc is None,
        lambda p: "ConsumerOptions.vpc_subnets needs vpc; got subnets without a VPC",
    ),
    Rule(
        lambda p: bool(p.options.security_groups) and p.options.vpc is None,
        lambda p: "ConsumerOptions.security_groups needs vpc; got security groups without a VPC",
    ),
    Rule(
        lambda p: p.environment_bytes > MAX_ENVIRONMENT_BYTES,
        lambda p: (
            f"the function's environment variables hold {p.environment_bytes} bytes, over Lambda's 4 KB; "
            "shorten fingerprint_fields / fingerprint_exclude or ConsumerOptions.environment"
        ),
    ),
    # -- warnings ---------------------------------------------------------------------------------------
    Rule(
        lambda p: p.fifo is None,
        lambda p: (
            f"queue {p.queue.node.path} is imported from a deploy-time ARN, so its type is unknown: "
            "treated as FIFO. Import it with sqs.Queue.from_queue_attributes(..., fifo=True) (or a standard "
            "queue by its ARN text) to say which"
        ),
        warning="idempotent-pipeline:queue-type-unknown",
    ),
    Rule(
        lambda p: (
            None not in (p.reserved_concurrent_executions, p.max_concurrency)
            and p.reserved_concurrent_executions < p.max_concurrency
        ),
        lambda p: (
            f"ConsumerOptions.reserved_concurrent_executions ({p.reserved_concurrent_executions}) is "
            f"below max_concurrency ({p.max_concurrency}): the event source will be throttled"
        ),
        warning="idempotent-pipeline:throttling",
    ),
    Rule(
        lambda p: p.reserved_concurrent_executions is not None and p.max_concurrency is None,
        lambda p: (
            f"ConsumerOptions.reserved_concurrent_executions ({p.reserved_concurrent_executions}) is set "
            "without max_concurrency: the event source's pollers invoke beyond the reserved concurrency, and "
            "throttled receives count toward the queue's max receives, so messages can reach the DLQ "
            "unprocessed; set max_concurrency (at most the reserved concurrency) instead, or as well"
        ),
        warning="idempotent-pipeline:reserved-concurrency",
    ),
    Rule(
        lambda p: (
            p.reserved_concurrent_executions is not None
            and p.facts.max_receive_count is not None
            and p.facts.max_receive_count < LAMBDA_MIN_MAX_RECEIVE_COUNT
        ),
        lambda p: (
            f"the queue's max_receive_count is {p.facts.max_receive_count} with reserved concurrency: a few "
            "throttled receives move a message to the DLQ unprocessed; AWS advises at least "
            f"{LAMBDA_MIN_MAX_RECEIVE_COUNT}"
        ),
        warning="idempotent-pipeline:low-max-receive-count",
    ),
    Rule(
        lambda p: short_lifetime(p.lifetime, p.arrival_window),
        lambda p: (
            f"{contract.recognising_lifetime(p.mode).option} ({p.lifetime} "
            f"seconds) is shorter than the time a duplicate can still arrive from queue {p.queue.node.path} "
            f"({arrival_window(p.facts)[1]}): a redelivery after its record expired is processed again; make "
            f"it at least {p.arrival_window} seconds, or None (never expire)"
        ),
        warning=SHORT_TTL,
    ),
)


def _resolve(
    scope: Construct,
    queue: sqs.IQueue,
    table: IdempotencyTable,
    dead_letter_queue: sqs.IQueue | None,
    options: ConsumerOptions | None,
    alarm_options: AlarmOptions | None,
    emit_target: sns.ITopic | sqs.IQueue | None = None,
) -> ConsumerProps:
    """Every input read once, as plain values; each option the runtime reads checked by its declaration."""
    o = options_of("options", options, ConsumerOptions)
    queue = instance("queue", queue, sqs.IQueue, "an sqs.IQueue")
    if queue is None:
        raise ConfigurationError("queue is required: the SQS queue the consumer reads")
    if not isinstance(table, IdempotencyTable):
        raise ConfigurationError(
            "table must be an IdempotencyTable (IdempotencyTable.from_table(...) for an existing table, so "
            f"its key names travel with it); got {type(table).__name__} {table!r}"
        )
    dead_letter_queue = instance("dead_letter_queue", dead_letter_queue, sqs.IQueue, "an sqs.IQueue")
    facts = describe_queue(queue)
    if dead_letter_queue is None:
        dead_letter_queue = facts.dead_letter_queue
    dlq_facts = describe_queue(dead_letter_queue) if dead_letter_queue is not None else None
    extra = _extra_environment(o)
    emit_target_arn = target_arn("emit_target", emit_target) if emit_target is not None else None
    settings, deployed = _settings(o, table, dead_letter_queue, facts, emit_target_arn)
    limits = {
        prop: read(_OPTIONS + prop, kind, getattr(o, prop), unset=True)[0]
        for prop, kind in LAMBDA_LIMITS.items()
    }
    alarms = Alarms.read(scope, alarm_options)
    patterns = {prop: _known_at_synth(prop, getattr(o, prop), texts) for prop in ("include", "exclude")}
    return ConsumerProps(
        options=o,
        queue=queue,
        table=table,
        dead_letter_queue=dead_letter_queue,
        facts=facts,
        dlq_facts=dlq_facts,
        alarms=alarms,
        settings=settings,
        environment=_environment(settings, deployed, extra),
        given=frozenset(name for name, default in _DEFAULTS.items() if getattr(o, name) is not default),
        mode=settings[contract.IDEMPOTENCY_MODE.name],
        queue_type=settings[contract.QUEUE_TYPE.name],
        fifo=facts.fifo,
        dead_letter_queue_fifo=dlq_facts.fifo if dlq_facts is not None else None,
        # Two queues of the app are two constructs; two imports of one queue share its ARN.
        dead_letter_queue_is_queue=dead_letter_queue is queue
        or (
            dead_letter_queue is not None
            and not isinstance(queue, sqs.Queue)
            and not isinstance(dead_letter_queue, sqs.Queue)
            and dead_letter_queue.queue_arn == queue.queue_arn
        ),
        **limits,
        max_batching_window=seconds("ConsumerOptions.max_batching_window", o.max_batching_window),
        overridden=tuple(
            sorted((contract.VARIABLE_NAMES | contract.RETIRED_VARIABLES.keys()).intersection(extra))
        ),
        lambda_reserved=tuple(sorted(LAMBDA_RESERVED_VARIABLES.intersection(extra))),
        emit_target=emit_target,
        code_directory=_known_at_synth("code_directory", o.code_directory, text),
        include=patterns["include"] or (),
        exclude=patterns["exclude"] or (),
        # The consumer alarms on the queue's age itself only when no Messaging does.
        own_age_alarm=alarms.max_message_age_seconds if alarms.enabled and not facts.alarmed else None,
    )


def _extra_environment(o: ConsumerOptions) -> dict[str, str]:
    """``ConsumerOptions.environment``, and the other options that are CDK objects, checked for their type."""
    for prop, kind, wanted in (
        ("log_retention", logs.RetentionDays, "a logs.RetentionDays (e.g. RetentionDays.ONE_MONTH)"),
        ("tracing", lambda_.Tracing, "a lambda_.Tracing (e.g. Tracing.ACTIVE)"),
        (
            "architecture",
            lambda_.Architecture,
            "a lambda_.Architecture (Architecture.ARM_64 or Architecture.X86_64)",
        ),
    ):
        instance(_OPTIONS + prop, getattr(o, prop), kind, wanted)
    instances("ConsumerOptions.layers", o.layers, lambda_.ILayerVersion, "lambda_.ILayerVersion")
    instance("ConsumerOptions.vpc", o.vpc, ec2.IVpc, "an ec2.IVpc")
    instance("ConsumerOptions.log_encryption_key", o.log_encryption_key, kms.IKey, "a kms.IKey")
    instance("ConsumerOptions.vpc_subnets", o.vpc_subnets, ec2.SubnetSelection, "an ec2.SubnetSelection")
    instances("ConsumerOptions.security_groups", o.security_groups, ec2.ISecurityGroup, "ec2.ISecurityGroup")
    extra = dict(instance("ConsumerOptions.environment", o.environment, Mapping, "a mapping") or {})
    if not all(isinstance(name, str) and isinstance(value, str) for name, value in extra.items()):
        raise ConfigurationError(
            f"ConsumerOptions.environment must map names to strings; got {o.environment!r}"
        )
    return extra


def _settings(
    o: ConsumerOptions,
    table: IdempotencyTable,
    dead_letter_queue: sqs.IQueue | None,
    facts: QueueFacts,
    emit_target_arn: str | None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The runtime's settings by variable as the function will get them (TOKEN: deploy-time, None: unset),
    from the options (each read and checked by its declaration), the table and the queues; and the
    environment's text of the deploy-time ones."""
    settings: dict[str, Any] = {}
    deployed: dict[str, str] = {}
    for prop, variable in SETTINGS.items():
        settings[variable.name], text = read(
            variable.option or prop, variable.kind, getattr(o, prop), unset=_DEFAULTS[prop] is None
        )
        if text is not None:
            deployed[variable.name] = text
    settings.update(contract.key_fields(settings))
    for variable, value in (
        (contract.TABLE_NAME, table.table.table_name),
        (contract.PARTITION_KEY, table.partition_key_name),
        (contract.SORT_KEY, table.sort_key_name),
        (contract.TTL_ATTRIBUTE, table.time_to_live_attribute),
        (contract.QUEUE_TYPE, QueueType.STANDARD if facts.fifo is False else QueueType.FIFO),
        (contract.DLQ_URL, dead_letter_queue.queue_url if dead_letter_queue is not None else None),
        # A record failing on its last receive goes to DLQ_URL with its reason, not silently by redrive.
        (contract.MAX_RECEIVE_COUNT, facts.max_receive_count if dead_letter_queue is not None else None),
        (contract.EMIT_TARGET_ARN, emit_target_arn),
    ):
        if isinstance(value, str) and is_token(value):
            value, deployed[variable.name] = TOKEN, value
        settings[variable.name] = value
    return settings, deployed


def _environment(
    settings: Mapping[str, Any], deployed: Mapping[str, str], extra: Mapping[str, str]
) -> dict[str, str]:
    """The function's environment: ``ConsumerOptions.environment``, then each setting the runtime reads
    with the others (``Variable.only``) and that is set, in the contract's order and text."""
    environment = dict(extra)
    for variable in contract.ENVIRONMENT:
        value = settings.get(variable.name)
        if value is None or value == "" or not variable.read_beside(settings):
            continue
        text = deployed.get(variable.name) if value is TOKEN else variable.kind.render(value)
        if text is not None:  # a deploy-time value no text stands for (a queue's): the runtime's default
            environment[variable.name] = text
    return environment


def _known_at_synth(prop: str, value: Any, reader: Any) -> Any:
    """What decides the asset's content: known at synth, never a deploy-time value."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if reader(_OPTIONS + prop, value) is TOKEN:
        raise ConfigurationError(
            f"ConsumerOptions.{prop} must be known at synth (it decides what the asset holds); got a "
            f"deploy-time value in {value!r}"
        )
    return reader(_OPTIONS + prop, value)


def _key_of(queue: sqs.IQueue, facts: QueueFacts | None) -> Any:
    """A queue's key as the block that made it remembered it, else as CDK knows it."""
    known = facts is not None and facts.encryption_key_known
    return facts.encryption_key if facts is not None and known else queue.encryption_master_key


def _validate(scope: Construct, p: ConsumerProps) -> None:
    """The rules, then the contract's cross-setting rules in the options' names (a deploy-time value skips
    the rules reading it), then the processor against its code."""
    enforce(scope, RULES, p)
    names = {**SETTING_NAMES, contract.EMIT_TARGET_ARN.name: "emit_target"}
    settings = dict(p.settings)
    if p.emit_target is not None:  # a deploy-time ARN: the rules ask only whether there is one
        settings[contract.EMIT_TARGET_ARN.name] = p.emit_target.node.path
    contract.check_settings(
        settings,
        lambda name: (
            f"queue {p.queue.node.path}, of type"
            if name == contract.QUEUE_TYPE.name
            else names.get(name, name)
        ),
        TOKEN,
    )


class IdempotentConsumer(Counters, Construct):
    """A Lambda function running the bundled idempotent runtime on an SQS queue (FIFO or standard).

    The code asset, staged without Docker, is the ``idempotent_runtime`` package and your code
    (``ConsumerOptions.code_directory``); the SQS event source reports batch item failures. The function gets
    its own role with exactly the actions the runtime uses and an explicit log group; its environment follows
    the runtime contract.

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
    :param emit_target: where ``message.emit()`` sends (an ``sns.ITopic`` or ``sqs.IQueue``; ``transaction``
        or ``guarded`` mode): the emitted messages commit with the effect as outbox items, and an
        :class:`OutboxRelay` (``relay``) publishes them from the table's stream. Default: none.
    """

    failed_alarm: cloudwatch.Alarm | None = None
    quarantined_alarm: cloudwatch.Alarm | None = None
    conflicts_alarm: cloudwatch.Alarm | None = None
    misconfigured_alarm: cloudwatch.Alarm | None = None
    errors_alarm: cloudwatch.Alarm | None = None
    message_age_alarm: cloudwatch.Alarm | None = None
    dead_letter_queue_alarm: cloudwatch.Alarm | None = None
    network_interface_policy: iam.Policy | None = None

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
        emit_target: sns.ITopic | sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, id)
        props = _resolve(self, queue, table, dead_letter_queue, options, alarm_options, emit_target)
        _validate(self, props)
        user_code, unchecked = check_processor(props.options.processor, props.code_directory, props.exclude)
        if unchecked is not None:
            warn(self, "idempotent-pipeline:processor-unchecked", unchecked)
        self.mode: Mode = props.mode
        self.queue_type: QueueType = props.queue_type
        self.queue = props.queue
        self.table = props.table
        self.dead_letter_queue = props.dead_letter_queue
        self.metrics_namespace: str = props.options.metrics_namespace
        self._build_function(props, user_code)
        self._grant(props)
        self.alarms: tuple[cloudwatch.Alarm, ...] = props.alarms.create(self, self._alarm_definitions(props))
        self.relay: OutboxRelay | None = None
        if emit_target is not None:
            o = props.options
            # The relay's dead-letter queue is kept as the consumer's is: as Messaging made it, else RETAIN.
            kept = getattr(props.dlq_facts, "removal_policy", None)
            self.relay = OutboxRelay(
                self,
                "Relay",
                table=props.table,
                target=emit_target,
                key_prefix=o.key_prefix,
                metrics_namespace=self.metrics_namespace,
                log_level=props.settings[contract.LOG_LEVEL.name] or contract.LOG_LEVEL.default,
                architecture=o.architecture,
                log_retention=o.log_retention,
                log_encryption_key=o.log_encryption_key,
                alarm_options=alarm_options,
                dead_letter_removal_policy=kept or RemovalPolicy.RETAIN,
            )

    def _build_function(self, p: ConsumerProps, user_code: Any) -> None:
        o = p.options
        runtime, python_version = python_runtime(o.runtime)
        architecture = o.architecture or DEFAULT_ARCHITECTURE
        target = Target(python_version, "arm64" if o.architecture is None else str(architecture.name))
        emits = p.emit_target is not None
        asset, left_out = stage_asset(user_code, p.include, p.exclude, target, p.mode, emits)
        note = left_out_note(left_out)
        if note is not None:
            warn(self, ASSET_LEFT_OUT, note)
        self.role, self.log_group, self.function = _keys.function(
            self,
            "Idempotent consumer: reads the queue, writes the idempotency table",
            asset,
            o.log_retention,
            o.log_encryption_key,
            "ConsumerOptions",
            runtime=runtime,
            handler=HANDLER,
            timeout=o.timeout,
            memory_size=o.memory_size,
            architecture=architecture,
            reserved_concurrent_executions=o.reserved_concurrent_executions,
            environment=dict(p.environment),
            description=f"Idempotent consumer ({p.mode.value} mode)",
            vpc=o.vpc,
            vpc_subnets=o.vpc_subnets,
            security_groups=list(o.security_groups) if o.security_groups else None,
            tracing=o.tracing,
            layers=list(o.layers) if o.layers else None,
        )
        self._function_name = self.function.function_name
        if o.tracing is not None and o.tracing != lambda_.Tracing.DISABLED:
            _compat.acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]", XRAY_REASON)
        if o.vpc is not None:
            self.network_interface_policy = iam.Policy(
                self,
                "NetworkInterfacePolicy",
                roles=[self.role],
                statements=[iam.PolicyStatement(actions=list(NETWORK_INTERFACE_ACTIONS), resources=["*"])],
            )
            # Lambda checks these permissions when it creates the function.
            self.function.node.add_dependency(self.network_interface_policy)
            _compat.acknowledge(
                self.network_interface_policy, "AwsSolutions-IAM5[Resource::*]", NETWORK_INTERFACE_REASON
            )

    def _grant(self, p: ConsumerProps) -> None:
        """Exactly the actions the runtime uses, keys only through the services that use them."""
        self.table_grant = p.table.table.grant(self.function, *contract.TABLE_ACTIONS[p.mode])
        if p.table.encryption_key is not None:
            _keys.grant_through(self.function, p.table.encryption_key, contract.TABLE_KEY_ACTIONS, "dynamodb")
        if p.dead_letter_queue is not None:
            self._grant_dead_letter_queue(p.dead_letter_queue, _key_of(p.dead_letter_queue, p.dlq_facts))
        # The SQS event source as CDK's SqsEventSource makes it (the same construct id, so the same mapping),
        # whose key grant is limited to use through SQS: SqsEventSource grants the key outright.
        o, arn, key = p.options, p.queue.queue_arn, _key_of(p.queue, p.facts)
        self.event_source = self.function.add_event_source_mapping(
            f"SqsEventSource:{Names.node_unique_id(p.queue.node)}",
            event_source_arn=arn,
            batch_size=o.batch_size,
            max_batching_window=o.max_batching_window,
            max_concurrency=o.max_concurrency,
            report_batch_item_failures=True,
        )
        _keys.grant(self.function, CONSUME_ACTIONS, arn, key, CONSUME_KEY_ACTIONS, "sqs")

    def _alarm_definitions(self, p: ConsumerProps) -> list[AlarmDefinition]:
        definitions = [
            AlarmDefinition(
                "FailedAlarm",
                lambda: self.metric_failed(period=p.alarms.options.failed_period),
                p.alarms.failed_threshold,
                "records failed and were left for SQS to retry (throttling, timeouts, or a deployment that "
                "cannot work): see the function's logs",
            ),
            AlarmDefinition(
                "QuarantinedAlarm",
                self.metric_quarantined,
                1,
                "records were rejected and sent to the dead-letter queue with a reason",
            ),
            AlarmDefinition(
                "ConflictsAlarm",
                self.metric_conflicts,
                1,
                "messages arrived whose key was already done with different content",
            ),
            AlarmDefinition(
                "MisconfiguredAlarm",
                self.metric_misconfigured,
                1,
                "records failed because the deployment is wrong (table, keys, permissions, KMS): they are "
                "retried, not quarantined; see the function's ERROR log lines",
            ),
            AlarmDefinition(
                "ErrorsAlarm",
                lambda: self.function.metric_errors(period=ONE_MINUTE, statistic="Sum"),
                1,
                "whole invocations failed (timeout, crash, a configuration refused at start): the runtime's "
                "own metrics do not see these",
            ),
        ]
        if not p.facts.alarmed:  # a Messaging alarms on its queue's age and its DLQ's depth already
            definitions.append(message_age(p.queue, p.alarms.max_message_age))
        if p.dead_letter_queue is not None and not (p.dlq_facts is not None and p.dlq_facts.alarmed):
            definitions.append(dead_letters(p.dead_letter_queue))
        return definitions

    # -- grants ---------------------------------------------------------------------------------------------

    def _grant_dead_letter_queue(self, dead_letter_queue: sqs.IQueue, key: Any) -> iam.Grant:
        arn = dead_letter_queue.queue_arn
        return _keys.grant(self.function, contract.DLQ_ACTIONS, arn, key, contract.DLQ_KEY_ACTIONS, "sqs")

    def grant_send_to_dead_letter_queue(self, dead_letter_queue: sqs.IQueue) -> iam.Grant:
        """``sqs:SendMessage`` on a queue (+ ``kms:GenerateDataKey``/``kms:Decrypt`` on its customer key)."""
        return self._grant_dead_letter_queue(dead_letter_queue, dead_letter_queue.encryption_master_key)

    def grant_start_execution(
        self, state_machine: sfn.IStateMachine, *, key: kms.IKey | None = None
    ) -> iam.Grant:
        """What ``idempotent_runtime.workflows.start_execution_once`` asks of ``state_machine`` (a STANDARD
        workflow): ``states:StartExecution`` and ``states:DescribeStateMachine`` on it,
        ``states:DescribeExecution`` on its executions, and on its customer managed key (``key``; default: the
        key of a state machine this app defines) ``kms:GenerateDataKey`` (a start encrypts the input) and
        ``kms:Decrypt`` (a describe reads it), through Step Functions for this state machine only. An Express
        state machine is refused: Step Functions does not check its execution names; so is a consumer not in
        guarded mode (the starter runs in it)."""
        self._require_guarded("grant_start_execution")
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
        self._acknowledge_wildcards(executions, EXECUTIONS_REASON)
        key_arn = key.key_arn if key is not None else _keys.state_machine_key(state_machine)
        if key_arn is not None:
            context = {"aws:states:stateMachineArn": state_machine.state_machine_arn}
            executions = executions.combine(
                _keys.grant_through(self.function, key_arn, STATE_MACHINE_KEY_ACTIONS, "states", context)
            )
        return grant.combine(executions)

    def grant_start_durable_execution(
        self, function: lambda_.IFunction, *, key: kms.IKey | None = None
    ) -> iam.Grant:
        """What ``idempotent_runtime.durable.start_durable_execution_once`` asks of a Lambda durable function:
        ``function`` is the version or alias it invokes (``function.current_version``, a ``lambda_.Alias``,
        ``function.latest_version``). ``lambda:InvokeFunction`` and ``lambda:GetFunctionConfiguration`` on
        it, ``lambda:ListDurableExecutionsByFunction`` and ``lambda:ListVersionsByFunction`` on the function,
        ``lambda:ListDurableExecutionsByFunction`` and ``lambda:GetDurableExecution`` on its versions'
        executions; ``key``: the function's customer managed key for durable execution data
        (``DurableConfig.KMSKeyArn``, separate from the function's own key), used through Lambda:
        ``kms:GenerateDataKey`` (an Invoke encrypts its input with it) and ``kms:Decrypt`` (reading an
        execution's input on a conflict); AWS: "Encrypting AWS Lambda durable execution data",
        https://docs.aws.amazon.com/lambda/latest/dg/durable-encryption.html. Default: none (Lambda's own
        encryption). Refused at synth: an unqualified function (Lambda invokes durable functions by version,
        alias or $LATEST only), a function of the app without durable_config, a consumer not in guarded
        mode."""
        self._require_guarded("grant_start_durable_execution")
        grant = _durable.grant(self.function, self, function, key, "grant_start_durable_execution")
        self._acknowledge_wildcards(grant, _durable.EXECUTIONS_REASON)
        return grant

    def _require_guarded(self, method: str) -> None:
        if self.mode != Mode.GUARDED:
            raise ConfigurationError(
                f"{method}: the execution starters run in guarded mode (their effect is outside DynamoDB); "
                f"the consumer's mode is {self.mode.value!r}: use ConsumerOptions(mode='guarded')"
            )

    def _acknowledge_wildcards(self, grant: iam.Grant, reason: str) -> None:
        """The cdk-nag IAM5 finding of each wildcard resource the grant gives, with ``reason``."""
        for statement in grant.principal_statements:
            for resource in statement.resources:
                if "*" in str(Stack.of(self).resolve(resource)):
                    _compat.acknowledge(self.role, _wildcard_finding(self, resource), reason)

    # -- metrics: the runtime's Embedded Metric Format counters ---------------------------------------------

    COUNTERS = Metric
    metric_processed = counter(Metric.PROCESSED, "Records whose effect this function applied.")
    metric_duplicates = counter(
        Metric.DUPLICATES,
        "Records whose key was already done with the same content (or conflicts treated as duplicates).",
    )
    metric_conflicts = counter(
        Metric.CONFLICTS,
        "Records whose key was done with different content (quarantined, or duplicates by choice).",
    )
    metric_failed = counter(Metric.FAILED, "Records left for SQS to deliver again.")
    metric_quarantined = counter(Metric.QUARANTINED, "Records sent to the dead-letter queue with a reason.")
    metric_stale = counter(
        Metric.STALE,
        "Versioned mode: records older than the version their entity holds (nothing written, not "
        "dead-lettered).",
    )
    metric_misconfigured = counter(
        Metric.MISCONFIGURED, "Records failed because the deployment is wrong (counted within ``failed``)."
    )

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
