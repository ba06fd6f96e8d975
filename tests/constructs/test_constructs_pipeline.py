"""IdempotentPipeline: the blocks wired together, attributes, grant_publish and alarms."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, assertions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs_helpers import actions_of, new_stack, only, policy_statements, resources, template_of

from idempotent_pipeline import (
    ConfigurationError,
    FifoMessaging,
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentPipeline,
)


@pytest.fixture(scope="session")
def built() -> tuple[IdempotentPipeline, assertions.Template]:
    stack = new_stack()
    pipeline = IdempotentPipeline(stack, "Pipeline")
    return pipeline, template_of(stack)


@pytest.fixture(scope="session")
def template(built) -> assertions.Template:
    return built[1]


def _id(template: assertions.Template, type_: str, part: str) -> str:
    found = [k for k in resources(template, type_) if part in k]
    assert len(found) == 1, (type_, part, found)
    return found[0]


def _alarms(template: assertions.Template) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in resources(template, "AWS::CloudWatch::Alarm").items()}


def test_exposes_the_resources_users_wire_further(built):
    pipeline, _ = built
    assert isinstance(pipeline.messaging, FifoMessaging)
    assert isinstance(pipeline.idempotency_table, IdempotencyTable)
    assert isinstance(pipeline.consumer, IdempotentConsumer)
    assert pipeline.topic is pipeline.messaging.topic
    assert pipeline.queue is pipeline.messaging.queue
    assert pipeline.dead_letter_queue is pipeline.messaging.dead_letter_queue
    assert pipeline.table is pipeline.idempotency_table.table
    assert pipeline.function is pipeline.consumer.function


def test_construct_ids_are_stable(built):
    pipeline, _ = built
    paths = {c.node.path for c in pipeline.node.find_all()}
    assert {
        "TestStack/Pipeline/Messaging/Topic",
        "TestStack/Pipeline/Messaging/Queue",
        "TestStack/Pipeline/Messaging/DeadLetterQueue",
        "TestStack/Pipeline/Table/Table",
        "TestStack/Pipeline/Consumer/Function",
        "TestStack/Pipeline/Consumer/Role",
        "TestStack/Pipeline/Consumer/LogGroup",
        "TestStack/Pipeline/DeadLetterQueueAlarm",
        "TestStack/Pipeline/MessageAgeAlarm",
        "TestStack/Pipeline/FunctionErrorsAlarm",
    } <= paths


def test_topic_feeds_queue_feeds_function_writes_table(template):
    topic_id = _id(template, "AWS::SNS::Topic", "Topic")
    queue_id = _id(template, "AWS::SQS::Queue", "MessagingQueue")
    dlq_id = _id(template, "AWS::SQS::Queue", "DeadLetterQueue")
    table_id = _id(template, "AWS::DynamoDB::Table", "Table")
    function_id = _id(template, "AWS::Lambda::Function", "Function")
    subscription = only(template, "AWS::SNS::Subscription")["Properties"]
    assert (subscription["TopicArn"], subscription["Endpoint"]) == (
        {"Ref": topic_id},
        {"Fn::GetAtt": [queue_id, "Arn"]},
    )
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert mapping["FunctionName"] == {"Ref": function_id}
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env["TABLE_NAME"] == {"Ref": table_id}
    assert env["DLQ_URL"] == {"Ref": dlq_id}


def test_visibility_timeout_is_six_times_the_function_timeout(template):
    queue = resources(template, "AWS::SQS::Queue")[_id(template, "AWS::SQS::Queue", "MessagingQueue")]
    assert queue["Properties"]["VisibilityTimeout"] == 6 * 30


def test_visibility_timeout_follows_a_custom_function_timeout(synth):
    template = synth(lambda stack: IdempotentPipeline(stack, "Pipeline", timeout=Duration.seconds(50)))
    queue = resources(template, "AWS::SQS::Queue")[_id(template, "AWS::SQS::Queue", "MessagingQueue")]
    assert queue["Properties"]["VisibilityTimeout"] == 300
    assert only(template, "AWS::Lambda::Function")["Properties"]["Timeout"] == 50


def test_visibility_timeout_below_six_times_the_timeout_is_rejected():
    with pytest.raises(
        ConfigurationError,
        match=r"visibility_timeout must be at least 6 x timeout \(30 seconds\) = 180 seconds; "
        r"got 120 seconds",
    ):
        IdempotentPipeline(new_stack(), "Pipeline", visibility_timeout=Duration.minutes(2))


def test_alarms_watch_dlq_message_age_and_function_errors(template):
    alarms = _alarms(template)
    dlq_id = _id(template, "AWS::SQS::Queue", "DeadLetterQueue")
    queue_id = _id(template, "AWS::SQS::Queue", "MessagingQueue")
    function_id = _id(template, "AWS::Lambda::Function", "Function")
    by_metric = {a["MetricName"]: a for a in alarms.values()}
    assert set(by_metric) == {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "Errors"}

    dlq = by_metric["ApproximateNumberOfMessagesVisible"]
    assert dlq["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}]
    assert (dlq["Threshold"], dlq["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")

    age = by_metric["ApproximateAgeOfOldestMessage"]
    assert age["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    assert age["Threshold"] == 600

    errors = by_metric["Errors"]
    assert errors["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_id}}]
    assert (errors["Threshold"], errors["Statistic"]) == (1, "Sum")
    for alarm in alarms.values():
        assert alarm["TreatMissingData"] == "notBreaching"
        assert "AlarmActions" not in alarm


def test_alarm_topic_receives_every_alarm(synth):
    def build(stack: cdk.Stack) -> None:
        alarm_topic = sns.Topic(stack, "Oncall")
        IdempotentPipeline(stack, "Pipeline", alarm_topic=alarm_topic, max_message_age=Duration.minutes(2))

    template = synth(build)
    oncall = _id(template, "AWS::SNS::Topic", "Oncall")
    alarms = _alarms(template)
    assert len(alarms) == 3
    assert all(a["AlarmActions"] == [{"Ref": oncall}] for a in alarms.values())
    assert {
        a["Threshold"] for a in alarms.values() if a["MetricName"] == "ApproximateAgeOfOldestMessage"
    } == {120}


def test_max_message_age_below_a_minute_is_rejected():
    with pytest.raises(
        ConfigurationError, match=r"max_message_age must be at least 60 seconds; got 30 seconds"
    ):
        IdempotentPipeline(new_stack(), "Pipeline", max_message_age=Duration.seconds(30))


def test_grant_publish_returns_a_grant_on_the_topic(synth):
    grants: list[iam.Grant] = []

    def build(stack: cdk.Stack) -> None:
        publisher = iam.Role(stack, "Publisher", assumed_by=iam.AccountRootPrincipal())
        grants.append(IdempotentPipeline(stack, "Pipeline").grant_publish(publisher))

    template = synth(build)
    assert isinstance(grants[0], iam.Grant) and grants[0].success
    topic_id = _id(template, "AWS::SNS::Topic", "Topic")
    publisher_policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(template, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": _id(template, "AWS::IAM::Role", "Publisher")}]
    ]
    assert publisher_policies == [
        [{"Action": "sns:Publish", "Effect": "Allow", "Resource": {"Ref": topic_id}}]
    ]


def test_grant_publish_on_an_encrypted_topic_includes_the_key(synth):
    def build(stack: cdk.Stack) -> None:
        publisher = iam.Role(stack, "Publisher", assumed_by=iam.AccountRootPrincipal())
        pipeline = IdempotentPipeline(stack, "Pipeline", topic_encryption_key=kms.Key(stack, "TopicKey"))
        pipeline.grant_publish(publisher)

    template = synth(build)
    actions = {a for s in policy_statements(template) for a in actions_of(s)}
    assert {"sns:Publish", "kms:Decrypt", "kms:GenerateDataKey*"} <= actions


def test_non_default_keys_reach_table_and_function(synth):
    template = synth(
        lambda stack: IdempotentPipeline(
            stack,
            "Pipeline",
            partition_key_name="order_id",
            sort_key_name="line_id",
            time_to_live_attribute="expires",
            partition_key_field="order",
            sort_key_field="line",
            ttl=Duration.days(1),
        )
    )
    table = only(template, "AWS::DynamoDB::Table")["Properties"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["order_id", "line_id"]
    assert table["TimeToLiveSpecification"]["AttributeName"] == "expires"
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert (env["PARTITION_KEY"], env["SORT_KEY"], env["TTL_ATTRIBUTE"], env["TTL_SECONDS"]) == (
        "order_id",
        "line_id",
        "expires",
        "86400",
    )
    assert (env["PARTITION_KEY_FIELD"], env["SORT_KEY_FIELD"]) == ("order", "line")


def test_one_customer_managed_key_encrypts_queues_and_table(synth):
    def build(stack: cdk.Stack) -> None:
        IdempotentPipeline(stack, "Pipeline", encryption_key=kms.Key(stack, "Key", enable_key_rotation=True))

    template = synth(build)
    key_arn = {"Fn::GetAtt": [_id(template, "AWS::KMS::Key", "Key"), "Arn"]}
    assert all(
        q["Properties"]["KmsMasterKeyId"] == key_arn for q in resources(template, "AWS::SQS::Queue").values()
    )
    assert (
        only(template, "AWS::DynamoDB::Table")["Properties"]["SSESpecification"]["KMSMasterKeyId"] == key_arn
    )
    key_actions = {a for s in policy_statements(template) if s["Resource"] == key_arn for a in actions_of(s)}
    # event source (decrypt received messages), DLQ sends, table writes
    assert key_actions == {"kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt"}


def test_existing_topic_and_options_pass_through(synth):
    arn = "arn:aws:sns:eu-west-1:111122223333:orders.fifo"

    def build(stack: cdk.Stack) -> None:
        IdempotentPipeline(
            stack,
            "Pipeline",
            topic=sns.Topic.from_topic_arn(stack, "Orders", arn),
            high_throughput=True,
            max_receive_count=2,
            batch_size=4,
            retention_period=Duration.days(1),
        )

    template = synth(build)
    assert resources(template, "AWS::SNS::Topic") == {}
    assert only(template, "AWS::SNS::Subscription")["Properties"]["TopicArn"] == arn
    queue = resources(template, "AWS::SQS::Queue")[_id(template, "AWS::SQS::Queue", "MessagingQueue")][
        "Properties"
    ]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 2
    assert queue["FifoThroughputLimit"] == "perMessageGroupId"
    assert queue["MessageRetentionPeriod"] == 86400
    assert only(template, "AWS::Lambda::EventSourceMapping")["Properties"]["BatchSize"] == 4


def test_filter_policy_warning_reaches_the_composite():
    stack = new_stack()
    IdempotentPipeline(
        stack, "Pipeline", filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["a"])}
    )
    template_of(stack)
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    assert [w.id for w in warnings] == ["/TestStack/Pipeline/Messaging"]


def test_guarded_pipeline_with_user_code_and_lease(synth, user_code):
    template = synth(
        lambda stack: IdempotentPipeline(
            stack,
            "Pipeline",
            mode="guarded",
            processor="orders:handle",
            code_directory=str(user_code),
            lease_duration=Duration.seconds(20),
        )
    )
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert (env["IDEMPOTENCY_MODE"], env["PROCESSOR"], env["LEASE_SECONDS"]) == (
        "guarded",
        "orders:handle",
        "20",
    )


def test_pipeline_validation_reaches_the_building_blocks():
    with pytest.raises(ConfigurationError, match=r"batch_size must be between 1 and 10; got 11"):
        IdempotentPipeline(new_stack(), "Pipeline", batch_size=11)
    with pytest.raises(ConfigurationError, match=r"max_receive_count must be between 1 and 1000; got 0"):
        IdempotentPipeline(new_stack(), "Pipeline", max_receive_count=0)
    with pytest.raises(ConfigurationError, match=r"ttl must be greater than 0 seconds; got 0 seconds"):
        IdempotentPipeline(new_stack(), "Pipeline", ttl=Duration.seconds(0))
    with pytest.raises(ConfigurationError, match=r"partition_key_name and sort_key_name must differ"):
        IdempotentPipeline(new_stack(), "Pipeline", partition_key_name="k", sort_key_name="k")


def test_standard_topic_is_rejected_by_the_composite():
    stack = new_stack()
    with pytest.raises(ConfigurationError, match=r"topic must be a FIFO topic"):
        IdempotentPipeline(stack, "Pipeline", topic=sns.Topic(stack, "Standard"))


def test_standard_queue_cannot_be_slipped_in_as_dead_letter_queue():
    stack = new_stack()
    with pytest.raises(
        ConfigurationError,
        match=r"dead_letter_queue must be a FIFO queue \(name ending in .fifo\); got a standard queue: "
        r"TestStack/Standard",
    ):
        IdempotentPipeline(stack, "Pipeline", dead_letter_queue=sqs.Queue(stack, "Standard"))


def test_existing_fifo_dead_letter_queue_gets_redrive_and_direct_sends(synth):
    arn = "arn:aws:sqs:eu-west-1:111122223333:failures.fifo"

    def build(stack: cdk.Stack) -> None:
        pipeline = IdempotentPipeline(
            stack, "Pipeline", dead_letter_queue=sqs.Queue.from_queue_arn(stack, "Failures", arn)
        )
        assert pipeline.dead_letter_queue.queue_arn == arn

    template = synth(build)
    queue = only(template, "AWS::SQS::Queue")["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == arn
    sends = [s for s in policy_statements(template) if "sqs:SendMessage" in actions_of(s)]
    assert [s["Resource"] for s in sends] == [arn]
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env["DLQ_URL"] == {
        "Fn::Join": ["", ["https://sqs.eu-west-1.", {"Ref": "AWS::URLSuffix"}, "/111122223333/failures.fifo"]]
    }


def test_token_timeout_needs_an_explicit_visibility_timeout():
    stack = new_stack()
    timeout = cdk.CfnParameter(stack, "TimeoutSeconds", type="Number")
    with pytest.raises(
        ConfigurationError, match=r"visibility_timeout is required when timeout is a deploy-time token"
    ):
        IdempotentPipeline(stack, "Pipeline", timeout=Duration.seconds(timeout.value_as_number))


def test_token_timeout_with_explicit_visibility_timeout_synthesizes():
    stack = new_stack()
    timeout = cdk.CfnParameter(stack, "TimeoutSeconds", type="Number")
    IdempotentPipeline(
        stack,
        "Pipeline",
        timeout=Duration.seconds(timeout.value_as_number),
        visibility_timeout=Duration.minutes(15),
    )
    assert only(template_of(stack), "AWS::Lambda::Function")["Properties"]["Timeout"] == {
        "Ref": "TimeoutSeconds"
    }
