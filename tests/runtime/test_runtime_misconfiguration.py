"""A wrong deployment is not a poison message: records are retried, counted, named once per batch."""

from __future__ import annotations

import pytest
from runtime_helpers import (
    dlq_reason,
    drain,
    event,
    failures,
    inject_errors,
    log_lines,
    metrics,
    record,
    scan,
)


def _errors(stream):
    return [line for line in log_lines(stream) if line.get("level") == "ERROR"]


@pytest.fixture
def other_schema_table(dynamodb) -> str:
    """A table whose key schema is not the configured PARTITION_KEY/SORT_KEY (pk/sk)."""
    dynamodb.create_table(
        TableName="orders-v2",
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "line", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}, {"AttributeName": "line", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return "orders-v2"


def test_a_table_with_another_key_schema_quarantines_nothing(
    make_handler, other_schema_table, sqs, dlq_url, dynamodb
):
    handler, stream = make_handler(table_name=other_schema_table, dlq_url=dlq_url, log_level="INFO")
    batch = [record({"x": f"o{i}", "y": "1"}, group=f"g{i % 3}") for i in range(9)]
    response = handler(event(*batch), None)
    assert sorted(failures(response)) == sorted(r["messageId"] for r in batch)  # on main: 9 of 9 in the DLQ
    assert drain(sqs, dlq_url) == []
    (error,) = _errors(stream)  # one line for the batch, not one per record
    (hint,) = error["likely_misconfiguration"]
    assert hint.startswith("the table's key schema differs from PARTITION_KEY/SORT_KEY")
    assert "Missing the key" in hint
    assert error["misconfigured"] == 9
    emf = metrics(stream)[-1]
    assert (emf["failed"], emf["misconfigured"], emf["quarantined"]) == (9, 9, 0)


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        (
            "ResourceNotFoundException",
            "the DynamoDB table (TABLE_NAME) does not exist in this account and region",
        ),
        ("AccessDeniedException", "the function's role may not use the DynamoDB table (TABLE_NAME)"),
        ("UnrecognizedClientException", "the function's credentials are not accepted"),
        ("KMSAccessDeniedException", "the KMS key of the DynamoDB table (TABLE_NAME) is not usable"),
        ("KMSDisabledException", "the KMS key of the DynamoDB table (TABLE_NAME) is not usable"),
        ("KMSInvalidStateException", "the KMS key of the DynamoDB table (TABLE_NAME) is not usable"),
        ("KMSNotFoundException", "the KMS key of the DynamoDB table (TABLE_NAME) is not usable"),
    ],
)
@pytest.mark.parametrize("mode", ["document", "transaction", "guarded"])
def test_deployment_errors_fail_the_records_and_are_named(
    make_handler, fresh_dynamodb, sqs, dlq_url, code, hint, mode
):
    operation = {"document": "PutItem", "transaction": "TransactWriteItems", "guarded": "UpdateItem"}[mode]
    inject_errors(fresh_dynamodb, operation, code)
    extra = {"processor": "runtime_examples:apply_payment"} if mode == "transaction" else {}
    fn = (lambda message: None) if mode == "guarded" else None
    handler, stream = make_handler(
        client=fresh_dynamodb, fn=fn, mode=mode, dlq_url=dlq_url, log_level="INFO", **extra
    )
    results = handler.process_batch(event(record({"x": "a", "y": "1", "cents": 1})), None)
    assert [(r.outcome, r.misconfigured) for r in results] == [("failed", True)]
    assert drain(sqs, dlq_url) == []
    (error,) = _errors(stream)
    assert error["likely_misconfiguration"][0].startswith(hint)
    assert metrics(stream)[-1]["misconfigured"] == 1


