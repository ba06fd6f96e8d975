"""Metrics tell the truth under slow DynamoDB: a write the runtime applied itself, whose response was lost
and which was sent again, is counted processed - not duplicate."""

from __future__ import annotations

import pytest
import runtime_examples
from idempotent_runtime.clients import create_client
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from idempotent_runtime.publisher import ConsumerKeys, publish
from runtime_helpers import (
    CLAIM,
    COMPLETION,
    Outcomes,
    deliver_until_empty,
    drain,
    event,
    lose_responses,
    record,
    scan,
)

ORDERS = 40


def _publish(sns, topic):
    orders = [{"x": f"o{i}", "y": "1", "cents": 10 + i, "email": f"c{i}@example.com"} for i in range(ORDERS)]
    assert publish(
        sns, topic, orders, keys=ConsumerKeys(("x", "y")), group_id=lambda m: f"g{int(m['x'][1:]) % 4}"
    ).ok
    return orders


def _bundled(config, **extra):
    """The runtime as the Lambda runs it: its own client (botocore retries off, deadline timeouts)."""
    client = create_client("dynamodb", parameter_validation=config.mode == "transaction")
    return client, build_handler(config, dynamodb_client=client, **extra)


@pytest.mark.parametrize(
    ("mode", "operations", "processor"),
    [
        ("document", ["PutItem"], None),
        ("transaction", ["TransactWriteItems"], "runtime_examples:apply_payment"),
        ("guarded", [("UpdateItem", CLAIM), ("UpdateItem", COMPLETION)], "runtime_examples:send_receipt"),
    ],
)
def test_lost_responses_are_counted_processed_once_per_message(
    pipeline, sqs, table, dynamodb, dlq_url, mode, operations, processor
):
    sns, topic, queue_url, queue_arn = pipeline
    runtime_examples.SENT.clear()
    client, handler = _bundled(
        Config(table_name=table, mode=mode, processor=processor, dlq_url=dlq_url), sqs_client=sqs
    )
    lost = [  # 25 % lost (of each guarded step)
        lose_responses(client, *operation, every=4)
        if isinstance(operation, tuple)
        else lose_responses(client, operation, every=4)
        for operation in operations
    ]
    counted = Outcomes(handler)
    orders = _publish(sns, topic)
    deliver_until_empty(sqs, queue_url, queue_arn, counted)
    assert all(lost)
    assert counted.counts == {"processed": ORDERS}
    assert drain(sqs, dlq_url) == []
    if mode == "document":
        assert len(scan(dynamodb)) == ORDERS
    if mode == "transaction":
        balances = {i["pk"]["S"]: i["balance"]["N"] for i in scan(dynamodb) if i["sk"]["S"] == "balance"}
        assert balances == {f"account#{o['x']}": str(o["cents"]) for o in orders}
    if mode == "guarded":
        assert sorted(runtime_examples.SENT) == sorted((f"{o['x']}#1", o["email"]) for o in orders)


def test_a_write_applied_before_a_read_timeout_is_retried_by_the_runtime_and_counted_processed(
    table, dynamodb
):
    from botocore.exceptions import ReadTimeoutError

    client, handler = _bundled(Config(table_name=table))
    timed_out: list[bool] = []

    def time_out_once(**_):
        # The PutItem was applied; the runtime sees a read timeout instead of the answer.
        if not timed_out:
            timed_out.append(True)
            raise ReadTimeoutError(endpoint_url="https://dynamodb.invalid")

    client.meta.events.register("after-call.dynamodb.PutItem", time_out_once)
    (result,) = handler.process_batch(event(record({"x": "a", "y": "b"})), None)
    assert timed_out
    assert result.outcome == "processed"
    (item,) = scan(dynamodb)
    assert item["pk"] == {"S": "a"}


def test_a_redelivery_after_an_applied_write_is_a_duplicate(make_handler):
    # The token is per write, not per message: a later delivery of the same message (the first
    # invocation died after its write) is a duplicate, as it should be.
    handler, _ = make_handler()
    rec = record({"x": "a", "y": "b"})
    (first,) = handler.process_batch(event(rec), None)
    (again,) = handler.process_batch(event(rec), None)
    assert (first.outcome, again.outcome) == ("processed", "duplicate")


def test_write_tokens_are_unique_across_threads_and_look_like_128_bit_hex() -> None:
    import threading

    from idempotent_runtime.modes.base import new_token

    tokens: list[str] = []

    def take() -> None:
        tokens.extend(new_token() for _ in range(2000))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(tokens)) == len(tokens) == 16000
    assert all(len(token) == 32 and int(token, 16) >= 0 for token in tokens)


def test_a_forked_process_never_repeats_its_parents_write_tokens() -> None:
    import os

    from idempotent_runtime.modes.base import new_token

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next tokens, to the parent
        os.close(read)
        os.write(write, " ".join(new_token() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    parent = {new_token() for _ in range(3)}
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    assert len(child) == 3 and not parent & child
