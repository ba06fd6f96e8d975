"""The same key with different content is a conflict, not a duplicate - in every mode, at the same cost."""

from __future__ import annotations

import hashlib
import itertools
import json
import threading

import pytest
from runtime_helpers import (
    dlq_details,
    dlq_reason,
    drain,
    event,
    failures,
    log_lines,
    metrics,
    quarantine_records,
    receive_event,
    record,
    record_logs,
    scan,
)


def _requests(client) -> list[str]:
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    return calls


def _fingerprint(body: dict) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def test_document_conflict_is_quarantined_naming_the_key_and_both_fingerprints(
    make_handler, fresh_dynamodb, sqs, dlq_url
):
    handler, stream = make_handler(client=fresh_dynamodb, dlq_url=dlq_url)
    first = {"x": "o-1", "y": "l-1", "amount": 100}
    second = {"x": "o-1", "y": "l-1", "amount": 999}
    handler(event(record(first)), None)
    calls = _requests(fresh_dynamodb)
    conflicting = record(second, group="g")
    (result,) = handler.process_batch(event(conflicting), None)
    # The conflict is found by the same single PutItem; the second is the quarantine record, written
    # because this record's source queue does not exist (its delete failed: SQS could deliver it again).
    assert calls == ["PutItem", "PutItem"]
    assert (result.outcome, result.conflict) == ("quarantined", True)
    (item,) = scan(fresh_dynamodb)
    assert item["amount"] == {"N": "100"}  # the first document stays
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == conflicting["body"]
    assert dlq_reason(dead) == (
        f"conflict: key o-1#l-1 is already done with another payload (fingerprint {_fingerprint(first)}), "
        f"this message's fingerprint is {_fingerprint(second)}"
    )
    details = dlq_details(dead)
    assert details["kind"] == "conflict"
    assert details["key"] == {"partition": "o-1", "sort": "l-1"}
    assert (details["fingerprint"], details["stored_fingerprint"]) == (
        _fingerprint(second),
        _fingerprint(first),
    )
    (emf,) = metrics(stream)[-1:]
    assert (emf["conflicts"], emf["quarantined"], emf["duplicates"]) == (1, 1, 0)


def test_a_conflict_delivered_from_a_fifo_queue_costs_one_dynamodb_request(
    make_handler, fresh_dynamodb, sqs, dlq_url, pipeline
):
    # Delivered from a real FIFO queue, the quarantined record is deleted from it right after the DLQ send;
    # a FIFO queue never delivers a deleted message again, so no quarantine record is needed.
    sns, topic, queue_url, queue_arn = pipeline
    handler, _ = make_handler(client=fresh_dynamodb, dlq_url=dlq_url)
    batches = []
    for amount in (100, 999):
        sns.publish(
            TopicArn=topic,
            Message=json.dumps({"x": "o-1", "y": "l-1", "amount": amount}),
            MessageGroupId="g",
            MessageDeduplicationId=f"send-{amount}",
        )
        batch, _ = receive_event(sqs, queue_url, queue_arn)
        batches.append(batch)
        if amount == 100:
            handler.process_batch(batch, None)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=batch["Records"][0]["receiptHandle"])
    second = batches[1]
    calls = _requests(fresh_dynamodb)
    (result,) = handler.process_batch(second, None)
    assert (result.outcome, result.conflict) == ("quarantined", True)
    assert calls == ["PutItem"]
    assert quarantine_records(fresh_dynamodb) == []
    (dead,) = drain(sqs, dlq_url)
    assert json.loads(dead["Body"])["amount"] == 999
    assert drain(sqs, queue_url) == []  # deleted from its source queue by the runtime


def test_on_conflict_duplicate_counts_and_warns_but_keeps_the_record_going(
    make_handler, fresh_dynamodb, sqs, dlq_url
):
    dynamodb = fresh_dynamodb
    handler, stream = make_handler(
        client=fresh_dynamodb, dlq_url=dlq_url, on_conflict="duplicate", log_level="INFO"
    )
    handler(event(record({"x": "o-1", "y": "l-1", "amount": 100})), None)
    calls = _requests(fresh_dynamodb)
    response = handler(event(record({"x": "o-1", "y": "l-1", "amount": 999})), None)
    assert calls == ["PutItem"]  # exactly one request per conflicting message
    assert failures(response) == []
    assert drain(sqs, dlq_url) == []
    assert scan(dynamodb)[0]["amount"] == {"N": "100"}
    (warning,) = [line for line in log_lines(stream) if line.get("level") == "WARNING"]
    assert (warning["outcome"], warning["conflict"]) == ("duplicate", True)
    assert warning["reason"].startswith("conflict: key o-1#l-1 is already done with another payload")
    emf = metrics(stream)[-1]
    assert (emf["duplicates"], emf["conflicts"]) == (1, 1)