def test_a_missing_table_is_named(make_handler, dlq_url, sqs):
    handler, stream = make_handler(table_name="no-such-table", dlq_url=dlq_url, log_level="INFO")
    (result,) = handler.process_batch(event(record({"x": "a", "y": "1"})), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert _errors(stream)[0]["likely_misconfiguration"][0].startswith(
        "the DynamoDB table (TABLE_NAME) does not exist in this account and region: ResourceNotFoundException"
    )
    assert drain(sqs, dlq_url) == []


def test_a_missing_dlq_is_named_and_the_poison_retried(make_handler, dynamodb):
    handler, stream = make_handler(
        dlq_url="https://sqs.us-east-1.amazonaws.com/123456789012/missing.fifo", log_level="INFO"
    )
    (result,) = handler.process_batch(event(record("{broken")), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    (hint,) = _errors(stream)[0]["likely_misconfiguration"]
    assert hint.startswith("the dead-letter queue (DLQ_URL) does not exist in this account and region")


@pytest.mark.parametrize("code", ["AccessDenied", "KmsAccessDenied", "KmsDisabled"])
def test_dlq_permission_and_key_errors_are_misconfiguration(make_handler, sqs, dlq_url, code):
    import boto3

    denied_sqs = boto3.client("sqs", region_name="us-east-1")
    inject_errors(denied_sqs, "SendMessage", code)
    from idempotent_runtime.config import Config
    from idempotent_runtime.flow import build_handler

    handler = build_handler(Config(table_name="documents", dlq_url=dlq_url), sqs_client=denied_sqs)
    (result,) = handler.process_batch(event(record("{broken")), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "dead-letter queue (DLQ_URL)" in result.hint


def test_other_validation_errors_stay_permanent(make_handler, fresh_dynamodb, sqs, dlq_url):
    inject_errors(
        fresh_dynamodb, "PutItem", "ValidationException", Error={"Code": "ValidationException",
        "Message": "Item size has exceeded the maximum allowed size"},
    )  # fmt: skip
    handler, _ = make_handler(client=fresh_dynamodb, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "a", "y": "1"})), None)
    assert (result.outcome, result.misconfigured) == ("quarantined", False)
    (dead,) = drain(sqs, dlq_url)
    assert "Item size has exceeded" in dead["MessageAttributes"]["idempotency.reason"]["StringValue"]


def test_valid_messages_are_processed_once_the_deployment_is_fixed(
    make_handler, other_schema_table, dynamodb
):
    broken, _ = make_handler(table_name=other_schema_table)
    fixed, _ = make_handler()
    rec = record({"x": "a", "y": "1"})
    assert failures(broken(event(rec), None)) == [rec["messageId"]]
    assert failures(fixed(event(rec), None)) == []
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["a"]


