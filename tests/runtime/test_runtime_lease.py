"""guarded mode keeps its word: completion outlasts throttling, clocks may disagree, any result completes the
key, a processor can extend its lease, and an effect repeated after a crash keeps its idempotency key."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
import runtime_examples
from runtime_helpers import (
    COMPLETION,
    Clock,
    die_before_completion,
    dlq_details,
    dlq_reason,
    drain,
    event,
    failures,
    guarded_step,
    log_lines,
    metrics,
    record,
    scan,
)

START = 1_800_000_000.0


def _item(dynamodb, pk="a1", sk="b1"):
    items = [i for i in scan(dynamodb) if (i["pk"]["S"], i["sk"]["S"]) == (pk, sk)]
    return items[0] if items else None


def _throttle_completions(client, clock: Clock, times: int | None) -> list[float]:
    """Throttle the first ``times`` completions (UpdateItem SET status COMPLETED; all when None); returns the
    clock at each."""
    from botocore.awsrequest import AWSResponse

    seen: list[float] = []

    def throttle(params, **_):
        if guarded_step(params) != COMPLETION:
            return None
        seen.append(clock.now)
        if times is not None and len(seen) > times:
            return None
        parsed = {
            "Error": {"Code": "ThrottlingException", "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse("https://dynamodb.invalid", 400, {}, None), parsed

    client.meta.events.register("before-call.dynamodb.UpdateItem", throttle)
    return seen


def test_completion_is_retried_through_throttling_while_the_lease_lasts(make_handler, fresh_dynamodb):
    clock = Clock()
    runs: list[str] = []
    handler, _ = make_handler(
        fn=lambda message: runs.append(message.key.idempotency_key) or {"sent": True},
        client=fresh_dynamodb,
        clock=clock,
        sleep=clock.sleep,
        mode="guarded",
        lease_seconds=30,
    )
    attempts = _throttle_completions(fresh_dynamodb, clock, times=8)
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == []  # main gives up after 3 attempts
    assert len(attempts) == 9 and attempts[-1] < START + 30
    assert _item(fresh_dynamodb)["idempotency:status"] == {"S": "COMPLETED"}
    clock.now += 3600
    assert failures(handler(event(rec), None)) == []
    assert runs == ["a1#b1"]


def test_completion_stops_retrying_shortly_before_the_owners_lease_ends(make_handler, fresh_dynamodb):
    clock = Clock()
    handler, stream = make_handler(
        fn=lambda message: None,
        client=fresh_dynamodb,
        clock=clock,
        sleep=clock.sleep,
        mode="guarded",
        lease_seconds=5,
    )
    attempts = _throttle_completions(fresh_dynamodb, clock, times=None)
    (result,) = handler.process_batch(event(record({"x": "a1", "y": "b1"})), None)
    assert result.outcome == "failed" and "completion of key a1#b1 failed" in result.reason
    assert len(attempts) > 3
    assert all(at < START + 5 for at in attempts)  # never after the claim stopped being ours
    assert "effect ran but its completion was not stored" in stream.getvalue()


def test_a_clock_running_ahead_elsewhere_cannot_take_over_a_live_claim(make_handler, dynamodb):
    clock = Clock()
    started, release = threading.Event(), threading.Event()
    runs: list[float] = []

    def effect(message):
        runs.append(clock.now)
        started.set()
        assert release.wait(10)
        return {"done": True}

    owner, _ = make_handler(fn=effect, clock=clock, mode="guarded", lease_seconds=30)
    ahead = Clock()
    other, _ = make_handler(fn=effect, clock=ahead, mode="guarded", lease_seconds=30)
    box: dict = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("r", owner(event(record({"x": "a1", "y": "b1"})), None))
    )
    thread.start()
    assert started.wait(10)
    clock.now = START + 29.5  # the owner is still inside its 30 s lease...
    ahead.now = clock.now + 1.0  # ...but this environment's clock runs 1 s ahead
    second = record({"x": "a1", "y": "b1"})
    assert failures(other(event(second), None)) == [second["messageId"]]  # on main: taken over, run twice
    assert len(runs) == 1
    release.set()
    thread.join(10)
    assert failures(box["r"]) == []
    assert _item(dynamodb)["idempotency:status"] == {"S": "COMPLETED"}


def test_the_margin_is_configurable(make_handler, dynamodb):
    clock = Clock()
    seen: dict = {}
    handler, _ = make_handler(
        fn=lambda message: seen.update(_item(dynamodb)),
        clock=clock,
        mode="guarded",
        lease_seconds=30,
        lease_margin_seconds=2,
    )
    handler(event(record({"x": "a1", "y": "b1"})), None)
    assert seen["idempotency:lease_expires_at"] == {"N": str(int(START * 1000) + 32_000)}


class _Unwritable(dict):
    """A result whose own code fails while it is written out (not a TypeError or ValueError)."""

    def items(self):
        raise RuntimeError("cannot list my items")


def test_a_result_that_fails_to_encode_still_completes_the_key(make_handler, dynamodb):
    runs: list[str] = []

    def effect(message):
        runs.append(message.message_id)
        return _Unwritable(receipt=1)

    handler, stream = make_handler(fn=effect, mode="guarded")
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == []  # on main: RuntimeError, the key stays IN_PROGRESS
    item = _item(dynamodb)
    assert item["idempotency:status"] == {"S": "COMPLETED"} and "idempotency:result" not in item
    (warning,) = [
        line for line in log_lines(stream) if line.get("message", "").startswith("result not stored")
    ]
    assert warning["error"] == "RuntimeError: cannot list my items"
    (again,) = handler.process_batch(event(rec), None)
    assert (again.outcome, again.result, len(runs)) == ("duplicate", None, 1)


def _containing_itself() -> dict:
    result: dict = {"amount": Decimal("12.50"), "items": []}  # a Decimal: JSON's own cycle check is skipped
    result["items"].append(result)
    return result


def _nested(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def _shared(levels: int) -> list:
    value: list = ["leaf"]
    for _ in range(levels):
        value = [value, value]  # 2**levels leaves as text, a few objects in memory
    return value


@pytest.mark.parametrize(
    ("result", "error"),
    [
        ({True: 1}, "has an object key that is not a string: True"),  # would come back as {"true": 1}
        ({1: "a", "1": "b"}, "has an object key that is not a string: 1"),  # one JSON name twice
        ({None: 0}, "has an object key that is not a string: None"),
        (_containing_itself(), "is nested more than 32 levels deep (or contains itself)"),
        (_nested(40), "is nested more than 32 levels deep (or contains itself)"),
        (_shared(30), "holds more than 100000 values"),
    ],
    ids=["bool-key", "int-and-str-key", "none-key", "contains-itself", "deep", "shared-members"],
)
def test_a_result_that_would_not_come_back_as_written_completes_the_key_unstored(
    make_handler, dynamodb, result, error
):
    runs: list[str] = []

    def effect(message):
        runs.append(message.message_id)
        return result

    handler, stream = make_handler(fn=effect, mode="guarded")
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == []
    item = _item(dynamodb)
    assert item["idempotency:status"] == {"S": "COMPLETED"} and "idempotency:result" not in item
    (warning,) = [
        line for line in log_lines(stream) if line.get("message", "").startswith("result not stored")
    ]
    assert warning["error"] == f"ValueError: {error}"
    (again,) = handler.process_batch(event(rec), None)
    assert (again.outcome, again.result, len(runs)) == ("duplicate", None, 1)


def test_decimal_results_are_stored_exactly_and_come_back_as_decimal(make_handler, dynamodb):
    result = {"amount": Decimal("12345678901234567.89"), "count": 3, "rate": 0.5, "tags": ["a"]}
    handler, _ = make_handler(fn=lambda message: result, mode="guarded")
    handler(event(record({"x": "a1", "y": "b1"})), None)
    assert _item(dynamodb)["idempotency:result"] == {
        "S": '{"amount":12345678901234567.89,"count":3,"rate":0.5,"tags":["a"]}'
    }
    (again,) = handler.process_batch(event(record({"x": "a1", "y": "b1"})), None)
    assert again.result == {
        "amount": Decimal("12345678901234567.89"),
        "count": 3,
        "rate": Decimal("0.5"),
        "tags": ["a"],
    }
    assert type(again.result["count"]) is int


def test_a_processor_extends_its_lease_and_no_one_takes_the_key_meanwhile(make_handler, dynamodb):
    clock = Clock()
    extended, release = threading.Event(), threading.Event()
    remaining: list[float] = []

    def long_effect(message):
        remaining.append(message.lease.remaining())
        remaining.append(message.lease.extend(120))
        extended.set()
        assert release.wait(10)
        return "ok"

    handler, _ = make_handler(
        fn=long_effect, clock=clock, mode="guarded", lease_seconds=30, dedup_ttl_seconds=60
    )
    box: dict = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("r", handler(event(record({"x": "a1", "y": "b1"})), None))
    )
    thread.start()
    assert extended.wait(10)
    claim = _item(dynamodb)
    assert claim["idempotency:lease_expires_at"] == {"N": str(int(START * 1000) + 130_000)}
    assert int(claim["expires_at"]["N"]) * 1000 > 130_000 + int(START * 1000)  # the TTL never ends first
    assert remaining == [30.0, 120.0]
    clock.now += 100  # past the original lease, inside the extended one
    second = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(second), None)) == [second["messageId"]]
    release.set()
    thread.join(10)
    assert failures(box["r"]) == []


def test_extending_a_lease_another_invocation_took_over_raises_lease_lost(make_handler, dynamodb):
    from idempotent_runtime import LeaseLost

    clock = Clock()
    started, release = threading.Event(), threading.Event()
    outcome: list[object] = []

    def effect(message):
        if outcome:  # the second delivery
            return "second"
        outcome.append("started")
        started.set()
        assert release.wait(10)
        try:
            message.lease.extend(60)
        except LeaseLost as lost:
            outcome.append(lost)
            raise
        return "first"

    handler, _ = make_handler(fn=effect, clock=clock, mode="guarded", lease_seconds=30)
    stale = record({"x": "a1", "y": "b1"})
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("r", handler(event(stale), None)))
    thread.start()
    assert started.wait(10)
    clock.now += 30 + 10 + 1
    assert failures(handler(event(record({"x": "a1", "y": "b1"})), None)) == []
    release.set()
    thread.join(10)
    assert isinstance(outcome[-1], LeaseLost)
    assert failures(box["r"]) == [stale["messageId"]]
    assert _item(dynamodb)["idempotency:result"] == {"S": '"second"'}


def test_the_lease_is_only_there_in_guarded_mode(make_handler):
    seen: list[object] = []
    handler, _ = make_handler(fn=lambda message: seen.append(message.lease))
    handler(event(record({"x": "a1", "y": "b1"})), None)
    assert seen == [None]


def test_a_lease_extension_must_be_positive(make_handler):
    errors: list[str] = []

    def effect(message):
        with pytest.raises(ValueError) as raised:
            message.lease.extend(0)
        errors.append(str(raised.value))

    handler, _ = make_handler(fn=effect, mode="guarded")
    handler(event(record({"x": "a1", "y": "b1"})), None)
    assert errors == ["lease extension must be a positive number of seconds, got 0"]


def test_an_effect_repeated_after_a_crash_keeps_its_idempotency_key_and_charges_once(
    make_handler, fresh_dynamodb
):
    provider = runtime_examples.PROVIDER = runtime_examples.PaymentProvider()
    clock = Clock()
    handler, _ = make_handler(
        processor="runtime_examples:charge_payment", client=fresh_dynamodb, clock=clock, mode="guarded",
        lease_seconds=30,
    )  # fmt: skip
    payment = record({"x": "cust-7", "y": "pay-1", "cents": 2500})
    die_before_completion(handler, fresh_dynamodb, payment)
    assert _item(fresh_dynamodb, "cust-7", "pay-1")["idempotency:status"] == {"S": "IN_PROGRESS"}

    clock.now += 30 + 10 + 1  # the claim expires; SQS delivers the payment again
    (result,) = handler.process_batch(event(payment), None)
    assert result.outcome == "processed"
    # The effect ran twice - with the same idempotency key - and the provider charged once.
    assert provider.requests == ["cust-7#pay-1", "cust-7#pay-1"]
    assert list(provider.charges.values()) == [{"charge": "ch_1", "customer": "cust-7", "cents": 2500}]
    assert result.result == {"charge": "ch_1", "customer": "cust-7", "cents": 2500}
    (again,) = handler.process_batch(event(payment), None)
    assert (again.outcome, len(provider.requests)) == ("duplicate", 2)


def _requests(client) -> list[str]:
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    return calls


def test_an_expired_claim_is_not_taken_over_by_another_payload(make_handler, fresh_dynamodb, sqs, dlq_url):
    provider = runtime_examples.PROVIDER = runtime_examples.PaymentProvider()
    clock = Clock()
    handler, stream = make_handler(
        processor="runtime_examples:charge_payment", client=fresh_dynamodb, clock=clock, mode="guarded",
        lease_seconds=30, dlq_url=dlq_url,
    )  # fmt: skip
    payment = record({"x": "cust-7", "y": "pay-1", "cents": 2500}, group="a")
    die_before_completion(handler, fresh_dynamodb, payment)
    claim = _item(fresh_dynamodb, "cust-7", "pay-1")

    clock.now += 30 + 10 + 1  # the claim expires; another payment with the same key arrives
    other = record({"x": "cust-7", "y": "pay-1", "cents": 9999}, group="b")
    calls = _requests(fresh_dynamodb)
    (result,) = handler.process_batch(event(other), None)
    # The failed claim found the other payload's claim: one request, then the quarantine record.
    assert calls == ["UpdateItem", "PutItem"]
    assert (result.outcome, result.conflict, result.result) == ("quarantined", True, None)
    assert provider.requests == ["cust-7#pay-1"]  # the processor did not run for the other payload
    assert _item(fresh_dynamodb, "cust-7", "pay-1") == claim  # the first payment's claim is untouched
    (dead,) = drain(sqs, dlq_url)
    stored = claim["idempotency:fingerprint"]["S"]
    details = dlq_details(dead)
    assert (details["kind"], details["stored_fingerprint"]) == ("conflict", stored)
    assert dlq_reason(dead) == (
        f"conflict: key cust-7#pay-1 is claimed by another payload whose effect may have run (fingerprint "
        f"{stored}), this message's fingerprint is {details['fingerprint']}"
    )
    emf = metrics(stream)[-1]
    assert (emf["quarantined"], emf["conflicts"], emf["processed"]) == (1, 1, 0)

    # The first payment's redelivery takes its own claim over and completes it: charged once.
    payment["attributes"]["ApproximateReceiveCount"] = "2"
    (again,) = handler.process_batch(event(payment), None)
    assert again.outcome == "processed"
    assert list(provider.charges.values()) == [{"charge": "ch_1", "customer": "cust-7", "cents": 2500}]
    completed = _item(fresh_dynamodb, "cust-7", "pay-1")
    assert completed["idempotency:status"] == {"S": "COMPLETED"}
    assert completed["idempotency:fingerprint"] == {"S": stored}


def test_another_payload_at_an_expired_claim_is_a_duplicate_with_on_conflict_duplicate(
    make_handler, fresh_dynamodb
):
    provider = runtime_examples.PROVIDER = runtime_examples.PaymentProvider()
    clock = Clock()
    handler, stream = make_handler(
        processor="runtime_examples:charge_payment", client=fresh_dynamodb, clock=clock, mode="guarded",
        lease_seconds=30, on_conflict="duplicate",
    )  # fmt: skip
    die_before_completion(handler, fresh_dynamodb, record({"x": "cust-7", "y": "pay-1", "cents": 2500}))
    claim = _item(fresh_dynamodb, "cust-7", "pay-1")
    clock.now += 30 + 10 + 1
    calls = _requests(fresh_dynamodb)
    (result,) = handler.process_batch(event(record({"x": "cust-7", "y": "pay-1", "cents": 9999})), None)
    assert calls == ["UpdateItem"]
    assert (result.outcome, result.conflict, result.result) == ("duplicate", True, None)
    assert provider.requests == ["cust-7#pay-1"]
    assert _item(fresh_dynamodb, "cust-7", "pay-1") == claim
    emf = metrics(stream)[-1]
    assert (emf["duplicates"], emf["conflicts"]) == (1, 1)


def test_inspect_sees_another_payloads_expired_claim_as_a_conflict(make_handler, fresh_dynamodb, table):
    from idempotent_runtime.config import Config
    from idempotent_runtime.records import inspect

    runtime_examples.PROVIDER = runtime_examples.PaymentProvider()
    clock = Clock()
    config = dict(processor="runtime_examples:charge_payment", mode="guarded", lease_seconds=30)
    handler, _ = make_handler(client=fresh_dynamodb, clock=clock, **config)
    payment = {"x": "cust-7", "y": "pay-1", "cents": 2500}
    die_before_completion(handler, fresh_dynamodb, record(payment))
    later = clock.now + 30 + 10 + 1
    seen = Config(table_name=table, **config)
    same = inspect(seen, fresh_dynamodb, record(payment), now=later)
    other = inspect(seen, fresh_dynamodb, record({**payment, "cents": 9999}), now=later)
    assert (same.state, other.state) == ("new", "conflict")
    assert other.stored_fingerprint == same.fingerprint


def test_a_result_keyed_by_a_str_subclass_is_stored_and_comes_back_equal(make_handler, dynamodb):
    from enum import StrEnum

    class Currency(StrEnum):
        EUR = "EUR"

    handler, _ = make_handler(fn=lambda message: {Currency.EUR: 250}, mode="guarded")
    rec = record({"x": "a1", "y": "b1"})
    handler(event(rec), None)
    assert _item(dynamodb)["idempotency:result"] == {"S": '{"EUR":250}'}
    (again,) = handler.process_batch(event(rec), None)
    assert (again.outcome, again.result) == ("duplicate", {"EUR": 250})
