"""Each rule of IdempotentPipelineChecks on plain aws-cdk-lib stacks (no construct of this library): a stack
with the flaw gets the finding, with the rule id, on the resource to fix; a stack without it gets none.

Every case is one stack of one app, synthesized once for the module with the pack attached.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_pipes as pipes
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagMessageLevel
from constructs_helpers import REPO, cdk_json_context, nag_findings
from idempotent_runtime import contract

from benchmarks.nag_apps import may_publish, normalized
from idempotent_nag import PACK_NAME, RULES, IdempotentPipelineChecks

CASES: dict[str, Callable[[cdk.Stack], Any]] = {}


def case(build: Callable[[cdk.Stack], Any]) -> Callable[[cdk.Stack], Any]:
    """A stack of the module's app, named after the function."""
    CASES[build.__name__.replace("_", "-")] = build
    return build


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[str, str]]]:
    """Stack name -> {(rule id without the pack's prefix, resource path inside the stack)}."""
    outdir = tmp_path_factory.mktemp("nag-rules")
    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
    for name, build in CASES.items():
        build(cdk.Stack(app, name))
    Validations.of(app).add_plugins(IdempotentPipelineChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    found: dict[str, set[tuple[str, str]]] = {stack.node.id: set() for stack in app.node.children}
    for rule, _, paths in nag_findings(Path(outdir)):
        for path in paths if rule.startswith(f"{PACK_NAME}-") else ():  # cdk.json: CloudFormation checks too
            stack, _, resource = path.partition("/")
            found[stack].add((rule.removeprefix(f"{PACK_NAME}-"), normalized(stack, resource)))
    return found


# -- building blocks ------------------------------------------------------------------------------------

MAPPING = "Function/SqsEventSource:Queue/Resource"
DLQ_DAYS = Duration.days(14)


def consume(stack: cdk.Stack, queue: sqs.IQueue, *, timeout: int = 30, **source: Any) -> lambda_.Function:
    """A function reading ``queue`` (partial batch responses on unless ``source`` says otherwise)."""
    function = lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
        timeout=Duration.seconds(timeout),
        environment=source.pop("environment", None),
    )
    source.setdefault("report_batch_item_failures", True)
    function.add_event_source(event_sources.SqsEventSource(queue, **source))
    return function


def alarm(scope: cdk.Stack, id: str, metric: cloudwatch.IMetric) -> cloudwatch.Alarm:
    return cloudwatch.Alarm(scope, id, metric=metric, threshold=1, evaluation_periods=1)


def visible(queue: sqs.IQueue) -> cloudwatch.IMetric:
    return queue.metric_approximate_number_of_messages_visible()


def queue_with_dead_letters(
    stack: cdk.Stack,
    *,
    fifo: bool | None = None,
    dlq_fifo: bool | None = None,
    alarmed: bool = True,
    **props: Any,
) -> sqs.Queue:
    """A queue (visibility 180 s unless ``props`` say otherwise) redriving to "DeadLetterQueue" (keeping
    messages 14 days, longer than SQS's default 4) after 5 receives."""
    dead_letters = sqs.Queue(
        stack, "DeadLetterQueue", fifo=dlq_fifo if dlq_fifo is not None else fifo, retention_period=DLQ_DAYS
    )
    if alarmed:
        alarm(stack, "DeadLetterQueueAlarm", visible(dead_letters))
    props.setdefault("visibility_timeout", Duration.seconds(180))
    return sqs.Queue(
        stack,
        "Queue",
        fifo=fifo,
        dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=5),
        **props,
    )


def alarm_topic(stack: cdk.Stack, **props: Any) -> sns.Topic:
    """A topic that an alarm (on nothing of interest to the other rules) notifies."""
    topic = sns.Topic(stack, "AlarmTopic", **props)
    watched = sqs.Queue(stack, "Watched")
    alarm(stack, "AgeAlarm", watched.metric_approximate_age_of_oldest_message()).add_alarm_action(
        actions.SnsAction(topic)
    )
    return topic


def only(findings: set[tuple[str, str]], rule: str) -> set[str]:
    """The resources with a finding, when all findings are of ``rule``."""
    assert {found for found, _ in findings} == {rule}, findings
    return {path for _, path in findings}


# -- PartialBatchResponses ------------------------------------------------------------------------------


@case
def partial_batch_responses_off(stack: cdk.Stack) -> None:
    consume(stack, queue_with_dead_letters(stack), report_batch_item_failures=False)


