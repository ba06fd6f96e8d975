"""Messaging: topic, queue, dead-letter queues, subscription, policies, keys, alarms, FIFO and standard."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, RemovalPolicy, assertions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs_helpers import (
    alarms_of,
    built_alone,
    cdk_json_context,
    logical_id,
    nag_findings,
    new_stack,
    only,
    quiet_alarms,
    resources,
    synth_with_nag,
    template_of,
    warnings_of,
)

from idempotent_pipeline import AlarmOptions, ConfigurationError, Messaging, MessagingOptions
from idempotent_pipeline.messaging import FILTER_POLICY_WARNING


def _queues(template: assertions.Template) -> dict[str, dict[str, Any]]:
    """Logical id part -> the queue resource: Queue, DeadLetterQueue, SubscriptionDeadLetterQueue."""
    found = {}
    for key, resource in resources(template, "AWS::SQS::Queue").items():
        for part in ("SubscriptionDeadLetterQueue", "DeadLetterQueue", "Queue"):
            if part in key:
                found[part] = resource
                break
    return found


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


def _refusal(**options: Any) -> str:
    """What synth says to a Messaging with these options."""
    with pytest.raises(ConfigurationError) as raised:
        Messaging(new_stack(), "M", options=MessagingOptions(**options))
    return str(raised.value)


@pytest.fixture(scope="session")
def built() -> tuple[Messaging, assertions.Template]:
    return built_alone(Messaging, "Messaging")


@pytest.fixture(scope="session")
def default_template(built) -> assertions.Template:
    return built[1]


# -- FIFO by default ----------------------------------------------------------------------------------------


def test_topic_is_fifo_with_content_based_deduplication(default_template):
    topic = only(default_template, "AWS::SNS::Topic")["Properties"]
    assert topic["FifoTopic"] is True
    assert topic["ContentBasedDeduplication"] is True
    assert "FifoThroughputScope" not in topic and "KmsMasterKeyId" not in topic


def test_three_fifo_queues_named_by_cloudformation(default_template):
    """Explicit names break destroy-then-deploy within 60 s (QueueDeletedRecently): none are set."""
    queues = _queues(default_template)
    assert set(queues) == {"Queue", "DeadLetterQueue", "SubscriptionDeadLetterQueue"}
    for queue in queues.values():
        assert queue["Properties"]["FifoQueue"] is True
        assert "QueueName" not in queue["Properties"]


def test_queue_redrives_to_the_dlq_after_five_receives(default_template):
    queue = _queues(default_template)["Queue"]["Properties"]
    dlq_id = logical_id(default_template, "AWS::SQS::Queue", "MessagingDeadLetterQueue")
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": 5,
    }


def test_queues_are_encrypted_with_documented_retention(default_template):
    queues = {k: v["Properties"] for k, v in _queues(default_template).items()}
    for props in queues.values():
        assert props["SqsManagedSseEnabled"] is True and "KmsMasterKeyId" not in props
    assert queues["Queue"]["MessageRetentionPeriod"] == 4 * 24 * 3600
    assert queues["DeadLetterQueue"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queues["SubscriptionDeadLetterQueue"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queues["Queue"]["VisibilityTimeout"] == 180
    assert queues["Queue"]["ContentBasedDeduplication"] is True


def test_dead_letter_queues_are_retained_and_the_source_queue_is_not(default_template):
    """Dead letters are unprocessed user data: deleting the stack keeps them."""
    queues = _queues(default_template)
    for name in ("DeadLetterQueue", "SubscriptionDeadLetterQueue"):
        assert (queues[name]["DeletionPolicy"], queues[name]["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert queues["Queue"]["DeletionPolicy"] == "Delete"


def test_subscription_delivers_raw_messages_and_redrives_what_sns_cannot_deliver(built, default_template):
    """Without a redrive policy SNS drops a message on a client-side delivery error."""
    messaging, template = built
    subscription = only(template, "AWS::SNS::Subscription")["Properties"]
    queue_id = logical_id(template, "AWS::SQS::Queue", "MessagingQueue")
    sub_dlq_id = logical_id(template, "AWS::SQS::Queue", "SubscriptionDeadLetterQueue")
    topic_id = logical_id(template, "AWS::SNS::Topic", "Topic")
    assert subscription == {
        "Endpoint": {"Fn::GetAtt": [queue_id, "Arn"]},
        "Protocol": "sqs",
        "RawMessageDelivery": True,
        "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": [sub_dlq_id, "Arn"]}},
        "TopicArn": {"Ref": topic_id},
    }
    assert messaging.subscription_dead_letter_queue is not None
    assert (
        messaging.subscription_dead_letter_queue.node.path
        == "TestStack/Messaging/SubscriptionDeadLetterQueue"
    )


@pytest.mark.parametrize("queue", ["MessagingQueue", "SubscriptionDeadLetterQueue"])
def test_queue_and_subscription_dlq_accept_send_message_only_from_the_topic(default_template, queue):
    queue_id = logical_id(default_template, "AWS::SQS::Queue", queue)
    topic_id = logical_id(default_template, "AWS::SNS::Topic", "Topic")
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


def test_every_queue_and_the_topic_deny_non_tls_access(default_template):
    for queue_id in resources(default_template, "AWS::SQS::Queue"):
        assert _denies_insecure_transport(_queue_policy(default_template, queue_id), "sqs:*"), queue_id
    topic_policy = only(default_template, "AWS::SNS::TopicPolicy")["Properties"]["PolicyDocument"]
    assert _denies_insecure_transport(topic_policy["Statement"], "sns:Publish")


def test_messaging_alone_passes_cdk_nag(tmp_path):
    synth_with_nag(tmp_path, lambda stack: Messaging(stack, "Messaging"))
    assert nag_findings(tmp_path) == []


def test_high_throughput_sets_per_group_scopes_on_every_queue_and_the_topic(synth):
    """Both dead-letter queues too: a redrive burst into a DLQ at the default FIFO limit is throttled (and
    SNS drops what it cannot move to the subscription's DLQ)."""
    template = synth(lambda stack: Messaging(stack, "M", options=MessagingOptions(high_throughput=True)))
    queues = _queues(template)
    assert sorted(queues) == ["DeadLetterQueue", "Queue", "SubscriptionDeadLetterQueue"]
    for name, queue in queues.items():
        properties = queue["Properties"]
        assert (properties["DeduplicationScope"], properties["FifoThroughputLimit"]) == (
            "messageGroup",
            "perMessageGroupId",
        ), name
    assert only(template, "AWS::SNS::Topic")["Properties"]["FifoThroughputScope"] == "MessageGroup"


def test_without_high_throughput_no_queue_sets_per_group_scopes(synth):
    template = synth(lambda stack: Messaging(stack, "M"))
    for queue in _queues(template).values():
        assert not {"DeduplicationScope", "FifoThroughputLimit"} & set(queue["Properties"])


@pytest.mark.parametrize("fifo", [True, False], ids=["fifo", "standard"])
def test_the_subscription_waits_for_both_queue_policies(fifo, synth):
    """SNS can move an undeliverable message to the subscription's DLQ only once that queue's policy allows
    the topic: created earlier, the subscription drops what it cannot deliver meanwhile."""
    template = synth(lambda stack: Messaging(stack, "M", options=MessagingOptions(fifo=fifo)))
    policies = {
        name: logical_id(template, "AWS::SQS::QueuePolicy", f"M{name}Policy")
        for name in ("Queue", "SubscriptionDeadLetterQueue")
    }
    subscription = only(template, "AWS::SNS::Subscription")
    assert set(policies.values()) <= set(subscription["DependsOn"])


def test_retention_visibility_and_max_receive_count_are_configurable(synth):
    options = MessagingOptions(
        retention_period=Duration.days(2),
        dead_letter_retention_period=Duration.days(7),
        visibility_timeout=Duration.minutes(10),
        max_receive_count=3,
    )
    queues = {
        k: v["Properties"] for k, v in _queues(synth(lambda s: Messaging(s, "M", options=options))).items()
    }
    assert queues["Queue"]["MessageRetentionPeriod"] == 2 * 24 * 3600
    assert queues["DeadLetterQueue"]["MessageRetentionPeriod"] == 7 * 24 * 3600
    assert queues["SubscriptionDeadLetterQueue"]["MessageRetentionPeriod"] == 7 * 24 * 3600
    assert queues["Queue"]["VisibilityTimeout"] == 600
    assert queues["Queue"]["RedrivePolicy"]["maxReceiveCount"] == 3


def test_content_based_deduplication_can_be_turned_off(synth):
    template = synth(lambda s: Messaging(s, "M", options=MessagingOptions(content_based_deduplication=False)))
    assert _queues(template)["Queue"]["Properties"]["ContentBasedDeduplication"] is False
    assert only(template, "AWS::SNS::Topic")["Properties"]["ContentBasedDeduplication"] is False


def test_removal_policies_are_configurable(synth):
    options = MessagingOptions(
        removal_policy=RemovalPolicy.RETAIN, dead_letter_removal_policy=RemovalPolicy.DESTROY
    )
    queues = _queues(synth(lambda s: Messaging(s, "M", options=options)))
    assert queues["Queue"]["DeletionPolicy"] == "Retain"
    assert queues["DeadLetterQueue"]["DeletionPolicy"] == "Delete"


# -- standard queues ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def standard_template(synth) -> assertions.Template:
    return synth(lambda stack: Messaging(stack, "Messaging", options=MessagingOptions(fifo=False)))


def test_standard_topic_feeds_standard_queues(standard_template):
    topic = only(standard_template, "AWS::SNS::Topic").get("Properties", {})
    assert "FifoTopic" not in topic and "ContentBasedDeduplication" not in topic and "TopicName" not in topic
    queues = _queues(standard_template)
    assert set(queues) == {"Queue", "DeadLetterQueue", "SubscriptionDeadLetterQueue"}
    for queue in queues.values():
        assert (
            "FifoQueue" not in queue["Properties"] and "ContentBasedDeduplication" not in queue["Properties"]
        )
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
    subscription = only(standard_template, "AWS::SNS::Subscription")["Properties"]
    assert subscription["RawMessageDelivery"] is True and "RedrivePolicy" in subscription


def test_content_based_deduplication_false_is_left_out_on_standard_queues_and_topics(synth):
    """SQS and SNS refuse ContentBasedDeduplication on a standard queue or topic, even false (E3501)."""
    template = synth(
        lambda s: Messaging(s, "M", options=MessagingOptions(fifo=False, content_based_deduplication=False))
    )
    for name, queue in _queues(template).items():
        assert "ContentBasedDeduplication" not in queue["Properties"], name
    assert "ContentBasedDeduplication" not in only(template, "AWS::SNS::Topic").get("Properties", {})


def test_standard_messaging_passes_cdk_nag(tmp_path):
    synth_with_nag(tmp_path, lambda s: Messaging(s, "M", options=MessagingOptions(fifo=False)))
    assert nag_findings(tmp_path) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"fifo": False, "high_throughput": True},
            "MessagingOptions.high_throughput applies only to FIFO queues; got it with fifo=False",
        ),
        (
            {"fifo": False, "content_based_deduplication": True},
            "MessagingOptions.content_based_deduplication applies only to FIFO queues; got it with "
            "fifo=False",
        ),
    ],
)
def test_fifo_only_options_are_rejected_on_standard_queues(options, message):
    assert _refusal(**options) == message


