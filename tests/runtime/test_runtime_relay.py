"""The relay: outbox items from the table's stream, published to the emit target in stream order, once per
emitted message downstream, past relay retries and SNS's 5-minute window."""

from __future__ import annotations

import base64
import io
import json
import os

import boto3
import pytest
from idempotent_runtime import contract
from idempotent_runtime.relay import Relay, RelayConfig, read_dead_letter
from idempotent_runtime.relay import handler as relay_handler
from outbox_helpers import FlakyPublisher, Stream, StrictSqs, fifo_target, stream_event
from runtime_helpers import REGION, Clock, drain, event, failures, log_lines, receive_event, record

TARGET = f"arn:aws:sns:{REGION}:123456789012:payments.fifo"


def emit_each(message):
    """Every order line emits one payment, to the order's group."""
    line = message.json_object()
    message.emit({"order": line["x"], "line": line["y"]}, group_id=line["x"], attributes={"source": "orders"})
    return []


@pytest.fixture
def stream(table, dynamodb):
    return Stream(dynamodb, table)


@pytest.fixture
def target(sqs):
    return fifo_target(sqs)


@pytest.fixture
def relay_dlq(sqs):
    return sqs.create_queue(QueueName="relay-dlq")["QueueUrl"]


def commit(make_handler, lines, group_of=lambda line: line[0]):
    """The orders consumer commits every line; returns its handler."""
    handler, _ = make_handler(fn=emit_each, mode="transaction", emit_target_arn=TARGET)
    for order, line in lines:
        assert (
            failures(handler(event(record({"x": order, "y": line}, group=group_of((order, line)))), None))
            == []
        )
    return handler


def relay_for(topic, sqs, publisher=None, dlq_url=None, log=None):
    sns = boto3.client("sns", region_name=REGION)
    return Relay(
        RelayConfig(target_arn=topic, dlq_url=dlq_url),
        target_client=publisher or sns,
        sqs_client=sqs,
        log_stream=log,
    )


def arrived(sqs, queue_url):
    return [(json.loads(m["Body"]), m["Attributes"]) for m in drain(sqs, queue_url)]


def test_each_emitted_message_is_published_once_in_stream_order_with_its_ids(
    make_handler, stream, target, sqs
):
    topic, queue_url, _ = target
    commit(make_handler, [("o-1", "1"), ("o-2", "1"), ("o-1", "2")])
    relay = relay_for(topic, sqs)
    assert relay(stream_event(stream.new())) == {"batchItemFailures": []}
    got = drain(sqs, queue_url)
    assert [(json.loads(m["Body"]), m["Attributes"]["MessageGroupId"]) for m in got] == [
        ({"order": "o-1", "line": "1"}, "o-1"),
        ({"order": "o-2", "line": "1"}, "o-2"),
        ({"order": "o-1", "line": "2"}, "o-1"),
    ]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in got] == [
        "documents#o-1#1#000",
        "documents#o-2#1#000",
        "documents#o-1#2#000",
    ]
    assert got[0]["MessageAttributes"]["source"] == {"StringValue": "orders", "DataType": "String"}


def test_ten_records_go_out_in_one_request_and_the_relay_reads_no_table(make_handler, stream, target, sqs):
    topic, queue_url, _ = target
    commit(make_handler, [(f"o-{n}", "1") for n in range(10)])
    sns = FlakyPublisher(boto3.client("sns", region_name=REGION))
    relay = Relay(RelayConfig(target_arn=topic), target_client=sns, sqs_client=sqs)
    relay(stream_event(stream.new()))
    assert [len(request) for request in sns.requests] == [10]
    assert not hasattr(relay, "dynamodb")  # the relay has no DynamoDB client at all
    assert len(drain(sqs, queue_url)) == 10