@case
def partial_batch_responses_on(stack: cdk.Stack) -> None:
    consume(stack, queue_with_dead_letters(stack))


@case
def partial_batch_responses_off_on_an_imported_queue(stack: cdk.Stack) -> None:
    queue = sqs.Queue.from_queue_arn(stack, "Queue", "arn:aws:sqs:eu-west-1:111111111111:orders")
    consume(stack, queue, report_batch_item_failures=False)


def test_an_sqs_mapping_without_partial_batch_responses_is_reported_on_the_mapping(findings):
    assert only(findings["partial-batch-responses-off"], "PartialBatchResponses") == {MAPPING}


def test_a_mapping_of_an_imported_queue_is_checked_by_its_arn(findings):
    """Nothing else is known of the queue (its visibility timeout): only this rule applies."""
    assert only(findings["partial-batch-responses-off-on-an-imported-queue"], "PartialBatchResponses") == {
        MAPPING
    }


def test_an_sqs_mapping_that_reports_batch_item_failures_passes(findings):
    assert findings["partial-batch-responses-on"] == set()


# -- VisibilityTimeout ----------------------------------------------------------------------------------


@case
def visibility_under_six_timeouts_plus_window(stack: cdk.Stack) -> None:
    queue = queue_with_dead_letters(stack, visibility_timeout=Duration.seconds(189))
    consume(stack, queue, timeout=30, max_batching_window=Duration.seconds(10))


@case
def visibility_of_six_timeouts_plus_window(stack: cdk.Stack) -> None:
    queue = queue_with_dead_letters(stack, visibility_timeout=Duration.seconds(190))
    consume(stack, queue, timeout=30, max_batching_window=Duration.seconds(10))


@case
def visibility_default_under_six_timeouts(stack: cdk.Stack) -> None:
    # SQS's default 30 s < 36 s (retention 4 days > 5 receives x 30 s)
    consume(stack, queue_with_dead_letters(stack, visibility_timeout=None), timeout=6)


def test_a_visibility_timeout_under_6x_the_timeout_plus_the_batching_window_is_reported_on_the_mapping(
    findings,
):
    assert only(findings["visibility-under-six-timeouts-plus-window"], "VisibilityTimeout") == {MAPPING}
    assert only(findings["visibility-default-under-six-timeouts"], "VisibilityTimeout") == {MAPPING}


def test_a_visibility_timeout_of_6x_the_timeout_plus_the_batching_window_passes(findings):
    assert findings["visibility-of-six-timeouts-plus-window"] == set()


# -- DeadLetterQueueType --------------------------------------------------------------------------------


@case
def fifo_queue_with_a_standard_dead_letter_queue(stack: cdk.Stack) -> None:
    queue_with_dead_letters(stack, fifo=True, dlq_fifo=False)


@case
def standard_queue_with_a_fifo_dead_letter_queue(stack: cdk.Stack) -> None:
    queue_with_dead_letters(stack, fifo=False, dlq_fifo=True)


@case
def fifo_queue_with_a_fifo_dead_letter_queue(stack: cdk.Stack) -> None:
    queue_with_dead_letters(stack, fifo=True)


@case
def fifo_topic_subscription_with_a_standard_dead_letter_queue(stack: cdk.Stack) -> None:
    queue = queue_with_dead_letters(stack, fifo=True)
    subscription_dead_letters = sqs.Queue(stack, "SubscriptionDeadLetterQueue")
    alarm(stack, "SubscriptionDeadLetterQueueAlarm", visible(subscription_dead_letters))
    sns.Topic(stack, "Topic", fifo=True).add_subscription(
        subscriptions.SqsSubscription(
            queue, raw_message_delivery=True, dead_letter_queue=subscription_dead_letters
        )
    )


def test_a_fifo_queue_redriving_to_a_standard_queue_is_reported_on_the_queue(findings):
    assert only(findings["fifo-queue-with-a-standard-dead-letter-queue"], "DeadLetterQueueType") == {
        "Queue/Resource"
    }


def test_a_standard_queue_redriving_to_a_fifo_queue_is_reported_on_the_queue(findings):
    assert only(findings["standard-queue-with-a-fifo-dead-letter-queue"], "DeadLetterQueueType") == {
        "Queue/Resource"
    }


