"""The redrive knows about idempotency: the consumer keys a redriven message as the first time (--dry-run
shows what the table says), and --force processes a done key again, per mode. Driven through the bundled
handler with the deployed function's configuration."""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime

import dlq_processors
import pytest
from dlq_helpers import (
    Deduplication,
    Terminal,
    body,
    by_group,
    client,
    consume,
    consumer,
    dead_letter,
    deploy_pipeline,
    dlq,
    drain,
    failing,
    hooked,
    peek,
    publish,
)
from idempotent_runtime.contract import (
    LEASE_ATTRIBUTE,
    OWNER_ATTRIBUTE,
    RESULT_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    DeadLetterKind,
)

pytest.importorskip("idempotent_runtime.records", reason="the runtime's records API (inspect, forget)")

pytestmark = pytest.mark.usefixtures("cloud")


@pytest.fixture(autouse=True)
def _processors():
    dlq_processors.reset()
    yield
    dlq_processors.reset()


def _pipeline(mode: str = "document", **environment: str):
    processor = dlq_processors.PROCESSORS[mode]
    pipeline = deploy_pipeline(
        environment={
            "IDEMPOTENCY_MODE": mode,
            "PROCESSOR": f"dlq_processors:{processor.__name__}",
            "LEASE_SECONDS": "60",
            **environment,
        }
    )
    return pipeline, consumer(pipeline, processor)


def _items(pipeline) -> list[dict]:
    return client("dynamodb").scan(TableName=pipeline.table)["Items"]


def _item(pipeline, pk: str, sk: str) -> dict | None:
    return (
        client("dynamodb")
        .get_item(TableName=pipeline.table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True)
        .get("Item")
    )


def test_the_runtimes_own_dead_letters_are_listed_and_redriven_after_the_fix_exactly_once():
    pipeline, handler = _pipeline()
    publish(pipeline, body("ok", amount=1), group="g1")
    publish(pipeline, body("card", amount=2, reject="card declined"), group="g2")
    publish(pipeline, "not json", group="g3")
    assert sorted(o for _, o in consume(pipeline, handler)) == ["processed", "quarantined", "quarantined"]

    code, terminal = dlq("list", "--stack", pipeline.stack, "--json")
    assert code == 0, terminal.error
    report = json.loads(terminal.out.getvalue())
    assert {r["kind"]: r["messages"] for r in report["reasons"]} == {"rejected": 1, "invalid": 1}

    dlq_processors.FIXED.set()
    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--reason", "rejected")
    assert code == 0, terminal.error

    assert consume(pipeline, handler) == [(body("card", amount=2, reject="card declined"), "processed")]
    assert _item(pipeline, "card", "1")["total"] == {"N": "200"}
    assert [
        json.loads(m["MessageAttributes"]["idempotency.details"]["StringValue"])["kind"]
        for m in drain(pipeline.dlq_url)
    ] == ["invalid"]


def test_dry_run_shows_per_message_whether_its_key_is_new_done_conflicting_or_invalid():
    pipeline, handler = _pipeline()
    publish(pipeline, body("done", amount=1))
    publish(pipeline, body("clash", amount=1))
    assert [o for _, o in consume(pipeline, handler)] == ["processed", "processed"]
    letters = [
        dead_letter(body("done", amount=1), queue_url=pipeline.dlq_url, dedup_id="d1"),
        dead_letter(body("clash", amount=9), queue_url=pipeline.dlq_url, dedup_id="c1"),
        dead_letter(body("fresh", amount=1), queue_url=pipeline.dlq_url, dedup_id="f1"),
        dead_letter("not json", queue_url=pipeline.dlq_url, dedup_id="n1"),
    ]
    items = _items(pipeline)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--dry-run")

    assert code == 1, terminal.error  # the conflict would stay: skipped
    text = terminal.out.getvalue()
    done, clash, fresh, bad = (letter["MessageId"] for letter in letters)
    assert (
        f"{done} group g1 key done#1: done: a redrive would be a duplicate (--force processes it again)"
        in text
    )
    assert f"{clash} group g1 key clash#1: conflict: done with a different payload" in text
    assert f"{fresh} group g1 key fresh#1: new: a redrive processes it" in text
    assert f"{bad} group g1: invalid: the consumer cannot key it" in text
    assert (
        "dry run: 1 conflict, 1 done, 1 invalid, 1 new; 3 would be redriven, 1 skipped; nothing was changed"
        in terminal.lines
    )
    assert _items(pipeline) == items
    assert [m["MessageId"] for m in drain(pipeline.dlq_url)] == [done, clash, fresh, bad]


