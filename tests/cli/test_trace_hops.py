"""`trace` across hops on a stack of two pipelines and a relay (moto server): orders (transaction mode) emits
a payment request per line to the payments queue; payments keys by the deduplication id and refuses a
payment of 0 cents for good. The trace of an order line shows its outbox item and what payments did with
the emitted message: stored, dead-lettered (with the reason), not yet arrived; an outbox item that expired
is shown as gone."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from dlq_helpers import Hops, client, command, consume, consumer, deploy_hops, publish
from idempotent_runtime import PermanentError
from idempotent_runtime.outbox import OUTBOX_SORT_PREFIX
from idempotent_runtime.relay import Relay, RelayConfig
from test_dlq_relay_redrive import _stream, order_and_pay

pytestmark = pytest.mark.usefixtures("cloud")


def refuse_free_payments(message: Any) -> dict[str, Any]:
    """payments (document mode, keyed by the deduplication id): a payment of 0 cents is refused for good."""
    payment = message.json_object()
    if payment["cents"] == 0:
        raise PermanentError("a payment of 0 cents")
    return payment


def _lines(hops: Hops, *lines: tuple[str, str, int]) -> None:
    for order, line, cents in lines:
        body = json.dumps({"order_id": order, "line_id": line, "cents": cents})
        publish(hops.orders, body, group=order)
    assert {o for _, o in consume(hops.orders, consumer(hops.orders, order_and_pay))} == {"processed"}


def _relay(hops: Hops) -> None:
    """The relay, run on the table's stream as Lambda would."""
    _, _, records = _stream(hops)
    environment = client("lambda").get_function_configuration(FunctionName=hops.relay)["Environment"]
    relay = Relay(RelayConfig.from_env(environment["Variables"]), target_client=client("sqs"))
    assert relay({"Records": records}) == {"batchItemFailures": []}


def _trace(hops: Hops, order: str, *more: str) -> dict[str, Any]:
    code, terminal = command(
        "trace", order, "1", "--stack", hops.stack, "--function", "FunctionName", "--json", *more
    )
    assert code == 0, terminal.error
    return json.loads(terminal.out.getvalue())


def _states(document: dict[str, Any]) -> list[tuple[str | None, str | None]]:
    return [(m["state"], m["reason"]) for item in document["emitted"] for m in item["messages"]]


def test_each_emitted_message_is_followed_into_the_next_consumer():
    hops = deploy_hops()
    _lines(hops, ("o-1", "1", 2500), ("o-2", "1", 0), ("o-3", "1", 5))
    _relay(hops)
    outcomes = consume(hops.payments, consumer(hops.payments, refuse_free_payments))
    assert sorted(o for _, o in outcomes) == ["processed", "processed", "quarantined"]
    _lines(hops, ("o-4", "1", 7))  # committed; its relay has not run yet

    stored = _trace(hops, "o-1")
    (item,) = stored["emitted"]
    assert item["state"] == "in the outbox"
    assert item["target"].endswith(":" + hops.payments.queue_url.rsplit("/", 1)[1])
    (message,) = item["messages"]
    assert (message["dedup_id"], message["group_id"]) == (f"{hops.orders.table}#o-1#1#000", "o-1")
    assert (message["consumer"], message["state"]) == (f"{hops.stack}/{hops.payments.function}", "stored")
    assert json.loads(message["body"]) == {"order_id": "o-1", "line_id": "1", "cents": 2500}

    assert _states(_trace(hops, "o-2")) == [("dead-lettered", "a payment of 0 cents")]
    assert _states(_trace(hops, "o-4")) == [("not yet arrived", None)]

    table = hops.orders.table
    for outbox in client("dynamodb").scan(TableName=table)["Items"]:
        if outbox["sk"]["S"].startswith(OUTBOX_SORT_PREFIX) and outbox["pk"]["S"].endswith("o-3"):
            client("dynamodb").delete_item(TableName=table, Key={"pk": outbox["pk"], "sk": outbox["sk"]})
    (gone,) = _trace(hops, "o-3")["emitted"]
    assert (gone["state"], gone["messages"]) == ("gone", [])


