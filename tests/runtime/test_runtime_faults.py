"""Faults: throttled and timed-out DynamoDB calls are retried (in the call, then through SQS) and end as
exactly one effect per key, counted once as processed."""

from __future__ import annotations

from collections import Counter

import pytest
import runtime_examples
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from idempotent_runtime.publisher import ConsumerKeys, publish
from runtime_helpers import (
    CLAIM,
    COMPLETION,
    deliver_until_empty,
    drain,
    event,
    failures,
    inject_errors,
    record,
    scan,
)


class Reported:
    """The handler, counting the outcomes of every delivery."""

    def __init__(self, handler) -> None:
        self.handler = handler
        self.outcomes: Counter[str] = Counter()

    @property
    def failed(self) -> int:
        return self.outcomes["failed"]

    def __call__(self, event, context):
        results = self.handler.process_batch(event, context)
        self.outcomes.update(r.outcome.value for r in results)
        return {"batchItemFailures": [{"itemIdentifier": r.message.message_id} for r in results if r.failed]}


def _raise_timeouts(client, operation: str, every: int) -> list[int]:
    from botocore.exceptions import ReadTimeoutError

    calls = {"n": 0}
    raised: list[int] = []

    def timeout(**_):
        calls["n"] += 1
        if calls["n"] % every == 0:
            raised.append(calls["n"])
            raise ReadTimeoutError(endpoint_url="https://dynamodb.invalid")

    client.meta.events.register(f"before-call.dynamodb.{operation}", timeout)
    return raised


def _publish_orders(sns, topic, count=30, **extra):
    orders = [
        {"x": f"o{i}", "y": "1", "email": f"c{i}@example.com", "cents": 10 + i, **extra} for i in range(count)
    ]
    assert publish(
        sns, topic, orders, keys=ConsumerKeys(("x", "y")), group_id=lambda m: f"g{int(m['x'][1:]) % 5}"
    ).ok
    return orders


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "RequestLimitExceeded"])
def test_throttled_document_writes_end_as_one_item_per_key(
    pipeline, sqs, table, fresh_dynamodb, dynamodb, dlq_url, code
):
    sns, topic, queue_url, queue_arn = pipeline
    throttled = inject_errors(fresh_dynamodb, "PutItem", code, every=3)
    timeouts = _raise_timeouts(fresh_dynamodb, "PutItem", every=7)
    handler = Reported(
        build_handler(
            Config(table_name=table, dlq_url=dlq_url),
            dynamodb_client=fresh_dynamodb,
            sqs_client=sqs,
            sleep=lambda seconds: None,
        )
    )
    orders = _publish_orders(sns, topic)
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    assert throttled and timeouts
    # Throttling and timeouts are retried (in the call first, then through SQS), never quarantined, and
    # every order is counted processed exactly once.
    assert handler.outcomes["processed"] == len(orders)
    assert handler.outcomes["quarantined"] == 0
    assert drain(sqs, dlq_url) == []
    assert sorted(i["pk"]["S"] for i in scan(dynamodb)) == sorted(o["x"] for o in orders)


def test_throttled_transactions_move_each_balance_once(
    pipeline, sqs, table, fresh_dynamodb, dynamodb, dlq_url
):
    sns, topic, queue_url, queue_arn = pipeline
    throttled = inject_errors(
        fresh_dynamodb,
        "TransactWriteItems",
        "TransactionCanceledException",
        every=3,
        CancellationReasons=[{"Code": "ThrottlingError"}, {"Code": "None"}, {"Code": "None"}],
    )
    config = Config(
        table_name=table, mode="transaction", processor="runtime_examples:apply_payment", dlq_url=dlq_url
    )
    handler = Reported(
        build_handler(config, dynamodb_client=fresh_dynamodb, sqs_client=sqs, sleep=lambda seconds: None)
    )
    orders = _publish_orders(sns, topic)
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    assert throttled
    assert handler.outcomes["processed"] == len(orders)
    assert drain(sqs, dlq_url) == []
    balances = {i["pk"]["S"]: int(i["balance"]["N"]) for i in scan(dynamodb) if i["sk"]["S"] == "balance"}
    assert balances == {f"account#{o['x']}": o["cents"] for o in orders}


def test_throttled_guarded_effects_run_once_per_key(pipeline, sqs, table, fresh_dynamodb, dynamodb, dlq_url):
    sns, topic, queue_url, queue_arn = pipeline
    runtime_examples.SENT.clear()
    claims = inject_errors(fresh_dynamodb, "UpdateItem", "ThrottlingException", every=4, step=CLAIM)
    completions = inject_errors(
        fresh_dynamodb, "UpdateItem", "InternalServerError", every=5, status=500, step=COMPLETION
    )
    config = Config(
        table_name=table, mode="guarded", processor="runtime_examples:send_receipt", dlq_url=dlq_url
    )
    handler = Reported(
        build_handler(config, dynamodb_client=fresh_dynamodb, sqs_client=sqs, sleep=lambda seconds: None)
    )
    orders = _publish_orders(sns, topic)
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    assert claims and completions
    assert handler.outcomes["processed"] == len(orders)
    assert drain(sqs, dlq_url) == []
    assert sorted(runtime_examples.SENT) == sorted((f"{o['x']}#1", o["email"]) for o in orders)
    items = scan(dynamodb)
    assert {i["idempotency:status"]["S"] for i in items} == {"COMPLETED"}
    assert sorted(i["pk"]["S"] for i in items) == sorted(o["x"] for o in orders)


def _connection_errors():
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    url = "https://dynamodb.invalid"
    server_error = {
        "Error": {"Code": "InternalServerError", "Message": "internal server error"},
        "ResponseMetadata": {"HTTPStatusCode": 500},
    }
    return [
        pytest.param(lambda: EndpointConnectionError(endpoint_url=url), id="EndpointConnectionError"),
        pytest.param(lambda: ConnectionClosedError(endpoint_url=url), id="ConnectionClosedError"),
        pytest.param(lambda: ConnectTimeoutError(endpoint_url=url), id="ConnectTimeoutError"),
        pytest.param(lambda: ReadTimeoutError(endpoint_url=url), id="ReadTimeoutError"),
        pytest.param(lambda: ClientError(server_error, "PutItem"), id="InternalServerError-500"),
    ]


@pytest.mark.parametrize("make_error", _connection_errors())
def test_connection_errors_and_timeouts_are_retried_not_quarantined(
    make_handler, fresh_dynamodb, sqs, dlq_url, make_error
):
    raised: list[str] = []

    def fail(**_):
        error = make_error()
        raised.append(type(error).__name__)
        raise error

    fresh_dynamodb.meta.events.register("before-call.dynamodb.PutItem", fail)
    handler, _ = make_handler(client=fresh_dynamodb, dlq_url=dlq_url)
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == [rec["messageId"]]
    assert raised
    assert drain(sqs, dlq_url) == []
    assert scan(fresh_dynamodb) == []

    # Once DynamoDB is reachable again, the redelivered record is written.
    fresh_dynamodb.meta.events.unregister("before-call.dynamodb.PutItem", fail)
    assert failures(handler(event(rec), None)) == []
    assert [i["pk"]["S"] for i in scan(fresh_dynamodb)] == ["a1"]
