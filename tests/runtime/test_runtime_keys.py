"""Idempotency keys from each key source."""

from __future__ import annotations

import hashlib

import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.keys import key_builder
from idempotent_runtime.message import Key, Message
from runtime_helpers import event, failures, record, scan


def _key(key_source: str, rec: dict, **overrides) -> Key:
    return key_builder(Config(table_name="t", key_source=key_source, **overrides))(Message(rec))


def test_fields_key_uses_the_two_configured_body_fields():
    rec = record({"order": "o-1", "line": "7", "x": "ignored"})
    assert _key("fields", rec, partition_key_field="order", sort_key_field="line") == Key("o-1", "7")


def test_dedup_id_key_uses_the_sqs_deduplication_id():
    rec = record("plain text body", dedup_id="order-1#line-7")
    assert _key("dedup_id", rec) == Key("order-1#line-7", "dedup_id")


def test_message_id_key_uses_the_message_id():
    rec = record("anything")
    assert _key("message_id", rec) == Key(rec["messageId"], "message_id")


def test_body_sha256_key_hashes_the_raw_body():
    rec = record("not json at all ✓")
    assert _key("body_sha256", rec) == Key(
        hashlib.sha256("not json at all ✓".encode()).hexdigest(), "body_sha256"
    )


def test_key_at_dynamodb_limits_is_accepted_and_one_byte_more_is_not():
    assert _key("fields", record({"x": "p" * 2048, "y": "s" * 1024})).sort == "s" * 1024
    with pytest.raises(InvalidMessage, match="2049 bytes"):
        _key("fields", record({"x": "p" * 2049, "y": "s"}))
    with pytest.raises(InvalidMessage, match="1025 bytes"):
        _key("fields", record({"x": "p", "y": "s" * 1025}))


def test_transaction_mode_reserves_room_for_the_marker_prefix():
    build = key_builder(Config(table_name="t"), sort_reserve=len("idempotency#"))
    with pytest.raises(InvalidMessage, match="over dynamodb's 1012-byte limit"):
        build(Message(record({"x": "p", "y": "s" * 1013})))


@pytest.mark.parametrize("key_source", ["dedup_id", "message_id", "body_sha256"])
def test_keyless_messages_are_deduplicated_by_their_key_source(make_handler, dynamodb, key_source):
    handler, _ = make_handler(key_source=key_source, fn=lambda message: {"body": message.body})
    rec = record("plain text", dedup_id="d-1")
    for _ in range(3):
        assert failures(handler(event(rec), None)) == []
    (item,) = scan(dynamodb)
    assert item["sk"] == {"S": key_source}
    assert item["body"] == {"S": "plain text"}


def test_idempotency_key_is_the_joined_key_in_the_common_case():
    assert Key("o-1", "receipt").idempotency_key == "o-1#receipt"


def test_idempotency_keys_of_parts_holding_the_separator_do_not_collide():
    first, second = Key("acct#1", "p").idempotency_key, Key("acct", "1#p").idempotency_key
    assert str(Key("acct#1", "p")) == str(Key("acct", "1#p"))  # the display form is ambiguous...
    assert first != second  # ...the idempotency key is not
    assert len(first) == len(second) == 64


def test_idempotency_key_matches_the_publishers_deduplication_id():
    from idempotent_runtime.publisher import dedup_id_for

    for x, y in (("a", "b"), ("acct#1", "p"), ("é", "b"), ("a" * 100, "b" * 100)):
        assert Key(x, y).idempotency_key == dedup_id_for({"x": x, "y": y}, ("x", "y"))
