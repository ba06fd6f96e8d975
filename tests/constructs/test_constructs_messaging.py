"""FifoMessaging: topic, queue, DLQ, policies and options, as they appear in the template."""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, assertions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs_helpers import new_stack, only, resources, template_of

from idempotent_pipeline import ConfigurationError, FifoMessaging
from idempotent_pipeline.messaging import FILTER_POLICY_WARNING


def _queues(template: assertions.Template) -> tuple[dict[str, Any], dict[str, Any]]:
    """(queue, dead-letter queue) properties: the queue is the one with a redrive policy."""
    queues = [q["Properties"] for q in resources(template, "AWS::SQS::Queue").values()]
    main = [q for q in queues if "RedrivePolicy" in q]
    dead = [q for q in queues if "RedrivePolicy" not in q]
    assert len(main) == 1 and len(dead) == 1, queues
    return main[0], dead[0]


def _logical_id(template: assertions.Template, type_: str, path_part: str) -> str:
    matches = [k for k in resources(template, type_) if path_part in k]
    assert len(matches) == 1, (type_, path_part, matches)
    return matches[0]


@pytest.fixture(scope="session")
def default_template(synth) -> assertions.Template:
    return synth(lambda stack: FifoMessaging(stack, "Messaging"))


def test_topic_is_fifo_with_content_based_deduplication(default_template):
    topic = only(default_template, "AWS::SNS::Topic")["Properties"]
    assert topic["FifoTopic"] is True
    assert topic["ContentBasedDeduplication"] is True
    assert topic["TopicName"].endswith(".fifo")
    assert "FifoThroughputScope" not in topic
    assert "KmsMasterKeyId" not in topic


def test_queue_and_dlq_are_fifo_with_generated_fifo_names(default_template):
    queue, dead = _queues(default_template)
    for props in (queue, dead):
        assert props["FifoQueue"] is True
        assert re.fullmatch(r"[A-Za-z0-9_-]+\.fifo", props["QueueName"]), props["QueueName"]
        assert len(props["QueueName"]) <= 80
    assert queue["QueueName"] != dead["QueueName"]
    assert queue["QueueName"].startswith("TestStack-Messaging-Queue")
    assert dead["QueueName"].startswith("TestStack-Messaging-DeadLetterQueue")


def test_queue_redrives_to_the_dlq_after_five_receives(default_template):
    queue, _ = _queues(default_template)
    dlq_id = _logical_id(default_template, "AWS::SQS::Queue", "DeadLetterQueue")
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": 5,
    }