@pytest.fixture
def hash_only_table(dynamodb) -> str:
    """A table keyed on PARTITION_KEY alone (an imported table, say): SORT_KEY is a plain attribute, so
    two keys with one partition value are one item to DynamoDB, and no request fails for it."""
    dynamodb.create_table(
        TableName="orders-hash-only",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return "orders-hash-only"


SORT_KEY_HINT = "the table's key does not include SORT_KEY 'sk'"


@pytest.mark.parametrize(
    "settings",
    [{}, {"on_conflict": "duplicate"}, {"fingerprint_fields": ["x"]}],
    ids=["default", "on-conflict-duplicate", "fingerprint-fields"],
)
def test_a_table_without_the_sort_key_fails_other_keys_of_a_partition_as_misconfigured(
    make_handler, hash_only_table, dynamodb, sqs, dlq_url, settings
):
    handler, stream = make_handler(table_name=hash_only_table, dlq_url=dlq_url, log_level="INFO", **settings)
    first = record({"x": "o-1", "y": "l-1", "q": 1})
    second = record({"x": "o-1", "y": "l-2", "q": 2})
    results = handler.process_batch(event(first, second), None)
    assert [(r.outcome, r.misconfigured, r.conflict) for r in results] == [
        ("processed", False, False),
        ("failed", True, False),
    ]
    assert results[1].reason == (
        "retry later: the conditional write at pk 'o-1', sk 'l-2' found the item at pk 'o-1', sk 'l-1': "
        "another key, so the table's key is not (pk, sk)"
    )
    assert drain(sqs, dlq_url) == []
    (item,) = scan(dynamodb, hash_only_table)
    assert (item["sk"], item["q"]) == ({"S": "l-1"}, {"N": "1"})  # the first line, untouched
    (error,) = _errors(stream)
    (hint,) = error["likely_misconfiguration"]
    assert hint.startswith(SORT_KEY_HINT)
    counts = ("processed", "duplicates", "quarantined", "failed", "conflicts", "misconfigured")
    assert {name: metrics(stream)[-1][name] for name in counts} == {
        "processed": 1,
        "duplicates": 0,
        "quarantined": 0,
        "failed": 1,
        "conflicts": 0,
        "misconfigured": 1,
    }


# Guarded mode's claim names the item by its whole key (an UpdateItem): DynamoDB refuses it on this table
# before reading any item, with the schema ValidationException.
SCHEMA_HINT = "the table's key schema differs from PARTITION_KEY/SORT_KEY"


@pytest.mark.parametrize(
    ("mode", "stored_sort", "extra", "hint"),
    [
        ("document", "l-1", {}, SORT_KEY_HINT),
        ("transaction", "idempotency#l-1", {"fn": lambda message: []}, SORT_KEY_HINT),
        ("guarded", "l-1", {"fn": lambda message: {"ran": True}}, SCHEMA_HINT),
    ],
)
def test_every_mode_reads_another_keys_item_as_misconfiguration(
    make_handler, hash_only_table, dynamodb, sqs, dlq_url, mode, stored_sort, extra, hint
):
    # What the mode wrote for (o-1, l-1), with another payload's fingerprint: on a table with the sort key
    # in its key schema the mode never sees it for (o-1, l-2).
    dynamodb.put_item(
        TableName=hash_only_table,
        Item={
            "pk": {"S": "o-1"},
            "sk": {"S": stored_sort},
            "idempotency:fingerprint": {"S": "0" * 64},
            "idempotency:status": {"S": "COMPLETED"},
        },
    )
    handler, stream = make_handler(table_name=hash_only_table, mode=mode, dlq_url=dlq_url, **extra)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "l-2"})), None)
    assert (result.outcome, result.misconfigured, result.conflict) == ("failed", True, False)
    assert result.hint.startswith(hint)
    assert drain(sqs, dlq_url) == []
    (item,) = scan(dynamodb, hash_only_table)
    assert item["sk"] == {"S": stored_sort}
    emf = metrics(stream)[-1]
    assert (emf["failed"], emf["misconfigured"], emf["conflicts"], emf["quarantined"]) == (1, 1, 0, 0)


def test_dedup_id_keys_for_records_of_a_standard_queue_are_misconfiguration(
    make_handler, dynamodb, sqs, dlq_url
):
    # QUEUE_TYPE says fifo (the default), but the event source mapping reads a standard queue.
    handler, stream = make_handler(key_source="dedup_id", dlq_url=dlq_url, log_level="INFO")
    batch = [record({"x": f"o-{i}", "y": "l-1"}, group=None) for i in range(3)]
    for rec in batch:
        rec["eventSourceARN"] = "arn:aws:sqs:us-east-1:123456789012:orders"
    results = handler.process_batch(event(*batch), None)
    assert [(r.outcome, r.misconfigured) for r in results] == [("failed", True)] * 3
    assert results[0].reason == (
        "retry later: KEY_SOURCE=dedup_id, but the record comes from the standard queue "
        "arn:aws:sqs:us-east-1:123456789012:orders, whose messages carry no MessageDeduplicationId"
    )
    assert drain(sqs, dlq_url) == []
    assert scan(dynamodb) == []
    (error,) = _errors(stream)
    assert error["likely_misconfiguration"] == [
        "KEY_SOURCE=dedup_id needs a FIFO queue: the event source is a standard queue, whose messages carry "
        "no MessageDeduplicationId; use KEY_SOURCE=fields, message_id, body_sha256 or field, or a FIFO queue"
    ]
    emf = metrics(stream)[-1]
    assert (emf["failed"], emf["misconfigured"], emf["quarantined"]) == (3, 3, 0)


