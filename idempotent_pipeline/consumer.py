"""IdempotentConsumer: the Lambda that drains the FIFO queue into the table through the bundled runtime."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from aws_cdk import Annotations, Duration, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from idempotent_pipeline._asset import HANDLER, check_processor, stage_asset
from idempotent_pipeline._checks import (
    ConfigurationError,
    require_fifo_queue,
    require_int_range,
    require_name,
    seconds,
    unresolved,
)
from idempotent_pipeline.table import (
    DEFAULT_PARTITION_KEY,
    DEFAULT_SORT_KEY,
    DEFAULT_TTL_ATTRIBUTE,
    check_key_names,
)

Mode = Literal["document", "transaction", "guarded"]
KeySource = Literal["fields", "dedup_id", "message_id", "body_sha256"]

MODES = ("document", "transaction", "guarded")
KEY_SOURCES = ("fields", "dedup_id", "message_id", "body_sha256")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DEFAULT_TIMEOUT = Duration.seconds(30)
DEFAULT_TTL = Duration.days(7)
DEFAULT_MEMORY_SIZE = 256
DEFAULT_BATCH_SIZE = 10  # the FIFO maximum
DEFAULT_LOG_RETENTION = logs.RetentionDays.ONE_MONTH
DEFAULT_PARTITION_KEY_FIELD = "x"
DEFAULT_SORT_KEY_FIELD = "y"
# AWS guidance for SQS event sources: visibility timeout at least 6 x the function timeout, so a message is
# not redelivered while retries of the same batch are still running.
VISIBILITY_FACTOR = 6
# SQS' own visibility timeout when none is set.
_SQS_DEFAULT_VISIBILITY = 30

# The table actions the runtime uses per mode (docs/runtime-contract.md, "IAM actions the runtime uses").
TABLE_ACTIONS: dict[str, tuple[str, ...]] = {
    "document": ("dynamodb:PutItem",),
    "guarded": ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
    "transaction": (
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ),
}
# DynamoDB encrypts and decrypts with a customer-managed table key on the caller's behalf.
TABLE_KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")
DLQ_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")

# Environment variables the runtime reads; `environment` may not override them.
CONTRACT_VARIABLES = frozenset(
    {
        "TABLE_NAME",
        "PARTITION_KEY",
        "SORT_KEY",
        "TTL_ATTRIBUTE",
        "TTL_SECONDS",
        "IDEMPOTENCY_MODE",
        "KEY_SOURCE",
        "PARTITION_KEY_FIELD",
        "SORT_KEY_FIELD",
        "PROCESSOR",
        "DLQ_URL",
        "LEASE_SECONDS",
        "MAX_WORKERS",
        "METRICS_NAMESPACE",
        "LOG_LEVEL",
    }
)
_NAMESPACE = re.compile(r"^[^:\s][^:]{0,254}$")


def newest_python_runtime() -> lambda_.Runtime:
    """The newest Python runtime this aws-cdk-lib knows (cdk-nag L1 flags any older one).

    Chosen from the names of the ``Runtime.PYTHON_3_x`` constants, which the binding defines without a call
    into jsii; only the chosen one is read (walking ``Runtime.ALL`` costs ~70 jsii round trips per synth).
    """
    minors = [
        int(match.group(1))
        for name in vars(lambda_.Runtime)
        if (match := re.fullmatch(r"PYTHON_3_(\d+)", name))
    ]
    return getattr(lambda_.Runtime, f"PYTHON_3_{max(minors)}")


class IdempotentConsumer(Construct):
    """A Lambda function running the bundled idempotent runtime on an SQS FIFO queue.

    The code asset is the ``idempotent_runtime`` package (plus ``code_directory`` when given), staged without
    Docker; handler ``idempotent_runtime.handler.handler`` on the newest Python runtime. The SQS event source
    reports batch item failures. The function gets its own role with exactly the actions the runtime uses
    (``docs/runtime-contract.md``) and an explicit log group.

    :param queue: the SQS FIFO queue to consume. Required.
    :param table: the DynamoDB table (string partition and sort key) the runtime writes. Required.
    :param partition_key_name: the table's partition key attribute. Default: ``pk``.
    :param sort_key_name: the table's sort key attribute. Default: ``sk``.
    :param time_to_live_attribute: the table's TTL attribute. Default: ``expires_at``.
    :param mode: ``document`` (one conditional put per message), ``transaction`` (the processor's writes and
        the idempotency marker in one transaction) or ``guarded`` (claim, run the processor, complete).
        Default: ``document``.
    :param key_source: where the idempotency key comes from: ``fields`` (two JSON body fields), ``dedup_id``,
        ``message_id`` or ``body_sha256``. Default: ``fields``.
    :param partition_key_field: with ``key_source="fields"``, the body field that becomes the partition key.
        Default: ``x``.
    :param sort_key_field: with ``key_source="fields"``, the body field that becomes the sort key.
        Default: ``y``.
    :param ttl: lifetime of the records the runtime writes. Default: 7 days.
    :param lease_duration: ``guarded`` mode only: how long an in-progress claim is held. Default: derived by
        the runtime from the remaining invocation time.
    :param processor: your processing function as ``module:function``, importable from ``code_directory``.
        Required for ``transaction`` and ``guarded``. Default: none.
    :param code_directory: the directory holding the processor's module; its contents are placed beside
        ``idempotent_runtime/`` at the asset root. Required with ``processor``. Default: none.
    :param dead_letter_queue: the FIFO DLQ; its URL becomes ``DLQ_URL`` so permanent failures go there at once
        (``sqs:SendMessage`` granted, plus the key's actions when it has a customer-managed key).
        Default: none (permanent failures reach the DLQ through redrive).
    :param timeout: the function timeout. The queue's visibility timeout must be at least 6 x this.
        Default: 30 seconds.
    :param memory_size: MiB of memory. Default: 256.
    :param architecture: the instruction set. Default: ARM_64.
    :param batch_size: records per invocation, 1 to 10 (FIFO limit). Default: 10.
    :param max_concurrency: the event source's maximum concurrent invocations (2 to 1000). Default: no limit
        (FIFO ordering already limits concurrency to the number of active message groups).
    :param reserved_concurrent_executions: the function's reserved concurrency. Default: none (unreserved).
    :param log_retention: how long the log group keeps logs. Default: one month.
    :param max_workers: threads processing different message groups of one batch, 1 to 64. Default: the
        runtime's (10).
    :param metrics_namespace: CloudWatch namespace of the runtime's EMF metrics. Default: the runtime's
        (``IdempotentPipeline``).
    :param log_level: ``DEBUG``, ``INFO``, ``WARNING`` or ``ERROR``. Default: the runtime's (``INFO``).
    :param environment: extra environment variables for your processor; may not set the runtime's own.
        Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue: sqs.IQueue,
        table: dynamodb.ITable,
        partition_key_name: str = DEFAULT_PARTITION_KEY,
        sort_key_name: str = DEFAULT_SORT_KEY,
        time_to_live_attribute: str = DEFAULT_TTL_ATTRIBUTE,
        mode: Mode = "document",
        key_source: KeySource = "fields",
        partition_key_field: str | None = None,
        sort_key_field: str | None = None,
        ttl: Duration | None = None,
        lease_duration: Duration | None = None,
        processor: str | None = None,
        code_directory: str | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        timeout: Duration | None = None,
        memory_size: int = DEFAULT_MEMORY_SIZE,
        architecture: lambda_.Architecture | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_concurrency: int | None = None,
        reserved_concurrent_executions: int | None = None,
        log_retention: logs.RetentionDays = DEFAULT_LOG_RETENTION,
        max_workers: int | None = None,
        metrics_namespace: str | None = None,
        log_level: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        timeout = timeout or DEFAULT_TIMEOUT
        ttl = ttl or DEFAULT_TTL

        # -- validation: fail at synth for what cannot work -------------------------------------------
        require_fifo_queue("queue", queue)
        if dead_letter_queue is not None:
            require_fifo_queue("dead_letter_queue", dead_letter_queue)
        check_key_names(partition_key_name, sort_key_name, time_to_live_attribute)
        _check_table_schema(table, partition_key_name, sort_key_name)
        if mode not in MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if key_source not in KEY_SOURCES:
            raise ConfigurationError(
                f"key_source must be one of {', '.join(KEY_SOURCES)}; got {key_source!r}"
            )
        if key_source == "fields":
            partition_key_field = (
                DEFAULT_PARTITION_KEY_FIELD if partition_key_field is None else partition_key_field
            )
            sort_key_field = DEFAULT_SORT_KEY_FIELD if sort_key_field is None else sort_key_field
            require_name("partition_key_field", partition_key_field)
            require_name("sort_key_field", sort_key_field)
            if partition_key_field == sort_key_field:
                raise ConfigurationError(
                    f"partition_key_field and sort_key_field must differ; both are {partition_key_field!r}"
                )
        elif partition_key_field is not None or sort_key_field is not None:
            raise ConfigurationError(
                "partition_key_field and sort_key_field apply only to key_source 'fields'; "
                f"got key_source {key_source!r} with fields {partition_key_field!r}, {sort_key_field!r}"
            )
        if mode in ("transaction", "guarded") and processor is None:
            raise ConfigurationError(
                f"mode {mode!r} runs your processing code: set processor ('module:function') "
                "and code_directory"
            )
        user_code = check_processor(processor, code_directory)

        ttl_seconds = seconds("ttl", ttl)
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ConfigurationError(f"ttl must be greater than 0 seconds; got {ttl_seconds} seconds")
        lease_seconds = None
        if lease_duration is not None:
            if mode != "guarded":
                raise ConfigurationError(f"lease_duration applies only to mode 'guarded'; got mode {mode!r}")
            lease_seconds = seconds("lease_duration", lease_duration)
            if lease_seconds is not None and lease_seconds <= 0:
                raise ConfigurationError(
                    f"lease_duration must be greater than 0 seconds; got {lease_seconds} seconds"
                )
        timeout_seconds = seconds("timeout", timeout)
        if timeout_seconds is not None and not 1 <= timeout_seconds <= 900:
            raise ConfigurationError(
                f"timeout must be between 1 and 900 seconds; got {timeout_seconds} seconds"
            )
        require_int_range("batch_size", batch_size, 1, 10)
        require_int_range("memory_size", memory_size, 128, 10240)
        require_int_range("max_concurrency", max_concurrency, 2, 1000)
        require_int_range("reserved_concurrent_executions", reserved_concurrent_executions, 1)
        require_int_range("max_workers", max_workers, 1, 64)
        if log_level is not None and log_level not in LOG_LEVELS:
            raise ConfigurationError(f"log_level must be one of {', '.join(LOG_LEVELS)}; got {log_level!r}")
        if (
            metrics_namespace is not None
            and not unresolved(metrics_namespace)
            and not _NAMESPACE.match(metrics_namespace)
        ):
            raise ConfigurationError(
                "metrics_namespace must be 1 to 255 characters without ':' or a leading space; "
                f"got {metrics_namespace!r}"
            )
        extra = dict(environment or {})
        overridden = sorted(CONTRACT_VARIABLES.intersection(extra))
        if overridden:
            raise ConfigurationError(
                "environment may not set the runtime's own variables (use the matching props); "
                f"got {', '.join(overridden)}"
            )
        _check_visibility_timeout(queue, timeout_seconds)
        if (
            max_concurrency is not None
            and reserved_concurrent_executions is not None
            and not unresolved(max_concurrency)
            and not unresolved(reserved_concurrent_executions)
            and reserved_concurrent_executions < max_concurrency
        ):
            Annotations.of(self).add_warning_v2(
                "idempotent-pipeline:throttling",
                f"reserved_concurrent_executions ({reserved_concurrent_executions}) is below max_concurrency "
                f"({max_concurrency}): the event source will be throttled",
            )

        # -- environment: docs/runtime-contract.md ----------------------------------------------------------
        env: dict[str, str] = {
            **extra,
            "TABLE_NAME": table.table_name,
            "PARTITION_KEY": partition_key_name,
            "SORT_KEY": sort_key_name,
            "TTL_ATTRIBUTE": time_to_live_attribute,
            "TTL_SECONDS": _seconds_text(ttl, ttl_seconds),
            "IDEMPOTENCY_MODE": mode,
            "KEY_SOURCE": key_source,
        }
        if key_source == "fields":
            env["PARTITION_KEY_FIELD"] = str(partition_key_field)
            env["SORT_KEY_FIELD"] = str(sort_key_field)
        optional = {
            "PROCESSOR": processor,
            "DLQ_URL": dead_letter_queue.queue_url if dead_letter_queue is not None else None,
            "LEASE_SECONDS": _seconds_text(lease_duration, lease_seconds)
            if lease_duration is not None
            else None,
            "MAX_WORKERS": str(max_workers) if max_workers is not None else None,
            "METRICS_NAMESPACE": metrics_namespace,
            "LOG_LEVEL": log_level,
        }
        env.update({name: value for name, value in optional.items() if value is not None})

        self.mode = mode
        self.queue = queue
        self.table = table
        self.dead_letter_queue = dead_letter_queue

        # -- resources ----------------------------------------------------------------------------------
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Idempotent consumer: reads the FIFO queue, writes the idempotency table",
        )
        self.log_group = logs.LogGroup(self, "LogGroup", retention=log_retention)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=newest_python_runtime(),
            handler=HANDLER,
            code=lambda_.Code.from_asset(stage_asset(user_code)),
            role=self.role,
            log_group=self.log_group,
            timeout=timeout,
            memory_size=memory_size,
            architecture=architecture or lambda_.Architecture.ARM_64,
            reserved_concurrent_executions=reserved_concurrent_executions,
            environment=env,
            description=f"Idempotent consumer ({mode} mode)",
        )
        self.log_group.grant_write(self.role)

        self.table_grant = table.grant(self.function, *TABLE_ACTIONS[mode])
        if table.encryption_key is not None:
            table.encryption_key.grant(self.function, *TABLE_KEY_ACTIONS)
        if dead_letter_queue is not None:
            self.grant_send_to_dead_letter_queue(dead_letter_queue)

        self.event_source = event_sources.SqsEventSource(
            queue,
            batch_size=batch_size,
            report_batch_item_failures=True,
            max_concurrency=max_concurrency,
        )
        self.function.add_event_source(self.event_source)

    def grant_send_to_dead_letter_queue(self, dead_letter_queue: sqs.IQueue) -> iam.Grant:
        """``sqs:SendMessage`` on the DLQ (+ ``kms:GenerateDataKey``/``kms:Decrypt`` on its customer key)."""
        grant = iam.Grant.add_to_principal(
            grantee=self.function, actions=["sqs:SendMessage"], resource_arns=[dead_letter_queue.queue_arn]
        )
        if dead_letter_queue.encryption_master_key is not None:
            dead_letter_queue.encryption_master_key.grant(self.function, *DLQ_KEY_ACTIONS)
        return grant


