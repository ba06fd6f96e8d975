"""Permanent failures: each goes to the DLQ at once with its reason, its group goes on, nothing is lost."""

from __future__ import annotations

import json

import pytest
from idempotent_runtime import PermanentError
from runtime_helpers import dlq_details, drain, event, failures, metrics, record, record_logs, scan

# 420 KB of UTF-8 in a 210,000-character field (SQS takes bodies up to 1 MiB).
BIG = json.dumps({"x": "a1", "y": "b1", "blob": "é" * 210_000}, ensure_ascii=False)

POISON = [
    pytest.param("{not json", "body is not valid json", id="invalid-json"),
    pytest.param("", "body is not valid json", id="empty-body"),
    pytest.param("[1, 2]", "body must be a json object, got list", id="json-array"),
    pytest.param({"y": "b1"}, "partition key field 'x' is missing", id="missing-partition-field"),
    pytest.param({"x": "a1"}, "sort key field 'y' is missing", id="missing-sort-field"),
    pytest.param({"x": "", "y": "b1"}, "partition key field 'x' is empty", id="empty-partition-field"),
    pytest.param({"x": "a1", "y": ""}, "sort key field 'y' is empty", id="empty-sort-field"),
    pytest.param(
        {"x": {"id": 7}, "y": "b1"},
        "partition key field 'x' is an object with fields 'id', not a string, number or boolean",
        id="object-key",
    ),
    pytest.param(
        {"x": "a1", "y": None},
        "sort key field 'y' is null; a key must be a string, a number or a boolean",
        id="null-key",
    ),
    pytest.param({"x": ["a"], "y": "b1"}, "partition key field 'x' is an array", id="list-key"),
    pytest.param(
        {"x": "p" * 2049, "y": "b1"}, "is 2049 bytes, over dynamodb's 2048-byte limit", id="long-pk"
    ),
    pytest.param({"x": "a1", "y": "é" * 513}, "is 1026 bytes, over dynamodb's 1024-byte limit", id="long-sk"),
    pytest.param(BIG, "over dynamodb's 409600-byte (400 KB) item limit", id="big"),
    pytest.param(
        '{"x": "a1", "y": "b1", "n": 1e999}',
        "body field n number 1E+999 has a magnitude of about 1E+999, outside DynamoDB's range",
        id="overflowing-number",
    ),
    pytest.param(
        '{"x": "a1", "y": "b1", "n": NaN}',
        "n is NaN, which is not a JSON number and cannot be stored in dynamodb",
        id="nan",
    ),
    # A JSON escape of half a surrogate pair parses to text that has no UTF-8 form.
    pytest.param(
        r'{"x": "a\ud800", "y": "b1"}',
        r"partition key field 'x' has a lone surrogate '\ud800'",
        id="lone-surrogate-in-key",
    ),
    pytest.param(
        r'{"x": "a1", "y": "b1", "note": "half \udc00 a pair"}',
        r"a string has a lone surrogate '\udc00'",
        id="lone-surrogate-in-field",
    ),
]