def test_a_refused_entry_stops_the_batch_and_the_retry_starts_at_its_record(
    make_handler, stream, target, sqs
):
    topic, queue_url, _ = target
    commit(make_handler, [("o-1", "1"), ("o-2", "1"), ("o-1", "2"), ("o-3", "1")])
    records = stream.new()
    # SNS fails the second entry (o-2) for a reason that may pass; the others are accepted.
    sns = FlakyPublisher(boto3.client("sns", region_name=REGION), {0: {1: ("InternalError", False)}})
    log = io.StringIO()
    relay = relay_for(topic, sqs, sns, log=log)
    response = relay(stream_event(records))
    assert response == {"batchItemFailures": [{"itemIdentifier": records[1]["dynamodb"]["SequenceNumber"]}]}
    (batch,) = [line for line in log_lines(log) if "_aws" in line]
    assert (batch["published"], batch["failed"], batch["reordered"]) == (3, 3, 0)
    # Lambda delivers that record and every later one again, in order.
    assert relay(stream_event(records[1:])) == {"batchItemFailures": []}
    # o-1#2 and o-3 went out twice with the same deduplication ids: SNS dropped the second copies.
    got = arrived(sqs, queue_url)
    assert sorted(body["order"] + "#" + body["line"] for body, _ in got) == [
        "o-1#1",
        "o-1#2",
        "o-2#1",
        "o-3#1",
    ]


def test_a_republish_after_the_5_minute_window_is_absorbed_by_a_consumer_keyed_by_the_id(
    make_handler, stream, target, sqs
):
    topic, queue_url, queue_arn = target
    commit(make_handler, [("o-1", "1")])
    records = stream.new()
    relay = relay_for(topic, sqs)
    relay(stream_event(records))
    payments_event, _ = receive_event(sqs, queue_url, queue_arn)
    # The relay crashed before answering and Lambda retried it after SNS's window: the same message again.
    sqs.purge_queue(QueueUrl=queue_url)
    duplicate = payments_event["Records"][0]
    again = {**duplicate, "messageId": "another-delivery"}
    payments, _ = make_handler(mode="document", key_source="dedup_id", table_name="documents")
    (first, second) = payments.process_batch({"Records": [duplicate, again]}, None)
    assert (first.outcome, second.outcome) == ("processed", "duplicate")


def test_a_message_the_target_refuses_for_good_goes_to_the_relays_dlq_and_its_group_goes_on(
    make_handler, stream, target, sqs, relay_dlq
):
    topic, queue_url, _ = target
    commit(make_handler, [("o-1", "1"), ("o-1", "2"), ("o-1", "3")])
    sns = FlakyPublisher(boto3.client("sns", region_name=REGION), {0: {1: ("InvalidParameter", True)}})
    relay = relay_for(topic, sqs, sns, dlq_url=relay_dlq)
    assert relay(stream_event(stream.new())) == {"batchItemFailures": []}
    assert [body["line"] for body, _ in arrived(sqs, queue_url)] == ["1", "3"]
    (dead,) = drain(sqs, relay_dlq)
    assert json.loads(dead["Body"]) == {"order": "o-1", "line": "2"}
    details = json.loads(dead["MessageAttributes"]["idempotency.details"]["StringValue"])
    assert details["kind"] == contract.DeadLetterKind.UNPUBLISHABLE == "unpublishable"
    assert (details["group_id"], details["dedup_id"], details["target"]) == (
        "o-1",
        "documents#o-1#2#000",
        topic,
    )
    assert dead["MessageAttributes"]["idempotency.reason"]["StringValue"] == (
        "the emit target refused it for good: InvalidParameter: injected"
    )
    assert dead["MessageAttributes"]["source"]["StringValue"] == "orders"  # the emitted attributes, kept


