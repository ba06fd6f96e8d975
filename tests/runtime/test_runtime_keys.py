"""Idempotency keys from each key source."""

from __future__ import annotations

import hashlib
import json

import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.keys import KeyBuilder
from idempotent_runtime.message import Key, Message
from runtime_helpers import event, failures, record, scan


def _key(key_source: str, rec: dict, **overrides) -> Key:
    return KeyBuilder(Config(table_name="t", key_source=key_source, **overrides))(Message(rec))


def test_fields_key_uses_the_two_configured_body_fields():
    rec = record({"order": "o-1", "line": "7", "x": "ignored"})
    assert _key("fields", rec, partition_key_field="order", sort_key_field="line") == Key("o-1", "7")


def test_a_single_field_key_holds_the_fields_path_as_its_sort_key():
    rec = record({"order": {"id": "o-1"}, "line": "7"})
    assert _key("field", rec, partition_key_field="order.id") == Key("o-1", "order.id")
    with pytest.raises(InvalidMessage, match=r"^partition key field 'order.id' is missing from the body"):
        _key("field", record({"id": "o-1"}), partition_key_field="order.id")


# One business id per message: a customer, keyed by its id alone, in every mode that reads body fields.
SINGLE = {"key_source": "field", "partition_key_field": "customer.id", "key_prefix": "shop#"}
CUSTOMER = {"customer": {"id": "c-1"}, "plan": "gold", "v": 1}
EFFECTS: list[str] = []