def test_dry_run_keys_dead_letters_of_a_single_field_key_as_the_consumer_does():
    pipeline = deploy_pipeline(environment={"KEY_SOURCE": "field", "PARTITION_KEY_FIELD": "customer_id"})
    handler = consumer(pipeline)
    gold = json.dumps({"customer_id": "c-1", "plan": "gold"})
    publish(pipeline, gold)
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    done, clash, fresh = (
        dead_letter(gold, queue_url=pipeline.dlq_url, dedup_id="d1"),
        dead_letter(
            json.dumps({"customer_id": "c-1", "plan": "tin"}), queue_url=pipeline.dlq_url, dedup_id="c1"
        ),
        dead_letter(json.dumps({"customer_id": "c-2"}), queue_url=pipeline.dlq_url, dedup_id="f1"),
    )

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--dry-run")

    assert code == 1, terminal.error  # the conflict would stay: the consumer would quarantine it again
    text = terminal.out.getvalue()
    assert "dry run: 1 conflict, 1 done, 1 new; 2 would be redriven, 1 skipped; nothing was changed" in text
    assert f"{done['MessageId']} group g1 key c-1#customer_id: done: a redrive would be a duplicate" in text
    assert (
        f"{clash['MessageId']} group g1 key c-1#customer_id: conflict: done with a different payload" in text
    )
    assert f"{fresh['MessageId']} group g1 key c-2#customer_id: new: a redrive processes it" in text


def test_dry_run_shows_a_versioned_key_holding_a_newer_version_as_stale_and_a_redrive_writes_nothing():
    pipeline = deploy_pipeline(
        fifo=False,
        environment={"IDEMPOTENCY_MODE": "versioned", "VERSION_FIELD": "v", "KEY_SOURCE": "fields"},
    )
    handler = consumer(pipeline)
    publish(pipeline, body("e-1", v=5, name="five"))
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    old, clash = (
        dead_letter(body("e-1", v=3, name="three"), queue_url=pipeline.dlq_url, group_id=None),
        dead_letter(body("e-1", v=5, name="other"), queue_url=pipeline.dlq_url, group_id=None),
    )

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--dry-run")

    assert code == 1, terminal.error  # the conflict would stay: skipped
    text = terminal.out.getvalue()
    stale = "stale: the key holds a newer version; a redrive writes nothing (counted stale)"
    assert f"{old['MessageId']} group - key e-1#1: {stale}" in text
    assert f"{clash['MessageId']} group - key e-1#1: conflict: done with a different payload" in text
    assert (
        "dry run: 1 conflict, 1 stale; 1 would be redriven, 1 skipped; nothing was changed" in terminal.lines
    )

    drain(pipeline.dlq_url)
    dead_letter(body("e-1", v=3, name="three"), queue_url=pipeline.dlq_url, group_id=None)
    code, terminal = dlq("redrive", "--stack", pipeline.stack)
    assert code == 0, terminal.error
    assert [o for _, o in consume(pipeline, handler)] == ["stale"]
    assert [(i["name"], i["v"]) for i in _items(pipeline)] == [({"S": "five"}, {"N": "5"})]


def test_dry_run_shows_a_key_whose_claim_is_held_as_in_progress():
    pipeline, handler = _pipeline("guarded")
    letter = dead_letter(body("busy"), queue_url=pipeline.dlq_url, dedup_id="b1")
    seen: list[tuple[int, Terminal]] = []
    dlq_processors.WHILE_CLAIMED.append(
        lambda: seen.append(dlq("redrive", "--stack", pipeline.stack, "--dry-run"))
    )

    publish(pipeline, body("busy"))
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]

    [(code, terminal)] = seen
    assert code == 0, terminal.error
    assert (
        f"{letter['MessageId']} group g1 key busy#1: in progress: a claim on the key is held"
        in terminal.out.getvalue()
    )