def test_a_fifo_topics_subscription_with_a_standard_dead_letter_queue_is_reported_on_the_subscription(
    findings,
):
    found = only(findings["fifo-topic-subscription-with-a-standard-dead-letter-queue"], "DeadLetterQueueType")
    assert found == {
        "Queue/Topic/Resource"
    }  # CDK puts the subscription under the queue, named after the topic


def test_a_fifo_queue_redriving_to_a_fifo_queue_passes(findings):
    assert findings["fifo-queue-with-a-fifo-dead-letter-queue"] == set()


# -- SubscriptionDeadLetterQueue ------------------------------------------------------------------------


@case
def subscription_without_a_dead_letter_queue(stack: cdk.Stack) -> None:
    sns.Topic(stack, "Topic").add_subscription(subscriptions.SqsSubscription(sqs.Queue(stack, "Queue")))


@case
def subscription_with_a_dead_letter_queue(stack: cdk.Stack) -> None:
    dead_letters = sqs.Queue(stack, "SubscriptionDeadLetterQueue")
    alarm(stack, "SubscriptionDeadLetterQueueAlarm", visible(dead_letters))
    topic = sns.Topic(stack, "Topic")
    topic.add_subscription(
        subscriptions.SqsSubscription(sqs.Queue(stack, "Queue"), dead_letter_queue=dead_letters)
    )
    topic.add_subscription(subscriptions.EmailSubscription("oncall@example.com"))  # not an application's


def test_an_sqs_subscription_without_a_dead_letter_queue_is_reported_with_one_it_passes_email_is_not_checked(
    findings,
):
    without = findings["subscription-without-a-dead-letter-queue"]
    assert only(without, "SubscriptionDeadLetterQueue") == {"Queue/Topic/Resource"}
    assert findings["subscription-with-a-dead-letter-queue"] == set()


# -- DeadLetterQueueAlarm -------------------------------------------------------------------------------


@case
def dead_letter_queue_without_an_alarm(stack: cdk.Stack) -> None:
    queue_with_dead_letters(stack, alarmed=False)


@case
def dead_letter_queues_with_alarms(stack: cdk.Stack) -> None:
    """One alarm on the metric, one on a metric math expression, one in another stack (a cross-stack
    reference), and one dead-letter queue acknowledged."""
    queue_with_dead_letters(stack)
    for name in ("Math", "Elsewhere", "Acknowledged"):
        dead_letters = sqs.Queue(stack, f"{name}DeadLetterQueue", retention_period=DLQ_DAYS)
        sqs.Queue(stack, name, dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=5))
        if name == "Math":
            expression = cloudwatch.MathExpression(
                expression="m1 + 0", using_metrics={"m1": visible(dead_letters)}
            )
            alarm(stack, "MathAlarm", expression)
        elif name == "Elsewhere":
            alarm(cdk.Stack(stack.node.scope, "dead-letter-alarms-elsewhere"), "Alarm", visible(dead_letters))
        else:
            Validations.of(dead_letters).acknowledge(
                Acknowledgment(id=f"{PACK_NAME}-DeadLetterQueueAlarm", reason="a test of acknowledgements")
            )


def test_a_dead_letter_queue_without_an_alarm_on_its_visible_messages_is_reported_on_it(findings):
    assert only(findings["dead-letter-queue-without-an-alarm"], "DeadLetterQueueAlarm") == {
        "DeadLetterQueue/Resource"
    }


def test_dead_letter_queues_alarmed_directly_in_math_or_from_another_stack_or_acknowledged_pass(findings):
    assert findings["dead-letter-queues-with-alarms"] == set()


# -- AlarmTopicPolicy -----------------------------------------------------------------------------------


@case
def alarm_topic_policy_without_cloudwatch(stack: cdk.Stack) -> None:
    alarm_topic(stack, enforce_ssl=True)  # a TLS-only policy replaces SNS's default one


@case
def alarm_topic_policy_with_cloudwatch(stack: cdk.Stack) -> None:
    may_publish(alarm_topic(stack, enforce_ssl=True))


@case
def alarm_topic_without_a_policy(stack: cdk.Stack) -> None:
    alarm_topic(stack)  # SNS's default policy lets the account's CloudWatch alarms publish


def test_an_alarm_topic_whose_policy_does_not_allow_cloudwatch_is_reported_on_the_topic(findings):
    assert only(findings["alarm-topic-policy-without-cloudwatch"], "AlarmTopicPolicy") == {
        "AlarmTopic/Resource"
    }