def test_a_refusal_for_good_without_a_relay_dlq_is_retried(make_handler, stream, target, sqs):
    topic, _, _ = target
    commit(make_handler, [("o-1", "1")])
    records = stream.new()
    sns = FlakyPublisher(boto3.client("sns", region_name=REGION), {0: {0: ("InvalidParameter", True)}})
    response = relay_for(topic, sqs, sns)(stream_event(records))
    assert response == {"batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]}


def test_a_later_entry_of_a_group_accepted_after_an_earlier_was_refused_is_counted_as_reordered(
    make_handler, stream, target, sqs
):
    topic, queue_url, _ = target
    commit(make_handler, [("o-1", "1"), ("o-1", "2")])
    records = stream.new()
    sns = FlakyPublisher(boto3.client("sns", region_name=REGION), {0: {0: ("InternalError", False)}})
    log = io.StringIO()
    relay = relay_for(topic, sqs, sns, log=log)
    relay(stream_event(records))
    lines = log_lines(log)
    (batch,) = [line for line in lines if "_aws" in line]
    assert batch["reordered"] == 1
    (warning,) = [line for line in lines if line.get("message", "").startswith("order:")]
    assert (warning["refused"], warning["accepted"]) == ("documents#o-1#1#000", "documents#o-1#2#000")
    relay(stream_event(records))  # the stream delivers from o-1#1 again
    # What downstream sees, exactly: line 2 before line 1 (its republish dropped by SNS's deduplication).
    assert [body["line"] for body, _ in arrived(sqs, queue_url)] == ["2", "1"]


def test_an_item_of_a_group_committed_before_one_already_published_is_counted_as_reordered(
    make_handler, stream, target, sqs
):
    """DynamoDB Streams orders records per item: a lane's item arriving after one that committed later
    (here: two hosts' clocks 5 s apart) is counted and named, once, not for a redelivery."""
    topic, queue_url, _ = target
    ahead, behind = Clock(1_800_000_005.0), Clock(1_800_000_000.0)
    for clock, line in ((ahead, "1"), (behind, "2")):
        handler, _ = make_handler(fn=emit_each, mode="transaction", emit_target_arn=TARGET, clock=clock)
        assert failures(handler(event(record({"x": "o-1", "y": line}, group="o-1")), None)) == []
    records = stream.new()
    log = io.StringIO()
    relay = relay_for(topic, sqs, log=log)
    assert relay(stream_event(records[:1])) == {"batchItemFailures": []}
    assert relay(stream_event(records[1:])) == {"batchItemFailures": []}  # the next batch of the shard
    assert relay(stream_event(records)) == {"batchItemFailures": []}  # delivered again: no new count
    lines = log_lines(log)
    assert [line["reordered"] for line in lines if "_aws" in line] == [0, 1, 0]
    (warning,) = [line for line in lines if line.get("message", "").startswith("order:")]
    assert (warning["group_id"], warning["published_first"], warning["committed_first"]) == (
        "o-1",
        "documents#o-1#1#000",
        "documents#o-1#2#000",
    )
    assert warning["committed_first_item"]["sk"] == "idempotency#outbox#1800000000000#o-1#2"
    assert warning["published_first_item"]["sk"] == "idempotency#outbox#1800000005000#o-1#1"
    assert [body["line"] for body, _ in arrived(sqs, queue_url)] == ["1", "2"]


def test_a_request_the_target_refuses_as_a_whole_is_retried_without_losing_anything(
    make_handler, stream, target, sqs
):
    topic, queue_url, _ = target
    commit(make_handler, [("o-1", "1"), ("o-2", "1")])
    records = stream.new()

    class Down:
        meta = boto3.client("sns", region_name=REGION).meta

        def publish_batch(self, **_):
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "AuthorizationError", "Message": "no"}}, "PublishBatch")

    log = io.StringIO()
    response = relay_for(topic, sqs, Down(), log=log)(stream_event(records))
    assert response == {"batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]}
    error = next(line for line in log_lines(log) if line["level"] == "ERROR")
    assert (
        "the function's role may not use the emit target (EMIT_TARGET_ARN)"
        in error["likely_misconfiguration"]
    )
    assert relay_for(topic, sqs)(stream_event(records)) == {"batchItemFailures": []}
    assert len(drain(sqs, queue_url)) == 2


def test_a_queue_target_gets_send_message_batch(make_handler, stream, sqs, table):
    url = sqs.create_queue(QueueName="payments-in.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    handler, _ = make_handler(fn=emit_each, mode="transaction", emit_target_arn=arn)
    handler(event(record({"x": "o-1", "y": "1"})), None)
    relay = Relay(RelayConfig(target_arn=arn), target_client=sqs)
    assert relay(stream_event(stream.new())) == {"batchItemFailures": []}
    (message,) = drain(sqs, url)
    assert message["Attributes"]["MessageDeduplicationId"] == "documents#o-1#1#000"


def test_a_record_that_is_not_a_readable_outbox_item_is_dead_lettered_whole_and_the_others_go_on(
    make_handler, stream, target, sqs, dynamodb, table, relay_dlq
):
    topic, queue_url, _ = target
    commit(make_handler, [("o-1", "1")])
    forged = {
        "pk": {"S": "idempotency#outbox#o-1"},
        "sk": {"S": "idempotency#outbox#1800000000000#forged"},
        "idempotency:emitter": {"S": "idempotency#outbox#"},
        "idempotency:messages": {"L": [{"M": {"body": {"N": "1"}}}]},
    }
    dynamodb.put_item(TableName=table, Item=forged)
    commit(make_handler, [("o-1", "2")])
    records = stream.new()
    assert len(records) == 3  # the emitter attribute lets the forged item through the filter
    assert relay_for(topic, sqs, dlq_url=relay_dlq)(stream_event(records)) == {"batchItemFailures": []}
    assert [body["line"] for body, _ in arrived(sqs, queue_url)] == ["1", "2"]
    (dead,) = drain(sqs, relay_dlq)
    assert dead["MessageAttributes"]["idempotency.reason"]["StringValue"].startswith(
        "never published: not an outbox item the relay can read: message 0 of idempotency:messages is "
        "malformed"
    )
    assert read_dead_letter(dead["Body"], dead["MessageAttributes"]) == {"record": forged}
    details = json.loads(dead["MessageAttributes"]["idempotency.details"]["StringValue"])
    assert details["outbox_item"] == {"pk": forged["pk"]["S"], "sk": forged["sk"]["S"]}
    assert details["source_message_id"] == records[1]["dynamodb"]["SequenceNumber"]


# -- messages no target accepts never hold up the others ------------------------------------------------


def _hand_written(sk, body, dedup_id, **more):
    """An outbox item written by 0.3's emit() (sk 'idempotency#outbox', no emitter) or by hand."""
    return {
        "pk": {"S": "idempotency#outbox#o-1"},
        "sk": {"S": sk},
        "idempotency:messages": {"L": [{"M": {"body": {"S": body}, "dedup_id": {"S": dedup_id}, **more}}]},
        "idempotency:group": {"S": "o-1"},
        "idempotency:message_id": {"S": "m-" + dedup_id},
    }


def test_poison_outbox_items_between_good_ones_are_dead_lettered_decodably_and_the_good_ones_published(
    make_handler, stream, sqs, dynamodb, table, relay_dlq
):
    url = sqs.create_queue(QueueName="payments-in.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    handler, _ = make_handler(fn=emit_each, mode="transaction", emit_target_arn=arn)
    assert failures(handler(event(record({"x": "o-1", "y": "1"})), None)) == []
    bell = {
        "attributes": {"M": {"note": {"M": {"DataType": {"S": "String"}, "StringValue": {"S": "bell \x07"}}}}}
    }
    poisons = [
        # 0.4's layout, written by hand: a control character in the body and in an attribute.
        {
            **_hand_written("idempotency#outbox#1800000000000#hand", "paid \x01 in full", "hand#000", **bell),
            "idempotency:emitter": {"S": "idempotency#outbox#"},
        },
        _hand_written("idempotency#outbox", "not a character: \uffff", "o-0#1#000"),  # what 0.3 committed
    ]
    for poison in poisons:
        dynamodb.put_item(TableName=table, Item=poison)
    assert failures(handler(event(record({"x": "o-2", "y": "1"})), None)) == []
    records = stream.new()
    assert len(records) == 4
    strict = StrictSqs(sqs)  # the target and the DLQ refuse what SQS refuses
    relay = Relay(RelayConfig(target_arn=arn, dlq_url=relay_dlq, table_name=table), target_client=strict)
    assert relay(stream_event(records)) == {"batchItemFailures": []}  # nothing retried, nothing held up
    assert [json.loads(m["Body"])["order"] for m in drain(sqs, url)] == ["o-1", "o-2"]
    assert strict.refused == []  # nothing was sent that SQS refuses
    dead = drain(sqs, relay_dlq)
    assert [read_dead_letter(d["Body"], d["MessageAttributes"]) for d in dead] == [
        {
            "body": "paid \x01 in full",
            "attributes": {"note": {"DataType": "String", "StringValue": "bell \x07"}},
        },
        {"body": "not a character: \uffff", "attributes": {}},
    ]
    encodings = {d["MessageAttributes"]["idempotency.encoding"]["StringValue"] for d in dead}
    assert encodings == {contract.DeadLetterEncoding.JSON_ZLIB_BASE64.value} == {"json+zlib+base64"}
    details = [json.loads(d["MessageAttributes"]["idempotency.details"]["StringValue"]) for d in dead]
    assert [(d["dedup_id"], d["group_id"], d["table"]) for d in details] == [
        ("hand#000", "o-1", table),
        ("o-0#1#000", "o-1", table),
    ]
    assert [d["outbox_item"]["sk"] for d in details] == [p["sk"]["S"] for p in poisons]
    assert dead[0]["MessageAttributes"]["idempotency.reason"]["StringValue"] == (
        "never published: SNS and SQS would refuse it: emitted message 0's body holds U+0001 at character 5, "
        "which SNS and SQS refuse (they take tab, line feed, carriage return and U+0020 to U+10FFFF but for "
        "surrogates, U+FFFE and U+FFFF)"
    )


def test_attributes_an_earlier_emit_let_through_are_dead_lettered_with_the_reason_and_the_group_goes_on(
    make_handler, stream, target, sqs, dynamodb, table, relay_dlq
):
    """0.4's emit() took 'aws.'-prefixed names and DynamoDB's numbers: the relay checks as emit() now does,
    dead-letters such a message naming the attribute, and publishes the others."""
    topic, queue_url, _ = target
    handler = commit(make_handler, [("o-1", "1")])

    def attribute(data_type, value):
        return {"M": {"DataType": {"S": data_type}, "StringValue": {"S": value}}}

    for n, (name, value) in enumerate([("aws.trace-id", attribute("String", "t-1")),
                                       ("cents", attribute("Number", "1E+125"))]):  # fmt: skip
        item = _hand_written(f"idempotency#outbox#180000000000{n}#o-1#9", "pay", f"o-1#9#00{n}")
        item["idempotency:messages"]["L"][0]["M"]["attributes"] = {"M": {name: value}}
        dynamodb.put_item(TableName=table, Item={**item, "idempotency:emitter": {"S": "idempotency#outbox#"}})
    assert failures(handler(event(record({"x": "o-1", "y": "2"}, group="o-1")), None)) == []
    relay = Relay(RelayConfig(target_arn=topic, dlq_url=relay_dlq), target_client=boto3.client("sns"))
    assert relay(stream_event(stream.new())) == {"batchItemFailures": []}
    assert [body["line"] for body, _ in arrived(sqs, queue_url)] == ["1", "2"]
    reasons = [d["MessageAttributes"]["idempotency.reason"]["StringValue"] for d in drain(sqs, relay_dlq)]
    assert reasons == [
        "never published: SNS and SQS would refuse it: emitted message 0: attribute name 'aws.trace-id' "
        "begins with 'aws.': SNS and SQS reserve 'AWS.' and 'Amazon.' in any casing; name it otherwise",
        "never published: SNS and SQS would refuse it: emitted message 0: attribute cents is the Number "
        "'1E+125', which SNS refuses (from -1E+9 to 1E+9, at most 5 digits after the point); send a str",
    ]


def test_a_03_outbox_item_still_in_the_stream_at_the_upgrade_is_published_as_stored_in_commit_order(
    make_handler, stream, target, sqs, dynamodb, table
):
    """0.3 replaced a group's one item (sort key 'idempotency#outbox') on every emit: the records of its
    writes still in the stream when 0.4 deploys are published with the ids they were written with, before
    what 0.4 commits after them to the same group."""
    topic, queue_url, _ = target
    for dedup_id in ("o-1#1#000", "o-1#2#000"):  # two 0.3 emits to group o-1, one item written twice
        dynamodb.put_item(
            TableName=table, Item=_hand_written("idempotency#outbox", "paid " + dedup_id, dedup_id)
        )
    handler, _ = make_handler(fn=emit_each, mode="transaction", emit_target_arn=topic)
    assert failures(handler(event(record({"x": "o-1", "y": "3"})), None)) == []
    relay = Relay(RelayConfig(target_arn=topic, table_name=table))
    assert relay(stream_event(stream.new())) == {"batchItemFailures": []}
    published = drain(sqs, queue_url)
    assert [m["Attributes"]["MessageDeduplicationId"] for m in published] == [
        "o-1#1#000",
        "o-1#2#000",
        f"{table}#o-1#3#000",
    ]
    assert [m["Body"] for m in published[:2]] == ["paid o-1#1#000", "paid o-1#2#000"]


def _emit_text(text):
    def emit(message):
        message.emit(text, group_id="o-1")
        return []

    return emit


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("x" * 262_000, "json+zlib+base64"),  # would not fit beside the reason and details: compressed
        (base64.b64encode(os.urandom(196_500)).decode(), "omitted"),  # not even then: the item holds it
    ],
)
def test_a_refused_message_too_large_for_a_dead_letter_with_its_details_is_still_dead_lettered(
    make_handler, stream, target, sqs, dynamodb, table, relay_dlq, text, encoding
):
    topic, _, _ = target
    handler, _ = make_handler(fn=_emit_text(text), mode="transaction", emit_target_arn=TARGET)
    assert failures(handler(event(record({"x": "o-1", "y": "1"})), None)) == []
    sns = FlakyPublisher(boto3.client("sns", region_name=REGION), {0: {0: ("InvalidParameter", True)}})
    relay = relay_for(topic, sqs, sns, dlq_url=relay_dlq)
    assert relay(stream_event(stream.new())) == {"batchItemFailures": []}
    (dead,) = drain(sqs, relay_dlq)
    assert dead["MessageAttributes"]["idempotency.encoding"]["StringValue"] == encoding
    details = json.loads(dead["MessageAttributes"]["idempotency.details"]["StringValue"])
    found = read_dead_letter(dead["Body"], dead["MessageAttributes"])
    if found is None:  # omitted: the outbox item named in the details holds it
        key = {name: {"S": value} for name, value in details["outbox_item"].items()}
        item = dynamodb.get_item(TableName=table, Key=key)["Item"]
        found = {"body": item["idempotency:messages"]["L"][details["position"]]["M"]["body"]["S"]}
    assert found["body"] == text


def test_the_relays_handler_reads_its_settings_from_the_environment(monkeypatch, target, sqs):
    import idempotent_runtime.relay as relay_module

    topic, _, _ = target
    monkeypatch.setattr(relay_module, "_relay", None)
    monkeypatch.setenv("EMIT_TARGET_ARN", topic)
    assert relay_handler({"Records": []}, None) == {"batchItemFailures": []}
    monkeypatch.setattr(relay_module, "_relay", None)
    monkeypatch.setenv("EMIT_TARGET_ARN", "not-an-arn")
    with pytest.raises(contract.ConfigurationError, match="EMIT_TARGET_ARN must be the arn of an sns topic"):
        relay_handler({"Records": []}, None)
