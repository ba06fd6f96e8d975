"""document mode: one conditional PutItem per message; duplicates are successes that write nothing."""

from __future__ import annotations

import json
import time

from runtime_helpers import drain, event, failures, record, record_logs, scan


def _count_requests(dynamodb) -> list[str]:
    calls: list[str] = []
    dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    return calls


def test_new_message_stores_the_body_fields_under_the_business_key(make_handler, dynamodb):
    handler, _ = make_handler()
    body = {"x": "a1", "y": "b1", "amount": 12.5, "tags": ["t"], "nested": {"ok": True}, "none": None}
    assert failures(handler(event(record(body, dedup_id="d-1")), None)) == []
    (item,) = scan(dynamodb)
    assert item["pk"] == {"S": "a1"} and item["sk"] == {"S": "b1"}
    assert item["idempotency:dedup_id"] == {"S": "d-1"}  # the message it was written for
    assert item["amount"] == {"N": "12.5"}
    assert item["tags"] == {"L": [{"S": "t"}]}
    assert item["nested"] == {"M": {"ok": {"BOOL": True}}}
    assert item["none"] == {"NULL": True}
    # Documents never expire unless DOCUMENT_TTL_SECONDS says so; the bookkeeping is namespaced.
    assert "expires_at" not in item
    assert set(item) == {"pk", "sk", "x", "y", "amount", "tags", "nested", "none"} | {
        "idempotency:fingerprint",
        "idempotency:token",
        "idempotency:dedup_id",
    }


def test_duplicate_delivery_writes_one_item(make_handler, dynamodb):
    handler, stream = make_handler()
    same = record({"x": "a1", "y": "b1", "v": 1})
    for _ in range(5):
        assert failures(handler(event(same), None)) == []
    assert len(scan(dynamodb)) == 1
    outcomes = [line["outcome"] for line in record_logs(stream)]
    assert outcomes == ["processed"] + ["duplicate"] * 4


def test_same_content_under_a_new_message_id_is_a_duplicate(make_handler, dynamodb):
    handler, stream = make_handler()
    body = {"x": "a1", "y": "b1"}
    handler(event(record(body)), None)
    response = handler(event(record(body)), None)  # a new messageId and dedup id: SQS cannot tell
    assert failures(response) == []
    assert len(scan(dynamodb)) == 1
    assert [line["outcome"] for line in record_logs(stream)] == ["processed", "duplicate"]


def test_same_business_key_after_the_dedup_window_keeps_the_first_document(
    make_handler, dynamodb, dlq_url, sqs
):
    handler, _ = make_handler(dlq_url=dlq_url)
    handler(event(record({"x": "a1", "y": "b1", "version": "first"})), None)
    # Past SNS/SQS's 5-minute dedup window the producer resends the key with new content: a conflict.
    second = record({"x": "a1", "y": "b1", "version": "second"})
    (result,) = handler.process_batch(event(second), None)
    (item,) = scan(dynamodb)
    assert item["version"] == {"S": "first"}
    assert (result.outcome, result.conflict) == ("quarantined", True)
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == second["body"]


def test_document_mode_makes_exactly_one_request_per_message(make_handler, fresh_dynamodb):
    handler, _ = make_handler(client=fresh_dynamodb)
    calls = _count_requests(fresh_dynamodb)
    batch = [record({"x": f"a{i}", "y": "b"}, group=f"g{i}") for i in range(10)]
    handler(event(*batch), None)
    assert calls == ["PutItem"] * 10
    calls.clear()
    handler(event(*batch), None)  # all duplicates now
    assert calls == ["PutItem"] * 10


def test_ttl_expired_but_present_record_counts_as_absent(make_handler, dynamodb, table):
    dynamodb.put_item(
        TableName=table,
        Item={"pk": {"S": "a1"}, "sk": {"S": "b1"}, "version": {"S": "old"}, "expires_at": {"N": "1000"}},
    )
    handler, stream = make_handler()
    assert failures(handler(event(record({"x": "a1", "y": "b1", "version": "new"})), None)) == []
    (item,) = scan(dynamodb)
    assert item["version"] == {"S": "new"}
    assert record_logs(stream)[0]["outcome"] == "processed"


def test_unexpired_record_without_a_fingerprint_is_a_duplicate_even_with_other_content(
    make_handler, dynamodb, table
):
    # A document written before fingerprints existed counts as the same payload.
    future = str(int(time.time()) + 3600)
    dynamodb.put_item(
        TableName=table,
        Item={"pk": {"S": "a1"}, "sk": {"S": "b1"}, "version": {"S": "old"}, "expires_at": {"N": future}},
    )
    handler, stream = make_handler()
    handler(event(record({"x": "a1", "y": "b1", "version": "new"})), None)
    assert scan(dynamodb)[0]["version"] == {"S": "old"}
    assert record_logs(stream)[0]["outcome"] == "duplicate"


