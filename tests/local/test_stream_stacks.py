"""A table with a stream and a filtered stream event source mapping, deployed and updated from hand-written
templates as CloudFormation does it, and read back through the APIs."""

from __future__ import annotations

import json
from typing import Any

from stack_helpers import deploy, failure_reasons, physical_ids, status

from idempotent_local.emulator import Emulator
from idempotent_local.stacks import deployed_stacks
from tests.local.moto_type_templates import ROLE, function

OUTBOX_ONLY = json.dumps({"dynamodb": {"NewImage": {"kind": {"S": ["outbox"]}}}})
MAPPING = {
    "EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]},
    "FunctionName": {"Ref": "Function"},
    "StartingPosition": "TRIM_HORIZON",
    "BatchSize": 25,
    "MaximumBatchingWindowInSeconds": 1,
    "FilterCriteria": {"Filters": [{"Pattern": OUTBOX_ONLY}]},
    "FunctionResponseTypes": ["ReportBatchItemFailures"],
    "MaximumRetryAttempts": 2,
    "MaximumRecordAgeInSeconds": 3600,
    "BisectBatchOnFunctionError": True,
    "ParallelizationFactor": 1,
    "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["OnFailure", "Arn"]}}},
}


def _template(
    view: str | None = "NEW_AND_OLD_IMAGES", mapping: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A table (with a stream of ``view``), a function, a queue for failed batches and, unless ``mapping``
    is ``{}``, a stream mapping with ``mapping``'s properties (default: :data:`MAPPING`)."""
    table: dict[str, Any] = {
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
    }
    if view:
        table["StreamSpecification"] = {"StreamViewType": view}
    resources: dict[str, Any] = {
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": table},
        "OnFailure": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Role": ROLE,
        "Function": function(),
    }
    outputs = {}
    if mapping != {}:
        resources["Mapping"] = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": mapping or MAPPING}
        outputs["StreamArn"] = {"Value": {"Fn::GetAtt": ["Table", "StreamArn"]}}
    return {"Resources": resources, "Outputs": outputs}


def _stream(emulator: Emulator, table: str) -> str:
    return str(
        emulator.client("dynamodb").describe_table(TableName=table)["Table"].get("LatestStreamArn", "")
    )


def _stream_status(emulator: Emulator, arn: str) -> str:
    described = emulator.client("dynamodbstreams").describe_stream(StreamArn=arn)["StreamDescription"]
    return str(described["StreamStatus"])


def _mapping(emulator: Emulator) -> dict[str, Any]:
    (mapping,) = emulator.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    return dict(mapping)


def test_a_table_stream_and_its_filtered_mapping_deploy_and_read_back_through_the_apis(
    clean_emulator: Emulator,
) -> None:
    ids = deploy(clean_emulator, _template())
    assert status(clean_emulator) == "CREATE_COMPLETE"
    stream_arn = _stream(clean_emulator, ids["Table"])
    listed = _mapping(clean_emulator)
    got = clean_emulator.client("lambda").get_event_source_mapping(UUID=ids["Mapping"])
    got.pop("ResponseMetadata")
    assert got == listed
    on_failure = clean_emulator.client("sqs").get_queue_attributes(
        QueueUrl=ids["OnFailure"], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    expected = {name: value for name, value in MAPPING.items() if name != "FunctionName"} | {
        "EventSourceArn": stream_arn,
        "DestinationConfig": {"OnFailure": {"Destination": on_failure}},
    }
    assert {name: listed[name] for name in expected} == expected
    assert listed["UUID"] == ids["Mapping"] and listed["State"] == "Enabled"
    assert listed["FunctionArn"].endswith(f":function:{ids['Function']}")
    described = clean_emulator.client("cloudformation").describe_stacks(StackName="Taught")["Stacks"][0]
    assert described["Outputs"][0]["OutputValue"] == stream_arn
    assert _stream_status(clean_emulator, stream_arn) == "ENABLED"
    (stack,) = deployed_stacks(clean_emulator)
    assert stack.problems() == []
    # The mapping leaves what the table writes in the stream, for the event-source runner.
    clean_emulator.client("dynamodb").put_item(
        TableName=ids["Table"], Item={"pk": {"S": "m-1"}, "kind": {"S": "outbox"}}
    )
    streams = clean_emulator.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )
    assert len(streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]) == 1