@pytest.mark.parametrize("mode", ["document", "transaction", "guarded"])
def test_force_processes_a_done_key_again_once_per_run_and_asks_first(mode):
    pipeline, handler = _pipeline(mode)
    publish(pipeline, body("k", amount=3))
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]

    # Without --force a redrive of the same message is a duplicate: nothing happens again.
    dead_letter(body("k", amount=3), queue_url=pipeline.dlq_url, group_id="g", dedup_id="k-copy-1")
    code, terminal = dlq("redrive", "--stack", pipeline.stack)
    assert code == 0, terminal.error
    assert "; key was done" in terminal.out.getvalue()
    assert [o for _, o in consume(pipeline, handler)] == ["duplicate"]

    # After the fix: two copies of the message in the DLQ. --force asks first (refused: nothing changes).
    dlq_processors.FIXED.set()
    dead_letter(body("k", amount=3), queue_url=pipeline.dlq_url, group_id="g", dedup_id="k-copy-2")
    dead_letter(body("k", amount=3), queue_url=pipeline.dlq_url, group_id="g", dedup_id="k-copy-3")
    items = _items(pipeline)
    code, terminal = dlq(
        "redrive", "--stack", pipeline.stack, "--force", terminal=Terminal(interactive=True, answers=["no"])
    )
    assert code == 1 and "not confirmed: nothing was changed" in terminal.error
    assert f"in table {pipeline.table} ({mode} mode: " in terminal.questions[0]
    assert _items(pipeline) == items and len(drain(pipeline.queue_url)) == 0

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--yes")

    assert code == 0, terminal.error
    assert terminal.out.getvalue().count("was done; forgot it") == 1
    assert "forgot 1 key(s) (--force)" in terminal.lines
    # The key is processed once more (the second copy is a duplicate of the first), with the fix.
    assert [o for _, o in consume(pipeline, handler)] == ["processed", "duplicate"]
    if mode == "document":
        assert _item(pipeline, "k", "1")["total"] == {"N": "300"}
    elif mode == "transaction":
        assert _item(pipeline, "account#k", "balance")["balance"] == {"N": "6"}
    else:
        assert dlq_processors.EFFECTS == ["k#1", "k#1"]


def test_force_lets_a_conflicting_version_replace_the_stored_document():
    pipeline, handler = _pipeline()
    publish(pipeline, body("k", amount=1))
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    dead_letter(
        body("k", amount=5),
        queue_url=pipeline.dlq_url,
        kind=DeadLetterKind.CONFLICT,
        reason="conflict",
        dedup_id="k-v2",
    )

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--dry-run")
    assert code == 0, terminal.error
    assert "key k#1: conflict: " in terminal.out.getvalue()
    assert "; --force forgets its key first" in terminal.out.getvalue()
    assert "dry run: 1 conflict; 1 would be redriven; --force would forget 1 key(s); nothing was changed" in (
        terminal.lines
    )

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--yes")

    assert code == 0, terminal.error
    assert "key k#1 was conflict; forgot it (the stored document is deleted" in terminal.out.getvalue()
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    assert _item(pipeline, "k", "1")["total"] == {"N": "5"}


@pytest.mark.parametrize(
    "when", ["after-call.dynamodb.BatchGetItem", "before-call.dynamodb.DeleteItem"], ids=["read", "delete"]
)
def test_force_never_deletes_a_claim_a_redelivery_took_over_since_the_inspection(when):
    # Guarded: payload X's invocation died holding its claim; another version Y of the key is dead-lettered
    # (a conflict). --force is to make Y win. Between the tool's inspection and its delete, X is delivered
    # again and takes its expired claim over: that claim is live, its effect runs, and must not be deleted.
    pipeline, handler = _pipeline("guarded")
    x, y = body("k", amount=1), body("k", amount=2)
    publish(pipeline, x)
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    client("dynamodb").update_item(  # X's record as its dead invocation left it: an expired claim
        TableName=pipeline.table,
        Key={"pk": {"S": "k"}, "sk": {"S": "1"}},
        UpdateExpression="SET #status = :claimed, #owner = :dead, #lease = :past REMOVE #result",
        ExpressionAttributeNames={
            "#status": STATUS_ATTRIBUTE,
            "#owner": OWNER_ATTRIBUTE,
            "#lease": LEASE_ATTRIBUTE,
            "#result": RESULT_ATTRIBUTE,
        },
        ExpressionAttributeValues={
            ":claimed": {"S": "IN_PROGRESS"},
            ":dead": {"S": "dead-invocation"},
            ":past": {"N": "1000"},
        },
    )
    letter = dead_letter(y, queue_url=pipeline.dlq_url, kind=DeadLetterKind.CONFLICT, reason="conflict")
    dlq_processors.EFFECTS.clear()
    publish(pipeline, x)  # the redelivery
    claimed, finish = threading.Event(), threading.Event()
    dlq_processors.WHILE_CLAIMED.append(lambda: (claimed.set(), finish.wait(30)))
    redelivered: list[tuple[str, str]] = []
    redelivery = threading.Thread(target=lambda: redelivered.extend(consume(pipeline, handler)))

    def take_over(**_: object) -> None:
        if not redelivery.is_alive() and not claimed.is_set():
            redelivery.start()
            assert claimed.wait(30)

    try:
        code, terminal = dlq(
            "redrive", "--stack", pipeline.stack, "--force", "--yes", connect=hooked(when, take_over)
        )
        held = _item(pipeline, "k", "1")  # while the redelivery runs its effect
    finally:
        finish.set()
        redelivery.join(30)

    assert claimed.is_set()
    assert held is not None and held[STATUS_ATTRIBUTE] == {"S": "IN_PROGRESS"}
    assert held[OWNER_ATTRIBUTE] != {"S": "dead-invocation"}
    assert code == 1
    assert (
        f"kept {letter['MessageId']} (group g1): key k#1 changed since it was inspected (it was conflict): "
        "not forgotten, not redriven; run again to see its state now"
    ) in terminal.lines
    assert "1 changed since inspected" in terminal.lines
    assert redelivered == [(x, "processed")] and dlq_processors.EFFECTS == ["k#1"]
    assert [m["Body"] for m in drain(pipeline.dlq_url)] == [y]
    assert drain(pipeline.queue_url) == []


