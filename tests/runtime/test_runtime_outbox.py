"""Emitting: message.emit() in transaction and guarded mode writes the emitted messages with the effect, in
one TransactWriteItems, as outbox items; they exist exactly when the effect committed."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from idempotent_runtime import outbox
from idempotent_runtime.config import Config
from idempotent_runtime.contract import ConfigurationError
from idempotent_runtime.relay import Relay, RelayConfig
from idempotent_runtime.retries import MAX_ATTEMPTS
from outbox_helpers import Stream, fifo_target, stream_event
from runtime_helpers import (
    REGION,
    Clock,
    EnvironmentDied,
    create_table,
    dlq_details,
    dlq_reason,
    drain,
    event,
    failures,
    receive_event,
    record,
    scan,
)

TARGET = f"arn:aws:sns:{REGION}:123456789012:payments.fifo"
DAY = 24 * 3600


def pay(message):
    """orders -> payments: record the order's payment and tell payments about it."""
    order = message.json_object()
    message.emit({"payment_id": f"pay-{order['x']}", "order_id": order["x"], "cents": order["cents"]})
    return [
        {
            "Put": {
                "Item": {
                    "pk": {"S": f"order#{order['x']}"},
                    "sk": {"S": "paid"},
                    "cents": {"N": str(order["cents"])},
                }
            }
        }
    ]


def outbox_items(dynamodb):
    return [item for item in scan(dynamodb) if item["pk"]["S"].startswith(outbox.OUTBOX_PARTITION_PREFIX)]


def messages_of(item):
    return [
        (m["M"]["body"]["S"], m["M"]["dedup_id"]["S"]) for m in item[outbox.OUTBOX_MESSAGES_ATTRIBUTE]["L"]
    ]


@pytest.fixture
def stream(table, dynamodb):
    return Stream(dynamodb, table)


def test_emitted_messages_are_committed_with_the_effect(make_handler, dynamodb, stream):
    clock = Clock()
    handler, _ = make_handler(fn=pay, mode="transaction", emit_target_arn=TARGET, clock=clock)
    message = record({"x": "o-1", "y": "1", "cents": 250}, group="o-1")
    response = handler(event(message), None)
    assert failures(response) == []
    (item,) = outbox_items(dynamodb)
    assert item == {
        "pk": {"S": "idempotency#outbox#o-1"},  # the lane: the downstream group (the source's by default)
        "sk": {"S": "idempotency#outbox#1800000000000#o-1#1"},  # commit time (ms), the emitting key
        "idempotency:messages": {
            "L": [
                {
                    "M": {
                        "body": {"S": '{"payment_id":"pay-o-1","order_id":"o-1","cents":250}'},
                        "dedup_id": {"S": "documents#o-1#1#000"},  # the table, the key, the position
                    }
                }
            ]
        },
        "idempotency:group": {"S": "o-1"},
        "idempotency:message_id": {"S": message["messageId"]},
        "idempotency:emitter": {"S": "idempotency#outbox#"},
        # It outlives the stream's 24 hours and the relay's retries: the relay never needs to delete it.
        "expires_at": {"N": str(1_800_000_000 + 7 * DAY)},  # max(2 days, the dedup TTL of 7 days)
    }
    # The emitting key's marker says where its emitted messages are.
    (marker,) = [i for i in scan(dynamodb) if i["sk"]["S"] == "idempotency#1"]
    assert outbox.outbox_keys("", marker) == [(item["pk"]["S"], item["sk"]["S"])]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in stream.new()] == ["idempotency#outbox#o-1"]


def test_a_duplicate_delivery_emits_nothing_again(make_handler, dynamodb, stream):
    handler, _ = make_handler(fn=pay, mode="transaction", emit_target_arn=TARGET)
    order = {"x": "o-1", "y": "1", "cents": 250}
    handler(event(record(order, group="o-1")), None)
    (again,) = handler.process_batch(event(record(order, group="o-1")), None)  # a resend, a new message id
    assert again.outcome == "duplicate"
    assert len(stream.new()) == 1  # one outbox write: the relay publishes it once