def test_standard_topic_with_fifo_messaging_is_rejected():
    stack = new_stack()
    with pytest.raises(
        ConfigurationError,
        match=r"^topic must be a FIFO topic \(MessagingOptions.fifo=True\); got a standard topic: "
        r"TestStack/Std$",
    ):
        Messaging(stack, "M", topic=sns.Topic(stack, "Std"))


def test_fifo_topic_with_standard_messaging_is_rejected():
    stack = new_stack()
    arn = "arn:aws:sns:eu-west-1:111122223333:orders.fifo"
    with pytest.raises(
        ConfigurationError,
        match=rf"^topic must be a standard topic \(MessagingOptions.fifo=False\); got a FIFO topic: {arn}$",
    ):
        Messaging(
            stack, "M", topic=sns.Topic.from_topic_arn(stack, "T", arn), options=MessagingOptions(fifo=False)
        )


def test_dead_letter_queue_of_the_other_type_is_rejected():
    stack = new_stack()
    dlq = sqs.Queue.from_queue_arn(stack, "Dlq", "arn:aws:sqs:eu-west-1:111122223333:failures")
    with pytest.raises(
        ConfigurationError,
        match=r"^dead_letter_queue must be a FIFO queue \(MessagingOptions.fifo=True\): SQS refuses a "
        r"dead-letter queue of the other type; got a standard queue: failures$",
    ):
        Messaging(stack, "M", dead_letter_queue=dlq)


