"""The nag evaluation's apps: plain aws-cdk-lib stacks (aws_sqs, aws_sns, aws_lambda,
aws_lambda_event_sources, aws_dynamodb; no construct of idempotent-pipeline), the way a team writes an
SNS -> SQS -> Lambda -> DynamoDB pipeline by hand.

Two are correct and hardened (DLQs with alarms, TLS-only queues and topics, raw delivery, partial batch
responses, bounded stream retries, TTL and point-in-time recovery on the table); each other one is the
correct pipeline with exactly one misconfiguration planted, named by the idempotent_nag rule that must
report it and the construct paths (inside the stack) it must be reported on.

tests/nag/test_nag_evaluation.py asserts the pack on them (``make test``); benchmarks/nag_eval.py runs
them through cdk-nag AwsSolutions, cfn-lint and serverless-rules too (``make bench``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs

# CDK names an event source mapping, and a subscription, after the unique id of its queue or topic: the
# stack's name without punctuation, the construct's path, and a hash of eight hex digits.
_HASH = re.compile(r"(?<=[A-Za-z])[0-9A-F]{8}(?=/|$)")


def normalized(stack: str, path: str) -> str:
    """A construct path inside stack ``stack`` without the stack's name and the hashes in those ids."""
    return _HASH.sub("", path.replace(re.sub(r"[^A-Za-z0-9]", "", stack), ""))


@dataclass(frozen=True)
class EvalApp:
    """One app of the evaluation: ``build(stack)`` makes it, ``what`` says what is wrong with it; ``planted``
    is what idempotent_nag must report on it: (rule id, level, construct path inside the stack), empty for
    a correct app. A level is "error" for a misconfiguration that loses or doubles messages."""

    name: str
    build: Callable[[cdk.Stack], Any]
    what: str
    planted: tuple[tuple[str, str, str], ...] = ()


# -- the correct pipeline and its parts -----------------------------------------------------------------

TIMEOUT = Duration.seconds(30)
VISIBILITY = Duration.seconds(180)  # 6 x the function's timeout
ALARMS_OF_THE_ACCOUNT = f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"
HANDLER = "def handler(event, context):\n    return {'batchItemFailures': []}\n"


def dead_letter_queue(scope: cdk.Stack, id: str, *, alarmed: bool = True, **props: Any) -> sqs.Queue:
    """A TLS-only dead-letter queue keeping messages 14 days, with an alarm on its first message."""
    props.setdefault("retention_period", Duration.days(14))
    queue = sqs.Queue(scope, id, enforce_ssl=True, **props)
    if alarmed:
        cloudwatch.Alarm(
            scope,
            f"{id}Alarm",
            metric=queue.metric_approximate_number_of_messages_visible(),
            threshold=1,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
    return queue


def function(scope: cdk.Stack, id: str, **props: Any) -> lambda_.Function:
    props.setdefault("timeout", TIMEOUT)
    return lambda_.Function(
        scope,
        id,
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline(HANDLER),
        memory_size=256,
        **props,
    )


def idempotency_table(scope: cdk.Stack, *, ttl: bool = True, **props: Any) -> dynamodb.Table:
    """Powertools' idempotency table: key ``id``, records expiring by ``expiration``."""
    return dynamodb.Table(
        scope,
        "IdempotencyTable",
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute="expiration" if ttl else None,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        **props,
    )


def alarm_topic(scope: cdk.Stack, *, cloudwatch_may_publish: bool = True, **props: Any) -> sns.Topic:
    """A TLS-only topic for the alarms, whose policy lets CloudWatch alarms of the account publish."""
    topic = sns.Topic(scope, "AlarmTopic", enforce_ssl=True, **props)
    if cloudwatch_may_publish:
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": ALARMS_OF_THE_ACCOUNT},
                },
            )
        )
    return topic