@pytest.mark.parametrize(
    "resent",
    [
        '{"y": "l-1", "x": "o-1", "amount": 100}',  # other key order
        '{ "x" : "o-1", "y" : "l-1", "amount" : 100.00 }',  # other spacing, 100 written as 100.00
        '{"x": "o-1", "y": "l-1", "amount": 1e2}',
        '{"x": "o\\u002d1", "y": "l-1", "amount": 100}',  # an escape of the same character
    ],
)
def test_the_same_payload_written_differently_is_a_duplicate(make_handler, dynamodb, sqs, dlq_url, resent):
    handler, _ = make_handler(dlq_url=dlq_url)
    handler(event(record('{"x": "o-1", "y": "l-1", "amount": 100}')), None)
    (result,) = handler.process_batch(event(record(resent)), None)
    assert (result.outcome, result.conflict) == ("duplicate", False)
    assert drain(sqs, dlq_url) == []


def test_fingerprint_exclude_ignores_fields_a_producer_sets_per_send(make_handler, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url, fingerprint_exclude=["sent_at", "meta.trace"])
    handler(
        event(record({"x": "o", "y": "l", "v": 1, "sent_at": 1, "meta": {"trace": "a", "src": "s"}})), None
    )
    (same,) = handler.process_batch(
        event(record({"x": "o", "y": "l", "v": 1, "sent_at": 2, "meta": {"trace": "b", "src": "s"}})), None
    )
    (other,) = handler.process_batch(
        event(record({"x": "o", "y": "l", "v": 1, "sent_at": 3, "meta": {"trace": "c", "src": "t"}})), None
    )
    assert (same.outcome, other.outcome, other.conflict) == ("duplicate", "quarantined", True)


def test_fingerprint_fields_cover_only_the_chosen_fields_and_count_a_missing_one(make_handler, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url, fingerprint_fields=["order.amount"])
    handler(event(record({"x": "o", "y": "l", "order": {"amount": 5}, "note": "a"})), None)
    outcomes = [
        handler.process_batch(event(record(body)), None)[0].outcome
        for body in (
            {"x": "o", "y": "l", "order": {"amount": 5}, "note": "b"},  # another note: same payload
            {"x": "o", "y": "l", "order": {"amount": 6}},  # another amount
            {"x": "o", "y": "l", "order": {}},  # no amount at all
        )
    ]
    assert outcomes == ["duplicate", "quarantined", "quarantined"]


def test_transaction_conflict_moves_no_balance_and_is_found_by_the_one_transaction(
    make_handler, fresh_dynamodb, sqs, dlq_url
):
    handler, _ = make_handler(
        client=fresh_dynamodb, mode="transaction", processor="runtime_examples:apply_payment", dlq_url=dlq_url
    )
    handler(event(record({"x": "a1", "y": "p1", "cents": 250})), None)
    calls = _requests(fresh_dynamodb)
    (result,) = handler.process_batch(event(record({"x": "a1", "y": "p1", "cents": 999})), None)
    assert calls == ["TransactWriteItems", "PutItem"]  # the transaction, then the quarantine record
    assert (result.outcome, result.conflict) == ("quarantined", True)
    balance = [i for i in scan(fresh_dynamodb) if i["sk"]["S"] == "balance"]
    assert balance[0]["balance"] == {"N": "250"}
    (dead,) = drain(sqs, dlq_url)
    assert dlq_details(dead)["kind"] == "conflict"


def test_guarded_conflict_neither_runs_the_effect_nor_returns_the_other_result(
    make_handler, fresh_dynamodb, sqs, dlq_url
):
    charges: list[int] = []

    def charge(message):
        charges.append(message.data["cents"])
        return {"charged": message.data["cents"]}

    handler, _ = make_handler(client=fresh_dynamodb, fn=charge, mode="guarded", dlq_url=dlq_url)
    handler(event(record({"x": "c1", "y": "pay-1", "cents": 100})), None)
    calls = _requests(fresh_dynamodb)
    (result,) = handler.process_batch(event(record({"x": "c1", "y": "pay-1", "cents": 500})), None)
    assert calls == ["UpdateItem", "PutItem"]  # the claim, as for a duplicate, then the quarantine record
    assert charges == [100]
    assert (result.outcome, result.conflict, result.result) == ("quarantined", True, None)
    (dead,) = drain(sqs, dlq_url)
    assert "conflict: key c1#pay-1" in dlq_reason(dead)


def test_guarded_conflict_treated_as_duplicate_returns_no_result(make_handler):
    handler, _ = make_handler(
        fn=lambda m: {"charged": m.data["cents"]}, mode="guarded", on_conflict="duplicate"
    )
    handler(event(record({"x": "c1", "y": "pay-1", "cents": 100})), None)
    (same,) = handler.process_batch(event(record({"x": "c1", "y": "pay-1", "cents": 100})), None)
    (other,) = handler.process_batch(event(record({"x": "c1", "y": "pay-1", "cents": 500})), None)
    assert (same.outcome, same.result) == ("duplicate", {"charged": 100})
    assert (other.outcome, other.conflict, other.result) == ("duplicate", True, None)


