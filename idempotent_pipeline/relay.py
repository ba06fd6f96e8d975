"""OutboxRelay: the function on the idempotency table's stream that publishes what processors emitted."""

from __future__ import annotations

import json
from typing import Any

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from idempotent_runtime import contract
from idempotent_runtime.contract import ConfigurationError, IntRange, LogLevel
from idempotent_runtime.outbox import stream_filters
from idempotent_runtime.relay import (
    QUEUE_ACTIONS,
    RELAY_HANDLER,
    STREAM_ACTIONS,
    TOPIC_ACTIONS,
    TOPIC_KEY_ACTIONS,
    RelayMetric,
)

from idempotent_pipeline import _compat, _keys
from idempotent_pipeline._alarms import ONE_MINUTE, AlarmDefinition, Alarms, Counters, counter, dead_letters
from idempotent_pipeline._asset import Target, stage_asset
from idempotent_pipeline._rules import TOKEN, implements, instance, read, text
from idempotent_pipeline.options import (
    DEFAULT_ARCHITECTURE,
    DEFAULT_PYTHON_VERSION,
    DEFAULT_RUNTIME,
    AlarmOptions,
)
from idempotent_pipeline.table import IdempotencyTable

# The stream view the relay reads: the written item (its messages), never the one it replaced.
STREAM_VIEWS = (dynamodb.StreamViewType.NEW_IMAGE, dynamodb.StreamViewType.NEW_AND_OLD_IMAGES)
# Lambda's limits for a DynamoDB stream mapping.
BATCH_SIZE = IntRange(1, 10_000)
RETRY_ATTEMPTS = IntRange(0, 10_000)
DEFAULT_BATCH_SIZE = 100
DEFAULT_RETRY_ATTEMPTS = 10_000
# The stream keeps a record 24 hours; the iterator-age alarm fires well before a record could expire.
ITERATOR_AGE_ALARM_MS = 3600 * 1000
TABLE_STREAM_KEY_ACTIONS = ("kms:Decrypt",)


def stream_arn(table: IdempotencyTable) -> str:
    """The table's stream (NEW_IMAGE on a table of this app, which gets one if it has none); an imported
    table must name its stream (``table_stream_arn``)."""
    made = table.table
    if isinstance(made, dynamodb.Table):
        cfn: dynamodb.CfnTable = made.node.default_child  # type: ignore[assignment]
        view = cfn.stream_specification
        view = getattr(view, "stream_view_type", None) if view is not None else None
        if view is None:
            cfn.stream_specification = dynamodb.CfnTable.StreamSpecificationProperty(
                stream_view_type=dynamodb.StreamViewType.NEW_IMAGE.value
            )
        elif view not in {v.value for v in STREAM_VIEWS}:
            raise ConfigurationError(
                f"the relay reads the emitted messages from the stream's new images; table {made.node.path} "
                f"has a {view} stream: make it NEW_IMAGE or NEW_AND_OLD_IMAGES"
            )
        return cfn.attr_stream_arn
    arn = made.table_stream_arn
    if arn is None:
        raise ConfigurationError(
            f"the relay reads the table's stream; the imported table {made.node.path} names none: import it "
            "with table_stream_arn (a NEW_IMAGE or NEW_AND_OLD_IMAGES stream)"
        )
    return arn


def target_arn(prop: str, target: object) -> str:
    """The ARN of a relay's target, an ``sns.ITopic`` or an ``sqs.IQueue`` (``prop``: its name in errors)."""
    if implements(target, sns.ITopic):
        return target.topic_arn  # type: ignore[attr-defined,no-any-return]
    if implements(target, sqs.IQueue):
        return target.queue_arn  # type: ignore[attr-defined,no-any-return]
    raise ConfigurationError(f"{prop} must be an sns.ITopic or an sqs.IQueue; got {target!r:.120}")


