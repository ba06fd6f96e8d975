"""transaction mode: the processor's writes and the idempotency marker commit together or not at all."""

from __future__ import annotations

import pytest
from runtime_helpers import drain, event, failures, inject_errors, record, record_logs, scan

PAYMENT = "runtime_examples:apply_payment"


def _balance(dynamodb, account="a1"):
    items = [i for i in scan(dynamodb) if i["pk"]["S"] == f"account#{account}" and i["sk"]["S"] == "balance"]
    return int(items[0]["balance"]["N"]) if items else 0


@pytest.fixture
def payments(make_handler):
    def make(**overrides):
        return make_handler(mode="transaction", processor=PAYMENT, **overrides)

    return make


def test_counter_moves_once_however_often_the_payment_arrives(payments, dynamodb):
    handler, stream = payments()
    same = record({"x": "a1", "y": "p1", "cents": 250})
    for _ in range(4):
        assert failures(handler(event(same), None)) == []
    # Same payment, new message id (resent past the dedup window).
    assert failures(handler(event(record({"x": "a1", "y": "p1", "cents": 250})), None)) == []
    assert _balance(dynamodb) == 250
    assert [line["outcome"] for line in record_logs(stream)] == ["processed"] + ["duplicate"] * 4


def test_different_payments_accumulate(payments, dynamodb):
    handler, _ = payments()
    batch = [record({"x": "a1", "y": f"p{i}", "cents": 100}) for i in range(3)]
    assert failures(handler(event(*batch), None)) == []
    assert _balance(dynamodb) == 300
    ledger = sorted(i["sk"]["S"] for i in scan(dynamodb) if i["sk"]["S"].startswith("ledger#"))
    assert ledger == ["ledger#p0", "ledger#p1", "ledger#p2"]


def test_marker_sits_beside_the_business_key_with_a_prefixed_sort_key(payments, dynamodb):
    handler, _ = payments()
    rec = record({"x": "a1", "y": "p1", "cents": 5})
    handler(event(rec), None)
    (marker,) = [i for i in scan(dynamodb) if i["sk"]["S"].startswith("idempotency#")]
    assert marker["pk"] == {"S": "a1"} and marker["sk"] == {"S": "idempotency#p1"}
    assert marker["idempotency:message_id"] == {"S": rec["messageId"]}
    assert len(marker["idempotency:fingerprint"]["S"]) == 64
    assert "expires_at" in marker  # markers keep the dedup TTL


