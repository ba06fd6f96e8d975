"""idempotent_runtime.testing: the Message a processor gets, built for a unit test, with the key the consumer
would compute and, in guarded mode, a lease that needs no table."""

from __future__ import annotations

import pytest
import runtime_examples
from idempotent_runtime import LeaseLost
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.outbox import Emitted
from idempotent_runtime.testing import message
from runtime_examples import charge_payment
from runtime_helpers import event, scan

LINE = {"order_id": "o-1", "line_id": "1", "sku": "tea", "quantity": 2}
KEYS = {"partition_key_field": "order_id", "sort_key_field": "line_id"}


def test_the_key_is_the_one_the_consumer_stores(make_handler, dynamodb):
    built = message(LINE, key_prefix="shop#", **KEYS)
    assert (built.key.partition, built.key.sort) == ("shop#o-1", "1")
    handler, _ = make_handler(key_prefix="shop#", **KEYS)
    handler(event(built.record), None)  # the very record the helper built, through the consumer
    (item,) = scan(dynamodb)
    assert (item["pk"]["S"], item["sk"]["S"]) == (built.key.partition, built.key.sort)
    assert built.json_object() == LINE and built.group_id == "group-1" and built.receive_count == 1


def test_a_guarded_processor_runs_with_a_local_lease():
    built = message({"x": "cust-9", "y": "pay-from-a-unit-test", "cents": 250}, mode="guarded")
    charged = charge_payment(built)  # on main: AttributeError, message.key is None
    assert charged["cents"] == 250
    assert runtime_examples.PROVIDER.requests[-1] == "cust-9#pay-from-a-unit-test"
    assert 899 < built.lease.remaining() <= 900
    assert built.lease.extend(1200) > 1199 and built.lease.extensions == [1200]


def test_a_lost_lease_raises_as_the_consumer_would():
    built = message({"x": "cust-7", "y": "pay-1"}, mode="guarded", lease_lost=True)
    with pytest.raises(LeaseLost, match="taken over by another invocation"):
        built.lease.extend(30)


def test_other_modes_have_no_lease_and_transaction_keeps_the_markers_room():
    assert message({"x": "a", "y": "b"}).lease is None
    with pytest.raises(InvalidMessage, match="over dynamodb's 1012-byte limit"):
        message({"x": "a", "y": "s" * 1013}, mode="transaction")


def test_a_body_the_consumer_cannot_key_fails_as_it_would_in_the_consumer():
    with pytest.raises(InvalidMessage, match="partition key field 'x' is missing from the body"):
        message({"y": "1"})


def test_attributes_and_queue_type_are_delivered_as_lambda_delivers_them():
    built = message(
        "plain text", key_source="body_sha256", attributes={"tenant": "acme", "n": 3, "raw": b"\x00"}
    )
    assert built.message_attributes["tenant"] == {"dataType": "String", "stringValue": "acme"}
    assert built.message_attributes["n"] == {"dataType": "Number", "stringValue": "3"}
    assert built.message_attributes["raw"] == {"dataType": "Binary", "binaryValue": "AA=="}
    assert built.body == "plain text" and built.from_fifo_queue is True
    standard = message({"x": "a", "y": "b"}, queue_type="standard")
    assert standard.group_id is None and standard.dedup_id is None and standard.from_fifo_queue is False


PAYMENTS = "arn:aws:sns:us-east-1:123456789012:payments.fifo"


def pay_order_line(message):
    line = message.json_object()
    message.emit({"order_id": line["order_id"], "line": line["line_id"]}, attributes={"source": "orders"})
    message.emit("line paid", group_id="audit")
    return []


def test_an_emitting_processor_shows_what_it_would_commit():
    built = message(LINE, mode="transaction", emit_target_arn=PAYMENTS, table_name="orders", **KEYS)
    assert pay_order_line(built) == []
    assert built.outbox.emitted == [
        Emitted(
            '{"order_id":"o-1","line":"1"}',
            "group-1",  # the delivered message's group: the default
            "orders#o-1#1#000",  # the table, the key, the position: what the consumer commits
            {"source": {"DataType": "String", "StringValue": "orders"}},
        ),
        Emitted("line paid", "audit", "orders#o-1#1#001", {}),
    ]


def test_an_emit_the_consumer_would_refuse_is_refused_with_its_reason(make_handler, dlq_url):
    def bell(message):
        message.emit("ding \x07")
        return []

    with pytest.raises(InvalidMessage) as refused:
        bell(message(LINE, mode="transaction", emit_target_arn=PAYMENTS, table_name="documents", **KEYS))
    handler, _ = make_handler(fn=bell, mode="transaction", emit_target_arn=PAYMENTS, dlq_url=dlq_url, **KEYS)
    (result,) = handler.process_batch(event(message(LINE, **KEYS).record), None)
    expected = (
        "emitted message 0's body holds U+0007 at character 5, which SNS and SQS refuse (they take tab, "
        "line feed, carriage return and U+0020 to U+10FFFF but for surrogates, U+FFFE and U+FFFF)"
    )
    assert result.reason == str(refused.value) == expected
