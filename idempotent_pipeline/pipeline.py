"""IdempotentPipeline: SNS FIFO -> SQS FIFO -> consumer Lambda -> DynamoDB, with alarms."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from idempotent_pipeline._checks import ConfigurationError, seconds
from idempotent_pipeline.consumer import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_LOG_RETENTION,
    DEFAULT_MEMORY_SIZE,
    DEFAULT_TIMEOUT,
    VISIBILITY_FACTOR,
    IdempotentConsumer,
    KeySource,
    Mode,
)
from idempotent_pipeline.messaging import DEFAULT_MAX_RECEIVE_COUNT, FifoMessaging
from idempotent_pipeline.table import (
    DEFAULT_PARTITION_KEY,
    DEFAULT_SORT_KEY,
    DEFAULT_TTL_ATTRIBUTE,
    IdempotencyTable,
)

DEFAULT_MAX_MESSAGE_AGE = Duration.minutes(10)


class IdempotentPipeline(Construct):
    """The whole pipeline: :class:`FifoMessaging` -> :class:`IdempotentConsumer` -> :class:`IdempotencyTable`,
    plus three CloudWatch alarms (DLQ has messages, age of the oldest queued message, function errors).

    Messaging props (see :class:`FifoMessaging`): ``topic``, ``content_based_deduplication``,
    ``high_throughput``, ``retention_period``, ``max_receive_count``, ``dead_letter_queue``,
    ``filter_policy``.
    Table props (see :class:`IdempotencyTable`): ``partition_key_name``, ``sort_key_name``,
    ``time_to_live_attribute``, ``removal_policy``, ``point_in_time_recovery``.
    Consumer props (see :class:`IdempotentConsumer`): ``mode``, ``key_source``, ``partition_key_field``,
    ``sort_key_field``, ``ttl``, ``lease_duration``, ``processor``, ``code_directory``, ``timeout``,
    ``memory_size``, ``architecture``, ``batch_size``, ``max_concurrency``,
    ``reserved_concurrent_executions``, ``log_retention``, ``max_workers``, ``metrics_namespace``,
    ``log_level``, ``environment``. Defaults are those of the building blocks, except:

    :param visibility_timeout: the queue's visibility timeout. Default: 6 x ``timeout`` (3 minutes with the
        default 30 s timeout); a smaller value is an error.
    :param encryption_key: one customer-managed KMS key for both queues and the table.
        Default: SSE-SQS on the queues, the AWS-owned key on the table.
    :param topic_encryption_key: a customer-managed KMS key for the new topic (a different key than
        ``encryption_key``; see :class:`FifoMessaging`). Default: the topic is not encrypted with KMS.
    :param alarm_topic: an SNS topic notified when an alarm fires. Default: no alarm action.
    :param max_message_age: the oldest-message-age alarm threshold. Default: 10 minutes.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        # messaging
        topic: sns.ITopic | None = None,
        content_based_deduplication: bool = True,
        high_throughput: bool = False,
        visibility_timeout: Duration | None = None,
        retention_period: Duration | None = None,
        max_receive_count: int = DEFAULT_MAX_RECEIVE_COUNT,
        dead_letter_queue: sqs.IQueue | None = None,
        filter_policy: Mapping[str, sns.SubscriptionFilter] | None = None,
        encryption_key: kms.IKey | None = None,
        topic_encryption_key: kms.IKey | None = None,
        # table
        partition_key_name: str = DEFAULT_PARTITION_KEY,
        sort_key_name: str = DEFAULT_SORT_KEY,
        time_to_live_attribute: str = DEFAULT_TTL_ATTRIBUTE,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        point_in_time_recovery: bool = True,
        # consumer
        mode: Mode = "document",
        key_source: KeySource = "fields",
        partition_key_field: str | None = None,
        sort_key_field: str | None = None,
        ttl: Duration | None = None,
        lease_duration: Duration | None = None,
        processor: str | None = None,
        code_directory: str | None = None,
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
        # alarms
        alarm_topic: sns.ITopic | None = None,
        max_message_age: Duration | None = None,
    ) -> None:
        super().__init__(scope, id)
        timeout = timeout or DEFAULT_TIMEOUT
        timeout_seconds = seconds("timeout", timeout)
        if visibility_timeout is None:
            if timeout_seconds is None:
                raise ConfigurationError(
                    "visibility_timeout is required when timeout is a deploy-time token; got timeout "
                    f"{timeout.to_string()}"
                )
            visibility_timeout = Duration.seconds(VISIBILITY_FACTOR * timeout_seconds)
        else:
            visibility = seconds("visibility_timeout", visibility_timeout)
            if (
                visibility is not None
                and timeout_seconds is not None
                and visibility < VISIBILITY_FACTOR * timeout_seconds
            ):
                raise ConfigurationError(
                    f"visibility_timeout must be at least {VISIBILITY_FACTOR} x timeout "
                    f"({timeout_seconds} seconds) = {VISIBILITY_FACTOR * timeout_seconds} seconds; "
                    f"got {visibility} seconds"
                )
        max_message_age = max_message_age or DEFAULT_MAX_MESSAGE_AGE
        age_seconds = seconds("max_message_age", max_message_age)
        if age_seconds is not None and age_seconds < 60:
            raise ConfigurationError(
                f"max_message_age must be at least 60 seconds; got {age_seconds} seconds"
            )

        self.messaging = FifoMessaging(
            self,
            "Messaging",
            topic=topic,
            content_based_deduplication=content_based_deduplication,
            high_throughput=high_throughput,
            visibility_timeout=visibility_timeout,
            retention_period=retention_period,
            max_receive_count=max_receive_count,
            dead_letter_queue=dead_letter_queue,
            encryption_key=encryption_key,
            topic_encryption_key=topic_encryption_key,
            filter_policy=filter_policy,
        )
        self.idempotency_table = IdempotencyTable(
            self,
            "Table",
            partition_key_name=partition_key_name,
            sort_key_name=sort_key_name,
            time_to_live_attribute=time_to_live_attribute,
            removal_policy=removal_policy,
            point_in_time_recovery=point_in_time_recovery,
            encryption_key=encryption_key,
        )
        self.consumer = IdempotentConsumer(
            self,
            "Consumer",
            queue=self.messaging.queue,
            table=self.idempotency_table.table,
            partition_key_name=partition_key_name,
            sort_key_name=sort_key_name,
            time_to_live_attribute=time_to_live_attribute,
            mode=mode,
            key_source=key_source,
            partition_key_field=partition_key_field,
            sort_key_field=sort_key_field,
            ttl=ttl,
            lease_duration=lease_duration,
            processor=processor,
            code_directory=code_directory,
            dead_letter_queue=self.messaging.dead_letter_queue,
            timeout=timeout,
            memory_size=memory_size,
            architecture=architecture,
            batch_size=batch_size,
            max_concurrency=max_concurrency,
            reserved_concurrent_executions=reserved_concurrent_executions,
            log_retention=log_retention,
            max_workers=max_workers,
            metrics_namespace=metrics_namespace,
            log_level=log_level,
            environment=environment,
        )

        self.topic = self.messaging.topic
        self.queue = self.messaging.queue
        self.dead_letter_queue = self.messaging.dead_letter_queue
        self.table = self.idempotency_table.table
        self.function = self.consumer.function

        one_minute = Duration.minutes(1)
        self.dead_letter_queue_alarm = cloudwatch.Alarm(
            self,
            "DeadLetterQueueAlarm",
            alarm_description="messages the pipeline could not process are waiting in the dead-letter queue",
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=one_minute, statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.message_age_alarm = cloudwatch.Alarm(
            self,
            "MessageAgeAlarm",
            alarm_description="the oldest message in the queue is older than expected: the consumer lags",
            metric=self.queue.metric_approximate_age_of_oldest_message(
                period=one_minute, statistic="Maximum"
            ),
            threshold=max_message_age.to_seconds(),
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.function_errors_alarm = cloudwatch.Alarm(
            self,
            "FunctionErrorsAlarm",
            alarm_description="the consumer function failed invocations",
            metric=self.function.metric_errors(period=one_minute, statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarms = (self.dead_letter_queue_alarm, self.message_age_alarm, self.function_errors_alarm)
        if alarm_topic is not None:
            action = cloudwatch_actions.SnsAction(alarm_topic)
            for alarm in self.alarms:
                alarm.add_alarm_action(action)

    def grant_publish(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to publish to the pipeline's topic (and use its key, if encrypted)."""
        return self.messaging.grant_publish(grantee)