def orders_pipeline(
    stack: cdk.Stack,
    *,
    queue: dict[str, Any] | None = None,
    max_receive_count: int | None = 5,
    dead_letters: dict[str, Any] | None = None,
    subscription: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    consumer: dict[str, Any] | None = None,
    table: dict[str, Any] | None = None,
) -> lambda_.Function:
    """Topic -> queue (dead-letter queue after 5 receives) -> function (partial batch responses) -> an
    idempotency table; each dict overrides the props of its part (max_receive_count None: no DLQ)."""
    topic = sns.Topic(stack, "Topic", enforce_ssl=True)
    redrive = None
    if max_receive_count is not None:
        dlq = dead_letter_queue(stack, "DeadLetterQueue", **(dead_letters or {}))
        redrive = sqs.DeadLetterQueue(queue=dlq, max_receive_count=max_receive_count)
    orders = sqs.Queue(
        stack,
        "Queue",
        **{
            "enforce_ssl": True,
            "visibility_timeout": VISIBILITY,
            "dead_letter_queue": redrive,
            **(queue or {}),
        },
    )
    subscription_props = {"raw_message_delivery": True, **(subscription or {})}
    if "dead_letter_queue" not in subscription_props:
        subscription_props["dead_letter_queue"] = dead_letter_queue(stack, "SubscriptionDeadLetterQueue")
    topic.add_subscription(subscriptions.SqsSubscription(orders, **subscription_props))
    records = idempotency_table(stack, **(table or {}))
    consumer = dict(consumer or {})
    environment = {"IDEMPOTENCY_TABLE": records.table_name, **consumer.pop("environment", {})}
    worker = function(stack, "Consumer", environment=environment, **consumer)
    records.grant_read_write_data(worker)
    worker.add_event_source(
        sources.SqsEventSource(
            orders, **{"batch_size": 10, "report_batch_item_failures": True, **(source or {})}
        )
    )
    return worker


def fifo_pipeline(
    stack: cdk.Stack,
    *,
    dead_letters: dict[str, Any] | None = None,
    consumer: dict[str, Any] | None = None,
    **source: Any,
) -> None:
    """A high-throughput FIFO topic -> FIFO queue -> function with reserved concurrency and the mapping's
    maximum concurrency at most that."""
    high_throughput = {
        "fifo": True,
        "deduplication_scope": sqs.DeduplicationScope.MESSAGE_GROUP,
        "fifo_throughput_limit": sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
    }
    topic = sns.Topic(
        stack,
        "Topic",
        fifo=True,
        content_based_deduplication=True,
        fifo_throughput_scope=sns.FifoThroughputScope.MESSAGE_GROUP,
        enforce_ssl=True,
    )
    dlq = dead_letter_queue(stack, "DeadLetterQueue", **{**high_throughput, **(dead_letters or {})})
    orders = sqs.Queue(
        stack,
        "Queue",
        enforce_ssl=True,
        visibility_timeout=VISIBILITY,
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=5),
        **high_throughput,
    )
    topic.add_subscription(
        subscriptions.SqsSubscription(
            orders,
            raw_message_delivery=True,
            dead_letter_queue=dead_letter_queue(stack, "SubscriptionDeadLetterQueue", **high_throughput),
        )
    )
    worker = function(stack, "Consumer", **{"reserved_concurrent_executions": 10, **(consumer or {})})
    worker.add_event_source(
        sources.SqsEventSource(
            orders, **{"report_batch_item_failures": True, "max_concurrency": 10, **source}
        )
    )