@jsii.implements(lambda_.IEventSourceDlq)
class _OnFailure:
    """The mapping's on-failure destination: Lambda sends the description of a batch it gave up on with the
    function's role. CDK's ``SqsDlq`` grants that role every use of a queue key (``kms:ReEncrypt*``,
    ``kms:GenerateDataKey*``); this grants what SendMessage needs (:meth:`OutboxRelay._grant`)."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self.queue = queue

    def bind(self, target: Any, target_handler: Any) -> lambda_.DlqDestinationConfig:
        return lambda_.DlqDestinationConfig(destination=self.queue.queue_arn)


class OutboxRelay(Counters, Construct):
    """A Lambda function on the table's stream that publishes the messages processors emitted
    (``message.emit()``) to ``target``, with their deduplication ids (``idempotent_runtime.relay``).

    The event source mapping: from the stream's oldest record (TRIM_HORIZON), filtered so only writes of
    this prefix's outbox items invoke the function (``idempotent_runtime.outbox.stream_filters``: the
    partitions and sort keys of its outbox and its exact emitter attribute, so no other consumer's item on a
    shared table, no marker and no processor write reaches it; and 0.3's items, for the upgrade), batch
    item failures reported (a batch is retried from the first record not published, in order), at most
    ``retry_attempts`` retries; a batch given up on is described in the dead-letter queue (the on-failure
    destination). The same queue receives, with the reason, each emitted message that can never be
    published. The queue is TLS-only, kept 14 days, encrypted with the table's customer-managed key, else
    the target's, else SSE-SQS.

    The function's environment names the table and the prefix (``TABLE_NAME``, ``KEY_PREFIX``) besides the
    target, so operators' tools find the outbox a relay publishes from the function alone.

    Alarms (``alarm_options``): messages in the dead-letter queue (≥ 1), messages left for the stream to
    deliver again over a window, invocation errors (≥ 1), the stream's iterator age (≥ 1 hour; records
    expire after 24).

    :param table: the :class:`IdempotencyTable` the consumer writes; a table of this app gets a NEW_IMAGE
        stream, an imported one must have one (``table_stream_arn``).
    :param target: the ``sns.ITopic`` or ``sqs.IQueue`` the consumer's ``EMIT_TARGET_ARN`` names.
    :param key_prefix: the consumer's ``ConsumerOptions.key_prefix``: the relay publishes its outbox only.
    :param dead_letter_removal_policy: of the dead-letter queue, which holds emitted messages no target took.
        Default: RETAIN (an :class:`IdempotentConsumer`'s relay: as its dead-letter queue from
        :class:`Messaging`, ``MessagingOptions.dead_letter_removal_policy``).
    :param batch_size: stream records per invocation (1-10000). Default: 100.
    :param retry_attempts: retries of a failing batch (0-10000) before it is given up to the dead-letter
        queue; Lambda stops earlier when its records expire (24 hours). Default: 10000.
    :param log_encryption_key: as :attr:`ConsumerOptions.log_encryption_key`, for the function's log group
        (its lines name the emitted messages and the targets' refusals).
    """

    dead_letter_queue_alarm: cloudwatch.Alarm | None = None
    failed_alarm: cloudwatch.Alarm | None = None
    errors_alarm: cloudwatch.Alarm | None = None
    iterator_age_alarm: cloudwatch.Alarm | None = None

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: IdempotencyTable,
        target: sns.ITopic | sqs.IQueue,
        key_prefix: str = contract.KEY_PREFIX.default,
        batch_size: int = DEFAULT_BATCH_SIZE,
        retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
        metrics_namespace: str = contract.METRICS_NAMESPACE.default,
        log_level: LogLevel | str = contract.LOG_LEVEL.default,
        architecture: lambda_.Architecture | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        log_encryption_key: kms.IKey | None = None,
        alarm_options: AlarmOptions | None = None,
        dead_letter_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        if not isinstance(table, IdempotencyTable):
            raise ConfigurationError(f"table must be an IdempotencyTable; got {type(table).__name__}")
        self.target_arn = target_arn("target", target)
        self.to_topic = implements(target, sns.ITopic)
        prefix = text("key_prefix", key_prefix)
        if prefix is TOKEN:
            raise ConfigurationError("key_prefix must be known at synth: it is the relay's event filter")
        prefix = contract.KEY_PREFIX.kind.coerce("key_prefix", prefix)
        batch = read("batch_size", BATCH_SIZE, batch_size)[0]
        retries = read("retry_attempts", RETRY_ATTEMPTS, retry_attempts)[0]
        instance("architecture", architecture, lambda_.Architecture, "a lambda_.Architecture")
        instance("log_encryption_key", log_encryption_key, kms.IKey, "a kms.IKey")
        instance("dead_letter_removal_policy", dead_letter_removal_policy, RemovalPolicy, "a RemovalPolicy")
        alarms = Alarms.read(self, alarm_options)
        self.table = table
        self.target = target
        self.metrics_namespace = contract.METRICS_NAMESPACE.kind.coerce(
            "metrics_namespace", metrics_namespace
        )
        # The messages in it are the table's and the target's data: protected like them.
        self.dead_letter_key: kms.IKey | None = table.encryption_key or self._target_key()
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.KMS if self.dead_letter_key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=self.dead_letter_key,
            enforce_ssl=True,
            retention_period=Duration.seconds(contract.SQS_MAX_RETENTION_SECONDS),
            removal_policy=dead_letter_removal_policy,
        )
        environment = {
            contract.EMIT_TARGET_ARN.name: self.target_arn,
            contract.DLQ_URL.name: self.dead_letter_queue.queue_url,
            contract.TABLE_NAME.name: table.table.table_name,
            **({contract.KEY_PREFIX.name: prefix} if prefix else {}),  # empty: unset, as the consumer's
            contract.METRICS_NAMESPACE.name: self.metrics_namespace,
            contract.LOG_LEVEL.name: contract.LOG_LEVEL.kind.render(
                contract.LOG_LEVEL.kind.coerce("log_level", log_level)
            ),
        }
        self._build_function(environment, architecture, log_retention, log_encryption_key)
        self._grant(table)
        self.event_source = lambda_.EventSourceMapping(
            self,
            "StreamEventSource",
            target=self.function,
            event_source_arn=stream_arn(table),
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=batch,
            retry_attempts=retries,
            report_batch_item_failures=True,
            filters=[
                {"pattern": json.dumps(pattern)}
                for pattern in stream_filters(table.partition_key_name, table.sort_key_name, prefix)
            ],
            on_failure=_OnFailure(self.dead_letter_queue),
        )
        _compat.acknowledge(
            self.event_source,
            "IdempotentPipeline-StreamRetries",
            "the relay publishes each item's messages in order: it retries a failing batch until its records "
            "expire rather than give it up and publish later messages first; the iterator-age alarm fires "
            "after an hour",
        )
        self.alarms: tuple[cloudwatch.Alarm, ...] = alarms.create(self, self._alarm_definitions(alarms))

    def _build_function(
        self,
        environment: dict[str, str],
        architecture: lambda_.Architecture | None,
        retention: Any,
        log_key: kms.IKey | None,
    ) -> None:
        machine = "arm64" if architecture is None else str(architecture.name)
        asset, _ = stage_asset(None, (), (), Target(DEFAULT_PYTHON_VERSION, machine), None)
        self.role, self.log_group, self.function = _keys.function(
            self,
            "Outbox relay: reads the table's stream, publishes emitted messages",
            asset,
            retention,
            log_key,
            "OutboxRelay",
            runtime=DEFAULT_RUNTIME,
            handler=RELAY_HANDLER,
            timeout=Duration.seconds(60),
            memory_size=256,
            architecture=architecture or DEFAULT_ARCHITECTURE,
            environment=environment,
            description="Outbox relay: publishes emitted messages with their deduplication ids",
        )
        self._function_name = self.function.function_name
        # The on-failure destination: Lambda writes a description of a batch it gave up on. cdk-nag's rule
        # sees a queue with no dead-letter queue of its own.
        _compat.acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "the relay's dead-letter queue: the stream mapping's on-failure destination and where the relay "
            "puts emitted messages the target refuses for good",
        )

    def _target_key(self) -> kms.IKey | None:
        if self.to_topic:
            return _compat.topic_key(self.target)  # type: ignore[arg-type]
        return self.target.encryption_master_key  # type: ignore[union-attr]

    def _grant(self, table: IdempotencyTable) -> None:
        """The stream's records, publishing to the target and sending to the dead-letter queue (the relay's
        dead letters and Lambda's on-failure destination alike), keys only through the services that use
        them."""
        _keys.grant(self.function, STREAM_ACTIONS, stream_arn(table))
        dead_letters = self.dead_letter_queue.queue_arn
        key = self.dead_letter_key
        _keys.grant(self.function, contract.DLQ_ACTIONS, dead_letters, key, contract.DLQ_KEY_ACTIONS, "sqs")
        if table.encryption_key is not None:
            _keys.grant_through(self.function, table.encryption_key, TABLE_STREAM_KEY_ACTIONS, "dynamodb")
        actions, service = (TOPIC_ACTIONS, "sns") if self.to_topic else (QUEUE_ACTIONS, "sqs")
        _keys.grant(self.function, actions, self.target_arn, self._target_key(), TOPIC_KEY_ACTIONS, service)

    def _alarm_definitions(self, alarms: Alarms) -> list[AlarmDefinition]:
        return [
            dead_letters(
                self.dead_letter_queue,
                what="emitted messages the target refused for good, or batches the relay gave up on, are "
                "waiting in the relay's dead-letter queue",
            ),
            AlarmDefinition(
                "FailedAlarm",
                lambda: self.metric_failed(period=alarms.options.failed_period),
                alarms.failed_threshold,
                "stream records were left for the stream to deliver again (the target throttles, fails or "
                "refuses the relay): see the relay's logs",
            ),
            AlarmDefinition(
                "ErrorsAlarm",
                lambda: self.function.metric_errors(period=ONE_MINUTE, statistic="Sum"),
                1,
                "whole relay invocations failed (timeout, crash, a configuration refused at start)",
            ),
            AlarmDefinition(
                "IteratorAgeAlarm",
                lambda: self.metric_iterator_age(),
                ITERATOR_AGE_ALARM_MS,
                "the relay lags an hour behind the table's stream: a record not published within 24 hours "
                "of its write expires from the stream",
            ),
        ]

    # -- metrics ------------------------------------------------------------------------------------

    COUNTERS = RelayMetric
    metric_published = counter(RelayMetric.PUBLISHED, "Emitted messages the target accepted.")
    metric_dead_lettered = counter(
        RelayMetric.DEAD_LETTERED,
        "Emitted messages the target refused for good, sent to the dead-letter queue with the reason.",
    )
    metric_failed = counter(RelayMetric.FAILED, "Stream records left for the stream to deliver again.")
    metric_reordered = counter(
        RelayMetric.REORDERED,
        "Messages published out of their group's order: accepted after an earlier one was refused in one "
        'request, or committed before one of their group already published (docs/runtime.md, "Order").',
    )

    def metric_iterator_age(self, **options: Any) -> cloudwatch.IMetric:
        """How far behind the stream the relay is (Lambda's IteratorAge, milliseconds, Maximum)."""
        options.setdefault("period", ONE_MINUTE)
        options.setdefault("statistic", "Maximum")
        return self.function.metric("IteratorAge", **options)