def test_an_alarm_topic_whose_policy_allows_cloudwatch_as_the_constructs_write_it_passes(findings):
    assert findings["alarm-topic-policy-with-cloudwatch"] == set()


def test_an_alarm_topic_without_a_policy_passes(findings):
    assert findings["alarm-topic-without-a-policy"] == set()


# -- AlarmTopicKey --------------------------------------------------------------------------------------


@case
def alarm_topic_key_without_cloudwatch(stack: cdk.Stack) -> None:
    alarm_topic(stack, master_key=kms.Key(stack, "Key", enable_key_rotation=True))


@case
def alarm_topic_with_the_aws_managed_key(stack: cdk.Stack) -> None:
    alarm_topic(stack, master_key=kms.Alias.from_alias_name(stack, "Key", "alias/aws/sns"))


@case
def alarm_topic_key_with_cloudwatch(stack: cdk.Stack) -> None:
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],
        )
    )
    alarm_topic(stack, master_key=key)


def test_an_alarm_topic_whose_key_cloudwatch_cannot_use_is_reported_on_the_topic(findings):
    assert only(findings["alarm-topic-key-without-cloudwatch"], "AlarmTopicKey") == {"AlarmTopic/Resource"}
    assert only(findings["alarm-topic-with-the-aws-managed-key"], "AlarmTopicKey") == {"AlarmTopic/Resource"}


def test_an_alarm_topic_whose_key_policy_allows_cloudwatch_passes(findings):
    assert findings["alarm-topic-key-with-cloudwatch"] == set()


# -- DedupLifetime --------------------------------------------------------------------------------------


def runtime_environment(mode: str, **lifetimes: int) -> dict[str, str]:
    """The variables the library's runtime reads (what IdempotentConsumer writes), set by hand."""
    return {contract.IDEMPOTENCY_MODE.name: mode, **{name: str(value) for name, value in lifetimes.items()}}


@case
def dedup_lifetime_shorter_than_retention(stack: cdk.Stack) -> None:
    environment = runtime_environment("transaction", DEDUP_TTL_SECONDS=3600)  # retention: SQS's 4 days
    consume(stack, queue_with_dead_letters(stack), environment=environment)


@case
def document_lifetime_shorter_than_receives(stack: cdk.Stack) -> None:
    queue = queue_with_dead_letters(stack, retention_period=Duration.seconds(600))  # 5 x 180 s = 900 s
    consume(stack, queue, environment=runtime_environment("document", DOCUMENT_TTL_SECONDS=899))


@case
def dedup_lifetimes_long_enough(stack: cdk.Stack) -> None:
    """The defaults: 7 days (transaction), never (document)."""
    consume(stack, queue_with_dead_letters(stack), environment=runtime_environment("transaction"))
    other = cdk.Stack(stack.node.scope, "document-lifetime-never")
    consume(other, queue_with_dead_letters(other), environment=runtime_environment("document"))


def test_a_runtime_lifetime_shorter_than_a_duplicate_can_arrive_is_reported_on_the_function(findings):
    assert only(findings["dedup-lifetime-shorter-than-retention"], "DedupLifetime") == {"Function/Resource"}
    # 600 s of retention under 5 receives x 180 s: the queue's own misconfiguration, reported with it
    assert findings["document-lifetime-shorter-than-receives"] == {
        ("DedupLifetime", "Function/Resource"),
        ("ExpiresBeforeDeadLetter", "Queue/Resource"),
    }


def test_the_runtime_default_lifetimes_pass(findings):
    assert findings["dedup-lifetimes-long-enough"] == findings["document-lifetime-never"] == set()


# -- what the templates cannot tell, and sources found by their ARN --------------------------------------


@case
def settings_from_parameters(stack: cdk.Stack) -> None:
    """A parameter for the visibility timeout, the batch size and the max receive count: no rule reading
    them guesses (the queue and the mapping are otherwise wrong for VisibilityTimeout,
    PartialBatchResponses and MaxReceiveCount)."""
    seconds = cdk.CfnParameter(stack, "Visibility", type="Number").value_as_number
    receives = cdk.CfnParameter(stack, "Receives", type="Number").value_as_number
    batch = cdk.CfnParameter(stack, "Batch", type="Number").value_as_number
    dead_letters = sqs.Queue(stack, "DeadLetterQueue", retention_period=DLQ_DAYS)
    alarm(stack, "DeadLetterQueueAlarm", visible(dead_letters))
    queue = sqs.Queue(
        stack,
        "Queue",
        visibility_timeout=Duration.seconds(seconds),
        dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letters, max_receive_count=receives),
    )
    consume(stack, queue, timeout=60, batch_size=batch, report_batch_item_failures=False)