def test_a_transaction_on_a_table_without_the_sort_key_is_misconfiguration_not_poison(
    make_handler, hash_only_table, dynamodb, sqs, dlq_url
):
    # The business line (o-1, l-1) and the marker (o-1, idempotency#l-1) are one item to this table:
    # DynamoDB refuses the transaction with a ValidationException, which is the deployment's fault.
    def line(message):
        return [{"Put": {"Item": {"pk": {"S": "o-1"}, "sk": {"S": "l-1"}, "q": {"N": "1"}}}}]

    handler, stream = make_handler(table_name=hash_only_table, mode="transaction", fn=line, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "l-1"})), None)
    assert (result.outcome, result.misconfigured, result.conflict) == ("failed", True, False)
    assert result.hint.startswith(SORT_KEY_HINT)
    assert drain(sqs, dlq_url) == [] and scan(dynamodb, hash_only_table) == []
    (error,) = _errors(stream)
    assert error["misconfigured"] == 1
    emf = metrics(stream)[-1]
    assert (emf["failed"], emf["misconfigured"], emf["quarantined"]) == (1, 1, 0)


def test_a_transaction_whose_own_entries_are_one_item_is_quarantined(make_handler, dynamodb, sqs, dlq_url):
    def twice(message):
        put = {"Put": {"Item": {"pk": {"S": "o-1"}, "sk": {"S": "l-1"}}}}
        return [put, put]

    handler, _ = make_handler(mode="transaction", fn=twice, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "l-1"})), None)
    assert result.outcome == "quarantined" and not result.misconfigured
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == "transaction entries operate on one item twice (dynamodb allows once)"
    assert scan(dynamodb) == []


def test_guarded_mode_on_a_table_without_the_sort_key_never_runs_the_effect(
    make_handler, hash_only_table, dynamodb, sqs, dlq_url
):
    # A new partition: nothing in the table to compare with. The claim itself must be refused, or the
    # effect runs, the completion is refused, and every delivery after the lease runs the effect again.
    effects: list[str] = []
    handler, _ = make_handler(
        table_name=hash_only_table,
        mode="guarded",
        fn=lambda message: effects.append(message.key.idempotency_key),
        dlq_url=dlq_url,
    )
    for _ in range(3):
        (result,) = handler.process_batch(event(record({"x": "o-1", "y": "l-1"})), None)
        assert (result.outcome, result.misconfigured) == ("failed", True)
        assert result.hint.startswith(SCHEMA_HINT)
    assert effects == []
    assert scan(dynamodb, hash_only_table) == [] and drain(sqs, dlq_url) == []


def test_two_operations_on_one_item_of_another_table_are_the_messages_fault(
    make_handler, dynamodb, sqs, dlq_url
):
    # The runtime does not know another table's key: two entries there may be one item, so DynamoDB's
    # refusal is the message's, not a sign that the runtime's own table is keyed otherwise.
    dynamodb.create_table(
        TableName="ledger",
        AttributeDefinitions=[{"AttributeName": "account", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "account", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )

    def twice(message):
        update = {
            "TableName": "ledger",
            "Key": {"account": {"S": "a-1"}},
            "UpdateExpression": "ADD cents :c",
            "ExpressionAttributeValues": {":c": {"N": "1"}},
        }
        return [{"Update": update}, {"Update": {**update, "UpdateExpression": "ADD fees :c"}}]

    handler, _ = make_handler(mode="transaction", fn=twice, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "l-1"})), None)
    assert (result.outcome, result.misconfigured) == ("quarantined", False)
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == "transaction entries operate on one item twice (dynamodb allows once)"
