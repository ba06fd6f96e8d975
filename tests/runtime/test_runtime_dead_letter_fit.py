"""A dead letter always fits, and always carries its reason.

SQS counts the body and every message attribute against a queue's maximum message size; the runtime's
reason and details come on top of a message that fitted its source queue. Moto counts the body alone, so
these tests make the DLQ client count as SQS does (``limit_like_sqs``).
"""

from __future__ import annotations

import io
import json

import boto3
import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from runtime_helpers import (
    REGION,
    Context,
    dlq_details,
    dlq_reason,
    drain,
    event,
    failures,
    limit_like_sqs,
    log_lines,
    record,
    record_logs,
    sqs_size,
)

# SQS's maximum message size for a queue created without one (for years, and what these DLQs have).
SQS_MESSAGE_BYTES = 262_144


def _string(value: str) -> dict:
    return {"stringValue": value, "dataType": "String", "stringListValues": [], "binaryListValues": []}


@pytest.fixture
def strict_sqs():
    return boto3.client(
        "sqs", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def _handler(table, dynamodb, sqs_client, dlq_url, log_stream=None, **config):
    return build_handler(
        Config(table_name=table, dlq_url=dlq_url, **config),
        dynamodb_client=dynamodb,
        sqs_client=sqs_client,
        sleep=lambda seconds: None,
        log_stream=log_stream,
    )


def _poison(body_bytes: int, **attributes: str) -> dict:
    """A message no key can be read from (invalid JSON) of ``body_bytes``, with producer attributes."""
    poison = record("{" + "x" * (body_bytes - 1), group="orders")
    poison["messageAttributes"] = {name: _string(value) for name, value in attributes.items()}
    return poison


def _original_size(poison: dict) -> int:
    attributes = {
        name: {"DataType": value["dataType"], "StringValue": value["stringValue"]}
        for name, value in poison["messageAttributes"].items()
    }
    return sqs_size({"MessageBody": poison["body"], "MessageAttributes": attributes})


def test_a_copy_over_the_limit_drops_producer_attributes_largest_first_and_names_them(
    table, dynamodb, sqs, strict_sqs, dlq_url
):
    sizes = limit_like_sqs(strict_sqs, SQS_MESSAGE_BYTES)
    poison = _poison(260_500, trace="t" * 800, tenant="acme", note="n" * 400)
    assert _original_size(poison) <= SQS_MESSAGE_BYTES  # the source queue took it
    handler = _handler(table, dynamodb, strict_sqs, dlq_url)
    assert failures(handler(event(poison), None)) == []  # on main: refused by SQS, failed on every receive
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == poison["body"]
    assert set(dead["MessageAttributes"]) == {"tenant", "note", "idempotency.reason", "idempotency.details"}
    assert dlq_reason(dead).startswith("body is not valid json")
    details = dlq_details(dead)
    assert details["dropped_attributes"] == ["trace"]
    assert details["source_message_id"] == poison["messageId"] and "shortened" not in details
    assert len(sizes) == 1 and sizes[0] <= SQS_MESSAGE_BYTES  # sized before sending: one send


def test_then_the_details_longest_values_then_the_reason_are_shortened(
    make_handler, table, dynamodb, sqs, strict_sqs, dlq_url
):
    """A key of 2 KB is not a reason to lose the dead letter: the details' key goes, its source id stays."""
    limit_like_sqs(strict_sqs, SQS_MESSAGE_BYTES)
    from idempotent_runtime import PermanentError

    def reject(message):
        raise PermanentError("no such account: " + "a" * 900)

    handler = build_handler(
        Config(table_name=table, dlq_url=dlq_url),
        dynamodb_client=dynamodb,
        sqs_client=strict_sqs,
        processor=reject,
    )
    filler = "f" * (SQS_MESSAGE_BYTES - 2_000 - 1_500)
    poison = record({"x": "p" * 1_900, "y": "1", "filler": filler}, group="orders")
    poison["messageAttributes"] = {"tenant": _string("acme")}
    assert failures(handler(event(poison), None)) == []
    (dead,) = drain(sqs, dlq_url)
    details = dlq_details(dead)
    assert details["dropped_attributes"] == ["tenant"]
    assert details["shortened"] == ["key"]
    assert details["source_message_id"] == poison["messageId"] and details["kind"] == "rejected"
    assert dlq_reason(dead) == "no such account: " + "a" * 900  # it fitted without cutting the reason

    poison = record({"x": "p" * 1_900, "y": "2", "filler": filler + "f" * 1_000}, group="orders")
    handler(event(poison), None)
    (dead,) = drain(sqs, dlq_url)
    assert dlq_details(dead)["shortened"] == ["key"]
    assert dlq_reason(dead) == "no such account: " + "a" * 80 + "..."  # 100 characters


def test_a_size_refusal_is_answered_with_the_smallest_copy_once(table, dynamodb, sqs, strict_sqs):
    """A DLQ that takes less than its source queue: the planned copy is refused, the smallest is sent."""
    dlq_url = sqs.create_queue(QueueName="small-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sizes = limit_like_sqs(strict_sqs, 4_096)
    poison = _poison(3_600, tenant="acme", trace="t" * 300)
    handler = _handler(table, dynamodb, strict_sqs, dlq_url)
    assert failures(handler(event(poison), None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert set(dead["MessageAttributes"]) == {"idempotency.reason", "idempotency.details"}
    details = dlq_details(dead)
    assert details["dropped_attributes"] == ["trace", "tenant"] and details["shortened"] == []
    assert details["source_message_id"] == poison["messageId"]
    assert [size > 4_096 for size in sizes] == [True, False]  # refused, then the smallest: no loop


def test_a_dlq_that_refuses_even_the_smallest_copy_is_named_as_the_deployments_fault(
    table, dynamodb, sqs, strict_sqs
):
    dlq_url = sqs.create_queue(QueueName="tiny-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sizes = limit_like_sqs(strict_sqs, 4_096)
    poison = _poison(5_000)
    handler = _handler(table, dynamodb, strict_sqs, dlq_url)
    (result,) = handler.process_batch(event(poison), None)
    assert result.outcome == "failed" and result.misconfigured
    assert "refuses even the smallest copy" in result.hint
    assert len(sizes) == 2  # the planned copy and the smallest, never more
    assert drain(sqs, dlq_url) == []


def test_the_reason_is_cut_last_and_the_copy_keeps_its_source_message_id(table, dynamodb, sqs, strict_sqs):
    dlq_url = sqs.create_queue(QueueName="snug-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    limit_like_sqs(strict_sqs, 4_096)
    poison = _poison(3_600)  # its copy is 551 bytes more, its smallest copy 423
    handler = _handler(table, dynamodb, strict_sqs, dlq_url, function_name="f" * 60)
    handler(event(poison), None)
    (dead,) = drain(sqs, dlq_url)
    assert sqs_size({"MessageBody": dead["Body"], "MessageAttributes": dead["MessageAttributes"]}) <= 4_096
    assert len(dlq_reason(dead)) <= 100
    assert dlq_details(dead)["source_message_id"] == poison["messageId"]
    assert json.loads(dead["MessageAttributes"]["idempotency.details"]["StringValue"])["kind"] == "invalid"


# --- the last receive, when the invocation is about to time out ---------------------------------------------


def test_a_record_out_of_time_on_its_last_receive_is_quarantined_with_a_reason(make_handler, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url, max_receive_count=4)
    last = record({"x": "a", "y": "1"}, receive_count=4)
    earlier = record({"x": "b", "y": "1"}, receive_count=2, group="g2")
    response = handler(event(last, earlier), Context(900))  # under the 1 s margin, time for a send
    assert failures(response) == [earlier["messageId"]]  # on main: both failed, `last` left to SQS's redrive
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == last["body"]
    assert dlq_reason(dead) == (
        "not attempted: the invocation is about to time out on this record's last receive "
        "(4 of MAX_RECEIVE_COUNT 4)"
    )
    assert dlq_details(dead)["kind"] == "exhausted"


def test_later_records_of_its_group_out_of_time_follow_each_by_its_own_receive(make_handler, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url, max_receive_count=4)
    first = record({"x": "a", "y": "1"}, receive_count=2, group="g")
    last = record({"x": "a", "y": "2"}, receive_count=4, group="g")
    assert failures(handler(event(first, last), Context(900))) == [first["messageId"]]
    assert [dlq_details(m)["source_message_id"] for m in drain(sqs, dlq_url)] == [last["messageId"]]


def test_without_time_for_a_send_the_last_receive_is_left_to_sqs(make_handler, sqs, dlq_url):
    handler, stream = make_handler(dlq_url=dlq_url, max_receive_count=4)
    last = record({"x": "a", "y": "1"}, receive_count=4)
    assert failures(handler(event(last), Context(600))) == [last["messageId"]]  # 0.1 s past the reserve
    assert drain(sqs, dlq_url) == []
    (line,) = record_logs(stream)
    assert line["reason"] == "not attempted: the invocation is about to time out"
    assert [entry for entry in log_lines(stream) if entry.get("level") == "ERROR"] == []


@pytest.mark.parametrize("short_of_limit", [0, 1, 30, 60, 100, 150, 250, 400, 600])
@pytest.mark.parametrize("attributes", [{}, {"tenant": "acme"}])
def test_a_poison_message_near_the_limit_reaches_the_dlq_on_its_first_receive_with_what_fits(
    table, dynamodb, sqs, strict_sqs, dlq_url, short_of_limit, attributes
):
    """Even the short copy (a 100-character reason, shortened details) does not fit beside a message a few
    hundred bytes short of the limit: the longest reason that fits goes, the details' kind and source id when
    they fit too, else the reason alone, else nothing - never a loop without a reason."""
    sizes = limit_like_sqs(strict_sqs, SQS_MESSAGE_BYTES)
    poison = _poison(SQS_MESSAGE_BYTES - short_of_limit, **attributes)
    poison["body"] = poison["body"][
        : len(poison["body"]) - _original_size(poison) + SQS_MESSAGE_BYTES - short_of_limit
    ]
    assert _original_size(poison) == SQS_MESSAGE_BYTES - short_of_limit  # the source queue took it
    stream = io.StringIO()
    handler = _handler(table, dynamodb, strict_sqs, dlq_url, log_stream=stream)
    assert failures(handler(event(poison), None)) == []  # on main: refused by SQS, failed on every receive
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == poison["body"]
    assert max(sizes) <= SQS_MESSAGE_BYTES and len(sizes) == 1  # one request, which fits
    (line,) = record_logs(stream)
    whole = line["reason"]
    assert whole.startswith("body is not valid json")
    sent = dead.get("MessageAttributes", {})
    reason = sent.get("idempotency.reason", {}).get("StringValue")
    details = dlq_details(dead) if "idempotency.details" in sent else None
    if short_of_limit >= 24 + len("idempotency.reason") + len("String"):
        assert reason is not None  # a reason always travels when it can
    if reason is not None:
        assert reason == whole or (reason.endswith("...") and whole.startswith(reason[:-3]))
    if details is not None:
        assert (details["kind"], details["source_message_id"]) == ("invalid", poison["messageId"])
    short = details is None or details.get("shortened") == "all" or reason != whole
    assert ("no room beside it" in json.dumps(line)) == short  # said when anything was left out
    if short_of_limit <= 100:
        assert short  # these leave no room for the short copy of the reason and details