def test_a_failed_business_condition_emits_nothing(make_handler, dynamodb, dlq_url, sqs, stream):
    def refuse(message):
        message.emit({"never": True})
        return [{"ConditionCheck": {"Key": {"pk": {"S": "acct"}, "sk": {"S": "open"}},
                                    "ConditionExpression": "attribute_exists(pk)"}}]  # fmt: skip

    handler, _ = make_handler(fn=refuse, mode="transaction", emit_target_arn=TARGET, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1"})), None)
    assert result.outcome == "quarantined"
    assert outbox_items(dynamodb) == [] and stream.new() == []


def test_emits_past_the_transaction_limit_are_refused_naming_it(make_handler, dynamodb, dlq_url, sqs):
    def many(message):
        for group in ("a", "b"):
            message.emit({"to": group}, group_id=group)
        return [{"Put": {"Item": {"pk": {"S": "w"}, "sk": {"S": str(n)}}}} for n in range(98)]

    handler, _ = make_handler(fn=many, mode="transaction", emit_target_arn=TARGET, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1"})), None)
    assert result.outcome == "quarantined"
    assert result.reason == (
        "the transaction would hold 101 items (98 from the processor, 2 outbox item(s) for the emitted "
        "messages and the marker); TransactWriteItems takes at most 100"
    )
    assert scan(dynamodb) == []  # nothing committed
    (dead,) = drain(sqs, dlq_url)
    assert dlq_details(dead)["kind"] == "invalid"


def test_an_emitted_message_too_large_for_sns_refuses_the_message_before_anything_commits(
    make_handler, dynamodb, dlq_url, sqs
):
    def huge(message):
        message.emit({"blob": "x" * 262_144})
        return [{"Put": {"Item": {"pk": {"S": "balance"}, "sk": {"S": "o-1"}}}}]

    handler, _ = make_handler(fn=huge, mode="transaction", emit_target_arn=TARGET, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1"})), None)
    assert result.outcome == "quarantined"
    assert "emitted message 0 is 262155 bytes with its attributes, over the 262144 bytes SNS and SQS" in (
        result.reason
    )
    assert scan(dynamodb) == []
    assert "262144 bytes SNS and SQS take" in dlq_reason(drain(sqs, dlq_url)[0])


@pytest.mark.parametrize(
    ("emit", "reason"),
    [
        (
            {"body": "paid \x01 in full"},
            "emitted message 0's body holds U+0001 at character 5, which SNS and SQS refuse",
        ),
        ({"body": "half a pair \ud83d"}, "emitted message 0's body holds U+D83D at character 12"),
        ({"body": "not a character \uffff"}, "emitted message 0's body holds U+FFFF at character 16"),
        (
            {"body": {"note": "json escapes \x01"}, "attributes": {"note": "bell \x07"}},
            "attribute note's value holds U+0007 at character 5",
        ),
        (
            {"body": "ok", "group_id": "warehouse 1"},
            "emitted message 0: group_id must be 1-128 letters, digits and punctuation (no space)",
        ),
        ({"body": "ok", "group_id": "warehouse-1\n"}, "got 'warehouse-1\\n'"),
        ({"body": "ok", "group_id": "g" * 129}, "group_id must be 1-128 letters"),
        (
            {"body": "ok", "attributes": {"kind\n": "x"}},
            "attribute name 'kind\\n' is not one SNS and SQS take",
        ),
        (
            {"body": "ok", "attributes": {"idempotency.redrive": "{}"}},
            "begins with 'idempotency.', the runtime's own attributes",
        ),
        ({"body": ""}, "emitted message 0's body is empty"),
        (
            {"body": "ok", "attributes": {"aws.trace-id": "t-1"}},
            "attribute name 'aws.trace-id' begins with 'aws.': SNS and SQS reserve 'AWS.' and 'Amazon.' in "
            "any casing",
        ),
        ({"body": "ok", "attributes": {"AMAZON.source": "orders"}}, "begins with 'AMAZON.'"),
        # DynamoDB holds 1E-129; SQS takes magnitudes from 1E-128 only.
        (
            {"body": "ok", "attributes": {"rate": Decimal("1E-129")}},
            "attribute rate is the Number '1E-129', which SQS",
        ),
        # The target is a topic: SNS takes -10^9 to 10^9 with 5 decimals.
        (
            {"body": "ok", "attributes": {"cents": 10**10}},
            "attribute cents is the Number '10000000000', which SNS",
        ),
        ({"body": "ok", "attributes": {"rate": Decimal("0.000001")}}, "at most 5 digits after the point"),
    ],
)
def test_an_emit_sns_or_sqs_would_refuse_is_rejected_naming_it_before_anything_commits(
    make_handler, dynamodb, dlq_url, sqs, emit, reason
):
    def emit_then_write(message):
        message.emit(emit["body"], group_id=emit.get("group_id"), attributes=emit.get("attributes"))
        return [{"Put": {"Item": {"pk": {"S": "balance"}, "sk": {"S": "o-1"}}}}]

    handler, _ = make_handler(fn=emit_then_write, mode="transaction", emit_target_arn=TARGET, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1"})), None)
    assert result.outcome == "quarantined"
    assert reason in result.reason
    assert scan(dynamodb) == []  # nothing committed: no effect, no outbox item
    (dead,) = drain(sqs, dlq_url)
    assert reason in dlq_reason(dead)
    assert dlq_details(dead)["kind"] == "invalid"


@pytest.mark.parametrize(
    ("target", "number", "refused"),
    [
        ("arn:aws:sqs:us-east-1:123456789012:payments.fifo", 10**126, None),  # over DynamoDB's 9.99E+125
        ("arn:aws:sqs:us-east-1:123456789012:payments.fifo", Decimal("1.0E-128"), None),
        ("arn:aws:sqs:us-east-1:123456789012:payments.fifo", Decimal("1E+127"), "which SQS refuses"),
        ("arn:aws:sqs:us-east-1:123456789012:payments.fifo", Decimal("1." + "1" * 38), "which SQS refuses"),
        (TARGET, Decimal("-999999999.12345"), None),
        (TARGET, Decimal("1000000000.5"), "which SNS refuses"),
    ],
)
def test_a_number_attribute_is_judged_by_its_targets_range_not_dynamodbs(
    make_handler, dynamodb, dlq_url, sqs, target, number, refused
):
    def emit(message):
        message.emit({"ok": True}, attributes={"n": number})
        return []

    handler, _ = make_handler(fn=emit, mode="transaction", emit_target_arn=target, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1"})), None)
    if refused is None:
        assert result.outcome == "processed"
        (item,) = outbox_items(dynamodb)
        stored = item[outbox.OUTBOX_MESSAGES_ATTRIBUTE]["L"][0]["M"]["attributes"]["M"]["n"]["M"]
        assert stored["StringValue"]["S"] == str(number)  # exactly as given
    else:
        assert result.outcome == "quarantined" and refused in result.reason
        assert outbox_items(dynamodb) == []


def test_an_emit_without_a_target_is_a_misconfiguration_retried_never_quarantined(
    make_handler, dynamodb, dlq_url, sqs
):
    handler, _ = make_handler(fn=pay, mode="transaction", dlq_url=dlq_url, max_receive_count=1)
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1", "cents": 5})), None)
    assert (result.outcome, result.misconfigured) == ("failed", True)
    assert "the consumer has no emit_target (EMIT_TARGET_ARN)" in result.hint
    assert drain(sqs, dlq_url) == [] and scan(dynamodb) == []


def test_document_mode_with_an_emit_target_is_refused_at_cold_start():
    with pytest.raises(ConfigurationError) as refused:
        Config.from_env({"TABLE_NAME": "t", "EMIT_TARGET_ARN": TARGET})
    assert str(refused.value) == (
        "EMIT_TARGET_ARN needs IDEMPOTENCY_MODE 'transaction' or 'guarded', which commit the emitted "
        "messages with the effect; got IDEMPOTENCY_MODE 'document'"
    )


def test_a_processor_may_not_write_the_outbox(make_handler, dynamodb, dlq_url, sqs):
    def forge(message):
        return [{"Put": {"Item": {"pk": {"S": "shop#idempotency#outbox#g"}, "sk": {"S": "x"}}}}]

    handler, _ = make_handler(
        fn=forge, mode="transaction", emit_target_arn=TARGET, dlq_url=dlq_url, key_prefix="shop#"
    )
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1"})), None)
    assert result.outcome == "quarantined"
    assert "writes partition key 'shop#idempotency#outbox#g' of the runtime's table" in result.reason


def test_a_fifo_target_needs_a_group_a_standard_source_cannot_give(make_handler, dlq_url, sqs):
    handler, _ = make_handler(
        fn=pay, mode="transaction", emit_target_arn=TARGET, dlq_url=dlq_url, queue_type="standard"
    )
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1", "cents": 5}, group=None)), None)
    assert result.outcome == "quarantined"
    assert result.reason == (
        "emitted message 0 needs a group_id: the emit target is FIFO and this message has no MessageGroupId "
        "to take it from"
    )


def test_a_key_holding_the_separator_gets_a_sha256_deduplication_id(make_handler, dynamodb):
    handler, _ = make_handler(fn=pay, mode="transaction", emit_target_arn=TARGET)
    handler(event(record({"x": "o#1", "y": "1", "cents": 1}, group="g")), None)
    ((_, dedup_id),) = messages_of(outbox_items(dynamodb)[0])
    assert len(dedup_id) == 64 and dedup_id != "documents#o#1#1#000"


def test_a_standard_target_gets_one_outbox_item_per_message_not_a_shared_one(make_handler, dynamodb):
    def fan_out(message):
        message.emit({"n": 1})
        message.emit("plain text, sent as written", attributes={"kind": "note", "n": 2, "raw": b"\x00\x01"})
        return []

    handler, _ = make_handler(fn=fan_out, mode="transaction", emit_target_arn=TARGET.removesuffix(".fifo"))
    handler(event(record({"x": "o-1", "y": "1"}), record({"x": "o-2", "y": "1"})), None)
    partitions = sorted(item["pk"]["S"] for item in outbox_items(dynamodb))
    assert partitions == ["idempotency#outbox#o-1#1", "idempotency#outbox#o-2#1"]
    item = outbox_items(dynamodb)[0]
    assert outbox.OUTBOX_GROUP_ATTRIBUTE not in item
    second = item[outbox.OUTBOX_MESSAGES_ATTRIBUTE]["L"][1]["M"]["attributes"]["M"]
    assert second["raw"] == {"M": {"DataType": {"S": "Binary"}, "BinaryValue": {"B": b"\x00\x01"}}}


# -- guarded mode ------------------------------------------------------------------------------------------


class Charges:
    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, message):
        self.runs += 1
        message.emit({"charged": message.json_object()["x"]}, group_id="shipping")
        return {"run": self.runs}


def test_guarded_emits_are_written_with_the_completion_in_one_transaction(make_handler, fresh_dynamodb):
    calls: list[str] = []
    fresh_dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    charges = Charges()
    handler, _ = make_handler(fn=charges, mode="guarded", emit_target_arn=TARGET, client=fresh_dynamodb)
    handler(event(record({"x": "c-1", "y": "p-1"})), None)
    assert calls == ["UpdateItem", "TransactWriteItems"]  # the claim; the completion with its outbox item
    record_item = next(i for i in scan(fresh_dynamodb) if i["pk"]["S"] == "c-1")
    assert record_item["idempotency:status"] == {"S": "COMPLETED"}
    (item,) = outbox_items(fresh_dynamodb)
    assert messages_of(item) == [('{"charged":"c-1"}', "documents#c-1#p-1#000")]
    assert outbox.outbox_keys("", record_item) == [(item["pk"]["S"], item["sk"]["S"])]


def test_guarded_without_emits_completes_with_one_update_as_before(make_handler, fresh_dynamodb):
    calls: list[str] = []
    fresh_dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    handler, _ = make_handler(
        fn=lambda m: "ok", mode="guarded", emit_target_arn=TARGET, client=fresh_dynamodb
    )
    handler(event(record({"x": "c-1", "y": "p-1"})), None)
    assert calls == ["UpdateItem", "UpdateItem"]


def _die_at(client, operation):
    died: list[bool] = []

    def die(**_):
        if not died:
            died.append(True)
            raise EnvironmentDied()

    client.meta.events.register(f"before-call.dynamodb.{operation}", die)
    return died


def test_a_crash_between_effect_and_completion_reruns_the_effect_and_emits_once(make_handler, fresh_dynamodb):
    clock, charges = Clock(), Charges()
    handler, _ = make_handler(
        fn=charges,
        mode="guarded",
        emit_target_arn=TARGET,
        client=fresh_dynamodb,
        clock=clock,
        lease_seconds=30,
    )
    charge = record({"x": "c-1", "y": "p-1"})
    _die_at(fresh_dynamodb, "TransactWriteItems")
    with pytest.raises(EnvironmentDied):
        handler(event(charge), None)
    assert outbox_items(fresh_dynamodb) == []  # the effect ran; nothing was emitted

    clock.now += 30 + 10 + 1  # the claim expires; SQS delivers the charge again
    (result,) = handler.process_batch(event(charge), None)
    assert (result.outcome, charges.runs) == ("processed", 2)
    (item,) = outbox_items(fresh_dynamodb)
    assert messages_of(item) == [('{"charged":"c-1"}', "documents#c-1#p-1#000")]  # the first run's id


def test_a_lost_lease_emits_nothing_the_new_owner_emits_once(make_handler, fresh_dynamodb, dynamodb):
    clock = Clock()
    taken: list[bool] = []

    def slow(message):
        message.emit({"charged": "c-1"}, group_id="shipping")
        if not taken:  # while this run works, its lease ends and another delivery takes the key over
            taken.append(True)
            clock.now += 30 + 10 + 1
            other.process_batch(event(record({"x": "c-1", "y": "p-1"})), None)
        return "done"

    handler, _ = make_handler(
        fn=slow, mode="guarded", emit_target_arn=TARGET, client=fresh_dynamodb, clock=clock, lease_seconds=30
    )
    other, _ = make_handler(fn=slow, mode="guarded", emit_target_arn=TARGET, clock=clock, lease_seconds=30)
    (result,) = handler.process_batch(event(record({"x": "c-1", "y": "p-1"})), None)
    assert result.outcome == "failed" and "lease on key c-1#p-1 expired and was taken over" in result.reason
    (item,) = outbox_items(dynamodb)
    assert len(messages_of(item)) == 1  # the new owner's emit, once


def test_a_completion_whose_answer_was_lost_is_sent_again_and_emits_once(make_handler, fresh_dynamodb):
    from botocore.exceptions import ReadTimeoutError

    sent: list[bool] = []

    def lose_answer(http_response, **_):
        if not sent:
            sent.append(True)
            raise ReadTimeoutError(endpoint_url="https://dynamodb")

    fresh_dynamodb.meta.events.register("after-call.dynamodb.TransactWriteItems", lose_answer)
    handler, _ = make_handler(fn=Charges(), mode="guarded", emit_target_arn=TARGET, client=fresh_dynamodb)
    (result,) = handler.process_batch(event(record({"x": "c-1", "y": "p-1"})), None)
    assert result.outcome == "processed" and sent == [True]
    (item,) = outbox_items(fresh_dynamodb)
    assert len(messages_of(item)) == 1


# -- one downstream group, many source groups: every emitted message kept, in commit order ------------------


def ship(message):
    """Every order ships from one warehouse: one downstream group for all source groups."""
    order = message.json_object()
    message.emit({"ship": order["x"]}, group_id="warehouse-1", attributes={"n": int(order["y"])})
    return []


def test_every_emit_to_one_group_keeps_its_own_outbox_item_unchanged(make_handler, dynamodb, stream):
    clock = Clock()
    handler, _ = make_handler(fn=ship, mode="transaction", emit_target_arn=TARGET, clock=clock)
    commits = [("o-1", "customer-a"), ("o-2", "customer-b"), ("o-3", "customer-a")]
    for order, group in commits:
        assert failures(handler(event(record({"x": order, "y": "7"}, group=group)), None)) == []
        clock.now += 0.001
    items = outbox_items(dynamodb)  # a scan: the lane's items in sort key order, which is commit order
    assert [(item["pk"]["S"], item["sk"]["S"]) for item in items] == [
        ("idempotency#outbox#warehouse-1", "idempotency#outbox#1800000000000#o-1#7"),
        ("idempotency#outbox#warehouse-1", "idempotency#outbox#1800000000001#o-2#7"),
        ("idempotency#outbox#warehouse-1", "idempotency#outbox#1800000000002#o-3#7"),
    ]
    expected = [
        [
            {
                "M": {
                    "body": {"S": f'{{"ship":"{order}"}}'},
                    "dedup_id": {"S": f"documents#{order}#7#000"},
                    "attributes": {
                        "M": {"n": {"M": {"DataType": {"S": "Number"}, "StringValue": {"S": "7"}}}}
                    },
                }
            }
        ]
        for order, _ in commits
    ]
    assert [item[outbox.OUTBOX_MESSAGES_ATTRIBUTE]["L"] for item in items] == expected
    assert {item[outbox.OUTBOX_GROUP_ATTRIBUTE]["S"] for item in items} == {"warehouse-1"}
    # Written once each, never replaced: one INSERT per emitting message, no MODIFY.
    assert [r["eventName"] for r in stream.new()] == ["INSERT", "INSERT", "INSERT"]


@pytest.mark.parametrize("mode", ["transaction", "guarded"])
def test_a_commit_retried_for_long_sorts_after_what_committed_meanwhile_in_its_group(
    make_handler, fresh_dynamodb, dynamodb, stream, mode
):
    """o-2's commit is throttled for 70 s while o-1, emitting to the same downstream group, commits: its
    outbox item takes the time of the attempt that committed, so the table sorts the group as the stream
    delivers it (commit order) - what a redrive from the table publishes."""
    from botocore.exceptions import ClientError

    clock = Clock()
    ships = ship if mode == "transaction" else lambda message: ship(message) or "shipped"
    other, _ = make_handler(fn=ships, mode=mode, emit_target_arn=TARGET, clock=clock)
    throttled: list[bool] = []

    def throttle(**_):
        if not throttled:
            throttled.append(True)
            clock.now += 35
            assert failures(other(event(record({"x": "o-1", "y": "1"}, group="customer-a")), None)) == []
            clock.now += 35
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
            raise ClientError({"Error": error}, "TransactWriteItems")

    fresh_dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", throttle)
    slow, _ = make_handler(
        fn=ships, mode=mode, emit_target_arn=TARGET, client=fresh_dynamodb, clock=clock, lease_seconds=300
    )
    assert failures(slow(event(record({"x": "o-2", "y": "1"}, group="customer-b")), None)) == []
    assert throttled == [True]
    in_the_stream = [r["dynamodb"]["NewImage"]["idempotency:message_id"]["S"] for r in stream.new()]
    in_the_table = [item["idempotency:message_id"]["S"] for item in outbox_items(dynamodb)]  # by sort key
    assert in_the_table == in_the_stream
    assert [item["sk"]["S"] for item in outbox_items(dynamodb)] == [
        "idempotency#outbox#1800000035000#o-1#1",
        "idempotency#outbox#1800000070000#o-2#1",  # the attempt that committed, not the first
    ]


def test_emits_to_one_group_from_two_source_groups_arrive_in_commit_order(
    make_handler, dynamodb, sqs, stream
):
    handler, _ = make_handler(fn=ship, mode="transaction", emit_target_arn=TARGET)
    topic, queue_url, _ = fifo_target(sqs)
    for order, group in (("o-1", "customer-a"), ("o-2", "customer-b"), ("o-3", "customer-a")):
        handler(event(record({"x": order, "y": "1"}, group=group)), None)
    records = stream.new()
    # One partition per downstream group: its records share a shard, in the order of the writes.
    assert {r["dynamodb"]["Keys"]["pk"]["S"] for r in records} == {"idempotency#outbox#warehouse-1"}
    relay = Relay(RelayConfig(target_arn=topic), target_client=_sns(), sqs_client=sqs)
    assert relay(stream_event(records)) == {"batchItemFailures": []}
    arrived = drain(sqs, queue_url)
    assert [json.loads(m["Body"])["ship"] for m in arrived] == ["o-1", "o-2", "o-3"]
    assert {m["Attributes"]["MessageGroupId"] for m in arrived} == {"warehouse-1"}
    assert [m["Attributes"]["MessageDeduplicationId"] for m in arrived] == [
        "documents#o-1#1#000",
        "documents#o-2#1#000",
        "documents#o-3#1#000",
    ]


def test_a_hundred_messages_of_ten_groups_emitting_to_one_group_are_each_published_once_in_commit_order(
    make_handler, dynamodb, sqs, stream
):
    handler, _ = make_handler(fn=ship, mode="transaction", emit_target_arn=TARGET, max_workers=10)
    topic, queue_url, _ = fifo_target(sqs)
    for batch in range(10):  # ten source groups processed side by side, ten batches
        lines = [record({"x": f"o-{batch}-{g}", "y": str(g)}, group=f"customer-{g}") for g in range(10)]
        assert failures(handler(event(*lines), None)) == []
    items = outbox_items(dynamodb)
    assert len(items) == 100
    bodies = {item[outbox.OUTBOX_MESSAGES_ATTRIBUTE]["L"][0]["M"]["body"]["S"] for item in items}
    assert bodies == {f'{{"ship":"o-{b}-{g}"}}' for b in range(10) for g in range(10)}
    records = stream.new()
    committed = [r["dynamodb"]["NewImage"]["idempotency:messages"]["L"][0]["M"]["body"]["S"] for r in records]
    assert len(committed) == 100 and [r["eventName"] for r in records] == ["INSERT"] * 100
    relay = Relay(RelayConfig(target_arn=topic), target_client=_sns(), sqs_client=sqs)
    for start in range(0, 100, 25):  # Lambda's batches of the shard, in order
        assert relay(stream_event(records[start : start + 25])) == {"batchItemFailures": []}
    arrived = drain(sqs, queue_url)
    assert [m["Body"] for m in arrived] == committed  # each once, in the stream's (commit) order


# -- one FIFO target, two emitters ----------------------------------------------------------------------


def test_two_pipelines_on_two_tables_emit_different_ids_and_a_consumer_keyed_by_them_applies_both(
    make_handler, dynamodb, sqs
):
    """orders and returns (each with the default empty key_prefix) both emit for o-1 line 1 to one FIFO
    topic: two facts, two ids, two effects downstream."""
    create_table(dynamodb, "returns")
    topic, queue_url, queue_arn = fifo_target(sqs)
    for table in ("documents", "returns"):
        stream = Stream(dynamodb, table)
        handler, _ = make_handler(fn=pay, mode="transaction", emit_target_arn=topic, table_name=table)
        assert failures(handler(event(record({"x": "o-1", "y": "1", "cents": 250}, group="o-1")), None)) == []
        relay = Relay(RelayConfig(target_arn=topic), target_client=_sns(), sqs_client=sqs)
        assert relay(stream_event(stream.new())) == {"batchItemFailures": []}
    payments_event, _ = receive_event(sqs, queue_url, queue_arn)
    ids = [r["attributes"]["MessageDeduplicationId"] for r in payments_event["Records"]]
    assert ids == ["documents#o-1#1#000", "returns#o-1#1#000"]
    create_table(dynamodb, "payments")
    payments, _ = make_handler(mode="document", key_source="dedup_id", table_name="payments")
    assert [r.outcome for r in payments.process_batch(payments_event, None)] == ["processed", "processed"]
    assert len(scan(dynamodb, "payments")) == 2


def test_an_emits_deduplication_id_is_the_same_on_every_delivery(make_handler, fresh_dynamodb):
    """The first delivery's transaction fails (throttled), the next commits: the id emit() returned the
    first time is the one committed."""
    returned: list[str] = []

    def pay_and_note(message):
        returned.append(message.emit({"order": message.json_object()["x"]}))
        return []

    throttled: list[bool] = []

    def throttle(**_):
        if len(throttled) < MAX_ATTEMPTS:  # every attempt of the first delivery
            throttled.append(True)
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "Transact")

    fresh_dynamodb.meta.events.register("before-call.dynamodb.TransactWriteItems", throttle)
    handler, _ = make_handler(
        fn=pay_and_note, mode="transaction", emit_target_arn=TARGET, client=fresh_dynamodb
    )
    line = record({"x": "o-1", "y": "1"})
    (first,) = handler.process_batch(event(line), None)
    (second,) = handler.process_batch(
        event({**line, "attributes": {**line["attributes"], "ApproximateReceiveCount": "2"}}), None
    )
    assert (first.outcome, second.outcome) == ("failed", "processed")
    ((_, committed),) = messages_of(outbox_items(fresh_dynamodb)[0])
    assert returned == [committed, committed] == ["documents#o-1#1#000", "documents#o-1#1#000"]


def _sns():
    import boto3

    return boto3.client("sns", region_name=REGION)