def test_queues_default_to_sse_sqs_and_documented_retention(default_template):
    queue, dead = _queues(default_template)
    assert queue["SqsManagedSseEnabled"] is True and dead["SqsManagedSseEnabled"] is True
    assert "KmsMasterKeyId" not in queue and "KmsMasterKeyId" not in dead
    assert queue["MessageRetentionPeriod"] == 4 * 24 * 3600
    assert dead["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queue["VisibilityTimeout"] == 180
    assert queue["ContentBasedDeduplication"] is True
    assert "DeduplicationScope" not in queue and "FifoThroughputLimit" not in queue


def test_subscription_delivers_raw_messages_to_the_queue_without_filter(default_template):
    subscription = only(default_template, "AWS::SNS::Subscription")["Properties"]
    queue_id = _logical_id(default_template, "AWS::SQS::Queue", "MessagingQueue")
    topic_id = _logical_id(default_template, "AWS::SNS::Topic", "Topic")
    assert subscription["Protocol"] == "sqs"
    assert subscription["RawMessageDelivery"] is True
    assert subscription["Endpoint"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert subscription["TopicArn"] == {"Ref": topic_id}
    assert "FilterPolicy" not in subscription


def _queue_policy(template: assertions.Template, queue_id: str) -> list[dict[str, Any]]:
    for policy in resources(template, "AWS::SQS::QueuePolicy").values():
        if policy["Properties"]["Queues"] == [{"Ref": queue_id}]:
            return policy["Properties"]["PolicyDocument"]["Statement"]
    raise AssertionError(f"no queue policy for {queue_id}")


def _denies_insecure_transport(statements: list[dict[str, Any]], action: str) -> bool:
    return any(
        s["Effect"] == "Deny"
        and s["Action"] == action
        and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )


def test_queue_accepts_send_message_only_from_its_topic(default_template):
    queue_id = _logical_id(default_template, "AWS::SQS::Queue", "MessagingQueue")
    topic_id = _logical_id(default_template, "AWS::SNS::Topic", "Topic")
    allows = [s for s in _queue_policy(default_template, queue_id) if s["Effect"] == "Allow"]
    assert allows == [
        {
            "Action": "sqs:SendMessage",
            "Condition": {"ArnEquals": {"aws:SourceArn": {"Ref": topic_id}}},
            "Effect": "Allow",
            "Principal": {"Service": "sns.amazonaws.com"},
            "Resource": {"Fn::GetAtt": [queue_id, "Arn"]},
        }
    ]


def test_queue_dlq_and_topic_deny_non_tls_access(default_template):
    queue_id = _logical_id(default_template, "AWS::SQS::Queue", "MessagingQueue")
    dlq_id = _logical_id(default_template, "AWS::SQS::Queue", "DeadLetterQueue")
    assert _denies_insecure_transport(_queue_policy(default_template, queue_id), "sqs:*")
    assert _denies_insecure_transport(_queue_policy(default_template, dlq_id), "sqs:*")
    topic_policy = only(default_template, "AWS::SNS::TopicPolicy")["Properties"]["PolicyDocument"][
        "Statement"
    ]
    assert _denies_insecure_transport(topic_policy, "sns:Publish")


def test_high_throughput_sets_per_group_scopes_on_queue_and_topic(synth):
    template = synth(lambda stack: FifoMessaging(stack, "Messaging", high_throughput=True))
    queue, _dead = _queues(template)
    assert queue["DeduplicationScope"] == "messageGroup"
    assert queue["FifoThroughputLimit"] == "perMessageGroupId"
    assert only(template, "AWS::SNS::Topic")["Properties"]["FifoThroughputScope"] == "MessageGroup"


def test_retention_visibility_and_max_receive_count_are_configurable(synth):
    template = synth(
        lambda stack: FifoMessaging(
            stack,
            "Messaging",
            retention_period=Duration.days(2),
            dead_letter_retention_period=Duration.days(7),
            visibility_timeout=Duration.minutes(10),
            max_receive_count=3,
        )
    )
    queue, dead = _queues(template)
    assert queue["MessageRetentionPeriod"] == 2 * 24 * 3600
    assert dead["MessageRetentionPeriod"] == 7 * 24 * 3600
    assert queue["VisibilityTimeout"] == 600
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 3


def test_content_based_deduplication_can_be_turned_off(synth):
    template = synth(lambda stack: FifoMessaging(stack, "Messaging", content_based_deduplication=False))
    queue, _ = _queues(template)
    assert queue["ContentBasedDeduplication"] is False
    assert only(template, "AWS::SNS::Topic")["Properties"]["ContentBasedDeduplication"] is False


@pytest.fixture(scope="session")
def cmk_template(synth) -> assertions.Template:
    def build(stack: cdk.Stack) -> None:
        key = kms.Key(stack, "Key", enable_key_rotation=True)
        FifoMessaging(stack, "Messaging", encryption_key=key)

    return synth(build)


def test_customer_managed_key_encrypts_both_queues(cmk_template):
    key_id = _logical_id(cmk_template, "AWS::KMS::Key", "Key")
    queue, dead = _queues(cmk_template)
    for props in (queue, dead):
        assert props["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert "SqsManagedSseEnabled" not in props
    assert "KmsMasterKeyId" not in only(cmk_template, "AWS::SNS::Topic")["Properties"]


def test_topic_encryption_key_encrypts_the_new_topic(synth):
    def build(stack: cdk.Stack) -> None:
        FifoMessaging(
            stack,
            "Messaging",
            encryption_key=kms.Key(stack, "QueueKey", enable_key_rotation=True),
            topic_encryption_key=kms.Key(stack, "TopicKey", enable_key_rotation=True),
        )

    template = synth(build)
    topic_key = _logical_id(template, "AWS::KMS::Key", "TopicKey")
    assert only(template, "AWS::SNS::Topic")["Properties"]["KmsMasterKeyId"] == {
        "Fn::GetAtt": [topic_key, "Arn"]
    }


def test_customer_managed_key_policy_lets_only_this_topic_use_it_through_sns(cmk_template):
    topic_id = _logical_id(cmk_template, "AWS::SNS::Topic", "Topic")
    statements = only(cmk_template, "AWS::KMS::Key")["Properties"]["KeyPolicy"]["Statement"]
    sns_statements = [s for s in statements if s.get("Principal") == {"Service": "sns.amazonaws.com"}]
    assert sns_statements, statements
    for statement in sns_statements:
        assert set(statement["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
        assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": topic_id}}}


def test_existing_topic_is_subscribed_instead_of_a_new_one(synth):
    arn = "arn:aws:sns:eu-west-1:111122223333:orders.fifo"

    def build(stack: cdk.Stack) -> None:
        topic = sns.Topic.from_topic_arn(stack, "Existing", arn)
        messaging = FifoMessaging(stack, "Messaging", topic=topic)
        assert messaging.topic is topic

    template = synth(build)
    assert resources(template, "AWS::SNS::Topic") == {}
    assert only(template, "AWS::SNS::Subscription")["Properties"]["TopicArn"] == arn
    queue_id = _logical_id(template, "AWS::SQS::Queue", "MessagingQueue")
    allows = [s for s in _queue_policy(template, queue_id) if s["Effect"] == "Allow"]
    assert allows[0]["Condition"] == {"ArnEquals": {"aws:SourceArn": arn}}


def test_existing_fifo_dead_letter_queue_is_used(synth):
    arn = "arn:aws:sqs:eu-west-1:111122223333:failures.fifo"

    def build(stack: cdk.Stack) -> None:
        FifoMessaging(stack, "Messaging", dead_letter_queue=sqs.Queue.from_queue_arn(stack, "Dlq", arn))

    template = synth(build)
    queue = only(template, "AWS::SQS::Queue")["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == arn


def test_filter_policy_is_applied_with_a_synth_warning():
    stack = new_stack()
    FifoMessaging(
        stack,
        "Messaging",
        filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["order"])},
    )
    template = template_of(stack)
    assert only(template, "AWS::SNS::Subscription")["Properties"]["FilterPolicy"] == {"kind": ["order"]}
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    texts = [str(w.entry.data) for w in warnings]
    assert any("exactly-once" in text and "filter policy" in text for text in texts), texts
    assert FILTER_POLICY_WARNING.startswith("a subscription filter policy is set")


def test_filter_policy_warning_can_be_acknowledged_next_to_the_construct():
    stack = new_stack()
    messaging = FifoMessaging(
        stack, "Messaging", filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["order"])}
    )
    cdk.Annotations.of(messaging).acknowledge_warning(
        "idempotent-pipeline:filter-policy", "the table's conditional writes catch the duplicates"
    )
    template_of(stack)
    assert assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value()) == []


def test_no_warning_without_filter_policy():
    stack = new_stack()
    FifoMessaging(stack, "Messaging")
    template_of(stack)
    assert assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value()) == []


