"""The outbox benchmark counts what it says: the outbox's write units, the relay's requests."""

from __future__ import annotations

import threading

import boto3
import pytest
from botocore.exceptions import ClientError

from benchmarks import outbox_bench, run
from benchmarks.instruments import ContendedStubber
from benchmarks.report import Target


def test_emitting_costs_two_write_units_and_a_tenth_of_a_publish_per_message_and_no_relay_read(
    monkeypatch,
):
    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
    ):
        monkeypatch.setenv(name, value)
    cost = outbox_bench.measure()
    assert (cost.emitted, cost.published) == (100, 100)  # every emitted message published, once
    assert cost.outbox_write_units == 200  # one Put of under 1 KB per message: 2 transactional units
    assert cost.transaction_write_units == 400  # the processor's Put and the marker, as without emitting
    assert (cost.relay_publish_requests, cost.relay_dynamodb_requests) == (10, 0)
    # One downstream group is one partition key: about 1,000 write units a second, 2 per emit.
    assert outbox_bench.lane_ceiling(cost) == 500


# --- the contention row and its DynamoDB model ----------------------------------------------------------


def _transaction(client, *pks: str) -> dict:
    entries = [{"Put": {"TableName": "t", "Item": {"pk": {"S": pk}, "sk": {"S": "s"}}}} for pk in pks]
    return client.transact_write_items(TransactItems=entries)


def test_the_dynamodb_model_cancels_a_transaction_on_an_item_another_transaction_is_writing(monkeypatch):
    """What moto never does: while one transaction is in flight, a second touching one of its items is
    cancelled with TransactionConflict at that entry, a single write to it is refused; other items and, once
    the first has answered, the same item are written."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    holding, release = threading.Event(), threading.Event()
    caller = threading.current_thread()

    def round_trip(seconds: float) -> None:
        if threading.current_thread() is not caller and not release.is_set():
            holding.set()
            release.wait(10)

    stub = ContendedStubber(client, {"transact_write_items": {}, "put_item": {}}, 0.001, sleep=round_trip)
    stub.activate()
    in_flight = threading.Thread(target=_transaction, args=(client, "a", "b"))
    in_flight.start()
    assert holding.wait(10)
    with pytest.raises(ClientError) as cancelled:
        _transaction(client, "c", "b")
    error = cancelled.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    assert [reason["Code"] for reason in error["CancellationReasons"]] == ["None", "TransactionConflict"]
    with pytest.raises(ClientError, match="TransactionConflictException"):
        client.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "s"}})
    _transaction(client, "c", "d")  # no item in common: written while the other is in flight
    release.set()
    in_flight.join(10)
    _transaction(client, "a", "b")  # the first has answered: its items are free again
    assert stub.calls["TransactWriteItems"] == 3
    assert stub.conflicts == 2


def test_emits_of_ten_source_groups_to_one_downstream_group_commit_without_a_conflict(monkeypatch):
    """The contention row, small: every commit to one hot downstream group writes its own outbox item, so
    none is cancelled and every message commits on its first delivery, as with ten downstream groups
    (0.3's one item per group: about 1.5 conflicts per commit, every batch delivered again)."""
    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
    ):
        monkeypatch.setenv(name, value)
    settings = run.Settings(quick=True)
    metric = run.outbox_contention(settings)
    rounds, batches = settings.latency_repeats, 5
    every = rounds * batches * outbox_bench.SOURCE_GROUPS
    assert metric.extra["commits"] == {"one_downstream_group": every, "ten_downstream_groups": every}
    assert metric.extra["transaction_conflicts"] == {"one_downstream_group": 0, "ten_downstream_groups": 0}
    assert metric.extra["deliveries"] == {
        "one_downstream_group": rounds * batches,
        "ten_downstream_groups": rounds * batches,
    }
    assert metric.ours is not None and metric.reference is not None
    assert metric.target is not None and metric.target.at_least


def test_a_throughput_target_is_a_floor():
    floor = Target("ratio", 0.5, "at least half", at_least=True)
    assert [floor.met(None, ratio) for ratio in (0.49, 0.5, 3.0)] == [False, True, True]