def _check_table_schema(table: dynamodb.ITable, partition_key_name: str, sort_key_name: str) -> None:
    """For a table defined in this app, the key names the runtime is told must be the table's."""
    if not isinstance(table, dynamodb.Table):
        return
    schema = table.schema_v2()
    wanted = (
        ("partition_key_name", partition_key_name, list(schema.partition_keys)),
        ("sort_key_name", sort_key_name, list(schema.sort_keys)),
    )
    for prop, name, attributes in wanted:
        if len(attributes) != 1:
            raise ConfigurationError(
                f"table must have one string partition key and one string sort key; {table.node.path} has "
                f"{len(attributes)} {prop.removesuffix('_name').replace('_', ' ')} attribute(s)"
            )
        attribute = attributes[0]
        if attribute.name != name:
            raise ConfigurationError(
                f"{prop} must match the table's key attribute {attribute.name!r}; got {name!r}"
            )
        if attribute.type != dynamodb.AttributeType.STRING:
            raise ConfigurationError(
                f"table key {attribute.name!r} must be of type string; got {attribute.type.name}"
            )


def _check_visibility_timeout(queue: sqs.IQueue, timeout_seconds: int | None) -> None:
    """A queue defined in this app must hide a message for at least 6 x the function timeout."""
    if timeout_seconds is None or not isinstance(queue, sqs.Queue):
        return
    cfn = queue.node.default_child
    if not isinstance(cfn, sqs.CfnQueue):
        return
    visibility = cfn.visibility_timeout
    if visibility is None:
        visibility = _SQS_DEFAULT_VISIBILITY
    if unresolved(visibility):
        return
    needed = VISIBILITY_FACTOR * timeout_seconds
    if visibility < needed:
        raise ConfigurationError(
            f"visibility_timeout of queue {queue.node.path} must be at least {VISIBILITY_FACTOR} x the "
            f"function timeout ({timeout_seconds} seconds) = {needed} seconds; got {visibility} seconds"
        )


def _seconds_text(duration: Duration, whole_seconds: int | None) -> str:
    """Whole seconds as the runtime parses them ("604800", never "604800.0"); tokens pass through."""
    if whole_seconds is not None:
        return str(whole_seconds)
    return Token.as_string(duration.to_seconds())