def test_long_stack_names_still_give_queue_names_of_at_most_80_characters(synth):
    template = synth(
        lambda stack: FifoMessaging(stack, "MessagingWithAVeryLongConstructIdIndeed"), name="S" * 120
    )
    queue, dead = _queues(template)
    for props in (queue, dead):
        assert len(props["QueueName"]) <= 80
        assert props["QueueName"].endswith(".fifo")
    assert queue["QueueName"] != dead["QueueName"]


def test_grant_publish_returns_a_grant_for_sns_publish(synth):
    from aws_cdk import aws_iam as iam

    grants = []

    def build(stack: cdk.Stack) -> None:
        role = iam.Role(stack, "Publisher", assumed_by=iam.AccountRootPrincipal())
        grants.append(FifoMessaging(stack, "Messaging").grant_publish(role))

    template = synth(build)
    assert isinstance(grants[0], iam.Grant) and grants[0].success
    statements = only(template, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]
    assert [s["Action"] for s in statements] == ["sns:Publish"]


# -- validation ---------------------------------------------------------------------------------------


def test_max_receive_count_below_one_is_rejected():
    with pytest.raises(ConfigurationError, match=r"max_receive_count must be between 1 and 1000; got 0"):
        FifoMessaging(new_stack(), "Messaging", max_receive_count=0)


def test_standard_topic_is_rejected():
    stack = new_stack()
    topic = sns.Topic(stack, "Standard")
    with pytest.raises(
        ConfigurationError, match=r"topic must be a FIFO topic .* got a standard topic: TestStack/"
    ):
        FifoMessaging(stack, "Messaging", topic=topic)