# -- no topic: producers send to the queue ----------------------------------------------------------------


@pytest.fixture(scope="session")
def direct() -> tuple[Messaging, assertions.Template, list[iam.Grant]]:
    stack = new_stack()
    messaging = Messaging(stack, "Messaging", options=MessagingOptions(with_topic=False))
    producer = iam.Role(stack, "Producer", assumed_by=iam.AccountRootPrincipal())
    grant = messaging.grant_publish(producer)
    return messaging, template_of(stack), [grant]


def test_without_a_topic_there_is_no_subscription_and_producers_send_to_the_queue(direct):
    messaging, template, (grant,) = direct
    assert messaging.topic is None and messaging.subscription_dead_letter_queue is None
    assert (
        resources(template, "AWS::SNS::Topic") == {} and resources(template, "AWS::SNS::Subscription") == {}
    )
    assert set(_queues(template)) == {"Queue", "DeadLetterQueue"}
    assert grant.success
    queue_id = logical_id(template, "AWS::SQS::Queue", "MessagingQueue")
    statements = only(template, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]
    assert [(s["Action"], s["Resource"]) for s in statements] == [
        (
            ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
            {"Fn::GetAtt": [queue_id, "Arn"]},
        )
    ]


def test_without_a_topic_there_are_no_topic_alarms(direct):
    _, template, _ = direct
    assert {a["MetricName"] for a in alarms_of(template).values()} == {
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
    }


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"topic_encryption_key": True},
            "MessagingOptions.topic_encryption_key needs a topic; got it with with_topic=False",
        ),
        (
            {"filter_policy": {"kind": sns.SubscriptionFilter.string_filter(allowlist=["a"])}},
            "MessagingOptions.filter_policy needs a topic; got it with with_topic=False",
        ),
    ],
)
def test_topic_options_without_a_topic_are_rejected(props, message):
    stack = new_stack()
    if props.get("topic_encryption_key") is True:
        props["topic_encryption_key"] = kms.Key(stack, "Key")
    with pytest.raises(ConfigurationError) as raised:
        Messaging(stack, "M", options=MessagingOptions(with_topic=False, **props))
    assert str(raised.value) == message


