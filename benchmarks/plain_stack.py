"""The reference stack's resources, written by hand with plain aws-cdk-lib L2 constructs.

The synth benchmark times this against the reference stack: the difference is what our constructs cost at
synth time (validation, derived settings, cdk-nag-ready policies), not the resources themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

LAMBDA_SRC = Path(__file__).resolve().parent.parent / "lambda_src"
FUNCTION_TIMEOUT_S = 30


class PlainPipelineStack(cdk.Stack):
    """SNS FIFO topic -> SQS FIFO queue (+ FIFO DLQ, + the subscription's FIFO DLQ) -> Lambda -> DynamoDB,
    with the reference's settings.

    Same resource types and counts as the reference stack (app.py, default context), same properties where
    they are settings (retention, memory, environment, least-privilege policy, the ten alarms, outputs).
    """

    def __init__(self, scope: Construct, construct_id: str, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        topic, queue, dead_letter_queue, subscription_dead_letter_queue = self._messaging()
        table = self._table()
        function = self._consumer(queue, dead_letter_queue, table)
        self._alarms(topic, queue, dead_letter_queue, subscription_dead_letter_queue, function)
        for name, value in (
            ("TopicArn", topic.topic_arn),
            ("QueueUrl", queue.queue_url),
            ("DeadLetterQueueUrl", dead_letter_queue.queue_url),
            ("SubscriptionDeadLetterQueueUrl", subscription_dead_letter_queue.queue_url),
            ("TableName", table.table_name),
            ("FunctionName", function.function_name),
        ):
            cdk.CfnOutput(self, name, value=value)

    def _messaging(self) -> tuple[sns.Topic, sqs.Queue, sqs.Queue, sqs.Queue]:
        topic = sns.Topic(self, "Topic", fifo=True, content_based_deduplication=True, enforce_ssl=True)
        fifo: dict[str, Any] = {
            "fifo": True,
            "content_based_deduplication": True,
            "enforce_ssl": True,
            "encryption": sqs.QueueEncryption.SQS_MANAGED,
        }
        kept: dict[str, Any] = {"removal_policy": cdk.RemovalPolicy.RETAIN}  # the dead-letter queues
        dead_letter_queue = sqs.Queue(
            self, "DeadLetterQueue", **fifo, **kept, retention_period=cdk.Duration.days(14)
        )
        queue = sqs.Queue(
            self,
            "Queue",
            **fifo,
            retention_period=cdk.Duration.days(4),
            visibility_timeout=cdk.Duration.seconds(6 * FUNCTION_TIMEOUT_S),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=5),
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        subscription_dead_letter_queue = sqs.Queue(
            self, "SubscriptionDeadLetterQueue", **fifo, **kept, retention_period=cdk.Duration.days(14)
        )
        topic.add_subscription(
            subscriptions.SqsSubscription(
                queue, raw_message_delivery=True, dead_letter_queue=subscription_dead_letter_queue
            )
        )
        return topic, queue, dead_letter_queue, subscription_dead_letter_queue

    def _table(self) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            time_to_live_attribute="expires_at",
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.DEFAULT,
            deletion_protection=False,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

    def _consumer(
        self, queue: sqs.Queue, dead_letter_queue: sqs.Queue, table: dynamodb.Table
    ) -> lambda_.Function:
        log_group = logs.LogGroup(self, "LogGroup", retention=logs.RetentionDays.ONE_MONTH)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="consumer: reads the queue, writes the table",
        )
        function = lambda_.Function(
            self,
            "Consumer",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="idempotent_runtime.handler.handler",
            code=lambda_.Code.from_asset(str(LAMBDA_SRC), exclude=["**/__pycache__", "*.pyc"]),
            description="consumer (document mode)",
            timeout=cdk.Duration.seconds(FUNCTION_TIMEOUT_S),
            memory_size=256,
            role=role,
            log_group=log_group,
            environment={
                "TABLE_NAME": table.table_name,
                "PARTITION_KEY": "pk",
                "SORT_KEY": "sk",
                "TTL_ATTRIBUTE": "expires_at",
                "DEDUP_TTL_SECONDS": "604800",
                "IDEMPOTENCY_MODE": "document",
                "KEY_SOURCE": "fields",
                "QUEUE_TYPE": "fifo",
                "ON_CONFLICT": "quarantine",
                "METRICS_NAMESPACE": "IdempotentPipeline",
                "DOCUMENT_TTL_SECONDS": "0",
                "PARTITION_KEY_FIELD": "x",
                "SORT_KEY_FIELD": "y",
                "DLQ_URL": dead_letter_queue.queue_url,
                "MAX_RECEIVE_COUNT": "5",
            },
        )
        log_group.grant_write(role)
        table.grant(function, "dynamodb:PutItem")
        iam.Grant.add_to_principal(
            grantee=function, actions=["sqs:SendMessage"], resource_arns=[dead_letter_queue.queue_arn]
        )
        function.add_event_source(
            event_sources.SqsEventSource(queue, batch_size=10, report_batch_item_failures=True)
        )
        return function

    def _alarms(
        self,
        topic: sns.Topic,
        queue: sqs.Queue,
        dead_letter_queue: sqs.Queue,
        subscription_dead_letter_queue: sqs.Queue,
        function: lambda_.Function,
    ) -> None:
        one_minute = cdk.Duration.minutes(1)
        at_least = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        not_breaching = cloudwatch.TreatMissingData.NOT_BREACHING

        def alarm(id: str, metric: cloudwatch.IMetric, threshold: float, description: str) -> None:
            cloudwatch.Alarm(
                self,
                id,
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=at_least,
                treat_missing_data=not_breaching,
            )

        def visible(queue: sqs.IQueue) -> cloudwatch.IMetric:
            return queue.metric_approximate_number_of_messages_visible(period=one_minute, statistic="Maximum")

        alarm("DeadLetterQueueAlarm", visible(dead_letter_queue), 1, "messages wait in the dead-letter queue")
        alarm(
            "SubscriptionDeadLetterQueueAlarm",
            visible(subscription_dead_letter_queue),
            1,
            "messages wait in the subscription's dead-letter queue",
        )
        alarm(
            "NotificationsFailedAlarm",
            topic.metric_number_of_notifications_failed(period=one_minute, statistic="Sum"),
            1,
            "SNS failed to deliver messages",
        )
        alarm(
            "NotificationsFailedToRedriveAlarm",
            topic.metric("NumberOfNotificationsFailedToRedriveToDlq", period=one_minute, statistic="Sum"),
            1,
            "SNS could not move messages to the subscription's dead-letter queue either",
        )
        alarm(
            "MessageAgeAlarm",
            queue.metric_approximate_age_of_oldest_message(period=one_minute, statistic="Maximum"),
            600,
            "the oldest message in the queue is older than expected",
        )
        function_name = function.function_name
        for name, threshold, period in (
            ("failed", 10, cdk.Duration.minutes(5)),
            ("quarantined", 1, one_minute),
            ("conflicts", 1, one_minute),
            ("misconfigured", 1, one_minute),
        ):
            metric = cloudwatch.Metric(
                namespace="IdempotentPipeline",
                metric_name=name,
                dimensions_map={"FunctionName": function_name},
                statistic="Sum",
                period=period,
            )
            alarm(f"{name.title()}Alarm", metric, threshold, f"the consumer counted {name} records")
        alarm(
            "ErrorsAlarm",
            function.metric_errors(period=one_minute, statistic="Sum"),
            1,
            "the consumer function failed invocations",
        )
