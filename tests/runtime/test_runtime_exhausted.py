"""MAX_RECEIVE_COUNT: a record failing on its last receive reaches the DLQ with its reason, not without."""

from __future__ import annotations

from idempotent_runtime import TransientError
from runtime_helpers import dlq_details, dlq_reason, drain, event, failures, inject_errors, record


def _busy(message):
    if message.data.get("busy"):
        raise TransientError("provider unavailable")


def test_a_transient_failure_on_the_last_receive_is_quarantined_with_the_last_error(
    make_handler, sqs, dlq_url
):
    handler, _ = make_handler(fn=_busy, dlq_url=dlq_url, max_receive_count=3)
    earlier = record({"x": "a", "y": "1", "busy": True}, receive_count=2)
    last = record({"x": "b", "y": "1", "busy": True}, receive_count=3, group="g2")
    assert failures(handler(event(earlier, last), None)) == [earlier["messageId"]]
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == last["body"]
    assert (
        dlq_reason(dead)
        == "failed on its last receive (3 of MAX_RECEIVE_COUNT 3): TransientError: provider unavailable"
    )
    assert (dlq_details(dead)["kind"], dlq_details(dead)["receive_count"]) == ("exhausted", 3)


def test_later_records_of_the_group_at_their_last_receive_follow_with_the_reason(make_handler, sqs, dlq_url):
    handler, _ = make_handler(fn=_busy, dlq_url=dlq_url, max_receive_count=5)
    blocker = record({"x": "a", "y": "1", "busy": True}, receive_count=2, group="g")
    waiting = record({"x": "b", "y": "1"}, receive_count=5, group="g")
    assert failures(handler(event(blocker, waiting), None)) == [blocker["messageId"]]
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == waiting["body"]
    assert dlq_reason(dead) == (
        f"not attempted: earlier record {blocker['messageId']} of its group failed on this record's last "
        "receive (5 of MAX_RECEIVE_COUNT 5): retry later: TransientError: provider unavailable"
    )


def test_misconfiguration_on_the_last_receive_is_never_quarantined(
    make_handler, fresh_dynamodb, sqs, dlq_url
):
    inject_errors(fresh_dynamodb, "PutItem", "AccessDeniedException")
    handler, _ = make_handler(client=fresh_dynamodb, dlq_url=dlq_url, max_receive_count=3)
    first = record({"x": "a", "y": "1"}, receive_count=3, group="g")
    second = record({"x": "b", "y": "1"}, receive_count=3, group="g")
    results = handler.process_batch(event(first, second), None)
    assert [(r.outcome, r.misconfigured) for r in results] == [("failed", True), ("failed", True)]
    assert drain(sqs, dlq_url) == []


def test_without_max_receive_count_the_last_receive_is_left_to_sqs(make_handler, sqs, dlq_url):
    handler, _ = make_handler(fn=_busy, dlq_url=dlq_url)
    busy = record({"x": "a", "y": "1", "busy": True}, receive_count=100)
    assert failures(handler(event(busy), None)) == [busy["messageId"]]
    assert drain(sqs, dlq_url) == []