def test_a_topic_given_with_with_topic_false_is_rejected():
    stack = new_stack()
    with pytest.raises(
        ConfigurationError, match=r"^topic was given but MessagingOptions.with_topic is False"
    ):
        Messaging(
            stack, "M", topic=sns.Topic(stack, "T", fifo=True), options=MessagingOptions(with_topic=False)
        )


# -- keys -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cmk_template(synth) -> assertions.Template:
    def build(stack: cdk.Stack) -> None:
        Messaging(stack, "Messaging", options=MessagingOptions(encryption_key=kms.Key(stack, "Key")))

    return synth(build)


def test_customer_managed_key_encrypts_all_three_queues(cmk_template):
    key_id = logical_id(cmk_template, "AWS::KMS::Key", "Key")
    for queue in _queues(cmk_template).values():
        assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert "SqsManagedSseEnabled" not in queue["Properties"]


def test_customer_managed_key_lets_only_this_topic_use_it_through_sns(cmk_template):
    """One statement serves the queue and the subscription's DLQ: both use the key."""
    topic_id = logical_id(cmk_template, "AWS::SNS::Topic", "Topic")
    statements = only(cmk_template, "AWS::KMS::Key")["Properties"]["KeyPolicy"]["Statement"]
    sns_statements = [s for s in statements if s.get("Principal") == {"Service": "sns.amazonaws.com"}]
    assert len(sns_statements) == 1
    assert set(sns_statements[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert sns_statements[0]["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": topic_id}}}


def test_topic_encryption_key_encrypts_the_new_topic(synth):
    def build(stack: cdk.Stack) -> None:
        options = MessagingOptions(
            encryption_key=kms.Key(stack, "QueueKey"), topic_encryption_key=kms.Key(stack, "TopicKey")
        )
        Messaging(stack, "Messaging", options=options)

    template = synth(build)
    topic_key = logical_id(template, "AWS::KMS::Key", "TopicKey")
    assert only(template, "AWS::SNS::Topic")["Properties"]["KmsMasterKeyId"] == {
        "Fn::GetAtt": [topic_key, "Arn"]
    }


IMPORTED_KEY = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_imported_queue_key_warns_naming_the_statement_sns_needs():
    stack = new_stack()
    key = kms.Key.from_key_arn(stack, "Imported", IMPORTED_KEY)
    Messaging(stack, "Messaging", options=MessagingOptions(encryption_key=key))
    (warning,) = warnings_of(stack)
    assert warning[0] == "/TestStack/Messaging"
    assert warning[1].startswith(f"MessagingOptions.encryption_key is an imported key ({IMPORTED_KEY})")
    assert '{"Service": "sns.amazonaws.com"} the actions kms:GenerateDataKey and kms:Decrypt' in warning[1]
    assert '"aws:SourceArn"' in warning[1]
    assert "moves every message to the subscription's dead-letter queue (encrypted with SSE-SQS" in warning[1]
    assert warning[1].endswith("[ack: idempotent-pipeline:imported-key:queue]")


def test_imported_queue_key_leaves_the_subscription_dlq_on_sse_sqs(synth):
    """An imported key's policy may lack SNS, or the key may be disabled: the subscription's DLQ must not
    depend on it, or SNS drops the message it could not deliver to the queue."""

    def build(stack: cdk.Stack) -> None:
        key = kms.Key.from_key_arn(stack, "Imported", IMPORTED_KEY)
        Messaging(stack, "Messaging", options=MessagingOptions(encryption_key=key))

    queues = {k: v["Properties"] for k, v in _queues(synth(build)).items()}
    assert queues["Queue"]["KmsMasterKeyId"] == IMPORTED_KEY
    assert queues["DeadLetterQueue"]["KmsMasterKeyId"] == IMPORTED_KEY
    subscription_dlq = queues["SubscriptionDeadLetterQueue"]
    assert subscription_dlq["SqsManagedSseEnabled"] is True and "KmsMasterKeyId" not in subscription_dlq


