"""Changing IDEMPOTENCY_MODE on a deployed stack: a key one mode wrote is recognised by the other, never
quarantined as "invalid" (which `dlq purge --reason invalid` would delete)."""

from __future__ import annotations

import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.message import Message
from idempotent_runtime.records import inspect
from runtime_helpers import dlq_details, dlq_reason, drain, event, record, record_logs, scan

ORDER = {"x": "o-1", "y": "1", "sku": "tea"}


def charge(message):
    return {"charged": message.json_object()["sku"]}


def test_a_key_stored_in_document_mode_is_a_duplicate_under_guarded_mode(
    make_handler, dynamodb, sqs, dlq_url
):
    document, _ = make_handler(dlq_url=dlq_url)
    assert [r.outcome for r in document.process_batch(event(record(ORDER)), None)] == ["processed"]
    guarded, _ = make_handler(fn=charge, mode="guarded", dlq_url=dlq_url)
    (result,) = guarded.process_batch(event(record(ORDER)), None)
    assert result.outcome == "duplicate"  # on main: quarantined, "not an idempotency record"
    assert drain(sqs, dlq_url) == []
    (item,) = scan(dynamodb)
    assert item["sku"] == {"S": "tea"} and "idempotency:status" not in item  # the document, untouched


def test_another_payload_for_a_document_mode_key_is_a_conflict_under_guarded_mode(
    make_handler, dynamodb, sqs, dlq_url
):
    document, _ = make_handler(dlq_url=dlq_url)
    document(event(record(ORDER)), None)
    guarded, _ = make_handler(fn=charge, mode="guarded", dlq_url=dlq_url)
    (result,) = guarded.process_batch(event(record({**ORDER, "sku": "coffee"})), None)
    assert (result.outcome, result.kind) == ("quarantined", "conflict")
    (dead,) = drain(sqs, dlq_url)
    assert dlq_details(dead)["kind"] == "conflict"
    assert dlq_reason(dead).startswith("conflict: key o-1#1 is already done with another payload")


@pytest.mark.parametrize(("body", "state"), [(ORDER, "done"), ({**ORDER, "sku": "coffee"}, "conflict")])
def test_records_inspect_under_guarded_mode_names_a_document_by_its_fingerprint(
    make_handler, dynamodb, table, body, state
):
    """What `dlq redrive --dry-run` shows: not "cannot key it"."""
    document, _ = make_handler()
    document(event(record(ORDER)), None)
    config = Config(table_name=table, mode="guarded", processor="runtime_examples:send_receipt")
    found = inspect(config, dynamodb, record(body))
    assert found.state == state and found.reason is None  # on main: invalid, "not an idempotency record"


def test_a_guarded_claim_in_progress_is_not_a_duplicate_under_document_mode(make_handler, dynamodb, table):
    """A claim still running in an environment of the old mode: the key is not done, so the delivery waits
    (retried) instead of being deleted as a duplicate while the claim may still be released."""

    def dies(message):
        raise KeyboardInterrupt  # the environment dies with its claim held

    guarded, _ = make_handler(fn=dies, mode="guarded", lease_seconds=300)
    message = Message(record(ORDER))
    message.key = guarded.key_of(message)
    with pytest.raises(KeyboardInterrupt):
        guarded.mode.process(message, None)
    (item,) = scan(dynamodb)
    assert item["idempotency:status"] == {"S": "IN_PROGRESS"}

    document, stream = make_handler()
    (result,) = document.process_batch(event(record(ORDER)), None)
    assert result.outcome == "failed"  # on main: a duplicate, deleted from the queue
    assert "claimed by guarded mode (IN_PROGRESS)" in result.reason
    found = inspect(Config(table_name=table), dynamodb, record(ORDER))
    assert found.state == "in_progress"
    assert record_logs(stream)[0]["outcome"] == "failed"
