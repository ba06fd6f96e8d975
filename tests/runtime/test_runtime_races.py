"""Races: many concurrent invocations with the same messages still give one item / one effect per key."""

from __future__ import annotations

import threading
import time
from collections import Counter

from idempotent_runtime import TransientError
from runtime_helpers import event, record, scan

THREADS = 8


def _invoke_concurrently(handler, batch, threads=THREADS):
    """Every thread delivers the same batch at the same moment; each keeps redelivering its failed records
    (as SQS would) until its copy of the batch is fully handled. Returns all per-record outcomes."""
    start = threading.Barrier(threads)
    outcomes: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker():
        try:
            start.wait(10)
            pending = list(batch)
            for _ in range(200):
                results = handler.process_batch(event(*pending), None)
                with lock:
                    outcomes.extend(r.outcome for r in results if not r.failed)
                failed = {r.message.message_id for r in results if r.failed}
                pending = [rec for rec in pending if rec["messageId"] in failed]
                if not pending:
                    return
                time.sleep(0.005)
            raise AssertionError("records still failing after 200 deliveries")
        except BaseException as exc:  # surfaced to the test below
            errors.append(exc)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors, errors
    return Counter(outcomes)


def _batch(keys=10):
    return [
        record({"x": f"k{i}", "y": "1", "email": f"c{i}@example.com", "cents": 5}, group=f"g{i}")
        for i in range(keys)
    ]


def test_concurrent_document_invocations_store_one_item_per_key(make_handler, dynamodb):
    handler, _ = make_handler()
    outcomes = _invoke_concurrently(handler, _batch())
    assert outcomes == {"processed": 10, "duplicate": 10 * (THREADS - 1)}
    assert sorted(i["pk"]["S"] for i in scan(dynamodb)) == sorted(f"k{i}" for i in range(10))


def test_concurrent_guarded_invocations_run_each_effect_once(make_handler, dynamodb):
    calls: Counter = Counter()
    lock = threading.Lock()

    def slow_effect(message):
        with lock:
            calls[str(message.key)] += 1
        time.sleep(0.01)  # widen the window in which other invocations see IN_PROGRESS
        return {"sent": True}

    handler, _ = make_handler(fn=slow_effect, mode="guarded")
    outcomes = _invoke_concurrently(handler, _batch())
    assert calls == {f"k{i}#1": 1 for i in range(10)}
    assert outcomes == {"processed": 10, "duplicate": 10 * (THREADS - 1)}
    assert {i["idempotency:status"]["S"] for i in scan(dynamodb)} == {"COMPLETED"}


def test_concurrent_guarded_invocations_with_failing_effects_still_run_once_successfully(make_handler):
    attempts: Counter = Counter()
    successes: Counter = Counter()
    lock = threading.Lock()

    def flaky(message):
        key = str(message.key)
        with lock:
            attempts[key] += 1
            first = attempts[key] == 1
        if first:
            raise TransientError("provider hiccup")  # the claim is released; another delivery runs it
        with lock:
            successes[key] += 1
        return None

    handler, _ = make_handler(fn=flaky, mode="guarded")
    _invoke_concurrently(handler, _batch())
    assert successes == {f"k{i}#1": 1 for i in range(10)}


def test_concurrent_transactions_move_each_balance_once(make_handler, dynamodb):
    handler, _ = make_handler(mode="transaction", processor="runtime_examples:apply_payment")
    outcomes = _invoke_concurrently(handler, _batch())
    assert outcomes == {"processed": 10, "duplicate": 10 * (THREADS - 1)}
    balances = {i["pk"]["S"]: i["balance"]["N"] for i in scan(dynamodb) if i["sk"]["S"] == "balance"}
    assert balances == {f"account#k{i}": "5" for i in range(10)}
