"""Poison messages reach the DLQ once, with a reason and everything they came with."""

from __future__ import annotations

import json
import re

import pytest
from runtime_helpers import (
    REGION,
    EnvironmentDied,
    dlq_details,
    dlq_reason,
    drain,
    event,
    failures,
    log_lines,
    quarantine_records,
    record,
    scan,
)

from idempotent_local.events import lambda_sqs_event


def _nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


# --- nesting and recursion -------------------------------------------------------------------------------


def test_nesting_of_32_levels_is_stored_and_33_is_quarantined_with_the_path(
    make_handler, dynamodb, sqs, dlq_url
):
    handler, _ = make_handler(dlq_url=dlq_url)
    ok = record(f'{{"x": "a", "y": "1", "d": {_nested(32)}}}', group="g")
    deep = record(f'{{"x": "a", "y": "2", "d": {_nested(33)}}}', group="g")
    assert failures(handler(event(ok, deep), None)) == []
    assert [i["sk"]["S"] for i in scan(dynamodb)] == ["1"]
    (dead,) = drain(sqs, dlq_url)
    assert (
        dlq_reason(dead)
        == "body field d" + "[0]" * 32 + " is nested more than 32 levels deep (DynamoDB's limit)"
    )


@pytest.mark.parametrize("depth", [900, 5000])
def test_deep_nesting_is_quarantined_with_a_reason_not_retried(make_handler, dynamodb, sqs, dlq_url, depth):
    handler, _ = make_handler(dlq_url=dlq_url)
    deep = record(f'{{"x": "a", "y": "1", "d": {_nested(depth)}}}', group="g")
    after = record({"x": "b", "y": "1"}, group="g")
    assert failures(handler(event(deep, after), None)) == []  # on main: failed until redrive, no reason
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == deep["body"]
    assert dlq_reason(dead).startswith(
        "body field d[0][0]" if depth == 900 else "body is nested too deeply to parse"
    )
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["b"]


@pytest.mark.parametrize("depth", [900, 5000])
def test_guarded_mode_takes_deep_bodies_it_can_parse_and_quarantines_the_rest(
    make_handler, sqs, dlq_url, depth
):
    ran: list[str] = []
    handler, _ = make_handler(
        fn=lambda message: ran.append(message.message_id), mode="guarded", dlq_url=dlq_url
    )
    (result,) = handler.process_batch(event(record(f'{{"x": "a", "y": "1", "d": {_nested(depth)}}}')), None)
    if depth == 900:  # parsed, fingerprinted without recursion, not stored: the processor's business
        assert (result.outcome, len(ran)) == ("processed", 1)
    else:
        assert (result.outcome, ran) == ("quarantined", [])
        assert dlq_reason(drain(sqs, dlq_url)[0]).startswith("body is nested too deeply to parse")


def test_a_recursion_error_in_the_processor_is_quarantined_not_retried(make_handler, sqs, dlq_url):
    def recurse(message, depth=0):
        return recurse(message, depth + 1)

    handler, _ = make_handler(fn=recurse, mode="guarded", dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "a", "y": "1"})), None)
    assert result.outcome == "quarantined"
    assert dlq_reason(drain(sqs, dlq_url)[0]).startswith(
        "input nested too deeply for the runtime or the processor"
    )


# --- one DLQ message per quarantined record ----------------------------------------------------------------


