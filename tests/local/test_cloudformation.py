"""What the emulator was taught: CloudFormation types moto skips or gets wrong, checked through the APIs."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from stack_helpers import deploy, queue_attributes

from idempotent_local.emulator import Emulator
from tests.local.moto_type_templates import subscription

QUEUE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "sns.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": "*",
        }
    ],
}


def _template(
    *,
    raw: bool = True,
    policy: bool = True,
    ttl_attribute: str | None = "expires_at",
    display_name: str = "one",
    alarm: bool = True,
    max_receive_count: int = 3,
    topic_name: str = "taught-topic.fifo",
) -> str:
    resources: dict[str, Any] = {
        "Topic": {
            "Type": "AWS::SNS::Topic",
            "Properties": {
                "FifoTopic": True,
                "ContentBasedDeduplication": True,
                "DisplayName": display_name,
                "TopicName": topic_name,
            },
        },
        "DeadLetterQueue": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": True}},
        "Queue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "FifoQueue": True,
                "QueueName": "taught-queue.fifo",
                "VisibilityTimeout": 30,
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]},
                    "maxReceiveCount": max_receive_count,
                },
            },
        },
        "Subscription": subscription("Topic", "Queue", RawMessageDelivery=raw),
        "Table": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            },
        },
        "Metadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:deflate64:xyz"}},
    }
    if ttl_attribute:
        resources["Table"]["Properties"]["TimeToLiveSpecification"] = {
            "AttributeName": ttl_attribute,
            "Enabled": True,
        }
    if policy:
        resources["QueuePolicy"] = {
            "Type": "AWS::SQS::QueuePolicy",
            "Properties": {"Queues": [{"Ref": "Queue"}], "PolicyDocument": QUEUE_POLICY},
        }
        resources["TopicPolicy"] = {
            "Type": "AWS::SNS::TopicPolicy",
            "Properties": {
                "Topics": [{"Ref": "Topic"}],
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Sid": "deny-insecure",
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "sns:Publish",
                            "Resource": {"Ref": "Topic"},
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        }
                    ],
                },
            },
        }
    if alarm:
        resources["Alarm"] = {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "EvaluationPeriods": 1,
                "Threshold": 1,
                "MetricName": "ApproximateNumberOfMessagesVisible",
                "Namespace": "AWS/SQS",
                "Period": 60,
                "Statistic": "Maximum",
                "Dimensions": [
                    {"Name": "QueueName", "Value": {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}}
                ],
            },
        }
    return json.dumps(
        {
            "Resources": resources,
            "Outputs": {"AlarmArn": {"Value": {"Fn::GetAtt": ["Alarm", "Arn"]}}} if alarm else {},
        }
    )


def test_raw_subscription_delivers_topic_messages_to_the_queue(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    sns, sqs = clean_emulator.client("sns"), clean_emulator.client("sqs")
    attributes = sns.get_subscription_attributes(SubscriptionArn=ids["Subscription"])["Attributes"]
    assert attributes["RawMessageDelivery"] == "true"
    assert attributes["Endpoint"].endswith(":taught-queue.fifo")
    sns.publish(
        TopicArn=ids["Topic"],
        Message='{"x": "1"}',
        MessageGroupId="g",
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "order"}},
    )
    received = sqs.receive_message(QueueUrl=ids["Queue"], MessageAttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in received] == ['{"x": "1"}']
    assert received[0]["MessageAttributes"]["kind"]["StringValue"] == "order"


def test_content_based_deduplication_of_the_topic_drops_a_republished_body(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    sns, sqs = clean_emulator.client("sns"), clean_emulator.client("sqs")
    for body in ("same", "same", "other"):
        sns.publish(TopicArn=ids["Topic"], Message=body, MessageGroupId="g")
    bodies = [
        m["Body"] for m in sqs.receive_message(QueueUrl=ids["Queue"], MaxNumberOfMessages=10)["Messages"]
    ]
    assert bodies == ["same", "other"]


def test_queue_and_topic_policies_are_set_and_removed_with_the_resource(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    policy = json.loads(queue_attributes(clean_emulator, ids["Queue"])["Policy"])
    assert policy["Statement"] == QUEUE_POLICY["Statement"]
    topic_policy = json.loads(
        clean_emulator.client("sns").get_topic_attributes(TopicArn=ids["Topic"])["Attributes"]["Policy"]
    )
    assert topic_policy["Statement"][0]["Sid"] == "deny-insecure"

    deploy(clean_emulator, _template(policy=False))
    assert "Policy" not in queue_attributes(clean_emulator, ids["Queue"])
    topic_policy = json.loads(
        clean_emulator.client("sns").get_topic_attributes(TopicArn=ids["Topic"])["Attributes"]["Policy"]
    )
    assert all(s.get("Sid") != "deny-insecure" for s in topic_policy["Statement"])


def test_redrive_policy_points_at_the_generated_fifo_dead_letter_queue(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    assert ids["DeadLetterQueue"].endswith(".fifo")
    dlq_arn = queue_attributes(clean_emulator, ids["DeadLetterQueue"])["QueueArn"]
    redrive = json.loads(queue_attributes(clean_emulator, ids["Queue"])["RedrivePolicy"])
    assert redrive == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}


def test_table_gets_time_to_live_and_point_in_time_recovery(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    dynamodb = clean_emulator.client("dynamodb")
    ttl = dynamodb.describe_time_to_live(TableName=ids["Table"])["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    backups = dynamodb.describe_continuous_backups(TableName=ids["Table"])["ContinuousBackupsDescription"]
    assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"


def test_update_changes_resources_in_place_and_keeps_the_subscription(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    dynamodb, sns = clean_emulator.client("dynamodb"), clean_emulator.client("sns")
    dynamodb.put_item(TableName=ids["Table"], Item={"pk": {"S": "kept"}, "sk": {"S": "1"}})

    updated = deploy(clean_emulator, _template(ttl_attribute=None, display_name="two", max_receive_count=7))

    assert updated == ids  # same physical resources: nothing replaced
    ttl = dynamodb.describe_time_to_live(TableName=ids["Table"])["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "DISABLED"  # the specification left the template
    assert dynamodb.get_item(TableName=ids["Table"], Key={"pk": {"S": "kept"}, "sk": {"S": "1"}})["Item"]
    assert json.loads(queue_attributes(clean_emulator, ids["Queue"])["RedrivePolicy"])["maxReceiveCount"] == 7
    assert "Policy" in queue_attributes(clean_emulator, ids["Queue"])  # the queue update kept the policy
    assert sns.get_topic_attributes(TopicArn=ids["Topic"])["Attributes"]["DisplayName"] == "two"
    assert [
        s["SubscriptionArn"] for s in sns.list_subscriptions_by_topic(TopicArn=ids["Topic"])["Subscriptions"]
    ] == [ids["Subscription"]]


@pytest.mark.parametrize("retain", [True, False], ids=["retained", "not-retained"])
def test_a_replaced_table_outlives_its_replacement_only_when_retained(
    clean_emulator: Emulator, retain: bool
) -> None:
    # A key-schema change replaces the table; with UpdateReplacePolicy Retain (CDK's RemovalPolicy.RETAIN)
    # CloudFormation leaves the old one, with its items, where it was.
    template = json.loads(_template())
    if retain:
        template["Resources"]["Table"].update(UpdateReplacePolicy="Retain", DeletionPolicy="Retain")
    ids = deploy(clean_emulator, json.dumps(template))
    dynamodb = clean_emulator.client("dynamodb")
    dynamodb.put_item(TableName=ids["Table"], Item={"pk": {"S": "kept"}, "sk": {"S": "1"}})

    table = template["Resources"]["Table"]["Properties"]
    table["KeySchema"][0]["AttributeName"] = table["AttributeDefinitions"][0]["AttributeName"] = "order_id"
    replaced = deploy(clean_emulator, json.dumps(template))

    assert replaced["Table"] != ids["Table"]
    tables = dynamodb.list_tables()["TableNames"]
    assert replaced["Table"] in tables
    if retain:
        assert ids["Table"] in tables
        (item,) = dynamodb.scan(TableName=ids["Table"])["Items"]
        assert item == {"pk": {"S": "kept"}, "sk": {"S": "1"}}
    else:
        assert ids["Table"] not in tables


def test_switching_raw_delivery_off_updates_the_subscription(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    deploy(clean_emulator, _template(raw=False))
    attributes = clean_emulator.client("sns").get_subscription_attributes(SubscriptionArn=ids["Subscription"])
    assert attributes["Attributes"]["RawMessageDelivery"] == "false"


def test_alarm_and_cdk_metadata_are_stack_resources(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    alarms = clean_emulator.client("cloudwatch").describe_alarms(AlarmNames=[ids["Alarm"]])["MetricAlarms"]
    assert [a["MetricName"] for a in alarms] == ["ApproximateNumberOfMessagesVisible"]
    assert alarms[0]["Dimensions"][0]["Value"].endswith(".fifo")
    outputs = clean_emulator.client("cloudformation").describe_stacks(StackName="Taught")["Stacks"][0][
        "Outputs"
    ]
    assert outputs[0]["OutputValue"] == alarms[0]["AlarmArn"]
    assert "Metadata" in ids


def test_deleting_the_stack_removes_every_taught_resource(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    clean_emulator.client("cloudformation").delete_stack(StackName="Taught")
    assert clean_emulator.client("sns").list_subscriptions()["Subscriptions"] == []
    assert clean_emulator.client("sqs").list_queues().get("QueueUrls", []) == []
    assert (
        clean_emulator.client("cloudwatch").describe_alarms(AlarmNames=[ids["Alarm"]])["MetricAlarms"] == []
    )
    assert clean_emulator.client("dynamodb").list_tables()["TableNames"] == []


def test_change_sets_are_looked_up_within_their_stack(clean_emulator: Emulator) -> None:
    cloudformation = clean_emulator.client("cloudformation")
    deploy(clean_emulator, _template(), stack="First")
    cloudformation.create_change_set(
        StackName="First",
        ChangeSetName="same-name",
        ChangeSetType="UPDATE",
        TemplateBody=_template(display_name="first"),
    )
    # Deleting a change set that does not exist succeeds, as in CloudFormation (the CDK CLI relies on it).
    cloudformation.delete_change_set(StackName="Second", ChangeSetName="same-name")
    with pytest.raises(ClientError) as missing:
        cloudformation.describe_change_set(StackName="Second", ChangeSetName="same-name")
    assert missing.value.response["Error"]["Code"] == "ChangeSetNotFound"
    assert (
        cloudformation.describe_change_set(StackName="First", ChangeSetName="same-name")["StackName"]
        == "First"
    )


def test_event_source_mapping_leaves_messages_for_the_runner(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    iam, lambda_ = clean_emulator.client("iam"), clean_emulator.client("lambda")
    role = iam.create_role(RoleName=f"r-{uuid.uuid4().hex[:6]}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lambda_.create_function(
        FunctionName="consumer",
        Runtime="python3.12",
        Role=role,
        Handler="h.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )
    queue_arn = queue_attributes(clean_emulator, ids["Queue"])["QueueArn"]
    lambda_.create_event_source_mapping(
        EventSourceArn=queue_arn,
        FunctionName="consumer",
        BatchSize=10,
        FunctionResponseTypes=["ReportBatchItemFailures"],
    )
    clean_emulator.client("sns").publish(TopicArn=ids["Topic"], Message="kept", MessageGroupId="g")
    attributes = queue_attributes(clean_emulator, ids["Queue"])
    assert attributes["ApproximateNumberOfMessages"] == "1"
    message = clean_emulator.client("sqs").receive_message(QueueUrl=ids["Queue"], AttributeNames=["All"])
    assert message["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "1"


def _changes(emulator: Emulator, stack: str, template: str) -> dict[str, dict[str, Any]]:
    cloudformation = emulator.client("cloudformation")
    name = f"change-{uuid.uuid4().hex[:8]}"
    cloudformation.create_change_set(
        StackName=stack, ChangeSetName=name, ChangeSetType="UPDATE", TemplateBody=template
    )
    described = cloudformation.describe_change_set(StackName=stack, ChangeSetName=name)
    return {c["ResourceChange"]["LogicalResourceId"]: c["ResourceChange"] for c in described["Changes"]}


def test_change_set_names_each_changed_property_and_whether_it_replaces(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _template())
    changes = _changes(clean_emulator, "Taught", _template(display_name="two", max_receive_count=7))

    assert set(changes) == {"Queue", "Topic"}
    queue, topic = changes["Queue"], changes["Topic"]
    assert (queue["Action"], queue["PhysicalResourceId"], queue["Replacement"], queue["Scope"]) == (
        "Modify",
        ids["Queue"],
        "False",
        ["Properties"],
    )
    # RedrivePolicy holds a Fn::GetAtt: CloudFormation evaluates it at deploy time ("Dynamic").
    assert queue["Details"] == [
        {
            "Target": {"Attribute": "Properties", "Name": "RedrivePolicy", "RequiresRecreation": "Never"},
            "Evaluation": "Dynamic",
            "ChangeSource": "DirectModification",
        }
    ]
    assert [(d["Target"]["Name"], d["Evaluation"]) for d in topic["Details"]] == [("DisplayName", "Static")]


def test_change_set_marks_a_replacing_property(clean_emulator: Emulator) -> None:
    deploy(clean_emulator, _template())
    changes = _changes(clean_emulator, "Taught", _template(topic_name="renamed-topic.fifo"))
    topic = changes["Topic"]
    assert topic["Replacement"] == "True"
    assert [(d["Target"]["Name"], d["Target"]["RequiresRecreation"]) for d in topic["Details"]] == [
        ("TopicName", "Always")
    ]


STANDARD_STACK = "a-stack-whose-name-is-long-enough-to-push-generated-queue-names-past-eighty"


def _standard_template() -> str:
    def queue(**properties: Any) -> dict[str, Any]:
        return {"Type": "AWS::SQS::Queue", "Properties": properties}

    resources = {
        "PipelineMessagingTopicWithAGeneratedName": {"Type": "AWS::SNS::Topic", "Properties": {}},
        "PipelineMessagingDeadLetterQueueWithAGeneratedName0123ABCD": queue(),
        "PipelineMessagingSubscriptionDeadLetterQueue4567CDEF": queue(),
        "PipelineMessagingQueueWithAGeneratedName89ABCDEF": queue(
            VisibilityTimeout=30,
            RedrivePolicy={
                "deadLetterTargetArn": {
                    "Fn::GetAtt": ["PipelineMessagingDeadLetterQueueWithAGeneratedName0123ABCD", "Arn"]
                },
                "maxReceiveCount": 3,
            },
        ),
        "PipelineMessagingFifoQueueWithAGeneratedName0123ABCD": queue(FifoQueue=True),
        "Subscription": subscription(
            "PipelineMessagingTopicWithAGeneratedName",
            "PipelineMessagingQueueWithAGeneratedName89ABCDEF",
            RawMessageDelivery=True,
            RedrivePolicy={
                "deadLetterTargetArn": {
                    "Fn::GetAtt": ["PipelineMessagingSubscriptionDeadLetterQueue4567CDEF", "Arn"]
                }
            },
        ),
    }
    return json.dumps({"Resources": resources})


def test_standard_queues_with_generated_names_deploy_and_deliver(clean_emulator: Emulator) -> None:
    ids = deploy(clean_emulator, _standard_template(), stack=STANDARD_STACK)
    sns, sqs = clean_emulator.client("sns"), clean_emulator.client("sqs")
    names = {logical: url.rsplit("/", 1)[-1] for logical, url in ids.items() if "Queue" in logical}

    assert all(len(name) <= 80 for name in names.values()), names
    fifo = names.pop("PipelineMessagingFifoQueueWithAGeneratedName0123ABCD")
    assert fifo.endswith(".fifo") and fifo.startswith(STANDARD_STACK[:20])
    assert not any(name.endswith(".fifo") for name in names.values())
    assert all(name.startswith(STANDARD_STACK[:20]) for name in names.values())
    topic = ids["PipelineMessagingTopicWithAGeneratedName"]
    attributes = sns.get_subscription_attributes(SubscriptionArn=ids["Subscription"])["Attributes"]
    dlq_arn = queue_attributes(clean_emulator, ids["PipelineMessagingSubscriptionDeadLetterQueue4567CDEF"])[
        "QueueArn"
    ]
    assert json.loads(attributes["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn}

    sns.publish(TopicArn=topic, Message="standard")
    queue = ids["PipelineMessagingQueueWithAGeneratedName89ABCDEF"]
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=queue)["Messages"]] == ["standard"]