@case
def kinesis_stream_imported_by_arn(stack: cdk.Stack) -> None:
    """A stream outside the app, known by its ARN: read as Kinesis, with Lambda's defaults."""
    stream = kinesis.Stream.from_stream_arn(
        stack, "Stream", "arn:aws:kinesis:eu-west-1:111111111111:stream/s"
    )
    function = consume_nothing(stack)
    function.add_event_source(
        event_sources.KinesisEventSource(
            stream,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            report_batch_item_failures=True,
            retry_attempts=3,
        )
    )


def consume_nothing(stack: cdk.Stack, **props: Any) -> lambda_.Function:
    return lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
        **props,
    )


@case
def function_dead_letter_queues_without_alarms(stack: cdk.Stack) -> None:
    """A function's DeadLetterConfig queue and its asynchronous on-failure queue are dead-letter queues."""
    consume_nothing(
        stack,
        dead_letter_queue=sqs.Queue(stack, "FunctionDeadLetters"),
        on_failure=destinations.SqsDestination(sqs.Queue(stack, "InvocationFailures")),
    )


@case
def runtime_table_with_ttl_on_another_attribute(stack: cdk.Stack) -> None:
    """This library's runtime names the table (TABLE_NAME) and writes expires_at; TTL is on another
    attribute, so its records never expire."""
    table = dynamodb.Table(
        stack,
        "Records",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="ttl",
    )
    consume_nothing(
        stack,
        environment={**runtime_environment("document"), contract.TABLE_NAME.name: table.table_name},
    )


def test_values_from_parameters_are_not_guessed_at(findings):
    assert findings["settings-from-parameters"] == set()


def test_a_stream_outside_the_app_is_read_as_kinesis_and_needs_an_on_failure_destination(findings):
    assert findings["kinesis-stream-imported-by-arn"] == {
        ("StreamFailureDestination", "Function/KinesisEventSource:Stream/Resource")
    }


def test_a_functions_dead_letter_queue_and_on_failure_queue_need_alarms(findings):
    assert only(findings["function-dead-letter-queues-without-alarms"], "DeadLetterQueueAlarm") == {
        "FunctionDeadLetters/Resource",
        "InvocationFailures/Resource",
    }


def test_a_runtime_table_whose_ttl_is_on_another_attribute_than_the_runtime_writes_is_reported(findings):
    assert only(findings["runtime-table-with-ttl-on-another-attribute"], "IdempotencyTableTtl") == {
        "Records/Resource"
    }


# -- aliases and versions, EventBridge pipes and rules, permissions that break delivery -------------------


def live(function: lambda_.Function) -> lambda_.Alias:
    return lambda_.Alias(function, "Live", alias_name="live", version=function.current_version)


@case
def mapping_on_a_version_and_on_an_alias(stack: cdk.Stack) -> None:
    """Visibility 60 s for a 30 s timeout, reserved concurrency 2 without a maximum: on the version's
    mapping and on the alias's."""
    function = consume_nothing(stack, timeout=Duration.seconds(30), reserved_concurrent_executions=2)
    for target, name in ((function.current_version, "Versioned"), (live(function), "Aliased")):
        queue = sqs.Queue(stack, name, visibility_timeout=Duration.seconds(60))
        target.add_event_source(event_sources.SqsEventSource(queue, report_batch_item_failures=True))


def test_mappings_on_a_version_or_an_alias_are_checked_against_their_function(findings):
    mappings = {"Function/CurrentVersion/SqsEventSource:Versioned", "Function/Live/SqsEventSource:Aliased"}
    assert findings["mapping-on-a-version-and-on-an-alias"] >= {
        (rule, f"{mapping}/Resource")
        for rule in ("VisibilityTimeout", "ReservedConcurrency")
        for mapping in mappings
    }


