"""DynamoDB Streams keep records 24 hours, and a closed stream 24 hours, as in AWS; a test makes time pass
with the streams' clock (``local age-streams``, the control API ``streams/clock``), and a stream mapping
gives up what left the stream before it was delivered as Lambda does: to its on-failure destination, with
the batch's place in the stream (``DDBStreamBatchInfo``)."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from idempotent_cli.main import main as cli_main
from idempotent_local.emulator import Emulator
from tests.local.stream_helpers import Deployed, deploy

DAY = 24 * 3600


def _records(emulator: Emulator, stream_arn: str, **where: Any) -> list[str]:
    """The keys of the records a reader gets from the stream's shard (from its trim horizon by default)."""
    streams = emulator.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard, **(where or {"ShardIteratorType": "TRIM_HORIZON"})
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    return [r["dynamodb"]["Keys"]["pk"]["S"] for r in records]


def _sequence_numbers(emulator: Emulator, stream_arn: str) -> list[str]:
    streams = emulator.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    return [r["dynamodb"]["SequenceNumber"] for r in records]


def test_a_record_leaves_its_stream_24_hours_after_it_was_written(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", mapping=False)
    deployed.put("old")
    (old,) = _sequence_numbers(clean_emulator, deployed.stream_arn)
    clean_emulator.control.clock(DAY - 60)
    deployed.put("new")
    assert _records(clean_emulator, deployed.stream_arn) == ["old", "new"]  # 23 h 59 min: still held

    clean_emulator.control.clock(60)

    assert _records(clean_emulator, deployed.stream_arn) == ["new"]  # TRIM_HORIZON: the oldest still held
    with pytest.raises(ClientError, match="TrimmedDataAccessException"):
        _records(
            clean_emulator,
            deployed.stream_arn,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=old,
        )
    clean_emulator.control.clock(DAY)
    assert _records(clean_emulator, deployed.stream_arn) == []


def test_an_iterator_that_waits_while_its_record_expires_is_refused(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", mapping=False)
    deployed.put("a")
    streams = clean_emulator.client("dynamodbstreams")
    shard = deployed.shard_id()
    iterator = streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    clean_emulator.control.clock(DAY)
    with pytest.raises(ClientError, match="TrimmedDataAccessException"):
        streams.get_records(ShardIterator=iterator)


def test_a_stream_replaced_by_a_new_view_type_stays_listed_and_readable_for_24_hours(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", mapping=False)
    deployed.put("before")
    dynamodb, streams = clean_emulator.client("dynamodb"), clean_emulator.client("dynamodbstreams")
    dynamodb.update_table(TableName=deployed.table, StreamSpecification={"StreamEnabled": False})
    new_arn = dynamodb.update_table(
        TableName=deployed.table, StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    )["TableDescription"]["LatestStreamArn"]

    listed = {s["StreamArn"] for s in streams.list_streams(TableName=deployed.table)["Streams"]}
    assert listed == {deployed.stream_arn, new_arn}
    old = streams.describe_stream(StreamArn=deployed.stream_arn)["StreamDescription"]
    assert old["StreamStatus"] == "DISABLED"
    assert _records(clean_emulator, deployed.stream_arn) == ["before"]  # a relay can still drain it

    clean_emulator.control.clock(DAY)

    assert [s["StreamArn"] for s in streams.list_streams()["Streams"]] == [new_arn]
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        streams.describe_stream(StreamArn=deployed.stream_arn)


def test_the_streams_clock_refuses_to_go_back(clean_emulator: Emulator) -> None:
    from idempotent_local.control import ControlError

    assert clean_emulator.control.clock(3600)["offset_seconds"] == 3600
    with pytest.raises(ControlError, match="a clock does not go back"):
        clean_emulator.control.clock(-1)
    assert clean_emulator.control.clock()["offset_seconds"] == 3600
    clean_emulator.reset()
    assert clean_emulator.control.clock()["offset_seconds"] == 0  # a reset forgets it with the streams


def _drain(emulator: Emulator) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "idempotent_local", "run", "--state-dir", emulator.state_dir]
    return subprocess.run(
        [*command, "--drain", "--retry-delay", "0"], capture_output=True, text=True, timeout=300
    )


def _arrival(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(int(seconds), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_records_that_expire_before_local_run_delivers_them_are_given_up_in_batches_with_their_place(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", BatchSize=2)
    for key in ("a", "b", "c"):  # written while nothing polls the stream (a relay outage)
        deployed.put(key)
    written = clean_emulator.client("dynamodbstreams")
    sequence = _sequence_numbers(clean_emulator, deployed.stream_arn)
    times = [r["dynamodb"]["ApproximateCreationDateTime"].timestamp() for r in _raw(written, deployed)]
    assert cli_main(["local", "age-streams", "25h", "--state-dir", clean_emulator.state_dir]) == 0
    deployed.put("after")

    drained = _drain(clean_emulator)

    assert drained.returncode == 1, drained.stdout + drained.stderr  # records were given up
    assert deployed.invocations() == [["after"]], drained.stdout + drained.stderr  # the expired: never
    first, second = sorted(
        deployed.on_failure(), key=lambda r: r["DDBStreamBatchInfo"]["startSequenceNumber"]
    )
    assert [r["requestContext"]["condition"] for r in (first, second)] == ["RecordAgeExceeded"] * 2
    assert [r["requestContext"]["approximateInvokeCount"] for r in (first, second)] == [0, 0]
    assert first["DDBStreamBatchInfo"] == {
        "shardId": deployed.shard_id(),
        "startSequenceNumber": sequence[0],
        "endSequenceNumber": sequence[1],
        "approximateArrivalOfFirstRecord": _arrival(times[0]),  # when they were written, not aged
        "approximateArrivalOfLastRecord": _arrival(times[1]),
        "batchSize": 2,  # the mapping's BatchSize
        "streamArn": deployed.stream_arn,
    }
    assert (
        second["DDBStreamBatchInfo"]["startSequenceNumber"],
        second["DDBStreamBatchInfo"]["batchSize"],
    ) == (
        sequence[2],
        1,
    )
    assert "3 were discarded by their stream mapping" in drained.stdout.strip().splitlines()[-1]


def _raw(streams: Any, deployed: Deployed) -> list[dict[str, Any]]:
    shard = deployed.shard_id()
    iterator = streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    return list(streams.get_records(ShardIterator=iterator)["Records"])


def test_a_batch_retried_until_its_records_expire_is_given_up_with_its_invocations(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out")  # MaximumRetryAttempts -1: until the records expire
    deployed.put("poison", mode="raise")
    with deployed.runner() as runner:
        mapping = deployed.mapping(runner)
        for _ in range(3):
            runner.poll(mapping, wait_seconds=0)
        clean_emulator.control.clock(DAY)
        deployed.put("later")
        stats = runner.drain(timeout=60)

    assert deployed.invocations() == [["poison"]] * 3 + [["later"]]
    (record,) = deployed.on_failure()
    assert record["requestContext"]["condition"] == "RecordAgeExceeded"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1
    assert stats.totals()["failed"] == 1 and len(stats.discarded) == 1