def _add_points(message):
    """transaction mode: one write of the processor's own, committed with the marker."""
    return [
        {
            "Update": {
                "Key": {"pk": {"S": "points"}, "sk": {"S": message.key.partition}},
                "UpdateExpression": "ADD points :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
    ]


def _welcome(message):
    """guarded mode: an effect outside DynamoDB."""
    EFFECTS.append(message.key.idempotency_key)
    return {"mailed": True}


def _items(dynamodb) -> dict[tuple[str, str], dict]:
    return {(item["pk"]["S"], item["sk"]["S"]): item for item in scan(dynamodb)}


def test_a_single_field_key_is_one_document_whose_resend_is_a_duplicate(make_handler, dynamodb):
    handler, _ = make_handler(**SINGLE)
    first = json.dumps(CUSTOMER)
    results = handler.process_batch(event(record(first), record(first)), None)
    assert [r.outcome for r in results] == ["processed", "duplicate"]
    ((key, item),) = _items(dynamodb).items()
    assert key == ("shop#c-1", "customer.id")
    assert (item["customer"], item["plan"], item["v"]) == (
        {"M": {"id": {"S": "c-1"}}},
        {"S": "gold"},
        {"N": "1"},
    )


def test_a_single_field_key_commits_a_transaction_once(make_handler, dynamodb):
    handler, _ = make_handler(fn=_add_points, mode="transaction", **SINGLE)
    body = json.dumps(CUSTOMER)
    results = handler.process_batch(event(record(body), record(body)), None)
    assert [r.outcome for r in results] == ["processed", "duplicate"]
    items = _items(dynamodb)
    assert set(items) == {("points", "shop#c-1"), ("shop#c-1", "idempotency#customer.id")}
    assert items[("points", "shop#c-1")]["points"] == {"N": "1"}


def test_a_single_field_key_runs_a_guarded_effect_once(make_handler, dynamodb):
    EFFECTS.clear()
    handler, _ = make_handler(fn=_welcome, mode="guarded", **SINGLE)
    body = json.dumps(CUSTOMER)
    results = handler.process_batch(event(record(body), record(body)), None)
    assert [r.outcome for r in results] == ["processed", "duplicate"]
    (effect,) = EFFECTS
    assert effect == Key("shop#c-1", "customer.id").idempotency_key
    ((key, item),) = _items(dynamodb).items()
    assert key == ("shop#c-1", "customer.id")
    assert item["idempotency:status"] == {"S": "COMPLETED"}
    assert item["idempotency:result"] == {"S": '{"mailed":true}'}


def test_a_single_field_key_keeps_the_latest_version_of_its_entity(make_handler, dynamodb):
    handler, _ = make_handler(mode="versioned", version_field="v", **SINGLE)
    versions = [{**CUSTOMER, "v": 2, "plan": "silver"}, CUSTOMER]
    results = handler.process_batch(event(*(record(json.dumps(v)) for v in versions)), None)
    assert [r.outcome for r in results] == ["processed", "stale"]
    ((key, item),) = _items(dynamodb).items()
    assert key == ("shop#c-1", "customer.id")
    assert (item["plan"], item["v"]) == ({"S": "silver"}, {"N": "2"})


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
    build = KeyBuilder(Config(table_name="t"), sort_reserve=len("idempotency#"))
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


def test_an_idempotency_key_ending_in_a_newline_is_hashed_not_handed_on_with_it():
    """Third-party APIs take printable ASCII: a value ending in a newline makes the key a digest."""
    expected = hashlib.sha256(json.dumps(["o-1", "receipt\n"]).encode()).hexdigest()
    assert Key("o-1", "receipt\n").idempotency_key == expected


def test_idempotency_keys_of_parts_holding_the_separator_do_not_collide():
    first, second = Key("acct#1", "p").idempotency_key, Key("acct", "1#p").idempotency_key
    assert str(Key("acct#1", "p")) == str(Key("acct", "1#p"))  # the display form is ambiguous...
    assert first != second  # ...the idempotency key is not
    assert len(first) == len(second) == 64


def test_key_fields_are_dotted_paths_into_nested_objects(make_handler, dynamodb):
    handler, _ = make_handler(partition_key_field="order.id", sort_key_field="order.line.no")
    handler(event(record({"order": {"id": "o-1", "line": {"no": "3"}}})), None)
    (item,) = scan(dynamodb)
    assert (item["pk"], item["sk"]) == ({"S": "o-1"}, {"S": "3"})


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("100", "100"),
        ("100.0", "100"),
        ("1e2", "100"),
        ("1.50", "1.5"),
        ("-0", "0"),
        ("0.00001", "0.00001"),
        ("1E-7", "0.0000001"),
        ("12345678901234567890.5", "12345678901234567890.5"),
        ("true", "true"),
        ("false", "false"),
    ],
)
def test_numbers_and_booleans_are_keys_in_one_canonical_text(value, text):
    assert _key("fields", record(f'{{"x": {value}, "y": "s"}}')) == Key(text, "s")


def test_the_same_number_written_differently_is_one_key(make_handler, dynamodb):
    handler, _ = make_handler()
    outcomes = [
        handler.process_batch(event(record(f'{{"x": {n}, "y": "s"}}')), None)[0].outcome
        for n in ("100", "1e2")
    ]
    assert outcomes == ["processed", "duplicate"]  # on main: int keys were rejected
    (item,) = scan(dynamodb)
    assert item["pk"] == {"S": "100"} and item["x"] == {"N": "100"}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"order": {}}, "partition key field 'order.id' is missing from the body (fields: none)"),
        ({"order": "o-1"}, "partition key field 'order.id' is missing from the body"),
        ({"order": {"id": None}}, "partition key field 'order.id' is null"),
        ({"order": {"id": ""}}, "partition key field 'order.id' is empty, got ''"),
        ({"order": {"id": {"n": 1}}}, "partition key field 'order.id' is an object"),
        ({"order": {"id": [1]}}, "partition key field 'order.id' is an array of 1 items"),
        (
            '{"x": {"order": 1}, "order": {"id": 1e3000}}',
            "partition key field 'order.id' is the number 1E+3000, too long for a dynamodb key",
        ),
    ],
)
def test_keys_that_cannot_be_keys_are_rejected_naming_the_field(body, reason):
    text = body if isinstance(body, str) else json.dumps(body)
    with pytest.raises(InvalidMessage) as raised:
        _key("fields", record(text), partition_key_field="order.id", sort_key_field="y")
    assert str(raised.value).startswith(reason)