def test_a_key_that_emitted_nothing_shows_no_hop():
    hops = deploy_hops()
    publish(hops.orders, json.dumps({"order_id": "o-9", "line_id": "1", "amount": 3}), group="o-9")
    import dlq_processors

    assert {o for _, o in consume(hops.orders, consumer(hops.orders, dlq_processors.add_to_order))} == {
        "processed"
    }

    assert _trace(hops, "o-9")["emitted"] == []


def test_a_message_taken_for_a_duplicate_of_another_messages_payload_is_duplicate_not_stored():
    """payments keyed by the body (order and line): the same payment, sent to payments by another sender
    before orders emitted it, is stored for that sender's message; orders' emitted message changed nothing
    and trace says so, naming the message the record was written for. A line only orders sent is stored."""
    hops = deploy_hops()
    keyed = {**hops.payments.environment, "KEY_SOURCE": "fields"}
    keyed |= {"PARTITION_KEY_FIELD": "order_id", "SORT_KEY_FIELD": "line_id"}
    client("lambda").update_function_configuration(
        FunctionName=hops.payments.function, Environment={"Variables": keyed}
    )
    payments = dataclasses.replace(hops.payments, environment=keyed)
    body = json.dumps({"order_id": "o-1", "line_id": "1", "cents": 2500})
    publish(payments, body, group="o-1", dedup_id="billing#o-1#1")
    assert [o for _, o in consume(payments, consumer(payments, refuse_free_payments))] == ["processed"]
    _lines(hops, ("o-1", "1", 2500), ("o-2", "1", 40))
    _relay(hops)
    outcomes = consume(payments, consumer(payments, refuse_free_payments))
    assert sorted(o for _, o in outcomes) == ["duplicate", "processed"]

    taken = _trace(hops, "o-1")
    (message,) = taken["emitted"][0]["messages"]
    assert message["dedup_id"] == f"{hops.orders.table}#o-1#1#000"
    assert message["state"] == "duplicate"
    assert message["reason"] == "the same payload was stored for billing#o-1#1"
    assert _states(_trace(hops, "o-2")) == [("stored", None)]
    code, terminal = command("trace", "o-1", "1", "--stack", hops.stack, "--function", "FunctionName")
    assert code == 0, terminal.error
    assert (
        f"{hops.orders.table}#o-1#1#000 group o-1 -> {hops.stack}/{hops.payments.function}: duplicate "
        "(the same payload was stored for billing#o-1#1)"
    ) in terminal.out.getvalue()


def test_a_versioned_next_consumer_shows_stale_under_a_newer_state_and_not_arrived_over_an_older_one():
    """payments keeps the latest state per line (versioned, version field `cents`): under a newer stored
    version orders' emitted message is stale, naming it; over an older one it is not applied yet (it was
    `stored` before: the walk took any record for this message's)."""
    hops = deploy_hops()
    versioned = {**hops.payments.environment, "KEY_SOURCE": "fields", "IDEMPOTENCY_MODE": "versioned"}
    versioned |= {"PARTITION_KEY_FIELD": "order_id", "SORT_KEY_FIELD": "line_id", "VERSION_FIELD": "cents"}
    client("lambda").update_function_configuration(
        FunctionName=hops.payments.function, Environment={"Variables": versioned}
    )
    payments = dataclasses.replace(hops.payments, environment=versioned)
    for order, cents in (("o-1", 9000), ("o-2", 10)):
        body = json.dumps({"order_id": order, "line_id": "1", "cents": cents})
        publish(payments, body, group=order, dedup_id=f"billing#{order}")
    assert [o for _, o in consume(payments, consumer(payments, refuse_free_payments))] == ["processed"] * 2
    _lines(hops, ("o-1", "1", 2500), ("o-2", "1", 40))  # committed; the relay has not run

    assert _states(_trace(hops, "o-1")) == [("stale", "a newer version is stored: number 9000")]
    assert _states(_trace(hops, "o-2")) == [("not yet arrived", None)]
    _relay(hops)
    outcomes = consume(payments, consumer(payments, refuse_free_payments))
    assert sorted(o for _, o in outcomes) == ["processed", "stale"]
    assert _states(_trace(hops, "o-1")) == [("stale", "a newer version is stored: number 9000")]
    assert _states(_trace(hops, "o-2")) == [("stored", None)]