def test_message_id_keys_survive_the_redrive():
    pipeline, handler = _pipeline(KEY_SOURCE="message_id")
    original = publish(pipeline, body("m"))
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    letter = dead_letter(body("m"), queue_url=pipeline.dlq_url, source_message_id=original, dedup_id="m1")

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--dry-run")
    assert f"{letter['MessageId']} group g1 key {original}#message_id: done" in terminal.out.getvalue()

    code, terminal = dlq("redrive", "--stack", pipeline.stack)
    assert code == 0, terminal.error
    assert [o for _, o in consume(pipeline, handler)] == ["duplicate"]


def test_dedup_id_keys_are_restored_and_an_unknown_one_is_kept_unless_forced(
    aws_deduplication: Deduplication,
):
    pipeline, handler = _pipeline(KEY_SOURCE="dedup_id")
    publish(pipeline, body("a"), dedup_id="order-1")
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    aws_deduplication.elapse(300)  # dead-lettered later: SQS has forgotten order-1
    known = dead_letter(body("a"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="order-1")
    unknown = dead_letter(body("b"), queue_url=pipeline.dlq_url, group_id="h", dedup_id=None)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--dry-run")
    text = terminal.out.getvalue()
    assert f"{known['MessageId']} group g key order-1#dedup_id: done" in text
    assert f"{unknown['MessageId']} group h" in text and "; kept: its original deduplication id" in text

    code, terminal = dlq("redrive", "--stack", pipeline.stack)
    assert code == 1
    assert f"kept {unknown['MessageId']} (group h): its original deduplication id is unknown" in (
        terminal.out.getvalue()
    )
    assert "the consumer keys messages by it (KEY_SOURCE=dedup_id)" in terminal.out.getvalue()
    assert [o for _, o in consume(pipeline, handler)] == ["duplicate"]
    assert by_group(drain(pipeline.dlq_url)) == {"h": [body("b")]}

    unknown = dead_letter(body("b"), queue_url=pipeline.dlq_url, group_id="h", dedup_id=None)
    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--yes")
    assert code == 0, terminal.error
    assert "redriven anyway (--force): the consumer keys it afresh" in terminal.out.getvalue()
    [message] = client("sqs").receive_message(QueueUrl=pipeline.queue_url, AttributeNames=["All"])["Messages"]
    assert message["Attributes"]["MessageDeduplicationId"] == f"redrive-{unknown['MessageId']}"


def _redriven_as(terminal: Terminal, letter_id: str) -> str:
    """The source-queue message id a run printed for ``letter_id`` ("redriven ID (group G) as NEW...")."""
    [line] = [line for line in terminal.lines if line.startswith(f"redriven {letter_id} ")]
    return line.split(" as ", 1)[1].split(",")[0].split(";")[0]


def _redriven_and_rejected_again(pipeline, handler, message_body: str) -> tuple[dict, str, dict]:
    """Dead-letter a rejected order, redrive it, let the consumer quarantine the copy again (the fix is not
    deployed): the first dead letter, the redriven copy's id, and the second dead letter (all attributes)."""
    first = dead_letter(
        message_body,
        queue_url=pipeline.dlq_url,
        group_id="g",
        dedup_id="order-1",
        kind=DeadLetterKind.REJECTED,
        reason="rejected by the processor: bug",
    )
    code, terminal = dlq("redrive", "--stack", pipeline.stack)
    assert code == 0, terminal.error
    copy = _redriven_as(terminal, first["MessageId"])
    assert consume(pipeline, handler) == [(message_body, "quarantined")]
    [again] = client("sqs").receive_message(
        QueueUrl=pipeline.dlq_url, VisibilityTimeout=0, AttributeNames=["All"]
    )["Messages"]
    return first, copy, again


def test_a_second_redrive_within_5_minutes_that_sqs_drops_keeps_the_dead_letter(
    aws_deduplication: Deduplication,
):
    # Redriven, rejected again at once (the fix is not deployed yet): the runtime dead-letters the redriven
    # copy X. Redriven again within 5 minutes, the restored deduplication id is still X's: SQS drops the send
    # and answers with X's id. The dead letter must stay, or the message is gone from both queues.
    pipeline, handler = _pipeline(KEY_SOURCE="dedup_id")  # keyed by the deduplication id: it is restored
    message_body = body("o-1", amount=2, reject="bug")
    _, copy, again = _redriven_and_rejected_again(pipeline, handler, message_body)

    dlq_processors.FIXED.set()
    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 1
    sent = int(again["Attributes"]["SentTimestamp"])
    free = datetime.fromtimestamp(math.ceil((sent + 300_000) / 1000), UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    assert (
        f"kept {again['MessageId']} (group g): SQS accepted the send but dropped it as a duplicate of "
        f"message {copy} (deduplication id order-1 was used within the last 5 minutes); redrive it again "
        f"after {free}"
    ) in terminal.lines
    assert "1 dropped by SQS" in terminal.lines
    assert drain(pipeline.queue_url) == []
    [kept] = client("sqs").receive_message(QueueUrl=pipeline.dlq_url, VisibilityTimeout=0)["Messages"]
    assert kept["MessageId"] == again["MessageId"] and kept["Body"] == message_body

    aws_deduplication.elapse(300)
    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    assert consume(pipeline, handler) == [(message_body, "processed")]
    assert _item(pipeline, "order-1", "dedup_id")["total"] == {"N": "200"}
    assert drain(pipeline.dlq_url) == []


def test_a_conflict_is_skipped_as_quarantined_again_its_group_goes_on_and_force_then_makes_it_win(
    aws_deduplication: Deduplication,
):
    # The documented conflict flow. A plain redrive would have the conflict quarantined again at once: the dry
    # run and the run say so in the same words and leave it, and its group goes on (as the consumer went on
    # past it). Then --force within 5 minutes: it must not delete the stored version and then have its send
    # dropped by SQS.
    pipeline, handler = _pipeline()
    publish(pipeline, body("o-1", amount=1), group="g", dedup_id="v1")
    publish(pipeline, body("o-1", amount=2), group="g", dedup_id="v2")
    assert [o for _, o in consume(pipeline, handler)] == ["processed", "quarantined"]
    [clash] = client("sqs").receive_message(QueueUrl=pipeline.dlq_url, VisibilityTimeout=0)["Messages"]
    dead_letter(body("o-2", amount=3), queue_url=pipeline.dlq_url, group_id="g", dedup_id="v3")
    aws_deduplication.elapse(300)

    preview_code, preview = dlq("redrive", "--stack", pipeline.stack, "--dry-run")
    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert preview_code == code == 1
    [previewed] = [line for line in preview.lines if line.startswith(clash["MessageId"])]
    [skipped] = [
        line for line in terminal.lines if line.startswith(f"skipped {clash['MessageId']} (group g): ")
    ]
    reason = skipped.split(": ", 1)[1]
    assert previewed.endswith(f"; skipped: {reason}")
    assert reason.startswith("quarantined again: key o-1#1 is done with another payload (stored fingerprint ")
    assert reason.endswith(
        "the consumer quarantines such a delivery (ON_CONFLICT=quarantine); --force makes this version win"
    )
    assert "dry run: 1 conflict, 1 new; 1 would be redriven, 1 skipped; nothing was changed" in preview.lines
    assert "1 redriven, 1 skipped" in terminal.lines
    assert consume(pipeline, handler) == [(body("o-2", amount=3), "processed")]  # nothing came back
    assert [m["MessageId"] for m in peek(pipeline.dlq_url)] == [clash["MessageId"]]

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--yes")

    assert code == 0, terminal.error
    assert "key o-1#1 was conflict; forgot it (the stored document is deleted" in terminal.out.getvalue()
    [line] = [line for line in terminal.lines if line.startswith("redriven ")]
    assert ", deduplication id redrive-" in line
    assert consume(pipeline, handler) == [(body("o-1", amount=2), "processed")]
    assert _item(pipeline, "o-1", "1")["total"] == {"N": "2"}
    assert drain(pipeline.dlq_url) == [] and drain(pipeline.queue_url) == []


def test_force_after_a_run_that_sent_but_could_not_delete_processes_the_message_again(
    aws_deduplication: Deduplication,
):
    # A run sent the dead letter (a duplicate: the key is done) but could not delete it. --force within 5
    # minutes forgets the key: its send must reach the consumer, whose copy from the first run is gone.
    pipeline, handler = _pipeline()
    publish(pipeline, body("k", amount=3), group="g")
    assert [o for _, o in consume(pipeline, handler)] == ["processed"]
    dead_letter(body("k", amount=3), queue_url=pipeline.dlq_url, group_id="g", dedup_id="k-copy")
    code, terminal = dlq(
        "redrive", "--stack", pipeline.stack, connect=failing("DeleteMessageBatch", lambda p: True)
    )
    assert code == 1 and "the dead letter could not be deleted" in terminal.out.getvalue()
    assert consume(pipeline, handler) == [(body("k", amount=3), "duplicate")]

    dlq_processors.FIXED.set()
    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--yes")

    assert code == 0, terminal.error
    assert "key k#1 was done; forgot it" in terminal.out.getvalue()
    assert consume(pipeline, handler) == [(body("k", amount=3), "processed")]
    assert _item(pipeline, "k", "1")["total"] == {"N": "300"}
    assert drain(pipeline.dlq_url) == []


def test_force_does_not_forget_a_key_that_is_the_deduplication_id_it_sends_again(
    aws_deduplication: Deduplication,
):
    # KEY_SOURCE=dedup_id, original deduplication id unknown: --force sends redrive-<DLQ message id> and the
    # consumer keys the message by it. A first --force run sent it (processed) but could not delete it; a
    # second one within 5 minutes would have that send dropped by SQS, so the key must not be forgotten.
    pipeline, handler = _pipeline(KEY_SOURCE="dedup_id")
    letter = dead_letter(body("b", amount=4), queue_url=pipeline.dlq_url, group_id="h", dedup_id=None)
    key = f"redrive-{letter['MessageId']}"
    code, terminal = dlq(
        "redrive",
        "--stack",
        pipeline.stack,
        "--force",
        "--yes",
        connect=failing("DeleteMessageBatch", lambda p: True),
    )
    assert code == 1, terminal.out.getvalue()
    assert consume(pipeline, handler) == [(body("b", amount=4), "processed")]
    assert _item(pipeline, key, "dedup_id")["total"] == {"N": "4"}

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--yes")

    assert code == 0, terminal.error
    assert (
        f"{letter['MessageId']} (group h): key {key}#dedup_id was done; not forgotten: the consumer keys it "
        f"by the deduplication id this send reuses ({key}), which SQS may drop as a duplicate"
    ) in terminal.lines
    assert "forgot it" not in terminal.out.getvalue() and "(--force)" not in terminal.lines[-1]
    assert consume(pipeline, handler) == []
    assert _item(pipeline, key, "dedup_id")["total"] == {"N": "4"}
    assert drain(pipeline.dlq_url) == []


def test_show_finds_a_redriven_message_by_the_id_the_consumer_logged_when_it_quarantined_it_again():
    pipeline, handler = _pipeline()
    # The consumer logs the copy's message id when it quarantines it.
    first, copy, again = _redriven_and_rejected_again(pipeline, handler, body("o-1", reject="bug"))

    for wanted in (copy, first["source_message_id"], again["MessageId"]):
        code, terminal = dlq("show", "--stack", pipeline.stack, wanted)
        assert code == 0, terminal.error
        assert terminal.lines[0].startswith(f"message            {again['MessageId']}  (in ")
        assert f"source message id  {first['source_message_id']}" in terminal.lines
        assert (
            f"dead-lettered as   {copy} (the redriven copy the consumer quarantined: the id it logged)"
        ) in terminal.lines

    code, terminal = dlq("list", "--stack", pipeline.stack, "--messages", "--json")
    assert code == 0, terminal.error
    [summary] = json.loads(terminal.out.getvalue())["message_list"]
    assert summary["source_message_id"] == first["source_message_id"]
    assert summary["message_ids"] == [first["source_message_id"], copy, again["MessageId"]]
