"""Keys and attributes cannot collide with the runtime's own records and bookkeeping."""

from __future__ import annotations

import json

import pytest
from runtime_helpers import dlq_reason, drain, event, failures, record, scan

PAYMENT = "runtime_examples:apply_payment"


def _keys(dynamodb) -> list[tuple[str, str]]:
    return sorted((i["pk"]["S"], i["sk"]["S"]) for i in scan(dynamodb))


def test_a_business_key_shaped_like_a_marker_is_rejected_not_dropped(make_handler, dynamodb, sqs, dlq_url):
    # A payment pipeline (transaction mode) and an orders pipeline (document mode) share the table.
    payments, _ = make_handler(mode="transaction", processor=PAYMENT, dlq_url=dlq_url)
    orders, _ = make_handler(dlq_url=dlq_url)
    payments(event(record({"x": "acct", "y": "pay-1", "cents": 5})), None)  # marker (acct, idempotency#pay-1)
    order = record({"x": "acct", "y": "idempotency#pay-1", "item": "book"})
    (result,) = orders.process_batch(event(order), None)
    assert result.outcome == "quarantined"  # on main: a "duplicate", the order silently dropped
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == order["body"]
    assert dlq_reason(dead) == (
        "sort key field 'y' begins with 'idempotency#', which the runtime reserves for its own records: "
        "'idempotency#pay-1'"
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"x": "idempotency#a", "y": "b"}, "partition key field 'x' begins with 'idempotency#'"),
        ({"x": "a", "y": "idempotency#quarantine"}, "sort key field 'y' begins with 'idempotency#'"),
    ],
)
@pytest.mark.parametrize("mode", ["document", "transaction", "guarded"])
def test_reserved_key_values_are_quarantined_in_every_mode(
    make_handler, dynamodb, sqs, dlq_url, mode, body, reason
):
    extra = {"processor": PAYMENT} if mode == "transaction" else {}
    ran: list[str] = []
    fn = (lambda message: ran.append(message.message_id)) if mode == "guarded" else None
    handler, _ = make_handler(mode=mode, fn=fn, dlq_url=dlq_url, **extra)
    assert failures(handler(event(record({**body, "cents": 1})), None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead).startswith(reason)
    assert scan(dynamodb) == [] and ran == []


def test_transaction_entries_may_not_write_the_runtimes_keys(make_handler, dynamodb, sqs, dlq_url):
    def overwrite_another_marker(message):
        return [{"Put": {"Item": {"pk": {"S": "acct"}, "sk": {"S": "idempotency#pay-2"}}}}]

    payments, _ = make_handler(mode="transaction", processor=PAYMENT)
    payments(event(record({"x": "acct", "y": "pay-2", "cents": 5})), None)
    before = _keys(dynamodb)
    handler, _ = make_handler(mode="transaction", fn=overwrite_another_marker, dlq_url=dlq_url)
    handler(event(record({"x": "acct", "y": "pay-1"})), None)
    assert _keys(dynamodb) == before  # pay-2's marker untouched, nothing committed
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == (
        "transaction entry 0 (Put) writes sort key 'idempotency#pay-2' of the runtime's table, which begins "
        "with 'idempotency#': those are the runtime's own records"
    )


@pytest.mark.parametrize("named", ["omitted", "name", "arn"])
@pytest.mark.parametrize("action", ["Update", "Delete"])
def test_transaction_updates_and_deletes_of_reserved_keys_are_rejected(
    make_handler, sqs, dlq_url, dynamodb, table, action, named
):
    body: dict = {"Key": {"pk": {"S": "acct"}, "sk": {"S": "idempotency#x"}}}
    if named != "omitted":  # DynamoDB takes a table's ARN wherever it takes its name
        described = dynamodb.describe_table(TableName=table)["Table"]
        body["TableName"] = described["TableName"] if named == "name" else described["TableArn"]
    if action == "Update":
        body.update(UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": {"N": "1"}})
    handler, _ = make_handler(mode="transaction", fn=lambda message: [{action: body}], dlq_url=dlq_url)
    handler(event(record({"x": "acct", "y": "pay-1"})), None)
    (dead,) = drain(sqs, dlq_url)
    assert f"transaction entry 0 ({action}) writes sort key 'idempotency#x'" in dlq_reason(dead)


def test_transaction_condition_checks_on_the_runtimes_keys_are_allowed(make_handler, dynamodb):
    # "only if pay-2 was applied": a processor may check another key's marker.
    payments, _ = make_handler(mode="transaction", processor=PAYMENT)
    payments(event(record({"x": "acct", "y": "pay-2", "cents": 5})), None)

    def after_pay_2(message):
        return [
            {
                "ConditionCheck": {
                    "Key": {"pk": {"S": "acct"}, "sk": {"S": "idempotency#pay-2"}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            {"Put": {"Item": {"pk": {"S": "acct"}, "sk": {"S": "refund-1"}}}},
        ]

    handler, _ = make_handler(mode="transaction", fn=after_pay_2)
    (result,) = handler.process_batch(event(record({"x": "acct", "y": "refund-1"})), None)
    assert result.outcome == "processed"
    assert ("acct", "refund-1") in _keys(dynamodb)


def test_body_fields_named_like_the_key_or_ttl_attributes_are_rejected_not_overwritten(
    make_handler, dynamodb, sqs, dlq_url
):
    handler, _ = make_handler(dlq_url=dlq_url)
    body = {"x": "o-1", "y": "l-1", "pk": "tenant-42", "expires_at": "2031-01-01"}
    (result,) = handler.process_batch(event(record(body)), None)
    assert result.outcome == "quarantined"  # on main: stored with pk = "o-1" and a new expires_at
    assert scan(dynamodb) == []
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == (
        "body field 'pk' is the table's partition key attribute: the runtime stores S 'o-1' there, "
        "the message has S 'tenant-42'"
    )


def test_a_ttl_field_is_rejected_when_documents_do_not_expire(make_handler, dynamodb, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url)
    handler(event(record({"x": "o-1", "y": "l-1", "expires_at": 5})), None)
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == (
        "body field 'expires_at' is the table's TTL attribute: the runtime stores nothing (no TTL: "
        "DOCUMENT_TTL_SECONDS is 0) there, the message has N '5'"
    )


def test_key_fields_equal_to_what_the_runtime_stores_are_accepted(make_handler, dynamodb):
    handler, _ = make_handler(partition_key_field="pk", sort_key_field="sk")
    (result,) = handler.process_batch(event(record({"pk": "o-1", "sk": "l-1", "v": 1})), None)
    assert result.outcome == "processed"
    assert _keys(dynamodb) == [("o-1", "l-1")]


def test_body_fields_in_the_runtimes_attribute_namespace_are_rejected(make_handler, dynamodb, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url)
    handler(event(record({"x": "o-1", "y": "l-1", "idempotency:fingerprint": "forged"})), None)
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == (
        "body field 'idempotency:fingerprint' begins with 'idempotency:', which the runtime reserves for its "
        "own attributes"
    )
    assert scan(dynamodb) == []


def test_guarded_bookkeeping_is_namespaced_so_no_result_or_body_can_clash(make_handler, dynamodb):
    handler, _ = make_handler(fn=lambda message: {"status": "sent"}, mode="guarded")
    handler(event(record({"x": "a", "y": "b", "status": "new", "owner": "me"})), None)
    (item,) = scan(dynamodb)
    assert set(item) == {
        "pk",
        "sk",
        "expires_at",
        "idempotency:status",
        "idempotency:owner",
        "idempotency:result",
        "idempotency:message_id",
        "idempotency:dedup_id",
        "idempotency:fingerprint",
    }


def _legacy_claim(dynamodb, table, status, lease_ms=None, result=None):
    item = {
        "pk": {"S": "a"},
        "sk": {"S": "b"},
        "status": {"S": status},
        "owner": {"S": "0.1-owner"},
        "message_id": {"S": "0.1-message"},
    }
    if lease_ms is not None:
        item["lease_expires_at"] = {"N": str(lease_ms)}
    if result is not None:
        item["result"] = {"S": result}
    dynamodb.put_item(TableName=table, Item=item)


def test_a_completed_record_of_0_1_is_a_duplicate_with_its_result(make_handler, dynamodb, table):
    _legacy_claim(dynamodb, table, "COMPLETED", result='{"receipt":7}')
    ran: list[str] = []
    handler, _ = make_handler(fn=lambda message: ran.append("again"), mode="guarded")
    (result,) = handler.process_batch(event(record({"x": "a", "y": "b"})), None)
    assert (result.outcome, result.result, ran) == ("duplicate", {"receipt": 7}, [])


def test_an_expired_claim_of_0_1_is_taken_over(make_handler, dynamodb, table):
    now = 1_800_000_000.0
    _legacy_claim(dynamodb, table, "IN_PROGRESS", lease_ms=int(now * 1000) - 1)
    handler, _ = make_handler(fn=lambda message: {"ran": True}, mode="guarded", clock=lambda: now)
    (result,) = handler.process_batch(event(record({"x": "a", "y": "b"})), None)
    assert result.outcome == "processed"
    (item,) = scan(dynamodb)
    assert item["idempotency:status"] == {"S": "COMPLETED"}
    # Taken over whole: nothing of the 0.1 claim is left beside the new record.
    assert not {"status", "owner", "lease_expires_at", "result", "message_id"} & set(item)


@pytest.mark.parametrize(
    ("pk", "sk", "ttl"),
    [
        ("owner", "sk", "expires_at"),
        ("pk", "result", "expires_at"),
        ("status", "sk", "expires_at"),
        ("pk", "sk", "lease_expires_at"),
        ("message_id", "sk", "result"),
    ],
)
@pytest.mark.parametrize("dedup_ttl_seconds", [3600, 0])
def test_key_and_ttl_attributes_named_like_0_1_attributes_work_in_guarded_mode(
    make_handler, dynamodb, sqs, dlq_url, pk, sk, ttl, dedup_ttl_seconds
):
    # The claim removes 0.1's attribute names, but never the table's own key or TTL attribute.
    name = f"legacy-names-{pk}-{sk}-{ttl}-{dedup_ttl_seconds}"
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": pk, "AttributeType": "S"},
            {"AttributeName": sk, "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ran: list[str] = []
    handler, _ = make_handler(
        table_name=name,
        partition_key=pk,
        sort_key=sk,
        ttl_attribute=ttl,
        dedup_ttl_seconds=dedup_ttl_seconds,
        mode="guarded",
        fn=lambda message: ran.append(message.key.idempotency_key) or {"sent": True},
        dlq_url=dlq_url,
    )
    for _ in range(2):
        handler(event(record({"x": "o-1", "y": "l-1"})), None)
    assert ran == ["o-1#l-1"] and drain(sqs, dlq_url) == []
    (item,) = scan(dynamodb, name)
    assert (item[pk], item[sk], item["idempotency:status"]) == (
        {"S": "o-1"},
        {"S": "l-1"},
        {"S": "COMPLETED"},
    )
    assert (ttl in item) == bool(dedup_ttl_seconds)


def test_a_live_claim_of_0_1_is_respected(make_handler, dynamodb, table):
    now = 1_800_000_000.0
    _legacy_claim(dynamodb, table, "IN_PROGRESS", lease_ms=int(now * 1000) + 60_000)
    ran: list[str] = []
    handler, _ = make_handler(fn=lambda message: ran.append("ran"), mode="guarded", clock=lambda: now)
    (result,) = handler.process_batch(event(record({"x": "a", "y": "b"})), None)
    assert result.outcome == "failed" and "in progress in another invocation" in result.reason
    assert ran == []


def test_key_prefix_keeps_pipelines_sharing_a_table_apart(make_handler, dynamodb):
    orders, _ = make_handler(key_prefix="orders#")
    refunds, _ = make_handler(key_prefix="refunds#")
    body = {"x": "o-1", "y": "l-1"}
    (first,) = orders.process_batch(event(record(body)), None)
    (second,) = refunds.process_batch(event(record(body)), None)
    assert (first.outcome, second.outcome) == ("processed", "processed")
    assert _keys(dynamodb) == [("orders#o-1", "l-1"), ("refunds#o-1", "l-1")]
    assert first.message.key.idempotency_key != second.message.key.idempotency_key


def test_transaction_markers_stay_where_0_1_put_them(make_handler, dynamodb):
    handler, _ = make_handler(mode="transaction", processor=PAYMENT, key_prefix="p#")
    handler(event(record({"x": "acct", "y": "pay-1", "cents": 5})), None)
    assert ("p#acct", "idempotency#pay-1") in _keys(dynamodb)


def _redrive(rec: dict, **fields) -> dict:
    value = json.dumps({"source_message_id": None, "dedup_id": None, **fields})
    rec["messageAttributes"]["idempotency.redrive"] = {"stringValue": value, "dataType": "String"}
    return rec


RESERVED = "begins with 'idempotency#', which the runtime reserves for its own records"


@pytest.mark.parametrize(
    ("settings", "delivery", "reason"),
    [
        pytest.param(
            {"key_source": "message_id"},
            _redrive(record({"a": 1}), source_message_id="idempotency#quarantine#m-1"),
            "partition key source_message_id of message attribute idempotency.redrive "
            f"{RESERVED}: 'idempotency#quarantine#m-1'",
            id="redriven-message-id",
        ),
        pytest.param(
            {"key_source": "dedup_id"},
            _redrive(record({"a": 1}), dedup_id="idempotency#x"),
            f"partition key dedup_id of message attribute idempotency.redrive {RESERVED}: 'idempotency#x'",
            id="redriven-dedup-id",
        ),
        pytest.param(
            {"key_source": "dedup_id"},
            record({"a": 1}, dedup_id="idempotency#x"),
            f"partition key MessageDeduplicationId {RESERVED}: 'idempotency#x'",
            id="dedup-id",
        ),
        pytest.param(
            {"key_prefix": "idempotency"},
            record({"x": "#quarantine#m-1", "y": "s"}),
            f"partition key field 'x' with KEY_PREFIX 'idempotency' {RESERVED}: 'idempotency#quarantine#m-1'",
            id="prefix-and-field",
        ),
        pytest.param(
            {"key_prefix": "idem"},
            record({"x": "potency#a", "y": "s"}),
            f"partition key field 'x' with KEY_PREFIX 'idem' {RESERVED}: 'idempotency#a'",
            id="part-of-the-prefix",
        ),
    ],
)
def test_no_key_source_or_prefix_reaches_the_reserved_namespace(
    make_handler, dynamodb, sqs, dlq_url, settings, delivery, reason
):
    handler, _ = make_handler(dlq_url=dlq_url, **settings)
    (result,) = handler.process_batch(event(delivery), None)
    assert (result.outcome, result.kind) == ("quarantined", "invalid")
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == reason
    assert scan(dynamodb) == []