def test_processor_may_write_the_message_key_itself(make_handler, dynamodb):
    def document_and_counter(message):
        key = message.key
        return [
            {"Put": {"Item": {"pk": {"S": key.partition}, "sk": {"S": key.sort}, "v": {"S": "doc"}}}},
            {
                "Update": {
                    "Key": {"pk": {"S": "stats"}, "sk": {"S": "count"}},
                    "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
        ]

    handler, _ = make_handler(fn=document_and_counter, mode="transaction")
    for _ in range(3):
        assert failures(handler(event(record({"x": "a1", "y": "b1"})), None)) == []
    by_key = {(i["pk"]["S"], i["sk"]["S"]): i for i in scan(dynamodb)}
    assert by_key[("a1", "b1")]["v"] == {"S": "doc"}
    assert by_key[("stats", "count")]["n"] == {"N": "1"}


def test_processor_condition_failure_is_permanent_and_nothing_commits(make_handler, dynamodb, dlq_url, sqs):
    def overdraw(message):
        return [
            {
                "Update": {
                    "Key": {"pk": {"S": "account#a1"}, "sk": {"S": "balance"}},
                    "UpdateExpression": "ADD #b :minus",
                    "ConditionExpression": "#b >= :amount",
                    "ExpressionAttributeNames": {"#b": "balance"},
                    "ExpressionAttributeValues": {":minus": {"N": "-50"}, ":amount": {"N": "50"}},
                }
            }
        ]

    handler, _ = make_handler(fn=overdraw, mode="transaction", dlq_url=dlq_url)
    rec = record({"x": "a1", "y": "w1"})
    assert failures(handler(event(rec), None)) == []
    assert scan(dynamodb) == []  # neither the update nor the marker
    (dead,) = drain(sqs, dlq_url)
    reason = dead["MessageAttributes"]["idempotency.reason"]["StringValue"]
    assert "transaction cancelled" in reason and "entry 0: ConditionalCheckFailed" in reason


def test_transaction_conflict_is_retried(payments, fresh_dynamodb):
    handler, stream = payments(client=fresh_dynamodb)
    inject_errors(
        fresh_dynamodb,
        "TransactWriteItems",
        "TransactionCanceledException",
        CancellationReasons=[{"Code": "TransactionConflict"}, {"Code": "None"}, {"Code": "None"}],
    )
    rec = record({"x": "a1", "y": "p1", "cents": 10})
    assert failures(handler(event(rec), None)) == [rec["messageId"]]
    assert "TransactionConflict" in record_logs(stream)[0]["reason"]


@pytest.mark.parametrize("code", ["ReplicatedWriteConflict", "SomeCodeAddedLater"])
def test_unknown_cancellation_code_is_retried_not_quarantined(payments, fresh_dynamodb, dlq_url, sqs, code):
    handler, stream = payments(client=fresh_dynamodb, dlq_url=dlq_url)
    inject_errors(
        fresh_dynamodb,
        "TransactWriteItems",
        "TransactionCanceledException",
        CancellationReasons=[{"Code": code}, {"Code": "None"}, {"Code": "None"}],
    )
    rec = record({"x": "a1", "y": "p1", "cents": 10})
    assert failures(handler(event(rec), None)) == [rec["messageId"]]
    assert drain(sqs, dlq_url) == []
    assert f"entry 0: {code}" in record_logs(stream)[0]["reason"]


@pytest.mark.parametrize(
    ("codes", "named"),
    [
        (["ValidationError", "None", "None"], "entry 0: ValidationError"),
        (["None", "ItemCollectionSizeLimitExceeded", "None"], "entry 1: ItemCollectionSizeLimitExceeded"),
    ],
)
def test_named_permanent_cancellation_codes_are_quarantined(
    payments, fresh_dynamodb, dlq_url, sqs, codes, named
):
    handler, _ = payments(client=fresh_dynamodb, dlq_url=dlq_url)
    inject_errors(
        fresh_dynamodb,
        "TransactWriteItems",
        "TransactionCanceledException",
        CancellationReasons=[{"Code": code} for code in codes],
    )
    assert failures(handler(event(record({"x": "a1", "y": "p1", "cents": 10})), None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert named in dead["MessageAttributes"]["idempotency.reason"]["StringValue"]


def test_user_condition_failure_with_an_unknown_code_beside_it_is_retried(
    payments, fresh_dynamodb, dlq_url, sqs
):
    handler, _ = payments(client=fresh_dynamodb, dlq_url=dlq_url)
    inject_errors(
        fresh_dynamodb,
        "TransactWriteItems",
        "TransactionCanceledException",
        CancellationReasons=[
            {"Code": "ConditionalCheckFailed"},
            {"Code": "ReplicatedWriteConflict"},
            {"Code": "None"},
        ],
    )
    rec = record({"x": "a1", "y": "p1", "cents": 10})
    assert failures(handler(event(rec), None)) == [rec["messageId"]]
    assert drain(sqs, dlq_url) == []


def test_marker_conflict_with_user_condition_failure_is_a_duplicate(payments, fresh_dynamodb):
    handler, _ = payments(client=fresh_dynamodb)
    inject_errors(
        fresh_dynamodb,
        "TransactWriteItems",
        "TransactionCanceledException",
        CancellationReasons=[
            {"Code": "None"},
            {"Code": "ConditionalCheckFailed"},
            {"Code": "ConditionalCheckFailed"},
        ],
    )
    (result,) = handler.process_batch(event(record({"x": "a1", "y": "p1", "cents": 10})), None)
    assert result.outcome == "duplicate"


def test_entry_targeting_the_marker_key_is_rejected(make_handler, dlq_url, sqs, dynamodb):
    def clash(message):
        return [{"Put": {"Item": {"pk": {"S": "a1"}, "sk": {"S": "idempotency#b1"}}}}]

    handler, _ = make_handler(fn=clash, mode="transaction", dlq_url=dlq_url)
    handler(event(record({"x": "a1", "y": "b1"})), None)
    (dead,) = drain(sqs, dlq_url)
    assert "targets the idempotency marker" in dead["MessageAttributes"]["idempotency.reason"]["StringValue"]
    assert scan(dynamodb) == []


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ({"Put": {}}, "must return a list"),
        ([{"Explode": {}}], "must be a dict with one of"),
        ([{"Put": {"Item": {}}}] * 100, "at most 99 fit"),
    ],
)
def test_malformed_processor_output_is_quarantined(make_handler, dlq_url, sqs, returned, expected):
    handler, _ = make_handler(fn=lambda message: returned, mode="transaction", dlq_url=dlq_url)
    assert failures(handler(event(record({"x": "a1", "y": "b1"})), None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert expected in dead["MessageAttributes"]["idempotency.reason"]["StringValue"]


def test_example_rejects_a_negative_payment_permanently(payments, dlq_url, sqs, dynamodb):
    handler, _ = payments(dlq_url=dlq_url)
    handler(event(record({"x": "a1", "y": "p1", "cents": -5})), None)
    (dead,) = drain(sqs, dlq_url)
    assert (
        dead["MessageAttributes"]["idempotency.reason"]["StringValue"]
        == "cents must be a positive integer, got -5"
    )
    assert scan(dynamodb) == []


def test_ttl_expired_marker_counts_as_absent(payments, dynamodb, table):
    dynamodb.put_item(
        TableName=table,
        Item={"pk": {"S": "a1"}, "sk": {"S": "idempotency#p1"}, "expires_at": {"N": "1000"}},
    )
    handler, stream = payments()
    assert failures(handler(event(record({"x": "a1", "y": "p1", "cents": 7})), None)) == []
    assert _balance(dynamodb) == 7
    assert [line["outcome"] for line in record_logs(stream)] == ["processed"]
