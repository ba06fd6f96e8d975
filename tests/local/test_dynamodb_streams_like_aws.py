"""DynamoDB Streams and stream event source mappings in the emulator behave as AWS documents them where
moto 5.2.5 does not (see idempotent_local.patches and idempotent_local.dynamodb_streams)."""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from idempotent_local.emulator import Emulator


def _table(emulator: Emulator, name: str = "orders", view: str | None = "NEW_AND_OLD_IMAGES") -> str:
    """A table (with a stream of ``view``); returns its latest stream ARN, or ``""``."""
    stream = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": view}} if view else {}
    described = emulator.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **stream,
    )["TableDescription"]
    return str(described.get("LatestStreamArn", ""))


def _function(emulator: Emulator, name: str = "relay") -> str:
    role = emulator.client("iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")
    return str(
        emulator.client("lambda").create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role["Role"]["Arn"],
            Handler="index.handler",
            Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
        )["FunctionArn"]
    )


def _read(emulator: Emulator, stream_arn: str) -> tuple[list[dict[str, Any]], bool]:
    """Every record of the stream's shard from its start, and whether the shard was read to its end (no
    next iterator)."""
    streams = emulator.client("dynamodbstreams")
    (shard,) = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    ).get("ShardIterator")
    records: list[dict[str, Any]] = []
    for _ in range(5):
        page = streams.get_records(ShardIterator=iterator)
        records += page["Records"]
        iterator = page.get("NextShardIterator")
        if iterator is None:
            return records, True
    return records, False


def _put(emulator: Emulator, table: str, *keys: str) -> None:
    for key in keys:
        emulator.client("dynamodb").put_item(TableName=table, Item={"pk": {"S": key}})


def test_a_stream_mapping_leaves_the_records_in_the_stream_for_the_runner(clean_emulator: Emulator) -> None:
    stream_arn = _table(clean_emulator)
    clean_emulator.client("lambda").create_event_source_mapping(
        EventSourceArn=stream_arn, FunctionName=_function(clean_emulator), StartingPosition="TRIM_HORIZON"
    )
    _put(clean_emulator, "orders", "o-1", "o-2")
    records, _ = _read(clean_emulator, stream_arn)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == ["o-1", "o-2"]
    sequence_numbers = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequence_numbers == sorted(set(sequence_numbers))


def test_disabling_a_stream_closes_it_and_enabling_it_again_makes_a_new_stream(
    clean_emulator: Emulator,
) -> None:
    dynamodb, streams = clean_emulator.client("dynamodb"), clean_emulator.client("dynamodbstreams")
    first = _table(clean_emulator, view="NEW_IMAGE")
    _put(clean_emulator, "orders", "before")
    dynamodb.update_table(TableName="orders", StreamSpecification={"StreamEnabled": False})
    _put(clean_emulator, "orders", "while-off")
    closed = streams.describe_stream(StreamArn=first)["StreamDescription"]
    assert closed["StreamStatus"] == "DISABLED"
    (shard,) = closed["Shards"]
    assert (
        shard["SequenceNumberRange"]["EndingSequenceNumber"]
        == shard["SequenceNumberRange"]["StartingSequenceNumber"]
    )  # its one record
    records, ended = _read(clean_emulator, first)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == ["before"]
    assert ended  # a closed shard read to its end: no next iterator
    assert dynamodb.describe_table(TableName="orders")["Table"]["LatestStreamArn"] == first

    dynamodb.update_table(
        TableName="orders", StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    )
    second = dynamodb.describe_table(TableName="orders")["Table"]["LatestStreamArn"]
    _put(clean_emulator, "orders", "after")
    assert second != first
    described = streams.describe_stream(StreamArn=second)["StreamDescription"]
    assert (described["StreamStatus"], described["StreamViewType"]) == ("ENABLED", "KEYS_ONLY")
    assert described["Shards"][0]["ShardId"] != shard["ShardId"]
    assert "EndingSequenceNumber" not in described["Shards"][0]["SequenceNumberRange"]
    records, ended = _read(clean_emulator, second)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == ["after"] and not ended
    assert "NewImage" not in records[0]["dynamodb"]  # KEYS_ONLY
    with pytest.raises(ClientError, match="ResourceInUseException"):
        dynamodb.update_table(
            TableName="orders", StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
        )