def test_a_quarantined_record_redelivered_after_the_invocation_died_is_not_sent_twice(
    make_handler, sqs, dynamodb
):
    # A standard DLQ deduplicates nothing (like a FIFO DLQ after its 5-minute window: a function timeout
    # of 60 s gives a visibility timeout of 6 minutes).
    dlq = sqs.create_queue(QueueName="dlq-standard")["QueueUrl"]
    deaths: list[bool] = []

    def processor(message):
        if message.data.get("kill") and not deaths:
            deaths.append(True)
            raise EnvironmentDied()

    handler, _ = make_handler(fn=processor, dlq_url=dlq)
    poison = record({"y": "no partition key"}, group="g", receive_count=1)
    killer = record({"x": "k", "y": "1", "kill": True}, group="g", receive_count=1)
    with pytest.raises(EnvironmentDied):  # after the poison's quarantine, before the batch response
        handler(event(poison, killer), None)
    for redelivered in (poison, killer):
        redelivered["attributes"]["ApproximateReceiveCount"] = "2"
    assert failures(handler(event(poison, killer), None)) == []
    (dead,) = drain(sqs, dlq)  # on main: two copies
    assert dead["Body"] == poison["body"]
    (quarantine,) = quarantine_records(dynamodb)
    assert quarantine["idempotency:status"] == {"S": "SENT"}
    assert quarantine["pk"] == {"S": "idempotency#quarantine#" + poison["messageId"]}


def _standard_queue_with_redrive(sqs, max_receive_count: int):
    dlq = sqs.create_queue(QueueName="source-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = sqs.create_queue(
        QueueName="source",
        Attributes={
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}
            )
        },
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return source, arn, dlq