def changes_relay(stack: cdk.Stack, *, alarmed: bool = True, **source: Any) -> None:
    """An orders table's stream -> function (partial batch responses, bounded retries, an on-failure
    queue)."""
    table = dynamodb.Table(
        stack,
        "Orders",
        partition_key=dynamodb.Attribute(name="order_id", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        stream=dynamodb.StreamViewType.NEW_IMAGE,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
    )
    failures = dead_letter_queue(stack, "StreamFailures", alarmed=alarmed)
    relay = function(stack, "Relay")
    props = {
        "starting_position": lambda_.StartingPosition.TRIM_HORIZON,
        "batch_size": 100,
        "report_batch_item_failures": True,
        "bisect_batch_on_error": True,
        "retry_attempts": 10,
        "max_record_age": Duration.hours(1),
        "on_failure": sources.SqsDlq(failures),
        **source,
    }
    relay.add_event_source(
        sources.DynamoEventSource(table, **{k: v for k, v in props.items() if v is not None})
    )


def notifier(stack: cdk.Stack, *, on_failure: bool = True) -> None:
    """A topic -> function subscription (asynchronous invocation) with an on-failure queue."""
    topic = sns.Topic(stack, "Notifications", enforce_ssl=True)
    failures = dead_letter_queue(stack, "NotifierFailures") if on_failure else None
    notify = function(
        stack,
        "Notifier",
        on_failure=destinations.SqsDestination(failures) if failures else None,
        retry_attempts=2,
    )
    topic.add_subscription(
        subscriptions.LambdaSubscription(
            notify, dead_letter_queue=dead_letter_queue(stack, "NotificationsDeadLetterQueue")
        )
    )


def watched(stack: cdk.Stack, topic: sns.Topic) -> None:
    """An alarm (on the source queue's age) notifying ``topic``."""
    queue = stack.node.find_child("Queue")
    assert isinstance(queue, sqs.Queue)
    cloudwatch.Alarm(
        stack,
        "AgeAlarm",
        metric=queue.metric_approximate_age_of_oldest_message(),
        threshold=600,
        evaluation_periods=1,
    ).add_alarm_action(actions.SnsAction(topic))


# -- the apps -------------------------------------------------------------------------------------------


def correct_orders(stack: cdk.Stack) -> None:
    orders_pipeline(stack)
    watched(stack, alarm_topic(stack))


def correct_fifo_streams_and_notifications(stack: cdk.Stack) -> None:
    fifo_pipeline(stack)
    changes_relay(stack)
    notifier(stack)
    # One message per invocation: nothing to report partially, so no ReportBatchItemFailures.
    single = sqs.Queue(
        stack,
        "Single",
        enforce_ssl=True,
        visibility_timeout=VISIBILITY,
        dead_letter_queue=sqs.DeadLetterQueue(
            queue=dead_letter_queue(stack, "SingleDeadLetters"), max_receive_count=5
        ),
    )
    function(stack, "SingleConsumer").add_event_source(sources.SqsEventSource(single, batch_size=1))


def dedup_lifetime(stack: cdk.Stack) -> None:
    """The environment this library's runtime reads, written by hand: records kept 1 hour, messages 4 days."""
    orders_pipeline(
        stack, consumer={"environment": {"IDEMPOTENCY_MODE": "transaction", "DEDUP_TTL_SECONDS": "3600"}}
    )


def filtered_shared_queue(stack: cdk.Stack) -> None:
    orders_pipeline(stack, source={"filters": [lambda_.FilterCriteria.filter({"body": {"kind": ["order"]}})]})
    refunds = function(stack, "Refunds")
    orders = stack.node.find_child("Queue")
    assert isinstance(orders, sqs.Queue)
    refunds.add_event_source(
        sources.SqsEventSource(
            orders,
            report_batch_item_failures=True,
            filters=[lambda_.FilterCriteria.filter({"body": {"kind": ["refund"]}})],
        )
    )


MAPPING = "Consumer/SqsEventSource:Queue/Resource"
APPS: tuple[EvalApp, ...] = (
    EvalApp("correct-orders", correct_orders, "SNS -> SQS -> Lambda -> DynamoDB, hardened"),
    EvalApp(
        "correct-fifo-streams-notifications",
        correct_fifo_streams_and_notifications,
        "high-throughput FIFO with reserved and maximum concurrency, a table stream, SNS -> Lambda, and a "
        "batch size of 1 without partial batch responses",
    ),
    EvalApp(
        "no-partial-batch-responses",
        lambda s: orders_pipeline(s, source={"report_batch_item_failures": False}),
        "SQS mapping, batch size 10, without ReportBatchItemFailures",
        (("PartialBatchResponses", "error", MAPPING),),
    ),
    EvalApp(
        "short-visibility-timeout",
        lambda s: orders_pipeline(s, queue={"visibility_timeout": Duration.seconds(60)}),
        "queue visibility timeout 60 s for a function timeout of 30 s",
        (("VisibilityTimeout", "error", MAPPING),),
    ),
    EvalApp(
        "no-dead-letter-queue",
        lambda s: orders_pipeline(s, max_receive_count=None),
        "a queue Lambda reads without a dead-letter queue",
        (("QueueDeadLetterQueue", "error", "Queue/Resource"),),
    ),
    EvalApp(
        "expires-before-dead-letter",
        lambda s: orders_pipeline(s, queue={"retention_period": Duration.minutes(10)}),
        "retention 600 s < 5 receives x 180 s visibility",
        (("ExpiresBeforeDeadLetter", "error", "Queue/Resource"),),
    ),
    EvalApp(
        "short-dead-letter-retention",
        lambda s: orders_pipeline(
            s,
            queue={"retention_period": Duration.days(14)},
            dead_letters={"retention_period": Duration.days(4)},
        ),
        "standard queue keeping messages 14 days, its dead-letter queue 4 days",
        (("DeadLetterQueueRetention", "error", "DeadLetterQueue/Resource"),),
    ),
    EvalApp(
        "subscription-without-dead-letter-queue",
        lambda s: orders_pipeline(s, subscription={"dead_letter_queue": None}),
        "SNS -> SQS subscription without a dead-letter queue",
        (("SubscriptionDeadLetterQueue", "error", "Queue/Topic/Resource"),),
    ),
    EvalApp(
        "stream-without-failure-destination",
        lambda s: changes_relay(s, on_failure=None),
        "DynamoDB stream mapping without an on-failure destination",
        (("StreamFailureDestination", "error", "Relay/DynamoDBEventSource:Orders/Resource"),),
    ),
    EvalApp(
        "async-without-failure-destination",
        lambda s: notifier(s, on_failure=False),
        "SNS -> Lambda without an on-failure destination or dead-letter queue on the function",
        (("AsyncFailureDestination", "error", "Notifier/Resource"),),
    ),
    EvalApp(
        "filtered-shared-queue",
        filtered_shared_queue,
        "two mappings with different filters on one queue",
        (
            ("FilteredSharedQueue", "error", MAPPING),
            ("FilteredSharedQueue", "error", "Refunds/SqsEventSource:Queue/Resource"),
        ),
    ),
    EvalApp(
        "short-dedup-lifetime",
        dedup_lifetime,
        "this library's runtime settings by hand: records kept 1 hour, messages 4 days",
        (("DedupLifetime", "error", "Consumer/Resource"),),
    ),
    EvalApp(
        "low-max-receive-count",
        lambda s: orders_pipeline(s, max_receive_count=2),
        "maxReceiveCount 2 on a queue Lambda reads",
        (("MaxReceiveCount", "warning", "Queue/Resource"),),
    ),
    EvalApp(
        "reserved-concurrency-without-maximum",
        lambda s: fifo_pipeline(s, max_concurrency=None),
        "reserved concurrency 10 on the function, no maximum concurrency on the mapping",
        (("ReservedConcurrency", "warning", MAPPING),),
    ),
    EvalApp(
        "fifo-with-standard-dead-letter-queue",
        lambda s: fifo_pipeline(
            s, dead_letters={"fifo": None, "deduplication_scope": None, "fifo_throughput_limit": None}
        ),
        "FIFO queue redriving to a standard queue",
        (("DeadLetterQueueType", "warning", "Queue/Resource"),),
    ),
    EvalApp(
        "high-throughput-dead-letter-queue",
        lambda s: fifo_pipeline(s, dead_letters={"deduplication_scope": None, "fifo_throughput_limit": None}),
        "high-throughput FIFO queue, its FIFO dead-letter queue without high throughput",
        (("HighThroughputDeadLetterQueue", "warning", "Queue/Resource"),),
    ),
    EvalApp(
        "no-raw-message-delivery",
        lambda s: orders_pipeline(s, subscription={"raw_message_delivery": False}),
        "SNS -> SQS -> Lambda without raw message delivery",
        (("RawMessageDelivery", "warning", "Queue/Topic/Resource"),),
    ),
    EvalApp(
        "unbounded-stream-retries",
        lambda s: changes_relay(s, retry_attempts=None, max_record_age=None),
        "DynamoDB stream mapping retrying until the records expire",
        (("StreamRetries", "warning", "Relay/DynamoDBEventSource:Orders/Resource"),),
    ),
    EvalApp(
        "stream-failures-without-alarm",
        lambda s: changes_relay(s, alarmed=False),
        "a stream mapping's on-failure queue without an alarm",
        (("DeadLetterQueueAlarm", "warning", "StreamFailures/Resource"),),
    ),
    EvalApp(
        "alarm-topic-policy-without-cloudwatch",
        lambda s: (orders_pipeline(s), watched(s, alarm_topic(s, cloudwatch_may_publish=False))),
        "alarm topic with a TLS-only policy and no statement for CloudWatch",
        (("AlarmTopicPolicy", "warning", "AlarmTopic/Resource"),),
    ),
    EvalApp(
        "alarm-topic-key-without-cloudwatch",
        lambda s: (
            orders_pipeline(s),
            watched(s, alarm_topic(s, master_key=kms.Key(s, "AlarmKey", enable_key_rotation=True))),
        ),
        "alarm topic encrypted with a key CloudWatch may not use",
        (("AlarmTopicKey", "warning", "AlarmTopic/Resource"),),
    ),
    EvalApp(
        "idempotency-table-without-ttl",
        lambda s: orders_pipeline(s, table={"ttl": False}),
        "idempotency table without TTL",
        (("IdempotencyTableTtl", "warning", "IdempotencyTable/Resource"),),
    ),
)
