"""A stack changed the way CloudFormation changes it: one update after another, read back through the APIs.

Each test deploys a sequence of hand-written templates (as a user iterating on an app deploys one
``-c`` option after another) and checks the resources themselves.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from stack_helpers import deploy, failure_reasons, physical_ids, queue_attributes, status

from idempotent_cli.main import main as cli_main
from idempotent_local.emulator import Emulator
from idempotent_local.stacks import deployed_stacks
from tests.local.moto_type_templates import ROLE, function, subscription

KEY_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "kms:*", "Resource": "*"}],
}
RETAINED = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}


def _queue(**properties: Any) -> dict[str, Any]:
    return {"Type": "AWS::SQS::Queue", "Properties": properties}


def _table(**properties: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::DynamoDB::Table",
        "Properties": {
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            **properties,
        },
    }


def _pipeline(*, fifo: bool = True, topic: bool = True) -> dict[str, Any]:
    """A queue, its retained DLQ and an event source mapping; with ``topic``, a topic subscribed to the
    queue with a retained subscription DLQ. FIFO as the reference stack makes it: the topic named
    explicitly (CDK names a FIFO topic), the queues with generated names."""
    fifo_queue = {"FifoQueue": True, "ContentBasedDeduplication": True} if fifo else {}
    resources: dict[str, Any] = {
        "DeadLetterQueue": {**_queue(**fifo_queue), **RETAINED},
        "Queue": _queue(
            **fifo_queue,
            RedrivePolicy={
                "deadLetterTargetArn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]},
                "maxReceiveCount": 3,
            },
        ),
        "Role": ROLE,
        "Function": function(),
        "Mapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]},
                "FunctionName": {"Ref": "Function"},
            },
        },
    }
    if topic:
        resources["Topic"] = {
            "Type": "AWS::SNS::Topic",
            "Properties": {
                "FifoTopic": True,
                "ContentBasedDeduplication": True,
                "TopicName": "Pipeline-Topic.fifo",
            }
            if fifo
            else {},
        }
        resources["SubscriptionDeadLetterQueue"] = {**_queue(**fifo_queue), **RETAINED}
        resources["Subscription"] = subscription(
            "Topic",
            "Queue",
            RawMessageDelivery=True,
            RedrivePolicy={"deadLetterTargetArn": {"Fn::GetAtt": ["SubscriptionDeadLetterQueue", "Arn"]}},
        )
    outputs = {"QueueUrl": {"Value": {"Ref": "Queue"}}}
    if topic:
        outputs["TopicArn"] = {"Value": {"Ref": "Topic"}}
    return {"Resources": resources, "Outputs": outputs}


def _outputs(emulator: Emulator, stack: str = "Taught") -> dict[str, str]:
    described = emulator.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def _publish_and_receive(emulator: Emulator, topic_arn: str, queue_url: str, fifo: bool = True) -> list[str]:
    group = {"MessageGroupId": "g"} if fifo else {}
    emulator.client("sns").publish(TopicArn=topic_arn, Message="through the topic", **group)
    received = emulator.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
    return [m["Body"] for m in received.get("Messages", [])]


def _queue_exists(emulator: Emulator, url: str) -> bool:
    return url.rsplit("/", 1)[-1] in [
        u.rsplit("/", 1)[-1] for u in emulator.client("sqs").list_queues().get("QueueUrls", [])
    ]


def test_a_topic_or_dashboard_dropped_by_one_update_and_added_back_by_the_next_exists_again(
    clean_emulator: Emulator,
) -> None:
    with_both = _pipeline()
    with_both["Resources"]["Dashboard"] = {
        "Type": "AWS::CloudWatch::Dashboard",
        "Properties": {"DashboardBody": json.dumps({"widgets": []})},
    }
    deploy(clean_emulator, with_both)
    deploy(clean_emulator, _pipeline(topic=False))
    assert clean_emulator.client("sns").list_topics()["Topics"] == []
    assert clean_emulator.client("cloudwatch").list_dashboards()["DashboardEntries"] == []

    ids = deploy(clean_emulator, with_both)

    assert status(clean_emulator) == "UPDATE_COMPLETE"
    outputs = _outputs(clean_emulator)
    sns = clean_emulator.client("sns")
    topic = sns.get_topic_attributes(TopicArn=outputs["TopicArn"])["Attributes"]
    assert topic["TopicArn"] == outputs["TopicArn"]
    attributes = sns.get_subscription_attributes(SubscriptionArn=ids["Subscription"])["Attributes"]
    assert attributes["TopicArn"] == outputs["TopicArn"]
    assert _queue_exists(clean_emulator, ids["SubscriptionDeadLetterQueue"])
    published = _publish_and_receive(clean_emulator, outputs["TopicArn"], outputs["QueueUrl"])
    assert published == ["through the topic"]
    dashboards = clean_emulator.client("cloudwatch").list_dashboards()["DashboardEntries"]
    assert [d["DashboardName"] for d in dashboards] == [ids["Dashboard"]]


def test_an_update_that_drops_retained_resources_keeps_them_and_their_data(clean_emulator: Emulator) -> None:
    template = _pipeline()
    template["Resources"]["Key"] = {
        "Type": "AWS::KMS::Key",
        "Properties": {"KeyPolicy": KEY_POLICY},
        **RETAINED,
    }
    template["Resources"]["Table"] = {**_table(), **RETAINED}
    ids = deploy(clean_emulator, template)
    sqs, dynamodb = clean_emulator.client("sqs"), clean_emulator.client("dynamodb")
    sqs.send_message(
        QueueUrl=ids["SubscriptionDeadLetterQueue"], MessageBody="a dead letter", MessageGroupId="g"
    )
    dynamodb.put_item(TableName=ids["Table"], Item={"pk": {"S": "kept"}})

    deploy(clean_emulator, _pipeline(topic=False))  # drops the topic, its DLQ, the key and the table

    assert status(clean_emulator) == "UPDATE_COMPLETE"
    assert not {"SubscriptionDeadLetterQueue", "Key", "Table", "Topic"} & set(physical_ids(clean_emulator))
    letters = sqs.receive_message(QueueUrl=ids["SubscriptionDeadLetterQueue"])["Messages"]
    assert [m["Body"] for m in letters] == ["a dead letter"]
    key = clean_emulator.client("kms").describe_key(KeyId=ids["Key"])["KeyMetadata"]
    assert (key["KeyState"], key["Enabled"]) == ("Enabled", True)
    assert dynamodb.get_item(TableName=ids["Table"], Key={"pk": {"S": "kept"}})["Item"] == {
        "pk": {"S": "kept"}
    }
    # What no policy retains goes: the topic and its subscription.
    assert clean_emulator.client("sns").list_topics()["Topics"] == []
    assert clean_emulator.client("sns").list_subscriptions()["Subscriptions"] == []


def test_a_property_dropped_from_the_template_goes_back_to_its_default(clean_emulator: Emulator) -> None:
    key = {"Fn::GetAtt": ["Key", "Arn"]}
    keyed = {
        "Resources": {
            "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": KEY_POLICY}, **RETAINED},
            "Queue": _queue(
                FifoQueue=True,
                DeduplicationScope="messageGroup",
                FifoThroughputLimit="perMessageGroupId",
                KmsMasterKeyId=key,
                VisibilityTimeout=180,
            ),
            "Topic": {
                "Type": "AWS::SNS::Topic",
                "Properties": {"KmsMasterKeyId": key, "DisplayName": "orders"},
            },
            "Table": _table(SSESpecification={"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": key}),
        }
    }
    ids = deploy(clean_emulator, keyed)
    dynamodb = clean_emulator.client("dynamodb")
    assert "SSEDescription" in dynamodb.describe_table(TableName=ids["Table"])["Table"]

    plain = {
        "Resources": {
            "Queue": _queue(FifoQueue=True),
            "Topic": {"Type": "AWS::SNS::Topic", "Properties": {}},
            "Table": _table(),
        }
    }
    assert deploy(clean_emulator, plain)["Queue"] == ids["Queue"]  # updated in place

    queue = queue_attributes(clean_emulator, ids["Queue"])
    assert (queue["DeduplicationScope"], queue["FifoThroughputLimit"]) == ("queue", "perQueue")
    assert queue["VisibilityTimeout"] == "30"
    assert "KmsMasterKeyId" not in queue and queue["SqsManagedSseEnabled"] == "true"
    topic = clean_emulator.client("sns").get_topic_attributes(TopicArn=ids["Topic"])["Attributes"]
    assert "KmsMasterKeyId" not in topic and topic["DisplayName"] == ""
    assert "SSEDescription" not in dynamodb.describe_table(TableName=ids["Table"])["Table"]


def test_moving_time_to_live_to_another_attribute_rolls_the_update_back(clean_emulator: Emulator) -> None:
    def template(ttl_attribute: str, visibility: int) -> dict[str, Any]:
        return {
            "Resources": {
                "Queue": _queue(VisibilityTimeout=visibility),
                "Table": _table(TimeToLiveSpecification={"AttributeName": ttl_attribute, "Enabled": True}),
            }
        }

    ids = deploy(clean_emulator, template("expires_at", 30))
    deploy(clean_emulator, template("gone_at", 60))

    assert status(clean_emulator) == "UPDATE_ROLLBACK_COMPLETE"
    assert "TimeToLive is active on a different AttributeName" in failure_reasons(clean_emulator)["Table"]
    ttl = clean_emulator.client("dynamodb").describe_time_to_live(TableName=ids["Table"])[
        "TimeToLiveDescription"
    ]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    assert queue_attributes(clean_emulator, ids["Queue"])["VisibilityTimeout"] == "30"  # rolled back too
    template_body = clean_emulator.client("cloudformation").get_template(StackName="Taught")["TemplateBody"]
    assert template_body == template("expires_at", 30)  # the stack keeps its previous template


def test_switching_fifo_off_replaces_topic_and_queues_under_new_names_and_rewires_what_uses_them(
    clean_emulator: Emulator,
) -> None:
    before = deploy(clean_emulator, _pipeline(fifo=True))
    after = deploy(clean_emulator, _pipeline(fifo=False))

    assert status(clean_emulator) == "UPDATE_COMPLETE"
    outputs = _outputs(clean_emulator)
    for logical in ("Topic", "Queue", "DeadLetterQueue", "SubscriptionDeadLetterQueue"):
        assert after[logical] != before[logical] and not after[logical].endswith(".fifo"), logical
    assert (outputs["TopicArn"], outputs["QueueUrl"]) == (after["Topic"], after["Queue"])
    # The subscription and the event source mapping follow the replacements.
    assert _publish_and_receive(clean_emulator, after["Topic"], after["Queue"], fifo=False) == [
        "through the topic"
    ]
    (mapping,) = clean_emulator.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    assert mapping["EventSourceArn"] == queue_attributes(clean_emulator, after["Queue"])["QueueArn"]
    redrive = json.loads(queue_attributes(clean_emulator, after["Queue"])["RedrivePolicy"])
    assert (
        redrive["deadLetterTargetArn"]
        == queue_attributes(clean_emulator, after["DeadLetterQueue"])["QueueArn"]
    )
    # The old queue and topic are gone; the old dead-letter queues stay (UpdateReplacePolicy: Retain).
    assert not _queue_exists(clean_emulator, before["Queue"])
    assert [t["TopicArn"] for t in clean_emulator.client("sns").list_topics()["Topics"]] == [after["Topic"]]
    assert _queue_exists(clean_emulator, before["DeadLetterQueue"])
    assert _queue_exists(clean_emulator, before["SubscriptionDeadLetterQueue"])


def test_a_failed_update_puts_back_what_it_had_created_replaced_and_updated(clean_emulator: Emulator) -> None:
    first = _pipeline()
    first["Resources"]["Table"] = {**_table(TableName="orders"), **RETAINED}
    before = deploy(clean_emulator, first)
    clean_emulator.client("dynamodb").put_item(TableName="orders", Item={"pk": {"S": "kept"}})

    second = _pipeline(fifo=False)  # replaces the topic and the queues, updates the mapping...
    second["Resources"]["Extra"] = _queue()  # ... adds a queue ...
    second["Resources"]["Table"] = copy.deepcopy(
        first["Resources"]["Table"]
    )  # ... and replaces a named table
    table = second["Resources"]["Table"]["Properties"]
    table["KeySchema"][0]["AttributeName"] = table["AttributeDefinitions"][0]["AttributeName"] = "order_id"
    deploy(clean_emulator, second)

    assert status(clean_emulator) == "UPDATE_ROLLBACK_COMPLETE"
    assert failure_reasons(clean_emulator)["Table"] == (
        "CloudFormation cannot update a stack when a custom-named resource requires replacing. "
        "Rename orders and update the stack again."
    )
    assert physical_ids(clean_emulator) == before
    # Of what the update had created, only the replacement dead-letter queues stay (UpdateReplacePolicy:
    # Retain keeps them out of the stack, as in AWS); the new queue, topic and "Extra" are gone.
    names = {u.rsplit("/", 1)[-1] for u in clean_emulator.client("sqs").list_queues()["QueueUrls"]}
    kept = {before[k].rsplit("/", 1)[-1] for k in ("Queue", "DeadLetterQueue", "SubscriptionDeadLetterQueue")}
    assert kept <= names
    orphans = sorted(name.split("-")[1] for name in names - kept)
    assert orphans == ["DeadLetterQueue", "SubscriptionDeadLetterQueue"]
    assert [t["TopicArn"] for t in clean_emulator.client("sns").list_topics()["Topics"]] == [before["Topic"]]
    described = clean_emulator.client("dynamodb").describe_table(TableName="orders")["Table"]
    assert described["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert clean_emulator.client("dynamodb").scan(TableName="orders")["Count"] == 1
    outputs = _outputs(clean_emulator)
    assert _publish_and_receive(clean_emulator, outputs["TopicArn"], outputs["QueueUrl"]) == [
        "through the topic"
    ]
    (mapping,) = clean_emulator.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    assert mapping["EventSourceArn"] == queue_attributes(clean_emulator, before["Queue"])["QueueArn"]


def test_a_failed_change_set_rolls_back_and_a_failed_creation_leaves_nothing(
    clean_emulator: Emulator,
) -> None:
    cloudformation = clean_emulator.client("cloudformation")
    named = {"Resources": {"Queue": _queue(), "Table": _table(TableName="named")}}
    rekeyed = {
        "Resources": {
            "Queue": _queue(),
            "Other": _queue(QueueName="other"),
            "Table": _table(TableName="named"),
        }
    }
    table = rekeyed["Resources"]["Table"]["Properties"]
    table["KeySchema"][0]["AttributeName"] = table["AttributeDefinitions"][0]["AttributeName"] = "id"
    for kind, template in (("CREATE", named), ("UPDATE", rekeyed)):
        cloudformation.create_change_set(
            StackName="Changed",
            ChangeSetName=f"c-{kind.lower()}",
            ChangeSetType=kind,
            TemplateBody=json.dumps(template),
        )
        cloudformation.execute_change_set(StackName="Changed", ChangeSetName=f"c-{kind.lower()}")
    assert status(clean_emulator, "Changed") == "UPDATE_ROLLBACK_COMPLETE"
    described = cloudformation.describe_change_set(StackName="Changed", ChangeSetName="c-update")
    assert described["ExecutionStatus"] == "EXECUTE_FAILED"
    assert "custom-named resource" in failure_reasons(clean_emulator, "Changed")["Table"]
    assert "other" not in str(clean_emulator.client("sqs").list_queues().get("QueueUrls"))

    # A change set that creates a stack and fails leaves no resource behind (ROLLBACK_COMPLETE).
    broken = {
        "Resources": {
            "Queue": _queue(QueueName="made-first"),
            "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"FifoTopic": True, "TopicName": "not-fifo"}},
        }
    }
    cloudformation.create_change_set(
        StackName="Broken", ChangeSetName="c", ChangeSetType="CREATE", TemplateBody=json.dumps(broken)
    )
    cloudformation.execute_change_set(StackName="Broken", ChangeSetName="c")
    assert status(clean_emulator, "Broken") == "ROLLBACK_COMPLETE"
    assert "Fifo Topic names must end with .fifo" in failure_reasons(clean_emulator, "Broken")["Topic"]
    assert "made-first" not in str(clean_emulator.client("sqs").list_queues().get("QueueUrls"))


@pytest.mark.parametrize(
    ("resource", "attribute"),
    [("Queue", "Nope"), ("Topic", "Arn"), ("Table", "TableName"), ("Subscription", "Arn")],
)
def test_a_template_reading_an_attribute_its_type_lacks_is_refused_and_every_stack_still_answers(
    clean_emulator: Emulator, resource: str, attribute: str
) -> None:
    cloudformation = clean_emulator.client("cloudformation")
    deploy(clean_emulator, _pipeline(), stack="Good")
    template = _pipeline()
    template["Resources"]["Table"] = _table()
    template["Outputs"]["Bad"] = {"Value": {"Fn::GetAtt": [resource, attribute]}}

    with pytest.raises(ClientError) as refused:
        cloudformation.create_stack(StackName="Bad", TemplateBody=json.dumps(template))

    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert refused.value.response["Error"]["Message"] == (
        f"Template error: resource {resource} does not support attribute type {attribute} in Fn::GetAtt"
    )
    assert [s["StackName"] for s in cloudformation.describe_stacks()["Stacks"]] == ["Good"]
    with pytest.raises(ClientError, match="does not support attribute type"):
        cloudformation.update_stack(StackName="Good", TemplateBody=json.dumps(template))
    assert status(clean_emulator, "Good") == "CREATE_COMPLETE"


def test_every_attribute_aws_has_for_queue_topic_and_table_resolves(clean_emulator: Emulator) -> None:
    def get_att(logical: str, attribute: str) -> dict[str, Any]:
        return {"Value": {"Fn::GetAtt": [logical, attribute]}}

    template = {
        "Resources": {
            "Queue": _queue(),
            "Topic": {"Type": "AWS::SNS::Topic", "Properties": {}},
            "Table": _table(StreamSpecification={"StreamViewType": "NEW_IMAGE"}),
        },
        "Outputs": {
            "QueueArn": get_att("Queue", "Arn"),
            "QueueName": get_att("Queue", "QueueName"),
            "QueueUrl": get_att("Queue", "QueueUrl"),
            "TopicArn": get_att("Topic", "TopicArn"),
            "TopicName": get_att("Topic", "TopicName"),
            "TableArn": get_att("Table", "Arn"),
            "StreamArn": get_att("Table", "StreamArn"),
        },
    }
    ids = deploy(clean_emulator, template)
    outputs = _outputs(clean_emulator)
    table = clean_emulator.client("dynamodb").describe_table(TableName=ids["Table"])["Table"]
    assert outputs == {
        "QueueArn": queue_attributes(clean_emulator, ids["Queue"])["QueueArn"],
        "QueueName": ids["Queue"].rsplit("/", 1)[-1],
        "QueueUrl": ids["Queue"],
        "TopicArn": ids["Topic"],
        "TopicName": ids["Topic"].rsplit(":", 1)[-1],
        "TableArn": table["TableArn"],
        "StreamArn": table["LatestStreamArn"],
    }


def test_a_change_to_the_inline_subscriptions_of_a_topic_updates_it_in_place(
    clean_emulator: Emulator,
) -> None:
    def template(*queues: str) -> dict[str, Any]:
        subscriptions = [{"Protocol": "sqs", "Endpoint": {"Fn::GetAtt": [q, "Arn"]}} for q in queues]
        return {
            "Resources": {
                "First": _queue(),
                "Second": _queue(),
                "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"Subscription": subscriptions}},
            }
        }

    ids = deploy(clean_emulator, template("First"))
    assert deploy(clean_emulator, template("Second"))["Topic"] == ids["Topic"]

    subscribed = clean_emulator.client("sns").list_subscriptions_by_topic(TopicArn=ids["Topic"])[
        "Subscriptions"
    ]
    assert [s["Endpoint"] for s in subscribed] == [
        queue_attributes(clean_emulator, ids["Second"])["QueueArn"]
    ]


def test_a_resource_the_stack_lists_but_the_emulator_lacks_is_named_by_status_and_run(
    clean_emulator: Emulator, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = deploy(clean_emulator, _pipeline(topic=False))
    queue_arn = queue_attributes(clean_emulator, ids["Queue"])["QueueArn"]
    clean_emulator.client("sqs").delete_queue(QueueUrl=ids["Queue"])  # behind the stack's back

    (stack,) = deployed_stacks(clean_emulator)

    queue, mapping = ids["Queue"], ids["Mapping"]
    assert stack.problems() == [
        f"Queue (AWS::SQS::Queue) is in the stack as {queue}, but {queue} does not exist in the emulator",
        f"Mapping (AWS::Lambda::EventSourceMapping) is in the stack as {mapping}, but the queue it reads, "
        f"{queue_arn}, does not exist in the emulator",
    ]
    where = ["--state-dir", str(state_dir)]
    assert cli_main(["local", "status", *where]) == 1
    assert f"! Queue (AWS::SQS::Queue) is in the stack as {ids['Queue']}" in capsys.readouterr().out
    assert cli_main(["local", "run", *where]) == 1
    assert "an event source mapping reads a queue that does not exist" in capsys.readouterr().err


def test_an_update_of_what_the_emulator_does_not_model_is_noted_on_the_stack(
    clean_emulator: Emulator,
) -> None:
    def template(ttl: bool, retention: int, keyed: bool) -> dict[str, Any]:
        key = {"KmsMasterKeyId": {"Fn::GetAtt": ["Key", "Arn"]}} if keyed else {}
        spec = {"TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True}} if ttl else {}
        return {
            "Resources": {
                "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": KEY_POLICY}},
                "Table": _table(**spec),
                "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": retention}},
                "First": _queue(**key),
                "Second": _queue(**key),
            }
        }

    deploy(clean_emulator, template(ttl=False, retention=7, keyed=False))
    deploy(clean_emulator, template(ttl=True, retention=14, keyed=True))

    (stack,) = deployed_stacks(clean_emulator)
    assert stack.notes == [
        "Table (AWS::DynamoDB::Table): AWS allows about one TimeToLive change per table an hour: another "
        "change within the hour fails there (the emulator does not limit it)",
        "Logs (AWS::Logs::LogGroup): the emulator cannot update AWS::Logs::LogGroup: it kept its properties",
        "First, Second (AWS::SQS::Queue): the emulator neither encrypts with a KMS key nor applies its key "
        "policy: a key that keeps SNS out loses messages only in AWS",
    ]
    deploy(clean_emulator, template(ttl=True, retention=14, keyed=False))  # dropping the key needs no note
    (stack,) = deployed_stacks(clean_emulator)
    assert stack.notes == []


def _change_set(emulator: Emulator, stack: str, name: str, template: dict[str, Any], kind: str) -> None:
    cloudformation = emulator.client("cloudformation")
    cloudformation.create_change_set(
        StackName=stack, ChangeSetName=name, ChangeSetType=kind, TemplateBody=json.dumps(template)
    )
    cloudformation.execute_change_set(StackName=stack, ChangeSetName=name)


def _operations(emulator: Emulator, stack: str) -> list[list[tuple[str, str, str]]]:
    """The stack's events grouped by OperationId, newest operation first: (logical id, status, reason)."""
    events = emulator.client("cloudformation").describe_stack_events(StackName=stack)["StackEvents"]
    grouped: dict[str, list[tuple[str, str, str]]] = {}
    for event in events:  # newest first
        row = (event["LogicalResourceId"], event["ResourceStatus"], event.get("ResourceStatusReason", ""))
        grouped.setdefault(event.get("OperationId", "none"), []).append(row)
    return list(grouped.values())


