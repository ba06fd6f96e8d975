"""IdempotentPipeline: SNS -> SQS -> consumer Lambda -> DynamoDB, with alarms and an optional dashboard."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from idempotent_runtime.contract import ConfigurationError

from idempotent_pipeline._rules import TOKEN, boolean, duration, options_of, seconds
from idempotent_pipeline.consumer import IdempotentConsumer, needed_visibility
from idempotent_pipeline.dashboard import PipelineDashboard
from idempotent_pipeline.messaging import Messaging
from idempotent_pipeline.options import AlarmOptions, ConsumerOptions, MessagingOptions, TableOptions
from idempotent_pipeline.table import IdempotencyTable


def _consumers(name: str) -> Callable[..., cloudwatch.IMetric]:
    """The pipeline's ``name``: its consumer's (:class:`IdempotentConsumer`), with its doc."""

    def method(self: IdempotentPipeline, **options: Any) -> cloudwatch.IMetric:
        return getattr(self.consumer, name)(**options)  # type: ignore[no-any-return]

    method.__doc__ = getattr(IdempotentConsumer, name).__doc__
    return method


class IdempotentPipeline(Construct):
    """The whole pipeline: :class:`Messaging` -> :class:`IdempotentConsumer` -> :class:`IdempotencyTable`,
    each with its alarms, and optionally a :class:`PipelineDashboard`.

    The options objects are those of the blocks; one default differs: ``MessagingOptions.visibility_timeout``
    (6 x the consumer's timeout + its ``max_batching_window``).

    Attributes: ``topic`` (None without a topic), ``queue``, ``dead_letter_queue``,
    ``subscription_dead_letter_queue`` (None without a topic), ``table``, ``function``; the blocks
    ``messaging``, ``idempotency_table``, ``consumer``; ``alarms`` (every alarm of the blocks) and
    ``dashboard`` (the ``cloudwatch.Dashboard``, or None).

    :param topic: an existing topic to subscribe the queue to. Default: a new topic.
    :param dead_letter_queue: an existing dead-letter queue. Default: a new one.
    :param messaging_options: :class:`MessagingOptions`. Default: ``MessagingOptions()``.
    :param table_options: :class:`TableOptions`. Default: ``TableOptions()``.
    :param consumer_options: :class:`ConsumerOptions`. Default: ``ConsumerOptions()``.
    :param alarm_options: :class:`AlarmOptions`, for the alarms of every block. Default: ``AlarmOptions()``.
    :param dashboard: add a CloudWatch dashboard. Default: False.
    :param emit_target: where processors' ``message.emit()`` sends, through an :class:`OutboxRelay` (see
        :class:`IdempotentConsumer`). Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        topic: sns.ITopic | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        messaging_options: MessagingOptions | None = None,
        table_options: TableOptions | None = None,
        consumer_options: ConsumerOptions | None = None,
        alarm_options: AlarmOptions | None = None,
        dashboard: bool = False,
        emit_target: sns.ITopic | sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, id)
        messaging_options = options_of("messaging_options", messaging_options, MessagingOptions)
        consumer_options = options_of("consumer_options", consumer_options, ConsumerOptions)
        with_dashboard = boolean("dashboard", dashboard)
        if messaging_options.visibility_timeout is None:
            timeout = seconds("ConsumerOptions.timeout", consumer_options.timeout)
            window = seconds("ConsumerOptions.max_batching_window", consumer_options.max_batching_window)
            if TOKEN in (timeout, window):
                raise ConfigurationError(
                    "MessagingOptions.visibility_timeout is required when ConsumerOptions.timeout or "
                    "max_batching_window is a deploy-time token (it defaults to 6 x the timeout + the window)"
                )
            messaging_options = dataclasses.replace(
                messaging_options, visibility_timeout=duration(needed_visibility(timeout, window))
            )

        self.messaging = Messaging(
            self,
            "Messaging",
            topic=topic,
            dead_letter_queue=dead_letter_queue,
            options=messaging_options,
            alarm_options=alarm_options,
        )
        self.idempotency_table = IdempotencyTable(self, "Table", options=table_options)
        self.consumer = IdempotentConsumer(
            self,
            "Consumer",
            queue=self.messaging.queue,
            table=self.idempotency_table,
            dead_letter_queue=self.messaging.dead_letter_queue,
            options=consumer_options,
            alarm_options=alarm_options,
            emit_target=emit_target,
        )

        self.topic: sns.ITopic | None = self.messaging.topic
        self.queue: sqs.Queue = self.messaging.queue
        self.dead_letter_queue: sqs.IQueue = self.messaging.dead_letter_queue
        self.subscription_dead_letter_queue: sqs.Queue | None = self.messaging.subscription_dead_letter_queue
        self.table: dynamodb.ITable = self.idempotency_table.table
        self.function: lambda_.Function = self.consumer.function
        relay = self.consumer.relay
        self.alarms: tuple[cloudwatch.Alarm, ...] = (
            *self.messaging.alarms,
            *self.consumer.alarms,
            *(relay.alarms if relay is not None else ()),
        )
        self.dashboard: cloudwatch.Dashboard | None = None
        if with_dashboard:
            self.dashboard = PipelineDashboard(
                self,
                "Dashboard",
                consumer=self.consumer,
                table=self.idempotency_table,
                messaging=self.messaging,
            ).dashboard

    def grant_publish(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to put messages into the pipeline (see :meth:`Messaging.grant_publish`)."""
        return self.messaging.grant_publish(grantee)

    # The consumer's metrics, for alarms and dashboards of your own.
    metric_processed = _consumers("metric_processed")
    metric_duplicates = _consumers("metric_duplicates")
    metric_conflicts = _consumers("metric_conflicts")
    metric_failed = _consumers("metric_failed")
    metric_quarantined = _consumers("metric_quarantined")
    metric_misconfigured = _consumers("metric_misconfigured")
    metric_stale = _consumers("metric_stale")
    metric_duplicate_rate = _consumers("metric_duplicate_rate")