def test_imported_queue_key_passes_cdk_nag(tmp_path):
    def build(stack: cdk.Stack) -> None:
        key = kms.Key.from_key_arn(stack, "Imported", IMPORTED_KEY)
        messaging = Messaging(stack, "Messaging", options=MessagingOptions(encryption_key=key))
        cdk.Annotations.of(messaging).acknowledge_warning(
            "idempotent-pipeline:imported-key:queue", "the key policy allows SNS"
        )

    synth_with_nag(tmp_path, build)
    assert nag_findings(tmp_path) == []


def test_imported_key_warning_can_be_acknowledged():
    stack = new_stack()
    key = kms.Key.from_key_arn(stack, "Imported", IMPORTED_KEY)
    messaging = Messaging(stack, "Messaging", options=MessagingOptions(encryption_key=key))
    cdk.Annotations.of(messaging).acknowledge_warning(
        "idempotent-pipeline:imported-key:queue", "statement added"
    )
    assert warnings_of(stack) == []


def test_imported_topic_key_warns_that_publishers_need_it():
    stack = new_stack()
    key = kms.Key.from_key_arn(stack, "Imported", IMPORTED_KEY)
    Messaging(stack, "Messaging", options=MessagingOptions(topic_encryption_key=key))
    (warning,) = warnings_of(stack)
    assert warning[1].startswith("MessagingOptions.topic_encryption_key is an imported key")
    assert "publishers cannot publish to the topic" in warning[1]
    assert warning[1].endswith("[ack: idempotent-pipeline:imported-key:topic]")


def test_app_keys_give_no_warning(cmk_template):
    stack = new_stack()
    Messaging(stack, "Messaging", options=MessagingOptions(encryption_key=kms.Key(stack, "Key")))
    assert warnings_of(stack) == []


def test_one_key_for_topic_and_queues_is_rejected_as_a_cycle():
    stack = new_stack()
    key = kms.Key(stack, "Key")
    with pytest.raises(
        ConfigurationError,
        match=r"^MessagingOptions.topic_encryption_key must be a different key than encryption_key"
        r".*got the same key TestStack/Key$",
    ):
        Messaging(stack, "M", options=MessagingOptions(encryption_key=key, topic_encryption_key=key))


def test_topic_encryption_key_with_an_existing_topic_is_rejected():
    stack = new_stack()
    topic = sns.Topic(stack, "Existing", fifo=True)
    with pytest.raises(
        ConfigurationError,
        match=r"^MessagingOptions.topic_encryption_key applies only to a new topic.*"
        r"got topic TestStack/Existing",
    ):
        Messaging(stack, "M", topic=topic, options=MessagingOptions(topic_encryption_key=kms.Key(stack, "K")))


def _sns_key_statements(stack: cdk.Stack) -> list[dict[str, Any]]:
    (key,) = resources(template_of(stack), "AWS::KMS::Key").values()
    return [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal", {}).get("Service") == "sns.amazonaws.com"
    ]


def test_queue_key_is_usable_only_by_the_new_topic_even_without_the_apps_feature_flag():
    stack = quiet_alarms(cdk.Stack(cdk.App(), "NoFlags"))  # no cdk.json context, as in a user's older app
    messaging = Messaging(stack, "Messaging", options=MessagingOptions(encryption_key=kms.Key(stack, "Key")))
    (statement,) = _sns_key_statements(stack)
    assert messaging.topic is not None
    assert statement["Condition"] == {
        "ArnEquals": {"aws:SourceArn": stack.resolve(messaging.topic.topic_arn)}
    }
    assert warnings_of(stack) == []


def test_existing_topic_in_an_app_without_the_flag_warns_that_the_queue_key_is_unrestricted():
    stack = quiet_alarms(cdk.Stack(cdk.App(), "NoFlags"))
    topic = sns.Topic(stack, "Existing", fifo=True)
    Messaging(stack, "Messaging", topic=topic, options=MessagingOptions(encryption_key=kms.Key(stack, "Key")))
    (statement,) = _sns_key_statements(stack)
    assert "Condition" not in statement
    assert [w for w in warnings_of(stack) if "lets every SNS topic use the key" in w[1]]


# -- existing resources -------------------------------------------------------------------------------------