def test_an_update_through_a_change_set_is_user_initiated_and_reports_each_resource(
    clean_emulator: Emulator,
) -> None:
    created = {"Resources": {"Queue": _queue(), "Dropped": _queue()}}
    updated = {"Resources": {"Queue": _queue(VisibilityTimeout=60), "Added": _queue()}}
    _change_set(clean_emulator, "Evented", "create", created, "CREATE")
    _change_set(clean_emulator, "Evented", "update", updated, "UPDATE")

    operations = _operations(clean_emulator, "Evented")
    assert len(operations) == 3, operations  # review, create, update: each its own OperationId
    update, create, review = operations
    assert list(reversed(update)) == [
        ("Evented", "UPDATE_IN_PROGRESS", "User Initiated"),
        ("Queue", "UPDATE_IN_PROGRESS", ""),
        ("Queue", "UPDATE_COMPLETE", ""),
        ("Added", "CREATE_IN_PROGRESS", ""),
        ("Added", "CREATE_COMPLETE", ""),
        ("Dropped", "DELETE_IN_PROGRESS", ""),
        ("Dropped", "DELETE_COMPLETE", ""),
        ("Evented", "UPDATE_COMPLETE", ""),
    ]
    assert create[-1] == ("Evented", "CREATE_IN_PROGRESS", "User Initiated")
    assert {("Queue", "CREATE_COMPLETE", ""), ("Dropped", "CREATE_COMPLETE", "")} <= set(create)
    assert review == [("Evented", "REVIEW_IN_PROGRESS", "User Initiated")]


