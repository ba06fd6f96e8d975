"""idempotent_runtime.records: what the table says about a message, as the consumer would see it."""

from __future__ import annotations

import json

import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.message import Key
from idempotent_runtime.records import RecordState, forget, inspect, key_of
from runtime_helpers import TABLE, event, record

MODES = {
    "document": {},
    "transaction": {"processor": "runtime_examples:apply_payment"},
    "guarded": {"processor": "runtime_examples:send_receipt"},
}


@pytest.mark.parametrize("mode", list(MODES))
def test_inspect_follows_a_key_from_new_to_done_and_conflict(make_handler, dynamodb, mode):
    config = Config(table_name=TABLE, mode=mode, **MODES[mode])
    body = {"x": "a1", "y": "p1", "cents": 5, "email": "a@example.com"}
    first = record(body)
    before = inspect(config, dynamodb, first)
    assert (before.key, before.state, before.stored_fingerprint) == (Key("a1", "p1"), RecordState.NEW, None)
    handler, _ = make_handler(mode=mode, **MODES[mode])
    handler(event(first), None)
    done = inspect(config, dynamodb, record(body))
    assert (done.state, done.stored_fingerprint) == ("done", before.fingerprint)
    other = inspect(config, dynamodb, record({**body, "cents": 6}))
    assert (other.state, other.stored_fingerprint) == ("conflict", before.fingerprint)
    assert other.fingerprint != before.fingerprint


@pytest.mark.parametrize("mode", list(MODES))
def test_forget_lets_a_forced_redrive_process_the_key_again(make_handler, dynamodb, mode):
    config = Config(table_name=TABLE, mode=mode, **MODES[mode])
    handler, _ = make_handler(mode=mode, **MODES[mode])
    rec = record({"x": "a1", "y": "p1", "cents": 5, "email": "a@example.com"})
    handler(event(rec), None)
    found = inspect(config, dynamodb, rec)
    assert forget(config, dynamodb, found) is True
    assert inspect(config, dynamodb, rec).state == "new"
    assert forget(config, dynamodb, found) is False  # nothing left to forget
    (again,) = handler.process_batch(event(rec), None)
    assert again.outcome == "processed"


def test_inspect_sees_a_live_guarded_claim_as_in_progress_and_an_expired_one_as_new(dynamodb, table):
    config = Config(table_name=table, mode="guarded", processor="runtime_examples:send_receipt")
    dynamodb.put_item(
        TableName=table,
        Item={
            "pk": {"S": "a1"},
            "sk": {"S": "p1"},
            "idempotency:status": {"S": "IN_PROGRESS"},
            "idempotency:lease_expires_at": {"N": str(1_800_000_000_000)},
        },
    )
    rec = record({"x": "a1", "y": "p1"})
    assert inspect(config, dynamodb, rec, now=1_799_999_999.0).state == "in_progress"
    assert inspect(config, dynamodb, rec, now=1_800_000_001.0).state == "new"


def test_inspect_explains_a_message_that_cannot_be_keyed(dynamodb, table):
    found = inspect(Config(table_name=table), dynamodb, record({"y": "p1"}))
    assert (found.key, found.fingerprint, found.state) == (None, None, "invalid")
    assert found.reason == "partition key field 'x' is missing from the body (fields: 'y')"


def test_inspect_keys_a_redriven_message_by_its_original_message_id(make_handler, dynamodb, table):
    config = Config(table_name=table, key_source="message_id")
    handler, _ = make_handler(key_source="message_id", fn=lambda message: {"v": 1})
    original = record("text")
    handler(event(original), None)
    redriven = record("text")
    redriven["messageAttributes"]["idempotency.redrive"] = {
        "stringValue": json.dumps({"source_message_id": original["messageId"], "dedup_id": None}),
        "dataType": "String",
    }
    found = inspect(config, dynamodb, redriven)
    assert (found.key, found.state) == (Key(original["messageId"], "message_id"), "done")


def test_inspect_reads_records_written_by_0_1_as_done(dynamodb, table):
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a1"}, "sk": {"S": "idempotency#p1"}})
    config = Config(table_name=table, mode="transaction", processor="runtime_examples:apply_payment")
    found = inspect(config, dynamodb, record({"x": "a1", "y": "p1"}))
    assert (found.state, found.stored_fingerprint) == ("done", None)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_key_asked_about_without_its_payload_is_done_never_a_conflict(make_handler, dynamodb, mode):
    config = Config(table_name=TABLE, mode=mode, key_prefix="shop#", **MODES[mode])
    handler, _ = make_handler(mode=mode, key_prefix="shop#", **MODES[mode])
    body = {"x": "a1", "y": "p1", "cents": 5, "email": "a@example.com"}
    handler(event(record(body)), None)

    asked = inspect(config, dynamodb, record({"x": "a1", "y": "p1"}), compare_payload=False)

    assert (asked.key, asked.state) == (Key("shop#a1", "p1"), "done")
    marker = "idempotency#p1" if mode == "transaction" else "p1"
    assert asked.location == {"pk": {"S": "shop#a1"}, "sk": {"S": marker}}
    assert asked.item is not None and asked.item["sk"] == {"S": marker}
    assert asked.item["idempotency:fingerprint"] == {"S": asked.stored_fingerprint}


def test_an_expired_claim_asked_about_without_its_payload_is_taken_over_by_its_own(dynamodb, table):
    config = Config(table_name=table, mode="guarded", processor="runtime_examples:send_receipt")
    dynamodb.put_item(
        TableName=table,
        Item={
            "pk": {"S": "a1"},
            "sk": {"S": "p1"},
            "idempotency:status": {"S": "IN_PROGRESS"},
            "idempotency:lease_expires_at": {"N": str(1_800_000_000_000)},
            "idempotency:fingerprint": {"S": "f" * 64},
        },
    )
    rec = record({"x": "a1", "y": "p1"})
    assert inspect(config, dynamodb, rec, now=1_800_000_001.0).state == "conflict"  # another payload
    assert inspect(config, dynamodb, rec, now=1_800_000_001.0, compare_payload=False).state == "new"
    assert inspect(config, dynamodb, rec, now=1_799_999_999.0, compare_payload=False).state == "in_progress"


def test_key_of_keys_a_record_as_the_consumer_does_without_reading_the_table():
    config = Config(table_name="never-read", key_prefix="t#")
    assert key_of(config, record({"x": "a1", "y": "p1"})) == (Key("t#a1", "p1"), None)
    assert key_of(config, record({"y": "p1"})) == (
        None,
        "partition key field 'x' is missing from the body (fields: 'y')",
    )