@pytest.mark.parametrize(("body", "reason"), POISON)
def test_poison_input_goes_to_the_dlq_with_its_reason_and_unblocks_its_group(
    make_handler, dynamodb, sqs, dlq_url, body, reason
):
    handler, stream = make_handler(dlq_url=dlq_url)
    poison = record(body, group="orders")
    after = record({"x": "next", "y": "1"}, group="orders")
    assert failures(handler(event(poison, after), None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert reason in dead["MessageAttributes"]["idempotency.reason"]["StringValue"]
    assert dlq_details(dead)["source_message_id"] == poison["messageId"]
    assert dead["Body"] == poison["body"] or (poison["body"] == "" and dead["Body"] == " ")
    assert dead["Attributes"]["MessageGroupId"] == "orders"
    assert dead["Attributes"]["MessageDeduplicationId"] == poison["messageId"]
    assert [(i["pk"]["S"], i["sk"]["S"]) for i in scan(dynamodb)] == [("next", "1")]
    assert [line["outcome"] for line in record_logs(stream)] == ["quarantined", "processed"]


def test_processor_permanent_error_is_quarantined_with_its_reason(make_handler, sqs, dlq_url, dynamodb):
    def reject(message):
        if message.data.get("cents", 0) < 0:
            raise PermanentError(f"cents must not be negative, got {message.data['cents']}")
        return None

    handler, _ = make_handler(fn=reject, dlq_url=dlq_url)
    assert (
        failures(handler(event(record({"x": "a", "y": "b", "cents": -1}), record({"x": "c", "y": "d"}))))
        == []
    )
    (dead,) = drain(sqs, dlq_url)
    assert (
        dead["MessageAttributes"]["idempotency.reason"]["StringValue"] == "cents must not be negative, got -1"
    )
    assert len(scan(dynamodb)) == 1


def test_dedup_id_key_source_without_a_dedup_id_is_quarantined(make_handler, sqs, dlq_url):
    handler, _ = make_handler(key_source="dedup_id", dlq_url=dlq_url)
    handler(event(record({"v": 1}, group=None)), None)  # a standard queue has no MessageDeduplicationId
    (dead,) = drain(sqs, dlq_url)
    assert "no MessageDeduplicationId" in dead["MessageAttributes"]["idempotency.reason"]["StringValue"]


def test_original_message_attributes_travel_to_the_dlq(make_handler, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url)
    poison = record("{bad")
    poison["messageAttributes"] = {
        "tenant": {
            "stringValue": "acme",
            "dataType": "String",
            "stringListValues": [],
            "binaryListValues": [],
        },
        "blob": {"binaryValue": "AAE=", "dataType": "Binary", "stringListValues": [], "binaryListValues": []},
    }
    handler(event(poison), None)
    (dead,) = drain(sqs, dlq_url)
    assert dead["MessageAttributes"]["tenant"]["StringValue"] == "acme"
    assert dead["MessageAttributes"]["blob"]["BinaryValue"] == b"\x00\x01"


def test_dlq_send_failure_is_a_batch_item_failure_and_blocks_the_group(make_handler, dynamodb):
    handler, stream = make_handler(dlq_url="https://sqs.us-east-1.amazonaws.com/123456789012/missing.fifo")
    poison = record("{bad", group="g")
    later = record({"x": "a", "y": "b"}, group="g")
    other = record({"x": "c", "y": "d"}, group="other")
    assert failures(handler(event(poison, later, other), None)) == [poison["messageId"], later["messageId"]]
    assert [(i["pk"]["S"]) for i in scan(dynamodb)] == ["c"]
    logs = {line["message_id"]: line for line in record_logs(stream)}
    assert "sending to the dlq failed" in logs[poison["messageId"]]["reason"]


def test_without_a_dlq_a_permanent_failure_fails_the_rest_of_its_group(make_handler, dynamodb):
    handler, stream = make_handler()
    poison = record("{bad", group="g")
    later = record({"x": "a", "y": "b"}, group="g")
    other = record({"x": "c", "y": "d"}, group="other")
    assert failures(handler(event(poison, later, other), None)) == [poison["messageId"], later["messageId"]]
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["c"]
    logs = {line["message_id"]: line for line in record_logs(stream)}
    assert "no DLQ_URL" in logs[poison["messageId"]]["reason"]
    assert "earlier record" in logs[later["messageId"]]["reason"]


def test_every_input_ends_as_one_item_or_one_dlq_message(make_handler, dynamodb, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url)
    bodies = [{"x": f"k{i}", "y": "v"} for i in range(6)] + ["nope", {"x": None, "y": "v"}, {"y": "v"}]
    records = [record(b, group=f"g{i % 3}") for i, b in enumerate(bodies)]
    for _ in range(2):  # delivered twice
        assert failures(handler(event(*records), None)) == []
    assert len(scan(dynamodb)) == 6
    dead = drain(sqs, dlq_url)  # the second delivery finds each poison message's quarantine record
    assert sorted(m["Body"] for m in dead) == sorted(
        json.dumps(b) if isinstance(b, dict) else b for b in bodies[6:]
    )


def test_processor_item_over_400_kb_is_quarantined(make_handler, sqs, dlq_url, dynamodb):
    handler, _ = make_handler(fn=lambda message: {"copies": [message.body] * 20_000}, dlq_url=dlq_url)
    handler(event(record({"x": "a", "y": "b"})), None)
    (dead,) = drain(sqs, dlq_url)
    assert "400 KB" in dead["MessageAttributes"]["idempotency.reason"]["StringValue"]
    assert scan(dynamodb) == []


def test_standard_dlq_gets_no_fifo_parameters(make_handler, sqs):
    dlq = sqs.create_queue(QueueName="consumer-dlq")["QueueUrl"]
    handler, _ = make_handler(dlq_url=dlq)
    poison = record("{bad", group=None)
    assert failures(handler(event(poison), None)) == []
    (dead,) = drain(sqs, dlq)
    assert dead["Body"] == "{bad"
    assert "MessageGroupId" not in dead["Attributes"]
    assert dlq_details(dead)["source_message_id"] == poison["messageId"]


def test_processor_value_with_a_lone_surrogate_is_quarantined(make_handler, sqs, dlq_url, dynamodb):
    handler, stream = make_handler(
        fn=lambda message: {"note": message.data.get("note", "-")}, dlq_url=dlq_url
    )
    poison = record(r'{"x": "a", "y": "b", "note": "\ud800"}', group="h")
    after = record({"x": "c", "y": "d"}, group="h")
    assert failures(handler(event(poison, after), None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == poison["body"]
    assert dead["MessageAttributes"]["idempotency.reason"]["StringValue"].startswith(
        r"a string has a lone surrogate '\ud800' (half of a utf-16 pair), which is not valid unicode"
    )
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["c"]
    assert [line["outcome"] for line in record_logs(stream)] == ["quarantined", "processed"]


def test_escaped_surrogate_pair_is_stored_as_its_character(make_handler, dynamodb):
    handler, _ = make_handler()
    rec = record(r'{"x": "a\ud83d\ude00", "y": "b", "note": "\ud83d\ude00"}')
    assert failures(handler(event(rec), None)) == []
    (item,) = scan(dynamodb)
    assert item["pk"] == {"S": "a\U0001f600"} and item["note"] == {"S": "\U0001f600"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param('{"x": "o-1", "y": "l-1", "amount": 100, "amount": 5}', "amount", id="field"),
        # Which key the message would get depends on the parser.
        pytest.param('{"x": "o-A", "x": "o-B", "y": "l-1"}', "x", id="key-field"),
        pytest.param(
            '{"x": "o-1", "y": "l-1", "order": {"lines": [{"p": 1}, {"p": 1, "q": 2, "p": 2}]}}',
            "order.lines[1].p",
            id="nested",
        ),
        pytest.param('{"x": "o-1", "y": "l-1", "a": 1, "\\u0061": 1}', "a", id="escaped-name"),
    ],
)
@pytest.mark.parametrize("mode", ["document", "transaction", "guarded"])
def test_a_name_repeated_in_a_json_object_is_quarantined_naming_the_field(
    make_handler, dynamodb, sqs, dlq_url, body, field, mode
):
    ran: list[str] = []
    processor = None if mode == "document" else (lambda message: ran.append(message.message_id) or [])
    handler, stream = make_handler(fn=processor, mode=mode, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record(body)), None)
    assert result.outcome == "quarantined"
    (dead,) = drain(sqs, dlq_url)
    assert dead["MessageAttributes"]["idempotency.reason"]["StringValue"] == (
        f"body field {field} appears more than once in its object; a JSON object's names must be unique "
        "(parsers differ on which value counts)"
    )
    assert (dlq_details(dead)["kind"], dead["Body"]) == ("invalid", body)
    assert scan(dynamodb) == []
    assert ran == []
    emf = metrics(stream)[-1]
    assert (emf["quarantined"], emf["processed"], emf["failed"]) == (1, 0, 0)
