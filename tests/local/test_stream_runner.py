"""The event-source runner on DynamoDB stream mappings: a table with a stream, a mapping (filtered, with
retries, bisection and an on-failure destination) and a function deployed as a code zip, all created in the
emulator; the runner reads the shard, filters, invokes, checkpoints, retries and discards as Lambda does."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from idempotent_local.emulator import Emulator
from idempotent_local.events import lambda_dynamodb_event, stream_invocation_record
from idempotent_local.runner import RunnerError
from tests.local.stream_helpers import OUTBOX_ONLY, deploy, map_stream

# --- the event and the invocation record ------------------------------------------------------------------


def test_lambda_dynamodb_event_has_the_shape_lambda_delivers() -> None:
    arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-11-26T06:19:57.424"
    created = datetime.datetime(2026, 11, 26, 6, 20, 1, 750000, tzinfo=datetime.UTC)
    record = {
        "eventID": "e-1",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "eu-west-1",
        "dynamodb": {
            "ApproximateCreationDateTime": created,
            "Keys": {"pk": {"S": "o-1"}},
            "OldImage": {"pk": {"S": "o-1"}, "blob": {"B": b"\x00\x01"}, "n": {"N": "5"}},
            "SequenceNumber": "111",
            "SizeBytes": 26,
            "StreamViewType": "OLD_IMAGE",
        },
        "userIdentity": {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"},
    }
    (event,) = lambda_dynamodb_event([record], arn)["Records"]
    assert event == {
        "eventID": "e-1",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "eu-west-1",
        "dynamodb": {
            "ApproximateCreationDateTime": int(created.timestamp()),  # whole seconds
            "Keys": {"pk": {"S": "o-1"}},
            "OldImage": {
                "pk": {"S": "o-1"},
                "blob": {"B": base64.b64encode(b"\x00\x01").decode()},
                "n": {"N": "5"},
            },
            "SequenceNumber": "111",
            "SizeBytes": 26,
            "StreamViewType": "OLD_IMAGE",
        },
        "eventSourceARN": arn,
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},  # a TTL deletion
    }
    json.dumps(event)  # what the function receives is JSON


def test_the_invocation_record_names_the_discarded_batchs_place_in_the_stream() -> None:
    arn = "arn:aws:dynamodb:us-east-1:000000000000:table/outbox/stream/2026-11-26T06:19:57.424"
    records = [
        {"eventSourceARN": arn, "dynamodb": {"SequenceNumber": s, "ApproximateCreationDateTime": t}}
        for s, t in (("110", 1_795_673_997), ("112", 1_795_674_001))
    ]
    record = stream_invocation_record(
        records,
        shard_id="shardId-00000001795673997424-704993fb",
        condition="RetryAttemptsExhausted",
        function_arn="arn:aws:lambda:us-east-1:000000000000:function:relay",
        invocations=3,
        request_id="r-3",
        function_error="Unhandled",
        at=datetime.datetime(2026, 11, 26, 6, 21, 0, 123000, tzinfo=datetime.UTC),
    )
    assert record == {
        "requestContext": {
            "requestId": "r-3",
            "functionArn": "arn:aws:lambda:us-east-1:000000000000:function:relay",
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": 3,
        },
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": "2026-11-26T06:21:00.123Z",
        "DDBStreamBatchInfo": {
            "shardId": "shardId-00000001795673997424-704993fb",
            "startSequenceNumber": "110",
            "endSequenceNumber": "112",
            "approximateArrivalOfFirstRecord": "2026-11-26T06:19:57Z",
            "approximateArrivalOfLastRecord": "2026-11-26T06:20:01Z",
            "batchSize": 2,
            "streamArn": arn,
        },
    }


# --- reading, filtering, checkpointing ---------------------------------------------------------------------


def test_stream_mappings_are_read_back_from_the_emulator(clean_emulator: Emulator, tmp_path: Path) -> None:
    deployed = deploy(
        clean_emulator,
        tmp_path / "out",
        FilterCriteria={"Filters": [{"Pattern": OUTBOX_ONLY}]},
        MaximumRetryAttempts=2,
        MaximumRecordAgeInSeconds=600,
        BisectBatchOnFunctionError=True,
        MaximumBatchingWindowInSeconds=1,
        ParallelizationFactor=4,
    )
    with deployed.runner() as runner:
        mapping = deployed.mapping(runner)
    assert (mapping.stream_arn, mapping.batch_size, mapping.starting_position) == (
        deployed.stream_arn,
        10,
        "TRIM_HORIZON",
    )
    assert mapping.filters == (OUTBOX_ONLY,) and mapping.report_batch_item_failures and mapping.bisect
    assert (mapping.maximum_retry_attempts, mapping.maximum_record_age, mapping.batching_window) == (
        2,
        600,
        1,
    )
    assert mapping.on_failure == "arn:aws:sqs:us-east-1:000000000000:stream-failures"
    assert abs(mapping.created - time.time()) < 30
    assert mapping.describe() == (
        f"{deployed.stream_arn} -> relay (batch 10, from TRIM_HORIZON, 1 filter, parallelization factor 4 "
        "run as 1)"
    )


def test_only_matching_records_reach_the_function_in_sequence_order_and_the_rest_are_read_past(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(
        clean_emulator, tmp_path / "out", BatchSize=3, FilterCriteria={"Filters": [{"Pattern": OUTBOX_ONLY}]}
    )
    for n in range(7):
        deployed.put(f"m-{n}", kind="outbox" if n % 2 == 0 else "order")  # m-0, m-2, m-4, m-6 match
    deployed.put("m-0", kind="order")  # a MODIFY that no longer matches
    with deployed.runner() as runner:
        stats = runner.drain(timeout=60)
        mapping = deployed.mapping(runner)
        assert runner.backlog(mapping) == 0
    assert deployed.invocations() == [["m-0", "m-2", "m-4"], ["m-6"]]  # BatchSize 3, in sequence order
    (first, *_), _ = deployed.events()[0]["records"], None
    assert first["eventName"] == "INSERT" and first["eventSourceARN"] == deployed.stream_arn
    assert first["dynamodb"]["NewImage"]["kind"] == {"S": "outbox"}
    assert (stats.delivered, stats.filtered, stats.invocations) == (4, 4, 2)
    # The checkpoint is past the last record, the filtered-out MODIFY included: a new runner (a second
    # `local run`) delivers nothing again.
    records = clean_emulator.client("dynamodbstreams").get_records(
        ShardIterator=clean_emulator.client("dynamodbstreams").get_shard_iterator(
            StreamArn=deployed.stream_arn, ShardId=deployed.shard_id(), ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
    )["Records"]
    saved = json.loads((Path(clean_emulator.state_dir) / "stream-checkpoints.json").read_text())
    assert saved[mapping.uuid] == {
        deployed.shard_id(): ["AFTER_SEQUENCE_NUMBER", records[-1]["dynamodb"]["SequenceNumber"]]
    }
    with deployed.runner() as again:
        assert again.drain(timeout=30).invocations == 0
    assert len(deployed.invocations()) == 2


def test_a_latest_mapping_starts_with_the_records_written_after_it(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", mapping=False)
    deployed.put("before")
    time.sleep(0.05)
    map_stream(deployed, StartingPosition="LATEST")
    deployed.put("after")
    with deployed.runner() as runner:
        runner.drain(timeout=60)
    assert deployed.invocations() == [["after"]]


def test_the_batching_window_gathers_records_written_apart_into_one_batch(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", MaximumBatchingWindowInSeconds=1)
    deployed.put("first")
    with deployed.runner() as runner:
        mapping = deployed.mapping(runner)
        assert runner.poll(mapping, wait_seconds=0) == 0  # the window is open: nothing invoked yet
        deployed.put("second")
        runner.drain(timeout=60)
    assert deployed.invocations() == [["first", "second"]]


# --- failures: partial, whole, bisected, too old ----------------------------------------------------------


def test_reported_item_failures_move_the_checkpoint_to_the_lowest_and_retry_from_it(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out")
    deployed.put("a")
    deployed.put("b", mode="fail-once")
    deployed.put("c")
    lines: list[str] = []
    with deployed.runner(report=lines.append) as runner:
        stats = runner.drain(timeout=60)
    assert deployed.invocations() == [["a", "b", "c"], ["b", "c"]]  # the retry starts at b
    assert stats.totals()["succeeded"] == 3 and stats.totals()["failed"] == 0
    sequence = [r["dynamodb"]["SequenceNumber"] for r in deployed.events()[0]["records"]]
    shard = deployed.shard_id()
    assert lines[0] == (
        f"relay: 3 records (shard {shard}, {sequence[0]}-{sequence[2]}) -> 1 failed, 2 succeeded; retrying 2 "
        f"records from {sequence[1]} (retry 1 of unlimited) | run total, every function: 3 stream records: "
        "0 processed, 0 duplicate, 0 quarantined, 1 failed, 2 succeeded"
    )
    assert lines[1].startswith(
        f"relay: 2 records (shard {shard}, {sequence[1]}-{sequence[2]}) -> 2 succeeded |"
    )
    assert deployed.on_failure() == []


def test_an_error_retries_the_whole_batch_then_sends_its_place_to_the_on_failure_queue_and_moves_on(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", MaximumRetryAttempts=2)
    deployed.put("a")
    deployed.put("poison", mode="raise")
    lines: list[str] = []
    with deployed.runner(report=lines.append) as runner:
        runner.drain(timeout=60)
        deployed.put("later")
        stats = runner.drain(timeout=60)
    assert deployed.invocations() == [["a", "poison"]] * 3 + [["later"]]  # the first try and 2 retries
    events = deployed.events()
    (record,) = deployed.on_failure()
    sequence = [r["dynamodb"]["SequenceNumber"] for r in events[0]["records"]]
    assert record["requestContext"] | {"functionArn": None} == {
        "requestId": events[2]["request_id"],  # the last invocation's
        "functionArn": None,
        "condition": "RetryAttemptsExhausted",
        "approximateInvokeCount": 3,
    }
    assert record["responseContext"]["functionError"] == "Unhandled"
    info = record["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (*sequence, 2)
    assert (info["shardId"], info["streamArn"]) == (deployed.shard_id(), deployed.stream_arn)
    assert lines[2].endswith(
        "2 failed: the function raised RuntimeError: poison poison; 2 records discarded "
        "(MaximumRetryAttempts 2 reached), invocation record sent to "
        "arn:aws:sqs:us-east-1:000000000000:stream-failures"
        " | run total, every function: 2 stream records: 0 processed, 0 duplicate, 0 quarantined, 2 failed"
    )
    assert stats.summary().startswith(
        "3 stream records: 0 processed, 0 duplicate, 0 quarantined, 2 failed, 1 succeeded; 7 deliveries in "
        "4 invocations; of the 2 failed, 2 were discarded by their stream mapping"
    )


def test_bisecting_a_failing_batch_isolates_the_poison_record(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(
        clean_emulator, tmp_path / "out", BisectBatchOnFunctionError=True, MaximumRetryAttempts=4
    )
    for key in ("a", "b", "c"):
        deployed.put(key)
    deployed.put("poison", mode="raise")
    with deployed.runner() as runner:
        runner.drain(timeout=60)
    # Halves carry the batch's invocations: [a b c p] fails (1), [a b] (2), [c p] fails (2), [c] (3), then
    # [p] alone (3, 4, 5: retries 2 to 4), and is discarded.
    assert deployed.invocations() == [
        ["a", "b", "c", "poison"],
        ["a", "b"],
        ["c", "poison"],
        ["c"],
        ["poison"],
        ["poison"],
        ["poison"],
    ]
    (record,) = deployed.on_failure()
    info = record["DDBStreamBatchInfo"]
    poison = deployed.events()[0]["records"][3]["dynamodb"]["SequenceNumber"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (poison, poison, 1)
    assert record["requestContext"]["approximateInvokeCount"] == 5


def test_records_older_than_the_maximum_record_age_are_discarded_to_a_topic_without_an_invocation(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    sns, sqs = clean_emulator.client("sns"), clean_emulator.client("sqs")
    topic = sns.create_topic(Name="stream-failures")["TopicArn"]
    deployed = deploy(clean_emulator, tmp_path / "out", mapping=False)
    queue_arn = sqs.get_queue_attributes(QueueUrl=deployed.on_failure_url, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true"},
    )
    map_stream(
        deployed, MaximumRecordAgeInSeconds=60, DestinationConfig={"OnFailure": {"Destination": topic}}
    )
    deployed.put("a")
    deployed.put("b")
    an_hour_later = lambda: time.time() + 3600  # noqa: E731
    with deployed.runner(clock=an_hour_later) as runner:
        stats = runner.drain(timeout=60)
    assert deployed.invocations() == []
    (record,) = deployed.on_failure()
    assert record["requestContext"]["condition"] == "RecordAgeExceeded"
    assert record["requestContext"]["approximateInvokeCount"] == 0 and "responseContext" not in record
    assert record["DDBStreamBatchInfo"]["batchSize"] == 2
    assert stats.invocations == 0 and stats.totals()["failed"] == 2 and len(stats.discarded) == 2


def test_a_function_that_cannot_start_leaves_the_stream_unread(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(clean_emulator, tmp_path / "out", 'raise RuntimeError("OUTBOX_TOPIC is required")\n')
    deployed.put("a")
    with deployed.runner() as runner:
        mapping = deployed.mapping(runner)
        for _ in range(2):
            with pytest.raises(RunnerError, match="cold start: RuntimeError: OUTBOX_TOPIC"):
                runner.poll(mapping, wait_seconds=0)
        assert runner.backlog(mapping) == 1
        assert runner.checkpoints.get(mapping.uuid, deployed.shard_id()) is None


def test_local_run_drain_reads_every_stream_to_its_end_and_says_so(
    clean_emulator: Emulator, tmp_path: Path
) -> None:
    deployed = deploy(
        clean_emulator, tmp_path / "out", FilterCriteria={"Filters": [{"Pattern": OUTBOX_ONLY}]}
    )
    deployed.put("m-1")
    deployed.put("o-1", kind="order")
    command = [sys.executable, "-m", "idempotent_local", "run", "--state-dir", clean_emulator.state_dir]
    drained = subprocess.run(
        [*command, "--drain", "--retry-delay", "0"], capture_output=True, text=True, timeout=300
    )
    assert drained.returncode == 0, drained.stdout + drained.stderr
    lines = drained.stdout.strip().splitlines()
    assert lines[0].endswith("until every queue is empty and every stream is read to its end")
    assert lines[1] == f"    {deployed.stream_arn} -> relay (batch 10, from TRIM_HORIZON, 1 filter)"
    assert lines[-1] == (
        "1 stream record: 0 processed, 0 duplicate, 0 quarantined, 0 failed, 1 succeeded; 1 delivery in "
        "1 invocation; 1 stream record matched no filter (never delivered)"
    )
    deployed.put("m-2", mode="raise")
    clean_emulator.client("lambda").update_event_source_mapping(
        UUID=clean_emulator.client("lambda").list_event_source_mappings()["EventSourceMappings"][0]["UUID"],
        MaximumRetryAttempts=0,
    )
    failing = subprocess.run(
        [*command, "--drain", "--retry-delay", "0"], capture_output=True, text=True, timeout=300
    )
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "1 were discarded by their stream mapping" in failing.stdout.strip().splitlines()[-1]
    assert deployed.invocations() == [["m-1"], ["m-2"]]