def test_a_record_whose_invocation_keeps_dying_reaches_the_dlq_once_not_again_by_redrive(make_handler, sqs):
    source, source_arn, dlq = _standard_queue_with_redrive(sqs, max_receive_count=3)

    def processor(message):
        if message.data.get("kill"):
            raise EnvironmentDied()  # every time: this record dies until SQS's redrive moves it

    handler, _ = make_handler(fn=processor, dlq_url=dlq, max_workers=1)
    sqs.send_message(QueueUrl=source, MessageBody=json.dumps({"y": "poison: no partition key"}))
    sqs.send_message(QueueUrl=source, MessageBody=json.dumps({"x": "k", "y": "1", "kill": True}))
    for _ in range(8):
        messages = sqs.receive_message(
            QueueUrl=source,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            break
        with pytest.raises(EnvironmentDied):
            handler(lambda_sqs_event(messages, source_arn), None)
        for message in messages:  # the dead invocation's records become visible again
            try:
                sqs.change_message_visibility(
                    QueueUrl=source, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
            except Exception as exc:  # the quarantined record was deleted from the queue
                assert "ReceiptHandle" in str(exc) or "NonExistent" in str(exc) or "not" in str(exc).lower()
    dead = drain(sqs, dlq)
    bodies = sorted(m["Body"] for m in dead)
    # The poison once, with its reason (main: once per delivery, then once more by redrive); the record that
    # kept killing the invocation once, moved by SQS itself.
    assert bodies == sorted(
        [json.dumps({"y": "poison: no partition key"}), json.dumps({"x": "k", "y": "1", "kill": True})]
    )
    (ours,) = [m for m in dead if "idempotency.reason" in m.get("MessageAttributes", {})]
    assert dlq_reason(ours).startswith("partition key field 'x' is missing")


def test_the_quarantined_record_is_deleted_from_its_source_queue(make_handler, sqs, dlq_url):
    source, source_arn, _ = _standard_queue_with_redrive(sqs, max_receive_count=5)
    sqs.send_message(QueueUrl=source, MessageBody="not json")
    messages = sqs.receive_message(QueueUrl=source, MessageSystemAttributeNames=["All"])["Messages"]
    handler, _ = make_handler(dlq_url=dlq_url)
    handler(lambda_sqs_event(messages, source_arn), None)
    attributes = sqs.get_queue_attributes(
        QueueUrl=source,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attributes == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}
    assert len(drain(sqs, dlq_url)) == 1


# --- what the dead letter carries --------------------------------------------------------------------------


def _string(value: str) -> dict:
    return {"stringValue": value, "dataType": "String", "stringListValues": [], "binaryListValues": []}


def test_producer_attributes_survive_beside_the_runtimes_namespaced_ones(make_handler, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url)
    poison = record("{broken", group="orders", dedup_id="order-7#1")
    poison["messageAttributes"] = {
        "reason": _string("customer asked for a refund"),  # the producer's own attribute named "reason"
        "blob": {"binaryValue": "AAE=", "dataType": "Binary", "stringListValues": [], "binaryListValues": []},
    }
    handler(event(poison), None)
    (dead,) = drain(sqs, dlq_url)
    attributes = dead["MessageAttributes"]
    assert attributes["reason"]["StringValue"] == "customer asked for a refund"  # on main: overwritten
    assert attributes["blob"]["BinaryValue"] == b"\x00\x01"
    assert dlq_reason(dead).startswith("body is not valid json")
    assert dlq_details(dead) == {
        "kind": "invalid",
        "source_message_id": poison["messageId"],
        "group_id": "orders",
        "dedup_id": "order-7#1",
        "key": None,
        "fingerprint": None,
        "stored_fingerprint": None,
        "receive_count": 1,
        "function": "local",
        "dropped_attributes": [],
    }


def test_attributes_that_do_not_fit_are_named_in_the_dlq_message_and_the_log(make_handler, sqs, dlq_url):
    handler, stream = make_handler(dlq_url=dlq_url)
    poison = record("{broken")
    poison["messageAttributes"] = {f"a{i:02}": _string(str(i)) for i in range(10)}
    poison["messageAttributes"]["idempotency.reason"] = _string("forged")  # the runtime's names: never copied
    poison["messageAttributes"]["idempotency.redrive"] = _string('{"source_message_id": "m-0"}')
    handler(event(poison), None)
    (dead,) = drain(sqs, dlq_url)
    kept = set(dead["MessageAttributes"])
    dropped = ["a07", "a08", "a09", "idempotency.reason"]
    assert kept == {f"a{i:02}" for i in range(7)} | {
        "idempotency.redrive",
        "idempotency.reason",
        "idempotency.details",
    }
    assert dlq_reason(dead).startswith("body is not valid json")
    assert dlq_details(dead)["dropped_attributes"] == dropped
    # One line for the record (beside the batch's EMF line), naming what was not copied and what else
    # went wrong on the way: this hand-built record's receipt handle cannot be deleted.
    (line,) = [line for line in log_lines(stream) if line.get("message") != "batch"]
    assert (line["message"], line["level"], line["dropped_attributes"]) == (
        "record quarantined",
        "WARNING",
        dropped,
    )
    (warning,) = line["warnings"]
    assert warning["warning"].startswith("quarantined record not deleted from its source queue")


# What real SQS accepts in message attribute values (moto accepts anything).
_SQS_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _reject_like_sqs(sqs_client):
    from botocore.awsrequest import AWSResponse

    def check(params, **_):
        for value in (params.get("MessageAttributes") or {}).values():
            if _SQS_INVALID.search(value.get("StringValue", "")):
                parsed = {
                    "Error": {"Code": "InvalidMessageContents", "Message": "Invalid characters found"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                }
                return AWSResponse("https://sqs.invalid", 400, {}, None), parsed
        return None

    sqs_client.meta.events.register("before-call.sqs.SendMessage", check)


def test_a_reason_built_from_input_never_makes_the_dlq_send_fail(make_handler, sqs, dlq_url):
    import boto3

    strict_sqs = boto3.client("sqs", region_name=REGION)
    _reject_like_sqs(strict_sqs)

    def reject(message):
        raise PermanentError(f"unknown account {message.data['account']}")

    from idempotent_runtime import PermanentError
    from idempotent_runtime.config import Config
    from idempotent_runtime.flow import build_handler

    handler = build_handler(
        Config(table_name="documents", dlq_url=dlq_url), sqs_client=strict_sqs, processor=reject
    )
    poison = record('{"x": "a", "y": "b", "account": "acme\\u0001\\ufffe\\ud800\\u0007 ok\\ttab"}')
    assert failures(handler(event(poison), None)) == []  # on main: the send fails on every delivery
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == "unknown account acme\\u0001\\ufffe\\ud800\\u0007 ok\ttab"
    assert dead["Body"] == poison["body"]