def test_processor_builds_the_stored_attributes(make_handler, dynamodb):
    def processor(message):
        data = message.data
        return {"total": data["a"] + data["b"], "source": message.message_id, "pk": "k1"}

    handler, _ = make_handler(fn=processor)
    rec = record({"x": "k1", "y": "k2", "a": 2, "b": 3})
    handler(event(rec), None)
    (item,) = scan(dynamodb)
    assert item["total"] == {"N": "5"}
    assert item["source"] == {"S": rec["messageId"]}
    assert item["pk"] == {"S": "k1"}  # equal to the idempotency key's partition: accepted


def test_processor_attribute_overwriting_the_key_is_rejected(make_handler, dynamodb, dlq_url, sqs):
    handler, _ = make_handler(fn=lambda message: {"total": 5, "pk": "ignored"}, dlq_url=dlq_url)
    handler(event(record({"x": "k1", "y": "k2"})), None)
    assert scan(dynamodb) == []
    (dead,) = drain(sqs, dlq_url)
    assert dead["MessageAttributes"]["idempotency.reason"]["StringValue"] == (
        "processor attribute 'pk' is the table's partition key attribute: the runtime stores S 'k1' there, "
        "the message has S 'ignored'"
    )


def test_processor_returning_none_stores_the_body(make_handler, dynamodb):
    seen = []
    handler, _ = make_handler(fn=lambda message: seen.append(message.key) or None)
    handler(event(record({"x": "k1", "y": "k2", "note": "hi"})), None)
    assert scan(dynamodb)[0]["note"] == {"S": "hi"}
    assert str(seen[0]) == "k1#k2"


def test_custom_key_attribute_names_and_ttl(dynamodb):
    dynamodb.create_table(
        TableName="custom",
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "kind", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}, {"AttributeName": "kind", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    from idempotent_runtime.config import Config
    from idempotent_runtime.flow import build_handler

    handler = build_handler(
        Config(
            table_name="custom",
            partition_key="id",
            sort_key="kind",
            ttl_attribute="ttl",
            document_ttl_seconds=60,
            partition_key_field="order",
            sort_key_field="line",
        ),
        dynamodb_client=dynamodb,
    )
    handler(event(record({"order": "o-1", "line": "3"})), None)
    (item,) = scan(dynamodb, "custom")
    assert item["id"] == {"S": "o-1"} and item["kind"] == {"S": "3"}
    assert abs(int(item["ttl"]["N"]) - (time.time() + 60)) < 30


def test_log_line_per_record_names_message_group_key_mode_and_outcome(make_handler):
    handler, stream = make_handler()
    rec = record({"x": "a1", "y": "b1"}, group="orders")
    handler(event(rec), None)
    (line,) = record_logs(stream)
    assert line["message_id"] == rec["messageId"]
    assert line["group_id"] == "orders"
    assert line["key"] == "a1#b1"
    assert line["mode"] == "document"
    assert line["outcome"] == "processed"
    json.dumps(line)


def test_example_document_processor_from_the_processor_setting(make_handler, dynamodb, dlq_url, sqs):
    handler, _ = make_handler(processor="runtime_examples:order_document", dlq_url=dlq_url)
    order = {"x": "o-1", "y": "v1", "customer": "ada", "lines": [{"cents": 250}, {"cents": 100}]}
    rec = record(order)
    for _ in range(2):
        assert failures(handler(event(rec), None)) == []
    (item,) = scan(dynamodb)
    assert item["customer"] == {"S": "ada"}
    assert item["line_count"] == {"N": "2"} and item["total_cents"] == {"N": "350"}
    assert item["source_message_id"] == {"S": rec["messageId"]}
    handler(event(record({"x": "o-2", "y": "v1", "lines": "oops"})), None)
    (dead,) = drain(sqs, dlq_url)
    assert dead["MessageAttributes"]["idempotency.reason"]["StringValue"] == "lines must be a list, got str"


def test_documents_never_expire_by_default(make_handler, dynamodb):
    handler, stream = make_handler()
    handler(event(record({"x": "a1", "y": "b1"})), None)
    handler(event(record({"x": "a1", "y": "b1"})), None)
    (item,) = scan(dynamodb)
    assert "expires_at" not in item
    assert [line["outcome"] for line in record_logs(stream)] == ["processed", "duplicate"]


def test_document_ttl_seconds_sets_the_documents_lifetime_and_dedup_ttl_does_not(make_handler, dynamodb):
    clock = lambda: 1_800_000_000.0  # noqa: E731
    handler, _ = make_handler(clock=clock, document_ttl_seconds=3600, dedup_ttl_seconds=60)
    handler(event(record({"x": "a1", "y": "b1"})), None)
    (item,) = scan(dynamodb)
    assert item["expires_at"] == {"N": str(1_800_000_000 + 3600)}