def test_existing_topic_is_subscribed_instead_of_a_new_one(synth):
    arn = "arn:aws:sns:eu-west-1:111122223333:orders.fifo"

    def build(stack: cdk.Stack) -> None:
        topic = sns.Topic.from_topic_arn(stack, "Existing", arn)
        assert Messaging(stack, "Messaging", topic=topic).topic is topic

    template = synth(build)
    assert resources(template, "AWS::SNS::Topic") == {}
    subscription = only(template, "AWS::SNS::Subscription")["Properties"]
    assert subscription["TopicArn"] == arn and "RedrivePolicy" in subscription
    sub_dlq = _queues(template)["SubscriptionDeadLetterQueue"]["Properties"]
    assert sub_dlq["FifoQueue"] is True  # a FIFO topic's subscription takes a FIFO DLQ


def test_existing_fifo_dead_letter_queue_is_used(synth):
    arn = "arn:aws:sqs:eu-west-1:111122223333:failures.fifo"
    template = synth(
        lambda stack: Messaging(stack, "M", dead_letter_queue=sqs.Queue.from_queue_arn(stack, "Dlq", arn))
    )
    assert _queues(template)["Queue"]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == arn
    assert "DeadLetterQueue" not in _queues(template)


def test_unresolved_topic_arn_is_not_checked():
    stack = new_stack()
    parameter = cdk.CfnParameter(stack, "TopicArn")
    Messaging(stack, "M", topic=sns.Topic.from_topic_arn(stack, "FromParameter", parameter.value_as_string))
    assert only(template_of(stack), "AWS::SNS::Subscription")["Properties"]["TopicArn"] == {"Ref": "TopicArn"}


def test_grant_publish_returns_a_grant_for_sns_publish(synth):
    grants = []

    def build(stack: cdk.Stack) -> None:
        role = iam.Role(stack, "Publisher", assumed_by=iam.AccountRootPrincipal())
        grants.append(Messaging(stack, "Messaging").grant_publish(role))

    template = synth(build)
    assert isinstance(grants[0], iam.Grant) and grants[0].success
    statements = only(template, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]
    assert [s["Action"] for s in statements] == ["sns:Publish"]


# -- filter policy ------------------------------------------------------------------------------------------


def test_filter_policy_is_applied_with_an_acknowledgeable_synth_warning():
    stack = new_stack()
    options = MessagingOptions(
        filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["order"])}
    )
    messaging = Messaging(stack, "Messaging", options=options)
    assert only(template_of(stack), "AWS::SNS::Subscription")["Properties"]["FilterPolicy"] == {
        "kind": ["order"]
    }
    ((path, message),) = warnings_of(stack)
    assert (path, message) == (
        "/TestStack/Messaging",
        f"{FILTER_POLICY_WARNING} [ack: idempotent-pipeline:filter-policy]",
    )
    stack2 = new_stack()
    messaging = Messaging(stack2, "Messaging", options=options)
    cdk.Annotations.of(messaging).acknowledge_warning(
        "idempotent-pipeline:filter-policy", "table catches them"
    )
    assert warnings_of(stack2) == []


def test_filter_policy_on_a_standard_topic_gives_no_warning():
    """Standard delivery is at-least-once anyway: filtering voids nothing."""
    stack = new_stack()
    options = MessagingOptions(
        fifo=False, filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["order"])}
    )
    Messaging(stack, "Messaging", options=options)
    assert warnings_of(stack) == []


def test_no_warning_by_default():
    stack = new_stack()
    Messaging(stack, "Messaging")
    assert warnings_of(stack) == []


# -- alarms -------------------------------------------------------------------------------------------------


def test_alarms_on_both_dead_letter_queues_failed_notifications_and_message_age(built, default_template):
    """NumberOfNotificationsFailedToRedriveToDlq counts what SNS could put in neither queue: lost messages."""
    messaging, template = built
    alarms = alarms_of(template)
    dlq_id = logical_id(template, "AWS::SQS::Queue", "MessagingDeadLetterQueue")
    sub_dlq_id = logical_id(template, "AWS::SQS::Queue", "SubscriptionDeadLetterQueue")
    queue_id = logical_id(template, "AWS::SQS::Queue", "MessagingQueue")
    topic_id = logical_id(template, "AWS::SNS::Topic", "Topic")
    summary = sorted(
        (
            (a["Namespace"], a["MetricName"], a["Dimensions"][0]["Value"], a["Statistic"], a["Threshold"])
            for a in alarms.values()
        ),
        key=str,
    )
    assert summary == sorted(
        [
            (
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                {"Fn::GetAtt": [dlq_id, "QueueName"]},
                "Maximum",
                1,
            ),
            (
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                {"Fn::GetAtt": [sub_dlq_id, "QueueName"]},
                "Maximum",
                1,
            ),
            ("AWS/SNS", "NumberOfNotificationsFailed", {"Fn::GetAtt": [topic_id, "TopicName"]}, "Sum", 1),
            (
                "AWS/SNS",
                "NumberOfNotificationsFailedToRedriveToDlq",
                {"Fn::GetAtt": [topic_id, "TopicName"]},
                "Sum",
                1,
            ),
            (
                "AWS/SQS",
                "ApproximateAgeOfOldestMessage",
                {"Fn::GetAtt": [queue_id, "QueueName"]},
                "Maximum",
                600,
            ),
        ],
        key=str,
    )
    for alarm in alarms.values():
        assert (alarm["ComparisonOperator"], alarm["TreatMissingData"]) == (
            "GreaterThanOrEqualToThreshold",
            "notBreaching",
        )
        assert "AlarmActions" not in alarm
    assert len(messaging.alarms) == 5