@case
def async_invocations_of_an_alias(stack: cdk.Stack) -> None:
    """SNS and an EventBridge rule (with a dead-letter queue) invoke an alias of a function without an
    on-failure destination."""
    target = live(consume_nothing(stack))
    sns.Topic(stack, "Topic").add_subscription(
        subscriptions.LambdaSubscription(
            target, dead_letter_queue=sqs.Queue(stack, "SubscriptionDeadLetters")
        )
    )
    rule = events.Rule(stack, "Rule", event_pattern=events.EventPattern(source=["shop"]))
    rule.add_target(targets.LambdaFunction(target, dead_letter_queue=sqs.Queue(stack, "RuleDeadLetters")))


def test_a_function_an_alias_of_which_sns_or_a_rule_invokes_needs_an_on_failure_destination(findings):
    assert ("AsyncFailureDestination", "Function/Resource") in findings["async-invocations-of-an-alias"]


@case
def rule_targets_without_dead_letter_queues(stack: cdk.Stack) -> None:
    """A rule on a schedule with a Lambda target and a retry policy, one with an imported queue as target;
    a third rule's SNS target is not checked."""
    failures = sqs.Queue(stack, "Failures")
    alarm(stack, "FailuresAlarm", visible(failures))
    function = consume_nothing(stack, on_failure=destinations.SqsDestination(failures))
    schedule = events.Rule(stack, "Schedule", schedule=events.Schedule.rate(Duration.minutes(5)))
    schedule.add_target(targets.LambdaFunction(function, retry_attempts=2))
    audit = sqs.Queue.from_queue_arn(stack, "AuditQueue", "arn:aws:sqs:eu-west-1:111111111111:audit")
    events.Rule(
        stack, "Audit", event_pattern=events.EventPattern(source=["shop"]), targets=[targets.SqsQueue(audit)]
    )
    notify = targets.SnsTopic(sns.Topic(stack, "Topic"))
    events.Rule(stack, "Notify", event_pattern=events.EventPattern(source=["shop"]), targets=[notify])


@case
def rule_targets_with_dead_letter_queues(stack: cdk.Stack) -> None:
    dead_letters = sqs.Queue(stack, "EventDeadLetters")
    alarm(stack, "EventDeadLettersAlarm", visible(dead_letters))
    function = consume_nothing(stack, on_failure=destinations.SqsDestination(dead_letters))
    rule = events.Rule(stack, "Rule", event_pattern=events.EventPattern(source=["shop"]))
    rule.add_target(targets.LambdaFunction(live(function), dead_letter_queue=dead_letters, retry_attempts=2))
    rule.add_target(targets.SqsQueue(sqs.Queue(stack, "Audit"), dead_letter_queue=dead_letters))


def test_rule_targets_a_function_or_a_queue_without_a_dead_letter_queue_are_reported_on_the_rule(findings):
    assert only(findings["rule-targets-without-dead-letter-queues"], "RuleTargetDeadLetterQueue") == {
        "Schedule/Resource",
        "Audit/Resource",
    }


def test_rule_targets_with_dead_letter_queues_pass(findings):
    assert findings["rule-targets-with-dead-letter-queues"] == set()


def stream_pipe(stack: cdk.Stack, stream: str, **parameters: Any) -> None:
    """A pipe from a stream to a function (its role granted nothing: the pack does not read it)."""
    target = consume_nothing(stack)
    role = iam.Role(stack, "PipeRole", assumed_by=iam.ServicePrincipal("pipes.amazonaws.com"))
    kinesis = ":kinesis:" in stream
    settings = (
        pipes.CfnPipe.PipeSourceKinesisStreamParametersProperty
        if kinesis
        else pipes.CfnPipe.PipeSourceDynamoDBStreamParametersProperty
    )(starting_position="LATEST", **parameters)
    source = pipes.CfnPipe.PipeSourceParametersProperty(
        **{"kinesis_stream_parameters" if kinesis else "dynamo_db_stream_parameters": settings}
    )
    arns = {"role_arn": role.role_arn, "source": stream, "target": target.function_arn}
    pipes.CfnPipe(stack, "Pipe", **arns, source_parameters=source)


def dead_letter(queue: sqs.Queue) -> pipes.CfnPipe.DeadLetterConfigProperty:
    return pipes.CfnPipe.DeadLetterConfigProperty(arn=queue.queue_arn)


def table_stream(stack: cdk.Stack) -> str:
    key = dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    table = dynamodb.Table(stack, "Table", partition_key=key, stream=dynamodb.StreamViewType.NEW_IMAGE)
    return table.table_stream_arn  # type: ignore[return-value]