def test_turning_the_stream_off_and_on_gives_a_new_stream_that_the_mapping_follows(
    clean_emulator: Emulator,
) -> None:
    table = deploy(clean_emulator, _template("NEW_IMAGE"))["Table"]
    first = _stream(clean_emulator, table)
    deploy(clean_emulator, _template(None, mapping={}))
    assert status(clean_emulator) == "UPDATE_COMPLETE"
    assert _stream_status(clean_emulator, first) == "DISABLED"
    assert clean_emulator.client("lambda").list_event_source_mappings()["EventSourceMappings"] == []

    deploy(clean_emulator, _template("NEW_IMAGE"))
    second = _stream(clean_emulator, table)
    assert second != first and _stream_status(clean_emulator, second) == "ENABLED"
    assert _mapping(clean_emulator)["EventSourceArn"] == second

    # Another view type: DynamoDB cannot change an enabled stream's, so the stream is replaced, and the
    # mapping reading its StreamArn is replaced with it (EventSourceArn requires replacement).
    before = _mapping(clean_emulator)["UUID"]
    deploy(clean_emulator, _template("NEW_AND_OLD_IMAGES"))
    third = _stream(clean_emulator, table)
    assert status(clean_emulator) == "UPDATE_COMPLETE"
    assert third not in (first, second) and _stream_status(clean_emulator, second) == "DISABLED"
    mapping = _mapping(clean_emulator)
    assert mapping["EventSourceArn"] == third and mapping["UUID"] != before
    assert physical_ids(clean_emulator)["Mapping"] == mapping["UUID"]

    # Turning the stream off under a mapping that still reads it fails, and rolls back.
    deploy(clean_emulator, _template(None))
    assert status(clean_emulator) == "UPDATE_ROLLBACK_COMPLETE"
    assert "StreamArn" in failure_reasons(clean_emulator)["Mapping"]


def test_a_property_dropped_from_a_mapping_goes_back_to_lambdas_default(clean_emulator: Emulator) -> None:
    deploy(clean_emulator, _template())
    kept = {
        name: MAPPING[name] for name in ("EventSourceArn", "FunctionName", "StartingPosition", "BatchSize")
    }
    deploy(clean_emulator, _template(mapping=kept))
    mapping = _mapping(clean_emulator)
    assert status(clean_emulator) == "UPDATE_COMPLETE"
    for dropped in set(MAPPING) - set(kept):
        assert dropped not in mapping, dropped
    assert mapping["BatchSize"] == 25 and mapping["StartingPosition"] == "TRIM_HORIZON"


def test_a_filter_pattern_lambda_refuses_fails_the_deploy(clean_emulator: Emulator) -> None:
    refused = {**MAPPING, "FilterCriteria": {"Filters": [{"Pattern": '{"eventName": "INSERT"}'}]}}
    cloudformation = clean_emulator.client("cloudformation")
    cloudformation.create_change_set(  # as the CDK CLI deploys
        StackName="Taught", ChangeSetName="c", ChangeSetType="CREATE", TemplateBody=json.dumps(_template())
    )
    cloudformation.execute_change_set(StackName="Taught", ChangeSetName="c")
    cloudformation.create_change_set(
        StackName="Taught",
        ChangeSetName="refused",
        ChangeSetType="UPDATE",
        TemplateBody=json.dumps(_template(mapping=refused)),
    )
    cloudformation.execute_change_set(StackName="Taught", ChangeSetName="refused")
    assert status(clean_emulator) == "UPDATE_ROLLBACK_COMPLETE"
    assert "Invalid filter pattern" in failure_reasons(clean_emulator)["Mapping"]
    assert _mapping(clean_emulator)["FilterCriteria"] == MAPPING["FilterCriteria"]