def test_each_table_has_its_own_shard_and_stream_records_say_version_1_1(clean_emulator: Emulator) -> None:
    streams = clean_emulator.client("dynamodbstreams")
    shards = {
        streams.describe_stream(StreamArn=_table(clean_emulator, name))["StreamDescription"]["Shards"][0][
            "ShardId"
        ]
        for name in ("one", "two")
    }
    assert len(shards) == 2
    _put(clean_emulator, "one", "k")
    (record,), _ = _read(clean_emulator, streams.list_streams(TableName="one")["Streams"][0]["StreamArn"])
    assert (record["eventVersion"], record["awsRegion"]) == ("1.1", "us-east-1")


def test_a_filter_pattern_lambda_refuses_is_refused_and_an_empty_filter_removes_it(
    clean_emulator: Emulator,
) -> None:
    lambda_ = clean_emulator.client("lambda")
    stream_arn, function = _table(clean_emulator), _function(clean_emulator)

    def criteria(*patterns: Any) -> dict[str, Any]:
        return {"Filters": [{"Pattern": p if isinstance(p, str) else json.dumps(p)} for p in patterns]}

    for invalid in ('{"eventName": "INSERT"}', "not json", {"dynamodb": {"Keys": [{"wildcard": "a*"}]}}):
        with pytest.raises(ClientError, match=r"InvalidParameterValueException.*Invalid filter pattern"):
            lambda_.create_event_source_mapping(
                EventSourceArn=stream_arn,
                FunctionName=function,
                StartingPosition="LATEST",
                FilterCriteria=criteria(invalid),
            )
    assert lambda_.list_event_source_mappings()["EventSourceMappings"] == []
    uuid = lambda_.create_event_source_mapping(
        EventSourceArn=stream_arn,
        FunctionName=function,
        StartingPosition="LATEST",
        FilterCriteria=criteria({"eventName": ["INSERT"]}),
    )["UUID"]
    with pytest.raises(ClientError, match="Invalid filter pattern"):
        lambda_.update_event_source_mapping(UUID=uuid, FilterCriteria=criteria({"eventName": []}))
    assert lambda_.get_event_source_mapping(UUID=uuid)["FilterCriteria"] == criteria(
        {"eventName": ["INSERT"]}
    )
    lambda_.update_event_source_mapping(UUID=uuid, FilterCriteria={})
    assert "FilterCriteria" not in lambda_.get_event_source_mapping(UUID=uuid)


@pytest.fixture
def eastern_time() -> Iterator[None]:
    """This process in New York's time zone (moto reads UTC wall time as local time)."""
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if previous is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = previous
    time.tzset()


def test_a_mappings_last_modified_is_when_it_was_created_or_updated_in_any_time_zone(
    eastern_time: None,
) -> None:
    from idempotent_local import patches

    with mock_aws():
        patches.apply()
        queue = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="q")["QueueUrl"]
        arn = boto3.client("sqs", region_name="us-east-1").get_queue_attributes(
            QueueUrl=queue, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lambda_ = boto3.client("lambda", region_name="us-east-1")
        lambda_.create_function(
            FunctionName="f", Runtime="python3.12", Role=role, Handler="i.h", Code={"ZipFile": b"x"}
        )
        before = datetime.datetime.now(datetime.UTC)
        created = lambda_.create_event_source_mapping(EventSourceArn=arn, FunctionName="f")
        time.sleep(0.05)
        updated = lambda_.update_event_source_mapping(UUID=created["UUID"], BatchSize=5)
    assert abs((created["LastModified"] - before).total_seconds()) < 2
    assert updated["LastModified"] > created["LastModified"]
