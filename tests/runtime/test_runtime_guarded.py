"""guarded mode: a fenced IN_PROGRESS lease around an effect outside DynamoDB."""

from __future__ import annotations

import threading

import runtime_examples
from idempotent_runtime import PermanentError, TransientError
from runtime_helpers import COMPLETION, Clock, drain, event, failures, record, scan, tag_guarded_steps


class Effects:
    """A side effect that counts its runs per key; optionally blocks its first run until released."""

    def __init__(self, block_first: bool = False) -> None:
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.started = threading.Event()
        self.release = threading.Event()
        self.block_first = block_first

    def __call__(self, message):
        with self.lock:
            self.calls.append(str(message.key))
            first = len(self.calls) == 1
        if first and self.block_first:
            self.started.set()
            assert self.release.wait(10), "test never released the first run"
        return {"run": len(self.calls), "key": str(message.key)}


def _item(dynamodb, pk="a1", sk="b1"):
    items = [i for i in scan(dynamodb) if i["pk"]["S"] == pk and i["sk"]["S"] == sk]
    return items[0] if items else None


def _in_thread(target):
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", target()))
    thread.start()
    return thread, box


def test_new_key_runs_the_effect_once_and_stores_completed_with_its_result(make_handler, dynamodb):
    effects = Effects()
    handler, _ = make_handler(fn=effects, mode="guarded")
    assert failures(handler(event(record({"x": "a1", "y": "b1"})), None)) == []
    assert effects.calls == ["a1#b1"]
    item = _item(dynamodb)
    assert item["idempotency:status"] == {"S": "COMPLETED"}
    assert item["idempotency:result"] == {"S": '{"run":1,"key":"a1#b1"}'}
    assert "idempotency:lease_expires_at" not in item


def test_duplicate_of_completed_returns_the_stored_result_without_running(make_handler):
    effects = Effects()
    handler, _ = make_handler(fn=effects, mode="guarded")
    handler(event(record({"x": "a1", "y": "b1"})), None)
    (result,) = handler.process_batch(event(record({"x": "a1", "y": "b1"})), None)
    assert result.outcome == "duplicate"
    assert result.result == {"run": 1, "key": "a1#b1"}
    assert effects.calls == ["a1#b1"]


def test_duplicate_of_live_in_progress_is_retried_later_not_run(make_handler):
    clock = Clock()
    effects = Effects(block_first=True)
    handler, _ = make_handler(fn=effects, clock=clock, mode="guarded", lease_seconds=30)
    first, box = _in_thread(lambda: handler(event(record({"x": "a1", "y": "b1"})), None))
    assert effects.started.wait(10)
    second = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(second), None)) == [second["messageId"]]
    effects.release.set()
    first.join(10)
    assert failures(box["value"]) == []
    assert effects.calls == ["a1#b1"]
    # Redelivered after the first finished: a duplicate now.
    assert failures(handler(event(second), None)) == []
    assert effects.calls == ["a1#b1"]


def test_exception_releases_the_claim_so_a_retry_runs(make_handler, dynamodb):
    runs = []

    def flaky(message):
        runs.append(message.message_id)
        if len(runs) == 1:
            raise TransientError("provider unavailable")
        return "sent"

    handler, _ = make_handler(fn=flaky, mode="guarded")
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == [rec["messageId"]]
    assert _item(dynamodb) is None  # released
    assert failures(handler(event(rec), None)) == []
    assert len(runs) == 2
    assert _item(dynamodb)["idempotency:status"] == {"S": "COMPLETED"}


def test_unexpected_exception_is_retried_and_releases_the_claim(make_handler, dynamodb):
    def broken(message):
        raise KeyError("bug")

    handler, _ = make_handler(fn=broken, mode="guarded")
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == [rec["messageId"]]
    assert _item(dynamodb) is None


def test_expired_lease_is_taken_over_and_the_stale_owner_cannot_complete(make_handler, dynamodb):
    clock = Clock()
    effects = Effects(block_first=True)
    handler, stream = make_handler(fn=effects, clock=clock, mode="guarded", lease_seconds=30)
    stale_delivery = record({"x": "a1", "y": "b1"})
    stale, box = _in_thread(lambda: handler(event(stale_delivery), None))
    assert effects.started.wait(10)
    stale_owner = _item(dynamodb)["idempotency:owner"]

    clock.now += 30 + 10 + 1  # the first invocation overran its lease and the 10 s margin
    retry = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(retry), None)) == []
    taken_over = _item(dynamodb)
    assert taken_over["idempotency:status"] == {"S": "COMPLETED"}
    assert taken_over["idempotency:owner"] != stale_owner

    effects.release.set()
    stale.join(10)
    # The stale owner's completion is refused: it reports a failure instead of overwriting the new owner.
    assert failures(box["value"]) == [stale_delivery["messageId"]]
    assert _item(dynamodb) == taken_over
    assert '"lease lost' in stream.getvalue()
    # Its redelivery finds the completed key.
    (again,) = handler.process_batch(event(stale_delivery), None)
    assert again.outcome == "duplicate" and again.result == {"run": 2, "key": "a1#b1"}