def test_alarm_topic_is_notified_by_every_alarm_when_it_fires_and_recovers(synth):
    def build(stack: cdk.Stack) -> None:
        oncall = sns.Topic(stack, "Oncall", enforce_ssl=True)
        Messaging(
            stack, "M", alarm_options=AlarmOptions(alarm_topic=oncall, max_message_age=Duration.minutes(2))
        )

    template = synth(build)
    oncall = logical_id(template, "AWS::SNS::Topic", "Oncall")
    alarms = alarms_of(template)
    assert len(alarms) == 5
    assert all(a["AlarmActions"] == [{"Ref": oncall}] == a["OKActions"] for a in alarms.values())
    assert {
        a["Threshold"] for a in alarms.values() if a["MetricName"] == "ApproximateAgeOfOldestMessage"
    } == {120}


def test_alarms_can_be_turned_off(synth):
    template = synth(lambda s: Messaging(s, "M", alarm_options=AlarmOptions(enabled=False)))
    assert alarms_of(template) == {}


# -- validation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_receive_count": 0}, "MessagingOptions.max_receive_count must be between 1 and 1000; got 0"),
        (
            {"visibility_timeout": Duration.seconds(43260)},
            "MessagingOptions.visibility_timeout must be at most 12 hours; got 43260 seconds",
        ),
        (
            {"retention_period": Duration.days(15)},
            "MessagingOptions.retention_period must be between 1 minute and 14 days; got 1296000 seconds",
        ),
        (
            {"dead_letter_retention_period": Duration.seconds(30)},
            "MessagingOptions.dead_letter_retention_period must be between 1 minute and 14 days; got 30 "
            "seconds",
        ),
        (
            {"removal_policy": RemovalPolicy.SNAPSHOT},
            "MessagingOptions.removal_policy must be DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE (queues "
            "have no snapshots); got RemovalPolicy.SNAPSHOT",
        ),
    ],
)
def test_invalid_options_are_rejected_naming_option_and_value(options, message):
    assert _refusal(**options) == message


# -- retention against visibility, receives and the age alarm -----------------------------------------------


def test_retention_not_longer_than_the_visibility_timeout_is_rejected():
    """The message would expire while a failed receive hides it: lost, never dead-lettered."""
    with pytest.raises(ConfigurationError) as raised:
        Messaging(new_stack(), "M", options=MessagingOptions(retention_period=Duration.minutes(2)))
    assert str(raised.value) == (
        "MessagingOptions.retention_period (120 seconds) must be longer than the visibility timeout (180 "
        "seconds): a message would expire while a failed receive still hides it, and never reach the "
        "dead-letter queue"
    )


def test_message_age_alarm_threshold_not_below_the_retention_is_rejected():
    options = MessagingOptions(retention_period=Duration.minutes(10), visibility_timeout=Duration.minutes(1))
    with pytest.raises(ConfigurationError) as raised:
        Messaging(new_stack(), "M", options=options)  # default max_message_age: 10 minutes
    assert str(raised.value) == (
        "AlarmOptions.max_message_age (600 seconds) must be shorter than MessagingOptions.retention_period "
        "(600 seconds): no message gets that old before it expires, so the message-age alarm could never fire"
    )
    stack = new_stack()
    Messaging(stack, "M", options=options, alarm_options=AlarmOptions(enabled=False))  # no alarm, no rule
    assert warnings_of(stack) == []


def test_retention_shorter_than_every_receive_warns_and_can_be_acknowledged():
    options = MessagingOptions(retention_period=Duration.minutes(10))  # 5 receives x 180 s = 900 s
    alarm_options = AlarmOptions(max_message_age=Duration.minutes(5))
    stack = new_stack()
    Messaging(stack, "M", options=options, alarm_options=alarm_options)
    ((path, message),) = warnings_of(stack)
    assert (path, message) == (
        "/TestStack/M",
        "MessagingOptions.retention_period (600 seconds) is shorter than max_receive_count x "
        "visibility_timeout (5 x 180 = 900 seconds): a message that keeps failing can expire before its "
        "last receive, and never reach the dead-letter queue (SQS does not dead-letter expired messages) "
        "[ack: idempotent-pipeline:short-retention]",
    )
    stack = new_stack()
    messaging = Messaging(stack, "M", options=options, alarm_options=alarm_options)
    cdk.Annotations.of(messaging).acknowledge_warning("idempotent-pipeline:short-retention", "fine")
    assert warnings_of(stack) == []


