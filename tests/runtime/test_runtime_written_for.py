"""Every record names the deduplication id of the message it was written for (``idempotency:dedup_id``), so
``trace`` can tell an emitted message that was applied from one taken for a duplicate of another's payload."""

from __future__ import annotations

import json
import time

import pytest
from runtime_helpers import event, failures, record, scan

DEDUP = "idempotency:dedup_id"
# The mode's options, and how to find the record the message wrote among the table's items.
MODES = {
    "document": ({}, lambda item: True),
    "versioned": ({"mode": "versioned", "version_field": "v"}, lambda item: True),
    "guarded": ({"mode": "guarded", "fn": lambda message: {"sent": True}}, lambda item: True),
    "transaction": (
        {"mode": "transaction", "processor": "runtime_examples:apply_payment"},
        lambda item: item["sk"]["S"].startswith("idempotency#"),
    ),
}
BODY = {"x": "a1", "y": "p1", "v": 1, "cents": 250}


def _written(dynamodb, mode: str) -> dict:
    (found,) = [item for item in scan(dynamodb) if MODES[mode][1](item)]
    return found


def _redriven(original_dedup_id: str | None, source_message_id: str = "m-0") -> dict:
    redriven = record(BODY, dedup_id="assigned-by-the-dlq")
    redriven["messageAttributes"]["idempotency.redrive"] = {
        "stringValue": json.dumps({"source_message_id": source_message_id, "dedup_id": original_dedup_id}),
        "dataType": "String",
    }
    return redriven


@pytest.mark.parametrize("mode", list(MODES))
def test_the_record_names_the_deduplication_id_it_was_written_for(make_handler, dynamodb, mode):
    handler, _ = make_handler(**MODES[mode][0])
    assert failures(handler(event(record(BODY, dedup_id="orders#o-1#1#000")), None)) == []
    assert _written(dynamodb, mode)[DEDUP] == {"S": "orders#o-1#1#000"}
    # a duplicate with another id (the same payload from another message) leaves the record as it was
    assert failures(handler(event(record(BODY, dedup_id="returns#o-1#1#000")), None)) == []
    assert _written(dynamodb, mode)[DEDUP] == {"S": "orders#o-1#1#000"}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_redriven_message_names_its_original_deduplication_id(make_handler, dynamodb, mode):
    handler, _ = make_handler(**MODES[mode][0])
    assert failures(handler(event(_redriven("orders#o-1#1#000")), None)) == []
    assert _written(dynamodb, mode)[DEDUP] == {"S": "orders#o-1#1#000"}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_message_of_a_standard_queue_names_none(make_handler, dynamodb, mode):
    handler, _ = make_handler(queue_type="standard", **MODES[mode][0])
    assert failures(handler(event(record(BODY, group=None)), None)) == []
    assert DEDUP not in _written(dynamodb, mode)


@pytest.mark.parametrize(
    "attribute",
    [
        "not json",
        json.dumps({"source_message_id": "m-0", "dedup_id": "x" * 300_000}),  # no id SQS gives: 1-128
        json.dumps({"source_message_id": "m-0", "dedup_id": "o-1\n"}),
        json.dumps({"source_message_id": "m-0", "dedup_id": "commande-été"}),
    ],
)
def test_a_redrive_attribute_with_no_id_sqs_could_give_names_the_messages_own_and_stores_it(
    make_handler, dynamodb, attribute
):
    handler, _ = make_handler()
    redriven = _redriven(None)
    redriven["messageAttributes"]["idempotency.redrive"]["stringValue"] = attribute
    assert failures(handler(event(redriven), None)) == []
    assert _written(dynamodb, "document")[DEDUP] == {"S": "assigned-by-the-dlq"}


def test_a_guarded_claim_taken_over_by_a_message_without_an_id_names_none(make_handler, dynamodb):
    """A claim whose owner died is taken over by the next delivery once its lease has run out: the record
    names the new owner's message, not the one that died (here one from a standard queue: no id)."""

    def die(message):
        raise SystemExit("the runner was killed mid-way")

    dying, _ = make_handler(mode="guarded", fn=die, lease_seconds=1)
    with pytest.raises(SystemExit):
        dying(event(record(BODY, dedup_id="first")), None)
    (claim,) = scan(dynamodb)
    assert (claim["idempotency:status"], claim[DEDUP]) == ({"S": "IN_PROGRESS"}, {"S": "first"})
    later = time.time() + 3600
    handler, _ = make_handler(mode="guarded", fn=lambda message: {"sent": True}, clock=lambda: later)
    assert failures(handler(event(record(BODY, group=None)), None)) == []
    (item,) = scan(dynamodb)
    assert item["idempotency:status"] == {"S": "COMPLETED"}
    assert DEDUP not in item