@case
def stream_pipes_unbounded_and_without_dead_letters(stack: cdk.Stack) -> None:
    stream_pipe(stack, table_stream(stack))
    other = cdk.Stack(stack.node.scope, "kinesis-pipe-with-dead-letters-unalarmed")
    dead_letters = sqs.Queue(other, "PipeDeadLetters")
    kinesis = "arn:aws:kinesis:eu-west-1:111111111111:stream/orders"
    stream_pipe(other, kinesis, dead_letter_config=dead_letter(dead_letters), maximum_retry_attempts=3)


@case
def stream_pipe_with_dead_letters_and_retries(stack: cdk.Stack) -> None:
    dead_letters = sqs.Queue(stack, "PipeDeadLetters")
    alarm(stack, "PipeDeadLettersAlarm", visible(dead_letters))
    parameters = {
        "dead_letter_config": dead_letter(dead_letters),
        "maximum_record_age_in_seconds": 3600,
    }
    stream_pipe(stack, table_stream(stack), **parameters)


def test_a_stream_pipe_without_a_dead_letter_queue_or_bounded_retries_is_reported_on_the_pipe(findings):
    assert findings["stream-pipes-unbounded-and-without-dead-letters"] == {
        ("StreamFailureDestination", "Pipe"),
        ("StreamRetries", "Pipe"),
    }
    assert findings["kinesis-pipe-with-dead-letters-unalarmed"] == {
        ("DeadLetterQueueAlarm", "PipeDeadLetters/Resource")
    }


def test_a_stream_pipe_with_a_dead_letter_queue_and_bounded_retries_passes(findings):
    assert findings["stream-pipe-with-dead-letters-and-retries"] == set()


@case
def queue_pipe_and_filtered_mapping_on_one_queue(stack: cdk.Stack) -> None:
    """A pipe and a filtering mapping read a queue without a dead-letter queue."""
    queue = sqs.Queue(stack, "Queue", visibility_timeout=Duration.seconds(180))
    role = iam.Role(stack, "PipeRole", assumed_by=iam.ServicePrincipal("pipes.amazonaws.com"))
    target = sqs.Queue(stack, "Target")
    pipes.CfnPipe(stack, "Pipe", role_arn=role.role_arn, source=queue.queue_arn, target=target.queue_arn)
    consume(stack, queue, filters=[lambda_.FilterCriteria.filter({"body": {"kind": ["order"]}})])


def test_a_queue_a_pipe_reads_needs_a_dead_letter_queue_and_a_filter_beside_it_deletes_its_messages(findings):
    assert findings["queue-pipe-and-filtered-mapping-on-one-queue"] == {
        ("QueueDeadLetterQueue", "Queue/Resource"),
        ("FilteredSharedQueue", MAPPING),
    }


def keyed_queue(stack: cdk.Stack, **props: Any) -> tuple[sqs.Queue, kms.Key]:
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    return queue_with_dead_letters(stack, encryption_master_key=key, **props), key


@case
def keyed_queue_read_without_decrypt(stack: cdk.Stack) -> None:
    """The queue imported by its ARN alone: CDK grants receive, not the key."""
    queue, _ = keyed_queue(stack)
    consume(stack, sqs.Queue.from_queue_arn(stack, "ByArn", queue.queue_arn))


@case
def keyed_queue_read_with_decrypt(stack: cdk.Stack) -> None:
    """Granted by the role's policy, by the key policy, by a managed policy of the app, or the role has a
    managed policy from outside the app that may allow it."""
    queue, key = keyed_queue(stack)
    role: Any = consume(stack, sqs.Queue.from_queue_arn(stack, "ByArn", queue.queue_arn)).role
    role.add_to_principal_policy(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn]))
    for name in ("KeyPolicy", "AppManagedPolicy", "ManagedPolicy"):
        other = cdk.Stack(stack.node.scope, f"keyed-queue-decrypt-by-{name.lower()}")
        queue, key = keyed_queue(other)
        role = consume(other, sqs.Queue.from_queue_arn(other, "ByArn", queue.queue_arn)).role
        decrypt = iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn])
        if name == "KeyPolicy":
            key.add_to_resource_policy(
                iam.PolicyStatement(principals=[role], actions=["kms:Decrypt"], resources=["*"])
            )
        elif name == "AppManagedPolicy":  # attached through the role's ManagedPolicyArns
            role.add_managed_policy(iam.ManagedPolicy(other, "Decrypt", statements=[decrypt]))
        else:
            role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("AdministratorAccess"))