def test_imported_standard_topic_is_rejected_by_name():
    stack = new_stack()
    topic = sns.Topic.from_topic_arn(stack, "Standard", "arn:aws:sns:eu-west-1:111122223333:orders")
    with pytest.raises(
        ConfigurationError, match=r"got a standard topic: arn:aws:sns:eu-west-1:111122223333:orders"
    ):
        FifoMessaging(stack, "Messaging", topic=topic)


def test_standard_dead_letter_queue_is_rejected():
    stack = new_stack()
    dlq = sqs.Queue.from_queue_arn(stack, "Dlq", "arn:aws:sqs:eu-west-1:111122223333:failures")
    with pytest.raises(
        ConfigurationError, match=r"dead_letter_queue must be a FIFO queue .* got a standard queue: failures"
    ):
        FifoMessaging(stack, "Messaging", dead_letter_queue=dlq)


def test_unresolved_topic_arn_is_not_checked():
    stack = new_stack()
    parameter = cdk.CfnParameter(stack, "TopicArn")
    topic = sns.Topic.from_topic_arn(stack, "FromParameter", parameter.value_as_string)
    FifoMessaging(stack, "Messaging", topic=topic)
    assert only(template_of(stack), "AWS::SNS::Subscription")["Properties"]["TopicArn"] == {"Ref": "TopicArn"}


def test_visibility_timeout_above_twelve_hours_is_rejected():
    with pytest.raises(
        ConfigurationError, match=r"visibility_timeout must be at most 12 hours; got 43260 seconds"
    ):
        FifoMessaging(new_stack(), "Messaging", visibility_timeout=Duration.seconds(43260))


def test_one_key_for_topic_and_queues_is_rejected_as_a_cycle():
    stack = new_stack()
    key = kms.Key(stack, "Key")
    with pytest.raises(
        ConfigurationError,
        match=r"topic_encryption_key must be a different key than encryption_key"
        r".*got the same key TestStack/Key",
    ):
        FifoMessaging(stack, "Messaging", encryption_key=key, topic_encryption_key=key)


def test_topic_encryption_key_with_an_existing_topic_is_rejected():
    stack = new_stack()
    topic = sns.Topic(stack, "Existing", fifo=True)
    with pytest.raises(
        ConfigurationError,
        match=r"topic_encryption_key applies only to a new topic.*got topic TestStack/Existing",
    ):
        FifoMessaging(stack, "Messaging", topic=topic, topic_encryption_key=kms.Key(stack, "Key"))


def test_fractional_visibility_timeout_is_rejected():
    with pytest.raises(
        ConfigurationError,
        match=r"visibility_timeout must be a whole number of seconds; got 1 second 500 millis",
    ):
        FifoMessaging(new_stack(), "Messaging", visibility_timeout=Duration.millis(1500))


# -- a customer-managed queue key in an app without cdk.json's feature flags ---------------------------------


def _sns_key_statements(stack: cdk.Stack) -> list[dict[str, Any]]:
    (key,) = resources(template_of(stack), "AWS::KMS::Key").values()
    return [
        statement
        for statement in key["Properties"]["KeyPolicy"]["Statement"]
        if statement.get("Principal", {}).get("Service") == "sns.amazonaws.com"
    ]


def test_queue_key_is_usable_only_by_the_new_topic_even_without_the_apps_feature_flag():
    stack = cdk.Stack(cdk.App(), "NoFlags")  # no cdk.json context, as in a user's older app
    messaging = FifoMessaging(stack, "Messaging", encryption_key=kms.Key(stack, "QueueKey"))
    (statement,) = _sns_key_statements(stack)
    topic_ref = stack.resolve(messaging.topic.topic_arn)
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": topic_ref}}
    assert not assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())


def test_existing_topic_in_an_app_without_the_flag_warns_that_the_queue_key_is_unrestricted():
    stack = cdk.Stack(cdk.App(), "NoFlags")
    topic = sns.Topic(stack, "Existing", fifo=True)
    FifoMessaging(stack, "Messaging", topic=topic, encryption_key=kms.Key(stack, "QueueKey"))
    (statement,) = _sns_key_statements(stack)
    assert "Condition" not in statement
    warnings = assertions.Annotations.from_stack(stack).find_warning(
        "*", assertions.Match.string_like_regexp("lets every SNS topic use the key")
    )
    assert len(warnings) == 1
