"""The nag evaluation's apps: plain aws-cdk-lib stacks (aws_sqs, aws_sns, aws_lambda,
aws_lambda_event_sources, aws_dynamodb, aws_events, aws_pipes; no construct of idempotent-pipeline), the way
a team writes an SNS -> SQS -> Lambda -> DynamoDB pipeline by hand, and the way production apps are built:
functions deployed through an alias (provisioned concurrency, CodeDeploy), customer managed keys, queues
shared by ARN, EventBridge pipes and rules.

Three are correct and hardened (DLQs with alarms, TLS-only queues and topics, raw delivery, partial batch
responses, bounded stream retries, TTL and point-in-time recovery on the table, dead-letter queues and
retry policies on pipes and rule targets, the key's Decrypt granted); each other one is built by the same
few builders with exactly one misconfiguration planted, named by the idempotent_nag rule that must report
it and the construct paths (inside the stack) it must be reported on.

tests/nag/test_nag_evaluation.py asserts the pack on them (``make test``); benchmarks/nag_eval.py runs
them through cdk-nag AwsSolutions, cfn-lint and serverless-rules too (``make bench``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import aws_cdk as cdk
from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_codedeploy as codedeploy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_pipes as pipes
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagMessageLevel
from constructs import Construct

from idempotent_nag import RULES

# CDK names an event source mapping, and a subscription, after the unique id of its queue or topic: the
# stack's name without punctuation, the construct's path, and a hash of eight hex digits.
_HASH = re.compile(r"(?<=[A-Za-z])[0-9A-F]{8}(?=/|$)")


def normalized(stack: str, path: str) -> str:
    """A construct path inside stack ``stack`` without the stack's name and the hashes in those ids."""
    return _HASH.sub("", path.replace(re.sub(r"[^A-Za-z0-9]", "", stack), ""))


@dataclass(frozen=True)
class EvalApp:
    """One app of the evaluation: ``build(stack)`` makes it; ``planted`` is what idempotent_nag must report
    on it: (rule id, level, construct path inside the stack), empty for a correct app, whose ``what`` says
    what it holds. A level is "error" for a misconfiguration that loses or doubles messages."""

    name: str
    build: Callable[[cdk.Stack], Any]
    what: str = ""
    planted: tuple[tuple[str, str, str], ...] = ()


def planted(build: Callable[..., Any], *apps: tuple[Any, ...]) -> list[EvalApp]:
    """Apps ``build`` makes, each (name, ``build``'s arguments, *findings): idempotent_nag must report each
    finding, (rule id, the construct whose resource it is on), at its rule's level."""
    levels = {rule.id: "error" if rule.level == NagMessageLevel.ERROR else "warning" for rule in RULES}
    return [
        EvalApp(
            name,
            partial(build, **arguments),
            planted=tuple((r, levels[r], f"{at}/Resource") for r, at in found),
        )
        for name, arguments, *found in apps
    ]


# -- the correct pipeline and its parts -----------------------------------------------------------------

TIMEOUT = Duration.seconds(30)
VISIBILITY = Duration.seconds(180)  # 6 x the function's timeout
SECONDS_60, MINUTES_10 = Duration.seconds(60), {"retention_period": Duration.minutes(10)}
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