def test_a_failed_update_holds_only_its_own_failure_in_the_operations_the_cdk_cli_reads(
    clean_emulator: Emulator,
) -> None:
    def template(ttl_attribute: str, key: str = "pk") -> dict[str, Any]:
        table = _table(
            TableName="named", TimeToLiveSpecification={"AttributeName": ttl_attribute, "Enabled": True}
        )
        table["Properties"]["KeySchema"][0]["AttributeName"] = key
        table["Properties"]["AttributeDefinitions"][0]["AttributeName"] = key
        return {"Resources": {"Table": table, "Queue": _queue()}}

    _change_set(clean_emulator, "Failing", "create", template("expires_at"), "CREATE")
    _change_set(clean_emulator, "Failing", "first", template("ttl_one"), "UPDATE")  # refused: TTL moves
    _change_set(clean_emulator, "Failing", "second", template("expires_at", key="id"), "UPDATE")  # named

    # The CDK CLI reports the newest operation, and the one before it when the newest is a rollback.
    operations = _operations(clean_emulator, "Failing")
    assert len(operations) == 6, operations  # review, create, then each update and its rollback
    rollback, update, *earlier = operations
    assert [status for _, status, _ in rollback] == [
        "UPDATE_ROLLBACK_COMPLETE",
        "UPDATE_ROLLBACK_IN_PROGRESS",
    ]
    failures = [(logical, reason) for logical, status, reason in update if status.endswith("_FAILED")]
    assert len(failures) == 1 and "custom-named resource" in failures[0][1], update
    assert any("TimeToLive is active" in reason for operation in earlier for _, _, reason in operation)