def test_key_prefix_is_prepended_to_every_partition_value_and_counted_in_its_limit():
    assert _key("fields", record({"x": "a", "y": "b"}), key_prefix="shop#") == Key("shop#a", "b")
    rec = record("text", dedup_id="d-1")
    assert _key("dedup_id", rec, key_prefix="shop#") == Key("shop#d-1", "dedup_id")
    assert _key("message_id", rec, key_prefix="shop#").partition == "shop#" + rec["messageId"]
    with pytest.raises(InvalidMessage, match="is 2049 bytes, over dynamodb's 2048-byte limit"):
        _key("fields", record({"x": "p" * 2044, "y": "b"}), key_prefix="shop#")


def _redriven(rec: dict, **redrive) -> dict:
    rec["messageAttributes"]["idempotency.redrive"] = {
        "stringValue": json.dumps(redrive),
        "dataType": "String",
        "stringListValues": [],
        "binaryListValues": [],
    }
    return rec


def test_a_redriven_message_keeps_its_original_message_id_and_dedup_id_as_key():
    rec = _redriven(
        record("text", dedup_id="new-dedup"), source_message_id="m-original", dedup_id="d-original"
    )
    assert _key("message_id", rec) == Key("m-original", "message_id")
    assert _key("dedup_id", rec) == Key("d-original", "dedup_id")
    # fields and body_sha256 keys do not depend on the delivery
    assert _key("body_sha256", rec) == _key("body_sha256", record("text"))


def test_a_redriven_message_is_a_duplicate_of_its_original_delivery(make_handler, dynamodb):
    handler, _ = make_handler(key_source="message_id", fn=lambda message: {"v": 1})
    original = record("text")
    handler(event(original), None)
    again = _redriven(record("text"), source_message_id=original["messageId"])
    (result,) = handler.process_batch(event(again), None)
    assert result.outcome == "duplicate"
    assert len(scan(dynamodb)) == 1


def test_a_malformed_redrive_attribute_is_rejected_with_a_reason():
    rec = record("text")
    rec["messageAttributes"]["idempotency.redrive"] = {"stringValue": "not json", "dataType": "String"}
    with pytest.raises(InvalidMessage, match=r"message attribute idempotency\.redrive must be a JSON object"):
        _key("message_id", rec)


def test_a_deeply_nested_key_field_is_described_not_walked():
    # 900 levels parse (the interpreter's limit is 1000); describing the key must not walk them.
    text = '{"x": ' + '{"a": ' * 900 + "1" + "}" * 900 + ', "y": "s"}'
    with pytest.raises(InvalidMessage, match="partition key field 'x' is an object with fields 'a'"):
        _key("fields", record(text))


def test_the_publisher_reads_a_single_field_key_from_the_consumers_environment():
    from idempotent_runtime.publisher import ConsumerKeys, dedup_id_for

    keys = ConsumerKeys.from_environment(
        {
            "TABLE_NAME": "t",
            "KEY_SOURCE": "field",
            "PARTITION_KEY_FIELD": "customer.id",
            "KEY_PREFIX": "shop#",
        }
    )
    assert (keys.key_source, keys.key_fields) == ("field", ("customer.id",))
    gold, silver = ({"customer": {"id": "c-1"}, "plan": plan} for plan in ("gold", "silver"))
    assert dedup_id_for(gold, keys).startswith("c-1#customer.id#")  # the id does not depend on a prefix
    assert dedup_id_for(gold, keys) != dedup_id_for(silver, keys)  # new content: a conflict, not dropped
    with pytest.raises(ValueError, match=r"^partition key field 'customer.id' is missing from the body"):
        dedup_id_for({"id": "c-1"}, keys)
    with pytest.raises(ValueError, match=r"key_source field needs key_fields=\(partition_key_field,\)"):
        ConsumerKeys(("customer.id", "plan"), key_source="field")