def table(scope: cdk.Stack, id: str, key: str, **props: Any) -> dynamodb.Table:
    """A pay-per-request table keyed by ``key``, with point-in-time recovery."""
    return dynamodb.Table(
        scope,
        id,
        partition_key=dynamodb.Attribute(name=key, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        **props,
    )


def idempotency_table(scope: cdk.Stack, *, ttl: bool = True, **props: Any) -> dynamodb.Table:
    """Powertools' idempotency table: key ``id``, records expiring by ``expiration``."""
    return table(
        scope, "IdempotencyTable", "id", time_to_live_attribute="expiration" if ttl else None, **props
    )


def alarm_topic(scope: cdk.Stack, *, cloudwatch_may_publish: bool = True, **props: Any) -> sns.Topic:
    """A TLS-only topic for the alarms, whose policy lets CloudWatch alarms of the account publish."""
    topic = sns.Topic(scope, "AlarmTopic", enforce_ssl=True, **props)
    if cloudwatch_may_publish:
        may_publish(topic)
    return topic


def may_publish(topic: sns.Topic) -> None:
    """The statement that lets CloudWatch alarms of the account publish to ``topic``."""
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


def orders_pipeline(
    stack: cdk.Stack,
    *,
    topic: dict[str, Any] | None = None,
    queue: dict[str, Any] | None = None,
    max_receive_count: int | None = 5,
    dead_letters: dict[str, Any] | None = None,
    subscription: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    consumer: dict[str, Any] | None = None,
    table: dict[str, Any] | None = None,
    mapped: bool = True,
) -> tuple[lambda_.Function, sqs.Queue]:
    """Topic -> queue (dead-letter queue after 5 receives) -> function (partial batch responses, unless
    ``mapped`` is False: the caller maps it) -> an idempotency table; each dict overrides the props of its
    part (max_receive_count None: no DLQ)."""
    publish_to = sns.Topic(stack, "Topic", **{"enforce_ssl": True, **(topic or {})})
    redrive = None
    if max_receive_count is not None:
        dlq = dead_letter_queue(stack, "DeadLetterQueue", **(dead_letters or {}))
        redrive = sqs.DeadLetterQueue(queue=dlq, max_receive_count=max_receive_count)
    props = {
        "enforce_ssl": True,
        "visibility_timeout": VISIBILITY,
        "dead_letter_queue": redrive,
        **(queue or {}),
    }
    orders = sqs.Queue(stack, "Queue", **props)
    subscription_props = {"raw_message_delivery": True, **(subscription or {})}
    if "dead_letter_queue" not in subscription_props:
        subscription_props["dead_letter_queue"] = dead_letter_queue(stack, "SubscriptionDeadLetterQueue")
    publish_to.add_subscription(subscriptions.SqsSubscription(orders, **subscription_props))
    records = idempotency_table(stack, **(table or {}))
    consumer = dict(consumer or {})
    environment = {"IDEMPOTENCY_TABLE": records.table_name, **consumer.pop("environment", {})}
    worker = function(stack, "Consumer", environment=environment, **consumer)
    records.grant_read_write_data(worker)
    if mapped:
        reading = {"batch_size": 10, "report_batch_item_failures": True, **(source or {})}
        worker.add_event_source(sources.SqsEventSource(orders, **reading))
    return worker, orders


THROUGHPUT_SCOPE = sns.FifoThroughputScope.MESSAGE_GROUP


def fifo_pipeline(stack: cdk.Stack, *, dead_letters: dict[str, Any] | None = None, **source: Any) -> None:
    """The orders pipeline, high-throughput FIFO, its function with reserved concurrency and the mapping's
    maximum concurrency at most that."""
    high_throughput = {
        "fifo": True,
        "deduplication_scope": sqs.DeduplicationScope.MESSAGE_GROUP,
        "fifo_throughput_limit": sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
    }
    orders_pipeline(
        stack,
        topic={"fifo": True, "content_based_deduplication": True, "fifo_throughput_scope": THROUGHPUT_SCOPE},
        queue=high_throughput,
        dead_letters={**high_throughput, **(dead_letters or {})},
        subscription={
            "dead_letter_queue": dead_letter_queue(stack, "SubscriptionDeadLetterQueue", **high_throughput)
        },
        consumer={"reserved_concurrent_executions": 10},
        source={"max_concurrency": 10, **source},
    )


def orders_table(stack: cdk.Stack) -> dynamodb.Table:
    """An orders table with a stream of its new items."""
    return table(stack, "Orders", "order_id", stream=dynamodb.StreamViewType.NEW_IMAGE)


def changes_relay(stack: cdk.Stack, *, alarmed: bool = True, **source: Any) -> None:
    """An orders table's stream -> function (partial batch responses, bounded retries, an on-failure
    queue)."""
    table = orders_table(stack)
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
    topic.add_subscription(
        subscriptions.LambdaSubscription(
            notifier_function(stack, on_failure=on_failure),
            dead_letter_queue=dead_letter_queue(stack, "NotificationsDeadLetterQueue"),
        )
    )


def notifier_function(stack: cdk.Stack, *, on_failure: bool) -> lambda_.Function:
    """A function invoked asynchronously: two retries, then its on-failure queue (``on_failure``)."""
    failures = dead_letter_queue(stack, "NotifierFailures") if on_failure else None
    destination = destinations.SqsDestination(failures) if failures else None
    return function(stack, "Notifier", on_failure=destination, retry_attempts=2)


# -- production style: an alias, customer managed keys, shared queues, EventBridge pipes and rules ------


def keyed_consumer(
    stack: cdk.Stack,
    *,
    visibility: Duration = VISIBILITY,
    reserved: int = 10,
    max_concurrency: int | None = 10,
    key_known: bool = True,
    dead_letters_by_arn: bool = False,
) -> None:
    """The orders pipeline with its queues under a customer managed key and its function deployed through
    an alias (provisioned concurrency, CodeDeploy), which the event source mapping invokes. The consumer
    imports the queue by its ARN and its key (``key_known`` False: its ARN alone, so CDK grants no
    kms:Decrypt); with ``dead_letters_by_arn`` the subscription's dead-letter queue is imported by its ARN
    too, and CDK adds no statement letting SNS send to it."""
    key = kms.Key(stack, "QueueKey", enable_key_rotation=True)
    subscription_dlq: sqs.IQueue = dead_letter_queue(stack, "SubscriptionDeadLetterQueue")
    if dead_letters_by_arn:
        subscription_dlq = sqs.Queue.from_queue_arn(stack, "SharedDeadLetters", subscription_dlq.queue_arn)
    consumer, queue = orders_pipeline(
        stack,
        queue={"encryption_master_key": key, "visibility_timeout": visibility},
        dead_letters={"encryption_master_key": key},
        subscription={"dead_letter_queue": subscription_dlq},
        consumer={"reserved_concurrent_executions": reserved},
        mapped=False,
    )
    key_arn = key.key_arn if key_known else None
    shared = sqs.Queue.from_queue_attributes(stack, "Shared", queue_arn=queue.queue_arn, key_arn=key_arn)
    version = consumer.current_version
    live = lambda_.Alias(
        stack, "Live", alias_name="live", version=version, provisioned_concurrent_executions=1
    )
    codedeploy.LambdaDeploymentGroup(
        stack, "Deployment", alias=live, deployment_config=codedeploy.LambdaDeploymentConfig.ALL_AT_ONCE
    )
    live.add_event_source(
        sources.SqsEventSource(shared, report_batch_item_failures=True, max_concurrency=max_concurrency)
    )


def stream_pipe(
    stack: cdk.Stack, *, dead_letters: bool = True, maximum_retry_attempts: int | None = 3
) -> None:
    """An orders table's stream -> an EventBridge pipe (bisecting failed batches, 3 retries, a dead-letter
    queue) -> a function."""
    dlq = dead_letter_queue(stack, "PipeDeadLetters")
    parameters = pipes.CfnPipe.PipeSourceDynamoDBStreamParametersProperty(
        starting_position="TRIM_HORIZON",
        on_partial_batch_item_failure="AUTOMATIC_BISECT",
        maximum_retry_attempts=maximum_retry_attempts,
        dead_letter_config={"arn": dlq.queue_arn} if dead_letters else None,
    )
    stream = orders_table(stack).table_stream_arn
    dlq.grant_send_messages(pipe(stack, "OrdersPipe", stream, dynamo_db_stream_parameters=parameters))


def queue_pipe(stack: cdk.Stack, *, max_receive_count: int | None = 5) -> None:
    """A shipments queue -> an EventBridge pipe -> a function: the pipe retries up to the queue's
    maxReceiveCount and gives up to the queue's dead-letter queue (None: it has none)."""
    dlq = dead_letter_queue(stack, "ShipmentsDeadLetters")
    redrive = (
        sqs.DeadLetterQueue(queue=dlq, max_receive_count=max_receive_count) if max_receive_count else None
    )
    shipments = sqs.Queue(stack, "Shipments", enforce_ssl=True, dead_letter_queue=redrive)
    shipments.grant_consume_messages(pipe(stack, "ShipmentsPipe", shipments.queue_arn))


def pipe(stack: cdk.Stack, id: str, source: str, **parameters: Any) -> iam.Role:
    """A pipe from ``source`` to a function of its own (its resource in a construct of its own, as
    aws-cdk-lib's L2 constructs hold theirs); its role, to grant it the source."""
    role = iam.Role(stack, f"{id}Role", assumed_by=iam.ServicePrincipal("pipes.amazonaws.com"))
    target = function(stack, f"{id}Target")
    target.grant_invoke(role)
    given = pipes.CfnPipe.PipeSourceParametersProperty(**parameters) if parameters else None
    arns = {"role_arn": role.role_arn, "source": source, "target": target.function_arn}
    pipes.CfnPipe(Construct(stack, id), "Resource", **arns, source_parameters=given)
    return role


def event_rule(stack: cdk.Stack, *, dead_letters: bool = True, alarmed: bool = True) -> None:
    """An EventBridge rule: order events -> an alias of a function with an on-failure queue, the target with
    a dead-letter queue and a retry policy."""
    dlq = dead_letter_queue(stack, "EventDeadLetters", alarmed=alarmed)
    live = notifier_function(stack, on_failure=True).add_alias("live")
    target = targets.LambdaFunction(
        live,
        dead_letter_queue=dlq if dead_letters else None,
        retry_attempts=4,
        max_event_age=Duration.hours(2),
    )
    events.Rule(
        stack, "OrderEvents", event_pattern=events.EventPattern(source=["shop.orders"]), targets=[target]
    )


def correct_production(stack: cdk.Stack) -> None:
    keyed_consumer(stack)
    stream_pipe(stack)
    queue_pipe(stack)
    event_rule(stack)


# -- the apps -------------------------------------------------------------------------------------------


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


def filtered_shared_queue(stack: cdk.Stack) -> None:
    filters = {"filters": [lambda_.FilterCriteria.filter({"body": {"kind": ["order"]}})]}
    _, orders = orders_pipeline(stack, source=filters)
    function(stack, "Refunds").add_event_source(
        sources.SqsEventSource(
            orders,
            report_batch_item_failures=True,
            filters=[lambda_.FilterCriteria.filter({"body": {"kind": ["refund"]}})],
        )
    )


def watched_by_alarms(stack: cdk.Stack, *, key: bool = False, cloudwatch_may_publish: bool = True) -> None:
    """The orders pipeline, an alarm on its queue's age notifying the alarm topic (planted: a topic policy
    without CloudWatch, or a key CloudWatch may not use)."""
    _, queue = orders_pipeline(stack)
    master_key = kms.Key(stack, "AlarmKey", enable_key_rotation=True) if key else None
    topic = alarm_topic(stack, cloudwatch_may_publish=cloudwatch_may_publish, master_key=master_key)
    age = queue.metric_approximate_age_of_oldest_message()
    cloudwatch.Alarm(stack, "AgeAlarm", metric=age, threshold=600, evaluation_periods=1).add_alarm_action(
        actions.SnsAction(topic)
    )


# The constructs the findings are on (paths inside the stack, without CDK's hashes).
MAPPING, QUEUE, DLQ = "Consumer/SqsEventSource:Queue", "Queue", "DeadLetterQueue"
REFUNDS = "Refunds/SqsEventSource:Queue"
SUBSCRIPTION, RELAY = "Queue/Topic", "Relay/DynamoDBEventSource:Orders"
ALIAS_MAPPING, PIPE = "Live/SqsEventSource:Shared", "OrdersPipe"
# What the apps plant.
NO_REPORTS = {"source": {"report_batch_item_failures": False}}
VISIBILITY_60 = {"queue": {"visibility_timeout": SECONDS_60}}
DAYS_4, DAYS_14 = {"retention_period": Duration.days(4)}, {"retention_period": Duration.days(14)}
SHORTER_DLQ = {"queue": DAYS_14, "dead_letters": DAYS_4}
WITHOUT_DLQ = {"subscription": {"dead_letter_queue": None}}
NOT_RAW = {"subscription": {"raw_message_delivery": False}}
NO_TTL, NO_PUBLISH = {"table": {"ttl": False}}, {"cloudwatch_may_publish": False}
DLQ_BY_ARN = {"dead_letters_by_arn": True}
HIGH_THROUGHPUT_OFF = {"deduplication_scope": None, "fifo_throughput_limit": None}
LOW_THROUGHPUT_DLQ = {"dead_letters": HIGH_THROUGHPUT_OFF}
STANDARD_DLQ = {"dead_letters": {"fifo": None, **HIGH_THROUGHPUT_OFF}}
# This library's runtime settings, by hand: records kept 1 hour, messages (SQS's default) 4 days.
SHORT_LIFETIME = {"environment": {"IDEMPOTENCY_MODE": "transaction", "DEDUP_TTL_SECONDS": "3600"}}
UNBOUNDED = {"retry_attempts": None, "max_record_age": None}

APPS: tuple[EvalApp, ...] = (
    EvalApp("correct-orders", watched_by_alarms, "SNS -> SQS -> Lambda -> DynamoDB, hardened"),
    EvalApp(
        "correct-fifo-streams-notifications",
        correct_fifo_streams_and_notifications,
        "high-throughput FIFO with reserved and maximum concurrency, a table stream, SNS -> Lambda, and a "
        "batch size of 1 without partial batch responses",
    ),
    EvalApp(
        "correct-production",
        correct_production,
        "SNS -> a customer-keyed queue -> an alias (provisioned concurrency, CodeDeploy), its key's Decrypt "
        "granted; a stream pipe and a queue pipe with dead-letter queues and bounded retries; a rule whose "
        "Lambda target has a dead-letter queue and a retry policy",
    ),
    *planted(
        orders_pipeline,
        ("no-partial-batch-responses", NO_REPORTS, ("PartialBatchResponses", MAPPING)),
        ("short-visibility-timeout", VISIBILITY_60, ("VisibilityTimeout", MAPPING)),
        ("no-dead-letter-queue", {"max_receive_count": None}, ("QueueDeadLetterQueue", QUEUE)),
        ("expires-before-dead-letter", {"queue": MINUTES_10}, ("ExpiresBeforeDeadLetter", QUEUE)),
        ("short-dead-letter-retention", SHORTER_DLQ, ("DeadLetterQueueRetention", DLQ)),
        ("dead-letter-retention-equal", {"dead_letters": DAYS_4}, ("DeadLetterQueueRetention", DLQ)),
        ("subscription-without-dlq", WITHOUT_DLQ, ("SubscriptionDeadLetterQueue", SUBSCRIPTION)),
        ("short-dedup-lifetime", {"consumer": SHORT_LIFETIME}, ("DedupLifetime", "Consumer")),
        ("low-max-receive-count", {"max_receive_count": 2}, ("MaxReceiveCount", QUEUE)),
        ("no-raw-message-delivery", NOT_RAW, ("RawMessageDelivery", SUBSCRIPTION)),
        ("idempotency-table-without-ttl", NO_TTL, ("IdempotencyTableTtl", "IdempotencyTable")),
    ),
    *planted(
        changes_relay,
        ("stream-without-failure-destination", {"on_failure": None}, ("StreamFailureDestination", RELAY)),
        ("unbounded-stream-retries", UNBOUNDED, ("StreamRetries", RELAY)),
        ("stream-retries-at-maximum", {**UNBOUNDED, "retry_attempts": 10_000}, ("StreamRetries", RELAY)),
        ("stream-failures-without-alarm", {"alarmed": False}, ("DeadLetterQueueAlarm", "StreamFailures")),
    ),
    *planted(
        notifier,
        ("async-without-failure-destination", {"on_failure": False}, ("AsyncFailureDestination", "Notifier")),
    ),
    *planted(
        filtered_shared_queue,
        ("filtered-shared-queue", {}, ("FilteredSharedQueue", MAPPING), ("FilteredSharedQueue", REFUNDS)),
    ),
    *planted(
        fifo_pipeline,
        ("reserved-concurrency-without-maximum", {"max_concurrency": None}, ("ReservedConcurrency", MAPPING)),
        ("fifo-with-standard-dead-letter-queue", STANDARD_DLQ, ("DeadLetterQueueType", QUEUE)),
        ("high-throughput-dlq", LOW_THROUGHPUT_DLQ, ("HighThroughputDeadLetterQueue", QUEUE)),
    ),
    *planted(
        watched_by_alarms,
        ("alarm-topic-policy-without-cloudwatch", NO_PUBLISH, ("AlarmTopicPolicy", "AlarmTopic")),
        ("alarm-topic-key-without-cloudwatch", {"key": True}, ("AlarmTopicKey", "AlarmTopic")),
    ),
    # production style
    *planted(
        keyed_consumer,
        (
            "alias-short-visibility-reserved-concurrency",
            {"visibility": SECONDS_60, "reserved": 2, "max_concurrency": None},
            ("VisibilityTimeout", ALIAS_MAPPING),
            ("ReservedConcurrency", ALIAS_MAPPING),
        ),
        ("queue-key-without-decrypt", {"key_known": False}, ("QueueKeyDecrypt", ALIAS_MAPPING)),
        ("subscription-dlq-without-policy", DLQ_BY_ARN, ("SubscriptionDeadLetterQueue", SUBSCRIPTION)),
    ),
    *planted(
        stream_pipe,
        ("pipe-stream-without-dlq", {"dead_letters": False}, ("StreamFailureDestination", PIPE)),
        ("pipe-stream-unbounded-retries", {"maximum_retry_attempts": None}, ("StreamRetries", PIPE)),
    ),
    *planted(
        queue_pipe,
        ("pipe-queue-without-dlq", {"max_receive_count": None}, ("QueueDeadLetterQueue", "Shipments")),
    ),
    *planted(
        event_rule,
        ("rule-target-without-dlq", {"dead_letters": False}, ("RuleTargetDeadLetterQueue", "OrderEvents")),
        ("rule-dlq-without-alarm", {"alarmed": False}, ("DeadLetterQueueAlarm", "EventDeadLetters")),
    ),
)