def test_a_state_machine_keeps_the_templates_logging_and_tracing_configurations(
    clean_emulator: Emulator,
) -> None:
    role = {
        "Type": "AWS::IAM::Role",
        "Properties": {"AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []}},
    }
    logging = {
        "Level": "ALL",
        "IncludeExecutionData": True,
        "Destinations": [{"CloudWatchLogsLogGroup": {"LogGroupArn": {"Fn::GetAtt": ["Logs", "Arn"]}}}],
    }

    def template(configured: bool) -> dict[str, Any]:
        machine: dict[str, Any] = {
            "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
            "DefinitionString": '{"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}}',
        }
        if configured:
            machine |= {"LoggingConfiguration": logging, "TracingConfiguration": {"Enabled": True}}
        return {
            "Resources": {
                "Role": role,
                "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {}},
                "Machine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": machine},
            }
        }

    ids = deploy(clean_emulator, template(configured=True))
    stepfunctions = clean_emulator.client("stepfunctions")
    described = stepfunctions.describe_state_machine(stateMachineArn=ids["Machine"])
    log_group = f"arn:aws:logs:us-east-1:000000000000:log-group:{ids['Logs']}"  # its Fn::GetAtt Arn here
    assert described["loggingConfiguration"] == {
        "level": "ALL",
        "includeExecutionData": True,
        "destinations": [{"cloudWatchLogsLogGroup": {"logGroupArn": log_group}}],
    }
    assert described["tracingConfiguration"] == {"enabled": True}

    deploy(clean_emulator, template(configured=False))  # an update that drops them: the defaults again
    described = stepfunctions.describe_state_machine(stateMachineArn=ids["Machine"])
    assert described["loggingConfiguration"] == {"level": "OFF", "includeExecutionData": False}
    assert described["tracingConfiguration"] == {"enabled": False}


def test_a_template_whose_resources_depend_on_each_other_in_a_cycle_is_refused(
    clean_emulator: Emulator,
) -> None:
    cloudformation = clean_emulator.client("cloudformation")
    redrive = {"deadLetterTargetArn": {"Fn::GetAtt": ["First", "Arn"]}, "maxReceiveCount": 3}
    template = {
        "Resources": {
            "Alone": _queue(),
            "First": {**_queue(), "DependsOn": "Second"},
            "Second": _queue(RedrivePolicy=redrive),
        }
    }

    with pytest.raises(ClientError) as refused:
        cloudformation.create_stack(StackName="Cycle", TemplateBody=json.dumps(template))

    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert refused.value.response["Error"]["Message"] == (
        "Circular dependency between resources: [First, Second]"
    )
    assert cloudformation.describe_stacks()["Stacks"] == []
    assert clean_emulator.client("sqs").list_queues().get("QueueUrls", []) == []