def test_stale_owner_cannot_release_a_newer_claim(make_handler, dynamodb):
    clock = Clock()
    gate = threading.Event()
    started = threading.Event()
    calls = []

    def fails_late(message):
        calls.append(1)
        if len(calls) == 1:
            started.set()
            gate.wait(10)
            raise TransientError("timed out talking to the provider")
        started.set()
        gate.wait(10)
        return "ok"

    handler, _ = make_handler(fn=fails_late, clock=clock, mode="guarded", lease_seconds=30)
    stale, _ = _in_thread(lambda: handler(event(record({"x": "a1", "y": "b1"})), None))
    assert started.wait(10)
    started.clear()
    clock.now += 30 + 10 + 1  # past the lease and its margin
    newer, newer_box = _in_thread(lambda: handler(event(record({"x": "a1", "y": "b1"})), None))
    assert started.wait(10)
    claim = _item(dynamodb)
    gate.set()
    stale.join(10)
    newer.join(10)
    # The stale owner's release (a conditional delete) did not remove the newer claim, which completed.
    assert failures(newer_box["value"]) == []
    item = _item(dynamodb)
    assert (
        item["idempotency:status"] == {"S": "COMPLETED"}
        and item["idempotency:owner"] == claim["idempotency:owner"]
    )


def test_ttl_expired_completed_record_counts_as_absent(make_handler, dynamodb, table):
    dynamodb.put_item(
        TableName=table,
        Item={
            "pk": {"S": "a1"},
            "sk": {"S": "b1"},
            "status": {"S": "COMPLETED"},
            "result": {"S": '"old"'},
            "expires_at": {"N": "1000"},
        },
    )
    effects = Effects()
    handler, _ = make_handler(fn=effects, mode="guarded")
    assert failures(handler(event(record({"x": "a1", "y": "b1"})), None)) == []
    assert effects.calls == ["a1#b1"]
    assert _item(dynamodb)["idempotency:result"] == {"S": '{"run":1,"key":"a1#b1"}'}


def test_lease_defaults_to_the_remaining_invocation_time(make_handler, dynamodb):
    clock = Clock()
    seen = {}

    class Context:
        def get_remaining_time_in_millis(self):
            return 42_000

    def look(message):
        seen.update(_item(dynamodb))
        return None

    handler, _ = make_handler(fn=look, clock=clock, mode="guarded")
    handler(event(record({"x": "a1", "y": "b1"})), Context())
    # The owner uses the claim for the invocation's remaining time; others see it held LEASE_MARGIN_SECONDS
    # (10 s by default) longer.
    assert int(seen["idempotency:lease_expires_at"]["N"]) == int(clock.now * 1000) + 42_000 + 10_000
    assert seen["idempotency:status"] == {"S": "IN_PROGRESS"}


def test_permanent_error_releases_and_quarantines(make_handler, dynamodb, dlq_url, sqs):
    def reject(message):
        raise PermanentError("account closed")

    handler, _ = make_handler(fn=reject, mode="guarded", dlq_url=dlq_url)
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == []
    assert _item(dynamodb) is None
    (dead,) = drain(sqs, dlq_url)
    assert dead["MessageAttributes"]["idempotency.reason"]["StringValue"] == "account closed"


def test_example_processor_loaded_from_processor_setting(make_handler):
    runtime_examples.SENT.clear()
    handler, _ = make_handler(mode="guarded", processor="runtime_examples:send_receipt")
    rec = record({"x": "o-1", "y": "receipt", "email": "a@example.com"})
    for _ in range(3):
        assert failures(handler(event(rec), None)) == []
    assert runtime_examples.SENT == [("o-1#receipt", "a@example.com")]


def test_completion_applied_but_response_lost_is_not_mistaken_for_a_lost_lease(make_handler, fresh_dynamodb):
    from botocore.exceptions import ReadTimeoutError

    effects = Effects()
    handler, stream = make_handler(fn=effects, mode="guarded", client=fresh_dynamodb)
    lost = {"done": False}

    def apply_then_time_out(http_response, context, **_):
        # The first completion reaches DynamoDB and is applied; its response never arrives.
        if not lost["done"] and context.get("guarded_step") == COMPLETION:
            lost["done"] = True
            raise ReadTimeoutError(endpoint_url="https://dynamodb.invalid")

    tag_guarded_steps(fresh_dynamodb)
    fresh_dynamodb.meta.events.register("after-call.dynamodb.UpdateItem", apply_then_time_out)
    rec = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(rec), None)) == []
    assert lost["done"]
    assert effects.calls == ["a1#b1"]
    assert _item(fresh_dynamodb)["idempotency:status"] == {"S": "COMPLETED"}
    assert "lease lost" not in stream.getvalue()


