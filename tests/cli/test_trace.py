"""trace KEY: a key's record (stored, completed, in progress with its owner and lease, conflict), its dead
letters in both DLQs with their reasons, and what SQS shows of the source queue - computed with the
consumer's own configuration, read without moving anything. Pipelines built in the test process's moto
server and driven through the bundled handler."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

import dlq_processors
import pytest
from dlq_helpers import (
    by_group,
    client,
    command,
    consume,
    consumer,
    dead_letter,
    deploy_pipeline,
    drain,
    make_subscription_dlq,
    peek,
    publish,
)
from idempotent_runtime.contract import LEASE_ATTRIBUTE, OWNER_ATTRIBUTE, STATUS_ATTRIBUTE, DeadLetterKind
from idempotent_runtime.message import Key

pytestmark = pytest.mark.usefixtures("cloud")

ORDERS = {"PARTITION_KEY_FIELD": "order_id", "SORT_KEY_FIELD": "line_id"}
TEA = json.dumps({"order_id": "o-1", "line_id": "1", "sku": "tea", "quantity": 2})
COCOA = json.dumps({"order_id": "o-1", "line_id": "1", "sku": "cocoa", "quantity": 2})
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture(autouse=True)
def _processors():
    dlq_processors.reset()
    yield
    dlq_processors.reset()


def _traced(*argv: str, **kwargs: Any) -> dict[str, Any]:
    code, terminal = command("trace", *argv, "--json", **kwargs)
    assert code == 0, terminal.error
    return json.loads(terminal.out.getvalue())


def _screen(*argv: str) -> list[str]:
    code, terminal = command("trace", *argv)
    assert code == 0, terminal.error
    return terminal.lines


def _orders(**environment: str):
    pipeline = deploy_pipeline(environment={**ORDERS, **environment})
    return pipeline, consumer(pipeline)


def test_a_stored_document_is_shown_with_its_fingerprint_attributes_and_no_expiry():
    pipeline, handler = _orders()
    publish(pipeline, TEA, group="o-1")
    assert consume(pipeline, handler) == [(TEA, "processed")]

    traced = _traced("o-1", "1", "--stack", pipeline.stack)

    assert traced["pipeline"] == {
        "stack": pipeline.stack,
        "function": pipeline.function,
        "mode": "document",
        "key_source": "fields",
        "key_prefix": "",
        "table": pipeline.table,
    }
    assert traced["key"] == {
        "given": "order_id 'o-1', line_id '1'",
        "partition": "o-1",
        "sort": "1",
        "text": "o-1#1",
        "idempotency_key": "o-1#1",
    }
    table = traced["table"]
    assert (table["state"], table["record_state"], table["found"]) == ("stored", "done", True)
    assert table["record"] == {"pk": "o-1", "sk": "1"}
    assert SHA256.match(table["fingerprint"]) and table["message_fingerprint"] is None
    assert table["expires_at"] is None and table["owner"] is None and table["lease_expires_at"] is None
    assert table["attributes"] == ["line_id", "order_id", "quantity", "sku"]
    assert traced["dead_letters"] == []
    assert [(q["queue"], q["read"]) for q in traced["dead_letter_queues"]] == [
        ("dlq", 0),
        ("subscription", 0),
    ]
    assert traced["dead_letter_queues"][1]["url"] is None
    assert _named(traced["queue"]["url"]) == _named(pipeline.queue_url)
    assert traced["queue"] | {"url": None} == {
        "url": None,
        "fifo": True,
        "visible": 0,
        "in_flight": 0,
        "delayed": 0,
        "peeked": False,
        "read": 0,
        "messages": [],
        "not_shown": None,
    }

    screen = _screen("o-1", "1", "--stack", pipeline.stack)
    assert screen[0].startswith(
        f"key o-1#1 (order_id 'o-1', line_id '1') of {pipeline.stack}/{pipeline.function}"
    )
    assert screen[1] == f"consumer      document mode, fields keys; table {pipeline.table}"
    assert screen[2] == (
        "table         stored: the document is in the table; a delivery of this key is a duplicate, with "
        "another payload a conflict"
    )
    assert screen[3] == "              record at pk 'o-1', sk '1'"
    assert screen[4] == f"              fingerprint {table['fingerprint']}; never expires (no TTL)"
    assert "              attributes: line_id, order_id, quantity, sku" in screen
    dlq_url = traced["dead_letter_queues"][0]["url"]
    assert _named(dlq_url) == _named(pipeline.dlq_url)
    assert f"dead letters  none in the dead-letter queue {dlq_url} (0 read)" in screen
    assert (
        "              no subscription's dead-letter queue: no SNS subscription with a redrive policy "
        "delivers to the queue" in screen
    )
    assert f"in flight     queue {traced['queue']['url']} (FIFO): 0 visible, 0 in flight" in screen
    assert screen[-1] == f"logs          idempotent-pipeline logs --stack {pipeline.stack} --key 'o-1#1'"


def test_a_key_never_seen_is_absent_and_the_named_options_give_the_same_key():
    _orders()

    traced = _traced("--partition", "o-9", "--sort", "2")

    assert traced["key"]["text"] == "o-9#2"
    assert (traced["table"]["state"], traced["table"]["found"]) == ("absent", False)
    assert traced["table"]["meaning"] == "not in the table: the next delivery of this key is processed"
    assert traced["table"]["record"] == {"pk": "o-9", "sk": "2"}


def test_the_body_is_compared_with_the_stored_record_same_payload_or_conflict():
    pipeline, handler = _orders()
    publish(pipeline, TEA, group="o-1")
    consume(pipeline, handler)

    same = _traced("--body", TEA)["table"]
    other = _traced("--body", COCOA)["table"]

    assert (same["state"], same["message_fingerprint"]) == ("stored", same["fingerprint"])
    assert same["meaning"].startswith("the document is in the table (the same payload as this body)")
    assert other["state"] == "conflict" and other["record_state"] == "conflict"
    assert other["message_fingerprint"] != other["fingerprint"] == same["fingerprint"]
    assert other["meaning"] == (
        "done with another payload: a delivery of this body is quarantined to the dead-letter queue as a "
        "conflict (ON_CONFLICT)"
    )
    screen = _screen("--body", COCOA)
    assert (
        f"              fingerprint {other['fingerprint']}; this body's {other['message_fingerprint']}; "
        "never expires (no TTL)" in screen
    )


def test_a_versioned_key_holding_a_newer_version_is_stale_for_an_older_body():
    pipeline = deploy_pipeline(
        fifo=False, environment={**ORDERS, "IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "version"}
    )
    publish(pipeline, json.dumps({**json.loads(TEA), "version": 5}))
    consume(pipeline, consumer(pipeline))

    older = _traced("--body", json.dumps({**json.loads(TEA), "version": 3}), "--stack", pipeline.stack)[
        "table"
    ]
    same = _traced("--body", json.dumps({**json.loads(TEA), "version": 5}), "--stack", pipeline.stack)[
        "table"
    ]

    assert (older["state"], older["meaning"]) == (
        "stale",
        "holds version 5, newer than this body's 3: a delivery of this body is stale, it writes nothing",
    )
    assert same["state"] == "stored"
    assert same["meaning"].startswith("version 5 of the entity's state is in the table (the same payload")


def _versioned(*states: dict[str, Any]):
    """A versioned pipeline (VERSION_FIELD ``version``) that has stored each of ``states`` (tea's order line
    with these fields) in turn."""
    pipeline = deploy_pipeline(
        fifo=False, environment={**ORDERS, "IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "version"}
    )
    handler = consumer(pipeline)
    for state in states:
        publish(pipeline, json.dumps({**json.loads(TEA), **state}))
        assert [outcome for _, outcome in consume(pipeline, handler)] == ["processed"]
    return pipeline


def _tea(**fields: Any) -> str:
    return json.dumps({**json.loads(TEA), **fields})


def test_trace_of_a_versioned_key_shows_the_stored_version_and_the_body_s():
    pipeline = _versioned({"version": 5})

    by_key = _traced("o-1", "1", "--stack", pipeline.stack)["table"]
    older = _traced("--body", _tea(version=3), "--stack", pipeline.stack)["table"]
    same = _traced("--body", _tea(version=5), "--stack", pipeline.stack)["table"]

    assert (by_key["state"], by_key["version"], by_key["deleted"]) == (
        "stored",
        {"kind": "number", "text": "5"},
        False,
    )
    assert by_key["message_version"] is None
    assert by_key["meaning"].startswith("version 5 of the entity's state is in the table; ")
    assert (older["state"], older["version"]["text"], older["message_version"]) == (
        "stale",
        "5",
        {"kind": "number", "text": "3"},
    )
    assert older["meaning"] == (
        "holds version 5, newer than this body's 3: a delivery of this body is stale, it writes nothing"
    )
    assert same["meaning"].startswith(
        "version 5 of the entity's state is in the table (the same payload as this body); "
    )
    screen = _screen("--body", _tea(version=3), "--stack", pipeline.stack)
    assert "              version 5 (number); this body's 3" in screen


def test_trace_of_a_body_newer_than_the_stored_version_says_a_delivery_writes_it():
    pipeline = _versioned({"version": 5})

    newer = _traced("--body", _tea(version=7), "--stack", pipeline.stack)["table"]

    # Not "expired": the stored state has no TTL; a delivery of this body replaces it.
    assert (newer["state"], newer["record_state"], newer["expires_at"]) == ("older", "new", None)
    assert newer["meaning"] == (
        "holds version 5, older than this body's 7: a delivery of this body writes its state over it"
    )
    assert (newer["version"]["text"], newer["message_version"]["text"]) == ("5", "7")


def test_trace_of_a_versioned_key_shows_a_timestamp_version_in_utc_and_a_tombstone():
    pipeline = _versioned(
        {"version": "2026-11-26T10:00:00+02:00"}, {"version": "2026-11-26T09:30:00Z", "deleted": True}
    )

    traced = _traced("o-1", "1", "--stack", pipeline.stack)["table"]
    older = _traced("--body", _tea(version="2026-11-26T10:00:00+02:00"), "--stack", pipeline.stack)["table"]

    assert (traced["state"], traced["version"], traced["deleted"]) == (
        "stored",
        {"kind": "timestamp", "text": "2026-11-26T09:30:00.000000000Z"},
        True,
    )
    assert traced["meaning"].startswith(
        "the entity is deleted: its tombstone at version 2026-11-26T09:30:00.000000000Z is in the table; "
    )
    # The body's offset is read as the consumer reads it: 10:00+02:00 is 08:00Z, older than the tombstone.
    assert (older["state"], older["message_version"]["text"]) == ("stale", "2026-11-26T08:00:00.000000000Z")
    screen = _screen("o-1", "1", "--stack", pipeline.stack)
    assert (
        "              version 2026-11-26T09:30:00.000000000Z (timestamp); a tombstone: the entity is deleted"
        in (screen)
    )


def test_trace_of_a_body_whose_version_the_consumer_refuses_says_why():
    pipeline = _versioned({"version": 5})

    naive = _traced("--body", _tea(version="2026-11-26T10:00:00"), "--stack", pipeline.stack)["table"]

    assert naive["state"] == "invalid"
    assert naive["version"] == {"kind": "number", "text": "5"}
    assert naive["message_version"] is None
    assert "a timestamp without a UTC offset" in naive["meaning"]


def test_key_prefix_and_a_transaction_marker_are_where_the_consumer_writes_them():
    pipeline = deploy_pipeline(
        environment={
            "IDEMPOTENCY_MODE": "transaction",
            "PROCESSOR": "dlq_processors:add_to_balance",
            "KEY_PREFIX": "shop#",
        }
    )
    handler = consumer(pipeline, dlq_processors.add_to_balance)
    publish(pipeline, json.dumps({"x": "a1", "y": "1", "amount": 5}), group="a1")
    consume(pipeline, handler)

    traced = _traced("a1", "1", "--stack", pipeline.stack)

    assert (traced["key"]["partition"], traced["key"]["sort"]) == ("shop#a1", "1")
    assert traced["table"]["record"] == {"pk": "shop#a1", "sk": "idempotency#1"}
    assert traced["table"]["state"] == "stored"
    assert traced["table"]["meaning"].startswith("the marker of its transaction is in the table")
    expires = time.time() + 7 * 24 * 3600  # DEDUP_TTL_SECONDS' default
    assert abs(_epoch(traced["table"]["expires_at"]) - expires) < 60
    screen = _screen("a1", "1")
    assert screen[1].endswith("transaction mode, fields keys, KEY_PREFIX 'shop#'; table " + pipeline.table)
    assert "              record at pk 'shop#a1', sk 'idempotency#1'" in screen


def test_a_guarded_claim_shows_its_owner_and_lease_then_completes():
    pipeline = deploy_pipeline(
        environment={
            "IDEMPOTENCY_MODE": "guarded",
            "PROCESSOR": "dlq_processors:claim_and_run",
            "LEASE_SECONDS": "60",
        }
    )
    handler = consumer(pipeline, dlq_processors.claim_and_run)
    during: list[dict[str, Any]] = []
    dlq_processors.WHILE_CLAIMED.append(lambda: during.append(_traced("c1", "1", "--stack", pipeline.stack)))
    publish(pipeline, json.dumps({"x": "c1", "y": "1"}), group="c1")
    started = time.time()

    consume(pipeline, handler)

    [claimed] = during
    table = claimed["table"]
    assert (table["state"], table["status"]) == ("in_progress", "IN_PROGRESS")
    assert table["owner"] and re.match(r"^[0-9a-f]{32}$", table["owner"])
    # The lease as other deliveries see it: LEASE_SECONDS plus the margin (LEASE_MARGIN_SECONDS, 10).
    assert started + 60 <= _epoch(table["lease_expires_at"]) <= time.time() + 71
    assert table["meaning"] == (
        f"in progress: claimed by {table['owner']} until {table['lease_expires_at']} (lease); a delivery of "
        "this key meanwhile fails and is retried until the claim completes or its lease expires"
    )
    # The message is in flight meanwhile: received by the consumer, not yet deleted.
    assert claimed["queue"]["in_flight"] == 1
    assert claimed["queue"]["not_shown"].startswith("SQS does not show messages in flight")

    done = _traced("c1", "1")["table"]
    assert (done["state"], done["status"], done["lease_expires_at"]) == ("completed", "COMPLETED", None)
    assert done["meaning"].startswith("the processor ran for it")


def test_a_claim_whose_invocation_died_and_a_record_past_its_ttl_say_what_the_next_delivery_does():
    pipeline = deploy_pipeline(
        environment={"IDEMPOTENCY_MODE": "guarded", "PROCESSOR": "dlq_processors:claim_and_run"}
    )
    now = int(time.time())
    # What a claim looks like when its invocation died: IN_PROGRESS, its lease over, its TTL not.
    for sort, lease, ttl in (("1", now - 60, now + 3600), ("2", now + 3600, now - 60)):
        client("dynamodb").put_item(
            TableName=pipeline.table,
            Item={
                "pk": {"S": "c1"},
                "sk": {"S": sort},
                STATUS_ATTRIBUTE: {"S": "IN_PROGRESS"},
                OWNER_ATTRIBUTE: {"S": "a-dead-invocation"},
                LEASE_ATTRIBUTE: {"N": str(lease * 1000)},
                "expires_at": {"N": str(ttl)},
            },
        )

    dead = _traced("c1", "1")["table"]
    expired = _traced("c1", "2")["table"]

    assert (dead["state"], dead["record_state"], dead["owner"]) == (
        "lease_expired",
        "new",
        "a-dead-invocation",
    )
    assert dead["meaning"] == (
        f"claimed by a-dead-invocation, whose lease expired at {dead['lease_expires_at']}: the next delivery "
        "of the same payload takes the claim over and runs the processor again"
    )
    assert (expired["state"], expired["record_state"]) == ("expired", "new")
    assert expired["meaning"].startswith(
        f"its record expired at {expired['expires_at']} (TTL; DynamoDB deletes"
    )


def test_dead_letters_of_the_key_are_found_in_both_dlqs_with_their_reasons_and_left_in_place():
    pipeline, handler = _orders()
    subscription_dlq = make_subscription_dlq(pipeline, fifo=True)
    publish(pipeline, TEA, group="o-1")
    publish(pipeline, COCOA, group="o-1")  # the same key, other content: a conflict
    assert consume(pipeline, handler) == [(TEA, "processed"), (COCOA, "quarantined")]
    other = json.dumps({"order_id": "o-2", "line_id": "1"})
    moved = client("sqs").send_message(  # as SQS moves a message after maxReceiveCount: no reason
        QueueUrl=pipeline.dlq_url, MessageBody=TEA, MessageGroupId="o-1", MessageDeduplicationId="m1"
    )["MessageId"]
    dead_letter(other, queue_url=pipeline.dlq_url, group_id="o-2", key={"partition": "o-2", "sort": "1"})
    undelivered = client("sqs").send_message(  # what SNS leaves in the subscription's DLQ
        QueueUrl=subscription_dlq,
        MessageBody=COCOA,
        MessageGroupId="o-1",
        MessageDeduplicationId="s1",
        MessageAttributes={"ErrorCode": {"DataType": "String", "StringValue": "KMS.AccessDeniedException"}},
    )["MessageId"]
    before = {url: sorted(m["MessageId"] for m in peek(url)) for url in (pipeline.dlq_url, subscription_dlq)}

    traced = _traced("o-1", "1")

    letters = {(letter["queue"], letter["kind"]): letter for letter in traced["dead_letters"]}
    assert sorted(letters) == [("dlq", "conflict"), ("dlq", "moved"), ("subscription", "undeliverable")]
    conflict = letters[("dlq", "conflict")]
    assert conflict["group"] == "o-1" and conflict["copies"] == [conflict["message_id"]]
    assert "conflict" in conflict["reason"] and conflict["source_message_id"]
    assert letters[("dlq", "moved")]["message_id"] == moved
    assert letters[("dlq", "moved")]["reason"].startswith("moved by SQS after 3 receives")
    assert letters[("subscription", "undeliverable")]["message_id"] == undelivered
    assert letters[("subscription", "undeliverable")]["reason"] == (
        "SNS could not deliver it to the queue (ErrorCode=KMS.AccessDeniedException)"
    )
    assert [(q["queue"], _named(q["url"]), q["read"]) for q in traced["dead_letter_queues"]] == [
        ("dlq", _named(pipeline.dlq_url), 3),
        ("subscription", _named(subscription_dlq), 1),
    ]
    dlq_url, subscription_url = (q["url"] for q in traced["dead_letter_queues"])
    # Nothing moved: every dead letter is still there and visible.
    after = {url: sorted(m["MessageId"] for m in peek(url)) for url in (pipeline.dlq_url, subscription_dlq)}
    assert after == before

    screen = _screen("o-1", "1")
    assert f"dead letters  2 in the dead-letter queue {dlq_url} (3 read)" in screen
    assert any(line.strip().startswith(f"{moved}  o-1  ") and "  moved  " in line for line in screen)
    assert f"              1 in the subscription's dead-letter queue {subscription_url} (1 read)" in screen


def test_a_dead_letter_sqs_moved_has_an_unknown_key_when_the_consumer_keys_by_deduplication_id():
    pipeline = deploy_pipeline(environment={"KEY_SOURCE": "dedup_id"})
    publish(pipeline, "{}", group="g", dedup_id="d-2")
    sqs = client("sqs")
    while sqs.receive_message(QueueUrl=pipeline.queue_url, VisibilityTimeout=0).get("Messages"):
        pass  # received maxReceiveCount times: SQS moves it, with its message id as deduplication id
    dead_letter(
        "{}",
        queue_url=pipeline.dlq_url,
        group_id="g",
        kind=DeadLetterKind.REJECTED,
        reason="rejected by the processor",
        key={"partition": "d-1", "sort": "dedup_id"},
    )

    traced = _traced("--dedup-id", "d-1")

    assert traced["key"]["text"] == "d-1#dedup_id"
    assert [letter["kind"] for letter in traced["dead_letters"]] == ["rejected"]
    assert traced["dead_letter_queues"][0]["key_unknown"] == 1
    assert (
        "              ! 1 message(s) SQS moved whose key cannot be told: the consumer keys by the "
        "deduplication id, which SQS replaces with the message id in a FIFO dead-letter queue"
    ) in _screen("d-1")


def test_a_fifo_group_behind_ten_dead_letters_is_said_to_be_unread():
    pipeline, _ = _orders()
    for n in range(10):
        dead_letter(
            json.dumps({"order_id": f"f-{n}", "line_id": "1"}), queue_url=pipeline.dlq_url, group_id="g"
        )
    dead_letter(TEA, queue_url=pipeline.dlq_url, group_id="g", key={"partition": "o-1", "sort": "1"})

    traced = _traced("o-1", "1")

    assert traced["dead_letters"] == []
    assert (traced["dead_letter_queues"][0]["read"], traced["dead_letter_queues"][0]["not_reached"]) == (
        10,
        1,
    )
    screen = _screen("o-1", "1")
    dlq_url = traced["dead_letter_queues"][0]["url"]
    assert f"dead letters  none in the dead-letter queue {dlq_url} (10 read)" in screen
    assert any(
        line.startswith(
            "              ! 1 message(s) not read: SQS hands out at most 10 messages of a FIFO group"
        )
        and "a dead letter of this key may be among them" in line
        for line in screen
    )
    # All still there, in order (read back by removing them: SQS shows no more of the group otherwise).
    bodies = by_group(drain(pipeline.dlq_url))["g"]
    assert bodies == [json.dumps({"order_id": f"f-{n}", "line_id": "1"}) for n in range(10)] + [TEA]


def test_a_visible_message_with_the_key_is_seen_only_with_peek_and_stays_visible():
    pipeline, _ = _orders()
    message_id = publish(pipeline, TEA, group="o-1")
    publish(pipeline, json.dumps({"order_id": "o-2", "line_id": "1"}), group="o-2")

    unread = _traced("o-1", "1")["queue"]
    screen = _screen("o-1", "1")
    peeked = _traced("o-1", "1", "--peek")["queue"]

    assert (unread["visible"], unread["peeked"], unread["messages"]) == (2, False, [])
    assert (
        "              the visible messages were not read: --peek reads them, and each read counts as a "
        "receive (maxReceiveCount 3): the runtime quarantines a failing message on its last receive"
    ) in screen
    assert (peeked["peeked"], peeked["read"]) == (True, 2)
    [found] = peeked["messages"]
    assert (found["message_id"], found["group"], found["receive_count"]) == (message_id, "o-1", 1)
    assert len(peek(pipeline.queue_url)) == 2  # both still visible
    assert "              peeked at 2 of 2 visible message(s): 1 with this key" in _screen(
        "o-1", "1", "--peek"
    )


def test_a_message_in_flight_is_counted_and_the_screen_says_what_sqs_does_not_show():
    pipeline, _ = _orders()
    publish(pipeline, TEA, group="o-1")
    client("sqs").receive_message(QueueUrl=pipeline.queue_url, VisibilityTimeout=300)  # a consumer has it

    traced = _traced("o-1", "1", "--peek")
    screen = _screen("o-1", "1")

    assert (traced["queue"]["visible"], traced["queue"]["in_flight"], traced["queue"]["read"]) == (0, 1, 0)
    assert f"in flight     queue {traced['queue']['url']} (FIFO): 0 visible, 1 in flight" in screen
    assert (
        "              ! SQS does not show messages in flight (received by the consumer, not yet deleted or "
        "back in the queue), only their number: once the consumer writes the key's record the table above "
        "says so (in progress in guarded mode, stored or completed when done)"
    ) in screen


CUSTOMERS = {"KEY_SOURCE": "field", "PARTITION_KEY_FIELD": "customer.id", "KEY_PREFIX": "shop#"}


def test_trace_of_one_value_finds_the_document_of_a_single_field_key():
    pipeline = deploy_pipeline(environment=CUSTOMERS)
    handler = consumer(pipeline)
    customer = json.dumps({"customer": {"id": "c-1"}, "plan": "gold"})
    publish(pipeline, customer, group="c-1")
    assert consume(pipeline, handler) == [(customer, "processed")]

    traced = _traced("c-1", "--stack", pipeline.stack)

    assert traced["key"] == {
        "given": "customer.id 'c-1'",
        "partition": "shop#c-1",
        "sort": "customer.id",
        "text": "shop#c-1#customer.id",
        "idempotency_key": Key("shop#c-1", "customer.id").idempotency_key,
    }
    assert (traced["table"]["state"], traced["table"]["found"]) == ("stored", True)
    assert traced["table"]["record"] == {"pk": "shop#c-1", "sk": "customer.id"}
    assert _traced("--partition", "c-1", "--stack", pipeline.stack)["key"] == traced["key"]
    assert _traced("--body", customer, "--stack", pipeline.stack)["table"]["state"] == "stored"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["c-1", "1"],
            "the consumer keys messages by one field, customer.id (KEY_SOURCE=field): give its value",
        ),
        (["--sort", "1"], "keys messages by the field customer.id (KEY_SOURCE=field), not by sort"),
        ([], "give the key to trace: the value of customer.id (trace VALUE, or --partition VALUE)"),
    ],
)
def test_trace_of_a_single_field_key_takes_one_value(argv, error):
    pipeline = deploy_pipeline(environment=CUSTOMERS)
    code, terminal = command("trace", *argv, "--stack", pipeline.stack)
    assert code == 1 and error in terminal.error, terminal.error


def test_message_id_and_body_sha256_keys_are_computed_as_the_consumer_computes_them():
    by_id = deploy_pipeline(fifo=False, environment={"KEY_SOURCE": "message_id"})
    assert _traced("m-1", "--stack", by_id.stack)["key"]["text"] == "m-1#message_id"
    assert _traced("--message-id", "m-1", "--stack", by_id.stack)["table"]["record"] == {
        "pk": "m-1",
        "sk": "message_id",
    }
    by_body = deploy_pipeline(environment={"KEY_SOURCE": "body_sha256", "KEY_PREFIX": "t#"})
    import hashlib

    traced = _traced("--body", "any text", "--stack", by_body.stack)
    assert traced["key"]["partition"] == "t#" + hashlib.sha256(b"any text").hexdigest()
    assert traced["key"]["sort"] == "body_sha256"


@pytest.mark.parametrize(
    ("environment", "argv", "error"),
    [
        (ORDERS, ["o-1"], "give both values, got 'o-1'"),
        (ORDERS, [], "give the key to trace: the values of order_id and line_id (trace VALUE VALUE"),
        (
            ORDERS,
            ["--message-id", "m-1"],
            "keys messages by the fields order_id, line_id (KEY_SOURCE=fields), not by message id",
        ),
        (ORDERS, ["o-1", "1", "--body", "{}"], "give the key's values or --body, not both"),
        (ORDERS, ["o-1", "--sort", "1"], "as KEY KEY or with --partition/--sort, not both"),
        (ORDERS, ["--body", "not json"], "the consumer cannot key this body: body is not valid json"),
        (
            ORDERS,
            ["--body", '{"order_id": "o-1"}'],
            "the consumer cannot key this body: sort key field 'line_id' is missing",
        ),
        (ORDERS, ["idempotency#x", "1"], "begins with 'idempotency#', which the runtime reserves"),
        (
            {"KEY_SOURCE": "message_id"},
            ["--body", "{}"],
            "--body alone cannot say which; give the message id too",
        ),
        ({"KEY_SOURCE": "message_id"}, ["a", "b"], "give it as one KEY or with --message-id, got 'a', 'b'"),
        ({"KEY_SOURCE": "body_sha256"}, ["abc"], "give the body with --body, got 'abc'"),
        (
            {"PARTITION_KEY_FIELD": "order.id", "SORT_KEY_FIELD": "order"},
            ["o", "1"],
            "one field lies inside the other, so no body holds both",
        ),
    ],
)
def test_a_key_the_consumer_cannot_take_is_refused_naming_what_was_wrong(environment, argv, error):
    pipeline = deploy_pipeline(fifo=environment.get("KEY_SOURCE") != "message_id", environment=environment)

    code, terminal = command("trace", *argv, "--stack", pipeline.stack)

    assert code == 1
    assert terminal.error.startswith("error: ") and error in terminal.error, terminal.error
    assert terminal.out.getvalue() == ""


def test_trace_on_the_local_emulator_finds_the_apps_pipeline(local_app):
    pipeline, handler = _orders()
    publish(pipeline, TEA, group="o-1")
    consume(pipeline, handler)

    code, terminal = command("trace", "o-1", "1", "--local", "--app-dir", str(local_app))

    assert code == 0, terminal.error
    assert "in the local emulator on http://localhost:" in terminal.lines[0]
    assert terminal.lines[2].startswith("table         stored: ")
    assert terminal.lines[-1].endswith(
        f"logs --stack {pipeline.stack} --local --app-dir {local_app} --key 'o-1#1'"
    )


def _named(url: str) -> str:
    """A queue's account and name (the stack's outputs and GetQueueUrl give the same queue other hosts)."""
    return url.split("/", 3)[3]


def _epoch(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=UTC).timestamp()
