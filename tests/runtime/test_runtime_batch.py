"""Batches: FIFO groups in order and concurrently; a failure fails exactly the rest of its group."""

from __future__ import annotations

import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from idempotent_runtime import PermanentError, TransientError
from runtime_helpers import dlq_details, drain, event, failures, record, record_logs, scan


def test_failure_fails_later_records_of_its_group_only(make_handler, dynamodb):
    def fail_marked(message):
        if message.data.get("fail"):
            raise TransientError("downstream busy")
        return None

    handler, _ = make_handler(fn=fail_marked)
    a1 = record({"x": "a1", "y": "1"}, group="A")
    a2 = record({"x": "a2", "y": "1", "fail": True}, group="A")
    b1 = record({"x": "b1", "y": "1"}, group="B")
    a3 = record({"x": "a3", "y": "1"}, group="A")
    b2 = record({"x": "b2", "y": "1"}, group="B")
    response = handler(event(a1, a2, b1, a3, b2), None)
    assert failures(response) == [a2["messageId"], a3["messageId"]]
    assert sorted(i["pk"]["S"] for i in scan(dynamodb)) == ["a1", "b1", "b2"]


def test_standard_queue_records_are_independent(make_handler, dynamodb):
    def fail_marked(message):
        if message.data.get("fail"):
            raise TransientError("downstream busy")
        return None

    handler, _ = make_handler(fn=fail_marked)
    bad = record({"x": "k1", "y": "1", "fail": True}, group=None)
    good = [record({"x": f"k{i}", "y": "1"}, group=None) for i in range(2, 5)]
    assert failures(handler(event(bad, *good), None)) == [bad["messageId"]]
    assert len(scan(dynamodb)) == 3


def test_groups_of_a_batch_run_concurrently_each_in_order(make_handler):
    # Group A's first record waits until group B has started: only concurrent groups get past it.
    b_started = threading.Event()
    order: dict[str, list[str]] = {"A": [], "B": []}
    threads: set[str] = set()

    def processor(message):
        threads.add(threading.current_thread().name)
        if message.group_id == "B":
            b_started.set()
        elif not order["A"]:
            assert b_started.wait(10), "group B never started while group A was running"
        order[message.group_id].append(message.data["x"])
        return None

    handler, _ = make_handler(fn=processor)
    records = [record({"x": f"a{i}", "y": "1"}, group="A") for i in range(3)]
    records += [record({"x": f"b{i}", "y": "1"}, group="B") for i in range(3)]
    assert failures(handler(event(*records), None)) == []
    assert order == {"A": ["a0", "a1", "a2"], "B": ["b0", "b1", "b2"]}
    assert len(threads) == 2


def test_single_worker_processes_groups_one_after_another(make_handler):
    seen = []
    handler, _ = make_handler(fn=lambda m: seen.append(m.data["x"]), max_workers=1)
    records = [record({"x": f"k{i}", "y": "1"}, group=f"g{i % 2}") for i in range(4)]
    assert failures(handler(event(*records), None)) == []
    assert seen == ["k0", "k2", "k1", "k3"]  # group g0, then group g1


def test_empty_batch_returns_no_failures(make_handler):
    handler, _ = make_handler()
    assert handler({"Records": []}, None) == {"batchItemFailures": []}


# A record's fate in the property below: ok, transient failure, or permanent failure.
FATES = st.sampled_from(["ok", "ok", "transient", "permanent"])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=st.lists(st.tuples(st.sampled_from(["g0", "g1", "g2", None]), FATES), min_size=1, max_size=10),
    with_dlq=st.booleans(),
)
def test_reported_failures_are_the_failing_record_and_later_records_of_its_group(
    make_handler, dlq_url, sqs, dynamodb, batch, with_dlq
):
    def processor(message):
        fate = message.data["fate"]
        if fate == "transient":
            raise TransientError("try again")
        if fate == "permanent":
            raise PermanentError("never")
        return None

    handler, stream = make_handler(fn=processor, dlq_url=dlq_url if with_dlq else None)
    run = uuid.uuid4().hex
    records = [
        record({"x": f"{run}-{i}", "y": "1", "fate": fate}, group=group)
        for i, (group, fate) in enumerate(batch)
    ]
    expected = []
    blocked: set[str] = set()
    for rec, (group, fate) in zip(records, batch, strict=True):
        fails = fate == "transient" or (fate == "permanent" and not with_dlq)
        if group in blocked or fails:
            expected.append(rec["messageId"])
            if group is not None:
                blocked.add(group)
    assert failures(handler(event(*records), None)) == expected
    # Nothing lost: every record is stored, quarantined, or reported for another delivery.
    stored = {i["pk"]["S"] for i in scan(dynamodb) if i["pk"]["S"].startswith(run)}
    quarantined = {dlq_details(m)["source_message_id"] for m in drain(sqs, dlq_url)}
    for index, rec in enumerate(records):
        handled = [f"{run}-{index}" in stored, rec["messageId"] in quarantined, rec["messageId"] in expected]
        assert handled.count(True) == 1, (index, handled)
    assert len(record_logs(stream)) == len(records)