def test_claim_applied_but_response_lost_is_still_ours(make_handler, fresh_dynamodb):
    effects = Effects()
    handler, _ = make_handler(fn=effects, mode="guarded", client=fresh_dynamodb)
    real_update = fresh_dynamodb.update_item
    retried: list[bool] = []

    def applied_then_retried(**request):
        if retried:
            return real_update(**request)
        retried.append(True)
        real_update(**request)  # the claim is stored, its response lost on the way back...
        return real_update(**request)  # ...so botocore sends the same request again

    fresh_dynamodb.update_item = applied_then_retried
    assert failures(handler(event(record({"x": "a1", "y": "b1"})), None)) == []
    assert retried and effects.calls == ["a1#b1"]
    assert _item(fresh_dynamodb)["idempotency:status"] == {"S": "COMPLETED"}


def test_dedup_ttl_seconds_zero_guarded_records_never_expire(make_handler, dynamodb):
    effects = Effects()
    handler, _ = make_handler(fn=effects, mode="guarded", dedup_ttl_seconds=0)
    for _ in range(2):
        assert failures(handler(event(record({"x": "a1", "y": "b1"})), None)) == []
    item = _item(dynamodb)
    assert item["idempotency:status"] == {"S": "COMPLETED"} and "expires_at" not in item
    assert effects.calls == ["a1#b1"]


def test_ttl_shorter_than_the_lease_does_not_let_a_second_delivery_run_the_effect(make_handler, dynamodb):
    clock = Clock()
    effects = Effects(block_first=True)
    handler, _ = make_handler(
        fn=effects, clock=clock, mode="guarded", dedup_ttl_seconds=60, lease_seconds=300
    )
    first, box = _in_thread(lambda: handler(event(record({"x": "a1", "y": "b1"})), None))
    assert effects.started.wait(10)
    claim = _item(dynamodb)
    # DynamoDB's TTL must not delete (nor the claim condition ignore) a claim whose lease is still live.
    assert int(claim["expires_at"]["N"]) * 1000 > int(claim["idempotency:lease_expires_at"]["N"])

    clock.now += 61  # past now + DEDUP_TTL_SECONDS, well inside the 300 s lease
    second = record({"x": "a1", "y": "b1"})
    assert failures(handler(event(second), None)) == [second["messageId"]]
    assert effects.calls == ["a1#b1"]

    effects.release.set()
    first.join(10)
    assert failures(box["value"]) == []
    completed = _item(dynamodb)
    assert completed["idempotency:status"] == {"S": "COMPLETED"}
    # The COMPLETED record lives DEDUP_TTL_SECONDS from its completion, as before.
    assert completed["expires_at"] == {"N": str(int(clock.now) + 60)}


def test_stale_owner_cannot_complete_a_key_a_new_owner_still_holds_in_progress(make_handler, dynamodb):
    clock = Clock()
    started = [threading.Event(), threading.Event()]
    finish = [threading.Event(), threading.Event()]
    runs: list[int] = []

    def effect(message):
        run = len(runs)
        runs.append(run)
        started[run].set()
        assert finish[run].wait(10), "test never let the effect finish"
        return {"run": run + 1}

    handler, stream = make_handler(fn=effect, clock=clock, mode="guarded", lease_seconds=30)
    stale_delivery = record({"x": "a1", "y": "b1"})
    stale, stale_box = _in_thread(lambda: handler(event(stale_delivery), None))
    assert started[0].wait(10)
    stale_owner = _item(dynamodb)["idempotency:owner"]

    clock.now += 30 + 10 + 1  # the stale owner overran its lease (and margin); a redelivery claims the key
    newer, newer_box = _in_thread(lambda: handler(event(record({"x": "a1", "y": "b1"})), None))
    assert started[1].wait(10)
    claim = _item(dynamodb)
    assert claim["idempotency:status"] == {"S": "IN_PROGRESS"} and claim["idempotency:owner"] != stale_owner

    finish[0].set()  # the stale effect finishes while the new owner is still running its own
    stale.join(10)
    assert failures(stale_box["value"]) == [stale_delivery["messageId"]]
    assert _item(dynamodb) == claim  # not completed by the stale owner
    assert '"lease lost' in stream.getvalue()

    finish[1].set()
    newer.join(10)
    assert failures(newer_box["value"]) == []
    item = _item(dynamodb)
    assert item["idempotency:status"] == {"S": "COMPLETED"}
    assert item["idempotency:owner"] == claim["idempotency:owner"]
    assert item["idempotency:result"] == {"S": '{"run":2}'}