def test_standard_dead_letter_retention_shorter_than_the_queues_is_rejected():
    """Standard queues keep the enqueue time in the DLQ: a dead letter 1 day old in a 1-day DLQ expires."""
    options = MessagingOptions(
        fifo=False, retention_period=Duration.days(14), dead_letter_retention_period=Duration.days(1)
    )
    with pytest.raises(ConfigurationError) as raised:
        Messaging(new_stack(), "M", options=options)
    assert str(raised.value) == (
        "MessagingOptions.dead_letter_retention_period (86400 seconds) must be longer than "
        "MessagingOptions.retention_period (1209600 seconds) on standard queues: SQS keeps a message's "
        "enqueue time when it moves it to the dead-letter queue, so a dead letter would expire early, or at "
        "once (14 days is the longest retention: give the source queue less)"
    )


@pytest.mark.parametrize(
    ("days", "seconds"), [(1, 86400), (None, 345600)], ids=["shorter", "as long (SQS's default, 4 days)"]
)
def test_a_given_standard_dead_letter_queue_keeping_messages_no_longer_than_the_queue_is_rejected(
    days, seconds
):
    """SQS's default retention (4 days) is the queue's default too: a given DLQ must keep messages longer."""
    stack = new_stack()
    dlq = sqs.Queue(stack, "Dlq", retention_period=Duration.days(days) if days else None)
    with pytest.raises(
        ConfigurationError,
        match=rf"^the retention period of dead_letter_queue TestStack/Dlq \({seconds} seconds\) must be "
        r"longer than MessagingOptions.retention_period \(345600 seconds\) on standard queues",
    ):
        Messaging(stack, "M", dead_letter_queue=dlq, options=MessagingOptions(fifo=False))
    longer = sqs.Queue(stack, "LongerDlq", retention_period=Duration.days(5))
    Messaging(stack, "Accepted", dead_letter_queue=longer, options=MessagingOptions(fifo=False))


def test_fifo_dead_letter_retention_shorter_than_the_queues_warns():
    """FIFO restarts the clock in the DLQ: nothing expires early, dead letters are just kept less long."""
    options = MessagingOptions(
        retention_period=Duration.days(14), dead_letter_retention_period=Duration.days(1)
    )
    stack = new_stack()
    messaging = Messaging(stack, "M", options=options)
    ((_, message),) = warnings_of(stack)
    assert message.startswith(
        "MessagingOptions.dead_letter_retention_period (86400 seconds) is shorter than "
        "MessagingOptions.retention_period (1209600 seconds)"
    )
    assert message.endswith("[ack: idempotent-pipeline:short-dead-letter-retention]")
    cdk.Annotations.of(messaging).acknowledge_warning("idempotent-pipeline:short-dead-letter-retention", "ok")
    assert warnings_of(stack) == []


def test_standard_dead_letter_retention_equal_to_the_queues_is_rejected():
    """AWS: a standard DLQ's retention longer than its source's. With equal ones a message that waited in
    the queue reaches the DLQ with only what was left of its retention, or none: it expires there unread."""
    options = MessagingOptions(
        fifo=False, retention_period=Duration.days(14), dead_letter_retention_period=Duration.days(14)
    )
    with pytest.raises(ConfigurationError) as raised:
        Messaging(new_stack(), "M", options=options)
    assert str(raised.value).startswith(
        "MessagingOptions.dead_letter_retention_period (1209600 seconds) must be longer than "
        "MessagingOptions.retention_period (1209600 seconds) on standard queues"
    )


def test_fifo_dead_letter_retention_equal_to_the_queues_is_accepted():
    """FIFO restarts the clock in the DLQ: an equal retention keeps a dead letter as long as the queue."""
    stack = new_stack()
    options = MessagingOptions(
        retention_period=Duration.days(14), dead_letter_retention_period=Duration.days(14)
    )
    Messaging(stack, "M", options=options)
    assert warnings_of(stack) == []


def test_retention_rules_skip_deploy_time_values():
    stack = new_stack()
    retention = cdk.CfnParameter(stack, "Retention", type="Number").value_as_number
    Messaging(stack, "M", options=MessagingOptions(retention_period=Duration.seconds(retention)))
    assert warnings_of(stack) == []


def test_cdk_json_context_is_what_the_tests_use():
    assert cdk_json_context()["@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption"] is True