def test_a_poller_role_that_may_not_decrypt_the_queues_customer_key_is_reported_on_the_mapping(findings):
    assert only(findings["keyed-queue-read-without-decrypt"], "QueueKeyDecrypt") == {
        "Function/SqsEventSource:ByArn/Resource"
    }


def test_decrypt_granted_by_the_role_or_the_key_policy_or_a_policy_from_outside_the_app_passes(findings):
    names = (
        "keyed-queue-read-with-decrypt",
        "keyed-queue-decrypt-by-keypolicy",
        "keyed-queue-decrypt-by-appmanagedpolicy",
        "keyed-queue-decrypt-by-managedpolicy",
    )
    assert [findings[name] for name in names] == [set(), set(), set(), set()]


@case
def subscription_dead_letters_sns_may_not_send_to(stack: cdk.Stack) -> None:
    """One imported by its ARN (no policy), one whose policy lets only another topic send."""
    topic, other = sns.Topic(stack, "Topic"), sns.Topic(stack, "Other")
    for name in ("Imported", "Elsewhere"):
        dead_letters = sqs.Queue(stack, f"{name}DeadLetters")
        alarm(stack, f"{name}Alarm", visible(dead_letters))
        given = sqs.Queue.from_queue_arn(stack, f"{name}ByArn", dead_letters.queue_arn)
        if name == "Elsewhere":
            dead_letters.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("sns.amazonaws.com")],
                    actions=["sqs:SendMessage"],
                    resources=[dead_letters.queue_arn],
                    conditions={"ArnEquals": {"aws:SourceArn": other.topic_arn}},
                )
            )
        queue = sqs.Queue(stack, name)
        topic.add_subscription(
            subscriptions.SqsSubscription(queue, raw_message_delivery=True, dead_letter_queue=given)
        )


def test_a_subscription_dead_letter_queue_sns_may_not_send_to_is_reported_on_the_subscription(findings):
    assert only(findings["subscription-dead-letters-sns-may-not-send-to"], "SubscriptionDeadLetterQueue") == {
        "Imported/Topic/Resource",
        "Elsewhere/Topic/Resource",
    }


@case
def stream_retries_at_the_maximum(stack: cdk.Stack) -> None:
    dead_letters = sqs.Queue(stack, "Failures")
    alarm(stack, "FailuresAlarm", visible(dead_letters))
    consume_nothing(stack).add_event_source(
        event_sources.DynamoEventSource(
            dynamodb.Table.from_table_attributes(
                stack,
                "Table",
                table_name="t",
                table_stream_arn="arn:aws:dynamodb:eu-west-1:111111111111:table/t/stream/1",
            ),
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            report_batch_item_failures=True,
            retry_attempts=10_000,
            on_failure=event_sources.SqsDlq(dead_letters),
        )
    )


def test_a_stream_mapping_retrying_10000_times_without_a_record_age_is_reported_as_unbounded(findings):
    assert only(findings["stream-retries-at-the-maximum"], "StreamRetries") == {
        "Function/DynamoDBEventSource:Table/Resource"
    }


@case
def dead_letter_retention_equal_to_the_source(stack: cdk.Stack) -> None:
    queue_with_dead_letters(stack, retention_period=DLQ_DAYS)


def test_a_dead_letter_queue_keeping_messages_as_long_as_its_source_is_reported_on_it(findings):
    assert only(findings["dead-letter-retention-equal-to-the-source"], "DeadLetterQueueRetention") == {
        "DeadLetterQueue/Resource"
    }


# -- the pack -------------------------------------------------------------------------------------------


def test_the_docs_list_every_rule_with_the_level_the_report_gives_and_its_aws_pages():
    docs = (REPO / "docs" / "constructs.md").read_text()
    rows = {line.split(" | ")[0]: line for line in docs.splitlines() if line.startswith(f"| `{PACK_NAME}-")}
    assert len(rows) == len(RULES)
    for rule in RULES:
        severity = "error" if rule.level == NagMessageLevel.ERROR else "warning"  # as NagPack reports it
        row = rows[f"| `{PACK_NAME}-{rule.id}`"]
        assert row.startswith(f"| `{PACK_NAME}-{rule.id}` | {severity} |"), rule.id
        assert all(f"]({source})" in row for source in rule.sources), rule.id