class _Context:
    """A Lambda context whose remaining time the test sets."""

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_records_are_not_started_when_the_invocation_is_about_to_time_out(make_handler, fresh_dynamodb):
    context = _Context(5000)
    dynamodb = fresh_dynamodb

    def slow(**_):  # the first record's write takes the invocation to 400 ms before its end
        context.remaining_ms = 400

    dynamodb.meta.events.register("after-call.dynamodb.PutItem", slow)
    handler, stream = make_handler(client=dynamodb, max_workers=1)
    first, second, third = (record({"x": f"k{i}", "y": "1"}, group="g") for i in range(3))
    response = handler(event(first, second, third), context)
    assert failures(response) == [second["messageId"], third["messageId"]]
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["k0"]
    reasons = [line.get("reason", "") for line in record_logs(stream)]
    assert "about to time out" in reasons[1]


class _ProviderError(Exception):
    """A user library's exception carrying a ``response`` attribute that is not botocore's shape."""

    def __init__(self, response) -> None:
        super().__init__("provider said no")
        self.response = response


@pytest.mark.parametrize(
    "response",
    [
        {"Error": "rate limited"},
        {"Error": None},
        {"Error": ["rate limited"]},
        {"Error": {"Code": ["not", "a", "string"], "Message": None}},
        "rate limited",
    ],
)
def test_exception_with_an_unusual_response_attribute_fails_only_its_record(make_handler, dynamodb, response):
    def call_provider(message):
        if message.data.get("bad"):
            raise _ProviderError(response)
        return None

    handler, stream = make_handler(fn=call_provider)
    good, bad, other = (
        record({"x": "c1", "y": "1"}, group="A"),
        record({"x": "c2", "y": "1", "bad": True}, group="B"),
        record({"x": "c3", "y": "1"}, group="C"),
    )
    outcome = handler(event(good, bad, other), None)
    assert failures(outcome) == [bad["messageId"]]
    assert sorted(i["pk"]["S"] for i in scan(dynamodb)) == ["c1", "c3"]
    (logged,) = [line for line in record_logs(stream) if line["message_id"] == bad["messageId"]]
    assert logged["outcome"] == "failed"
    assert logged["reason"].startswith("retry later: ")


def test_a_failure_that_cannot_even_be_described_fails_only_its_record(make_handler, dynamodb):
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("cannot print this error")

    def broken(message):
        if message.data.get("bad"):
            raise Unprintable()
        return None

    handler, stream = make_handler(fn=broken)
    good, bad = (
        record({"x": "c1", "y": "1"}, group="A"),
        record({"x": "c2", "y": "1", "bad": True}, group="B"),
    )
    (ok, failed) = handler.process_batch(event(good, bad), None)
    assert ok.outcome == "processed"
    assert failed.outcome == "failed"
    assert "unexpected error while handling the record" in failed.reason
    assert "RuntimeError: cannot print this error" in failed.reason
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["c1"]
    assert sorted(line["outcome"] for line in record_logs(stream)) == ["failed", "processed"]


def test_standard_queue_records_with_group_ids_are_still_independent(make_handler, dynamodb):
    # SQS fair queues: a standard queue's records may carry a MessageGroupId without any ordering.
    def fail_marked(message):
        if message.data.get("fail"):
            raise TransientError("downstream busy")

    handler, _ = make_handler(fn=fail_marked, queue_type="standard")
    bad = record({"x": "k1", "y": "1", "fail": True}, group="tenant-a")
    later = record({"x": "k2", "y": "1"}, group="tenant-a")
    assert failures(handler(event(bad, later), None)) == [bad["messageId"]]  # FIFO would fail both
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["k2"]


class _Died(BaseException):
    """An execution environment ending mid-batch (not an Exception: the runtime must not swallow it)."""


def test_an_environment_dying_in_another_groups_thread_ends_the_invocation(make_handler, dynamodb):
    # Group A blocks until group B (on another thread) has raised: the exception must reach the caller
    # rather than being lost in the helper thread (which would report B's records as processed).
    b_died = threading.Event()

    def processor(message):
        if message.group_id == "B":
            b_died.set()
            raise _Died()
        assert b_died.wait(10)
        return None

    handler, _ = make_handler(fn=processor)
    records = [record({"x": "a0", "y": "1"}, group="A"), record({"x": "b0", "y": "1"}, group="B")]
    with pytest.raises(_Died):
        handler(event(*records), None)


def test_every_group_of_a_wide_batch_runs_exactly_once(make_handler):
    seen: list[str] = []
    lock = threading.Lock()

    def processor(message):
        with lock:
            seen.append(message.data["x"])
        return None

    handler, _ = make_handler(fn=processor, max_workers=4)
    records = [record({"x": f"k{i}", "y": "1"}, group=f"g{i}") for i in range(10)]
    for _ in range(20):
        seen.clear()
        assert failures(handler(event(*records), None)) == []
        assert sorted(seen) == sorted(f"k{i}" for i in range(10))
