"""The reference stack's resources, written by hand with plain aws-cdk-lib L2 constructs.

The synth benchmark times this against the reference stack: the difference is what our constructs cost at
synth time (validation, derived settings, cdk-nag-ready policies), not the resources themselves.
"""

from __future__ import annotations

from pathlib import Path

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
    """SNS FIFO topic -> SQS FIFO queue (+ FIFO DLQ) -> Lambda -> DynamoDB, with the reference's settings.

    Same resource types and counts as the reference stack (app.py, default context), same properties where
    they are settings (names, retention, memory, alarms, least-privilege policy, outputs).
    """

    def __init__(self, scope: Construct, construct_id: str, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]

        topic = sns.Topic(self, "Topic", fifo=True, content_based_deduplication=True, enforce_ssl=True)
        dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            queue_name=f"{construct_id}-DeadLetterQueue.fifo",
            fifo=True,
            content_based_deduplication=True,
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            retention_period=cdk.Duration.days(14),
        )
        queue = sqs.Queue(
            self,
            "Queue",
            queue_name=f"{construct_id}-Queue.fifo",
            fifo=True,
            content_based_deduplication=True,
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            retention_period=cdk.Duration.days(4),
            visibility_timeout=cdk.Duration.seconds(6 * FUNCTION_TIMEOUT_S),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=5),
        )
        topic.add_subscription(subscriptions.SqsSubscription(queue, raw_message_delivery=True))

        table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            time_to_live_attribute="expires_at",
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=False,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

        log_group = logs.LogGroup(self, "LogGroup", retention=logs.RetentionDays.ONE_MONTH)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="consumer: reads the FIFO queue, writes the table",
        )
        log_group.grant_write(role)
        role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:PutItem"], resources=[table.table_arn]))
        role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[dead_letter_queue.queue_arn])
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
                "TTL_SECONDS": "604800",
                "IDEMPOTENCY_MODE": "document",
                "KEY_SOURCE": "fields",
                "PARTITION_KEY_FIELD": "x",
                "SORT_KEY_FIELD": "y",
                "DLQ_URL": dead_letter_queue.queue_url,
            },
        )
        function.add_event_source(
            event_sources.SqsEventSource(queue, batch_size=10, report_batch_item_failures=True)
        )

        one_minute = cdk.Duration.minutes(1)
        at_least = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        not_breaching = cloudwatch.TreatMissingData.NOT_BREACHING
        cloudwatch.Alarm(
            self,
            "DeadLetterQueueAlarm",
            alarm_description="messages are waiting in the dead-letter queue",
            metric=dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=one_minute, statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=at_least,
            treat_missing_data=not_breaching,
        )
        cloudwatch.Alarm(
            self,
            "MessageAgeAlarm",
            alarm_description="the oldest message in the queue is older than expected",
            metric=queue.metric_approximate_age_of_oldest_message(period=one_minute, statistic="Maximum"),
            threshold=600,
            evaluation_periods=1,
            comparison_operator=at_least,
            treat_missing_data=not_breaching,
        )
        cloudwatch.Alarm(
            self,
            "FunctionErrorsAlarm",
            alarm_description="the consumer function failed invocations",
            metric=function.metric_errors(period=one_minute, statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=at_least,
            treat_missing_data=not_breaching,
        )

        for name, value in (
            ("TopicArn", topic.topic_arn),
            ("QueueUrl", queue.queue_url),
            ("DeadLetterQueueUrl", dead_letter_queue.queue_url),
            ("TableName", table.table_name),
            ("FunctionName", function.function_name),
        ):
            cdk.CfnOutput(self, name, value=value)