def test_records_written_before_fingerprints_count_as_the_same_payload(make_handler, dynamodb, table):
    # 0.1 wrote documents, markers and guarded records without a fingerprint.
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "d"}, "sk": {"S": "1"}, "v": {"S": "old"}})
    dynamodb.put_item(
        TableName=table, Item={"pk": {"S": "t"}, "sk": {"S": "idempotency#1"}, "message_id": {"S": "m"}}
    )
    dynamodb.put_item(
        TableName=table,
        Item={"pk": {"S": "g"}, "sk": {"S": "1"}, "status": {"S": "COMPLETED"}, "result": {"S": '{"n":1}'}},
    )
    document, _ = make_handler()
    transaction, _ = make_handler(mode="transaction", processor="runtime_examples:apply_payment")
    guarded, _ = make_handler(mode="guarded", fn=lambda message: {"n": 2})
    (d,) = document.process_batch(event(record({"x": "d", "y": "1", "v": "new"})), None)
    (t,) = transaction.process_batch(event(record({"x": "t", "y": "1", "cents": 5})), None)
    (g,) = guarded.process_batch(event(record({"x": "g", "y": "1"})), None)
    assert [r.outcome for r in (d, t, g)] == ["duplicate"] * 3
    assert g.result == {"n": 1}


def test_a_body_that_is_not_json_is_fingerprinted_raw(make_handler, sqs, dlq_url):
    handler, _ = make_handler(
        key_source="dedup_id", fn=lambda message: {"text": message.body}, dlq_url=dlq_url
    )
    handler(event(record("plain text", dedup_id="d-1")), None)
    (same,) = handler.process_batch(event(record("plain text", dedup_id="d-1")), None)
    (other,) = handler.process_batch(event(record("other text", dedup_id="d-1")), None)
    assert (same.outcome, other.outcome, other.conflict) == ("duplicate", "quarantined", True)
    (dead,) = drain(sqs, dlq_url)
    assert dlq_details(dead)["stored_fingerprint"] == hashlib.sha256(b"plain text").hexdigest()


def test_every_idempotency_record_stores_the_fingerprint(make_handler, dynamodb):
    body = {"x": "k", "y": "1", "cents": 5}
    for mode, extra in (
        ("document", {}),
        ("transaction", {"processor": "runtime_examples:apply_payment"}),
        ("guarded", {"fn": lambda message: None}),
    ):
        handler, _ = make_handler(mode=mode, **extra)
        handler(event(record({**body, "x": mode})), None)
    records = {
        i["pk"]["S"]: i for i in scan(dynamodb) if i["pk"]["S"] in ("document", "transaction", "guarded")
    }
    assert {
        pk: r["idempotency:fingerprint"]["S"] for pk, r in records.items() if "idempotency:fingerprint" in r
    } == {mode: _fingerprint({**body, "x": mode}) for mode in ("document", "transaction", "guarded")}


def test_concurrent_conflicting_deliveries_store_one_payload_and_quarantine_the_other(
    make_handler, dynamodb, sqs, dlq_url
):
    handler, stream = make_handler(dlq_url=dlq_url)
    bodies = [{"x": "o", "y": "l", "v": i} for i in range(2)]
    start = threading.Barrier(2)
    results: list = []

    def deliver(body):
        start.wait(5)
        results.extend(handler.process_batch(event(record(body)), None))

    threads = [threading.Thread(target=deliver, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(r.outcome for r in results) == ["processed", "quarantined"]
    (item,) = scan(dynamodb)
    (dead,) = drain(sqs, dlq_url)
    assert json.loads(dead["Body"])["v"] != int(item["v"]["N"])
    assert [line["outcome"] for line in record_logs(stream)].count("quarantined") == 1


def _enriching(mode: str):
    """A processor that enriches the parsed body in place, differently on every run."""
    runs = itertools.count(1)

    def enrich(message):
        body = message.json_object()
        body["run"] = next(runs)
        return body if mode == "document" else []

    return enrich


@pytest.mark.parametrize("mode", ["document", "transaction"])
def test_a_processor_changing_the_parsed_body_does_not_change_the_fingerprint(
    make_handler, dynamodb, sqs, dlq_url, table, mode
):
    from idempotent_runtime.config import Config
    from idempotent_runtime.records import inspect

    handler, stream = make_handler(fn=_enriching(mode), mode=mode, dlq_url=dlq_url)
    body = {"x": "o-1", "y": "l-1", "qty": 2}
    first = record(body)
    again = record(body)
    outcomes = [handler.process_batch(event(r), None)[0] for r in (first, again)]
    assert [(r.outcome, r.conflict) for r in outcomes] == [("processed", False), ("duplicate", False)]
    assert drain(sqs, dlq_url) == []
    sort = "l-1" if mode == "document" else "idempotency#l-1"
    (stored,) = [i for i in scan(dynamodb) if i["sk"]["S"] == sort]
    assert stored["idempotency:fingerprint"] == {"S": _fingerprint(body)}  # the body as it arrived
    if mode == "document":
        assert stored["run"] == {"N": "1"}  # the processor's document is what is stored
    assert metrics(stream)[-1]["conflicts"] == 0
    found = inspect(
        Config(table_name=table, mode=mode, processor="runtime_examples:apply_payment"), dynamodb, again
    )
    assert (found.state, found.fingerprint) == ("done", _fingerprint(body))
