"""dlq redrive: back to the source queue in order within each group, with the group id and the idempotency
key; a dead letter is deleted only after its send succeeded; nothing is dropped silently; at volume, ten
groups a request, a failed entry or a killed run losing and doubling nothing, and what a run cannot read
said with its reason and when it can be read."""

from __future__ import annotations

import contextlib
import json
import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from dlq_helpers import (
    Terminal,
    attribute,
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
    failing_entries,
    hooked,
    make_subscription_dlq,
    peek,
    size_limited,
    sqs_size,
)
from idempotent_runtime.contract import DLQ_DETAILS_ATTRIBUTE, DLQ_REASON_ATTRIBUTE, DeadLetterKind

from idempotent_cli.dlq.letters import REDRIVE_ATTRIBUTE

pytestmark = pytest.mark.usefixtures("cloud")


def _redrive_value(message: dict[str, Any]) -> dict[str, Any]:
    value = json.loads(attribute(message, REDRIVE_ATTRIBUTE) or "null")
    assert isinstance(value, dict), message
    return value


def _dead_letters(pipeline: Any, groups: int, each: int, prefix: str = "") -> dict[str, list[str]]:
    """``each`` dead letters in each of ``groups`` groups (g0, g1...), interleaved as a busy DLQ has them:
    their bodies by group, in order."""
    sent: dict[str, list[str]] = {}
    for n in range(each):
        for g in range(groups):
            name = f"{prefix}{g}-{n}"
            sent.setdefault(f"g{g}", []).append(body(name))
            dead_letter(body(name), queue_url=pipeline.dlq_url, group_id=f"g{g}", dedup_id=name)
    return sent


def test_redrive_keeps_the_order_of_each_group_and_its_group_id():
    pipeline = deploy_pipeline()
    sources = {}
    for n in range(12):  # more than one receive's worth of group a, interleaved with group b
        sources[f"a{n}"] = dead_letter(body(f"a{n}"), queue_url=pipeline.dlq_url, group_id="a")
        if n % 4 == 0:
            sources[f"b{n}"] = dead_letter(body(f"b{n}"), queue_url=pipeline.dlq_url, group_id="b")

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    assert "15 redriven" in terminal.lines
    assert drain(pipeline.dlq_url) == []
    moved = drain(pipeline.queue_url)
    assert by_group(moved) == {
        "a": [body(f"a{n}") for n in range(12)],
        "b": [body(f"b{n}") for n in (0, 4, 8)],
    }
    for message in moved:
        name = json.loads(message["Body"])["x"]
        assert _redrive_value(message)["source_message_id"] == sources[name]["source_message_id"]
        assert attribute(message, DLQ_REASON_ATTRIBUTE) is None
        assert attribute(message, DLQ_DETAILS_ATTRIBUTE) is None


@pytest.mark.usefixtures("aws_deduplication")
def test_a_consumer_keyed_by_body_fields_gets_its_message_back_at_once_under_a_fresh_deduplication_id():
    # Sent a minute ago and dead-lettered at once: its original deduplication id is inside SQS's 5-minute
    # window, where a send with it would be dropped. The consumer keys by body fields, so the redrive uses
    # an id SQS has not seen (the same for every run on this dead letter) and the message is back at once.
    pipeline = deploy_pipeline()
    client("sqs").send_message(
        QueueUrl=pipeline.queue_url, MessageBody=body("o-1"), MessageGroupId="g", MessageDeduplicationId="o-1"
    )
    assert [m["Body"] for m in drain(pipeline.queue_url)] == [body("o-1")]
    letter = dead_letter(body("o-1"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="o-1")

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    [message] = drain(pipeline.queue_url)
    assert message["Body"] == body("o-1") and message["Attributes"]["MessageGroupId"] == "g"
    assert message["Attributes"]["MessageDeduplicationId"] == f"redrive-{letter['MessageId']}"
    assert _redrive_value(message)["dedup_id"] == "o-1"  # the original still travels with it
    assert drain(pipeline.dlq_url) == []


def test_redrive_restores_the_producers_attributes_and_deduplication_id():
    pipeline = deploy_pipeline(environment={"KEY_SOURCE": "dedup_id"})  # the consumer keys by it
    letter = dead_letter(
        body("order-1"),
        queue_url=pipeline.dlq_url,
        group_id="customer-7",
        dedup_id="order-1#v1",
        attributes={"tenant": "acme", "trace": "t-1"},
        kind=DeadLetterKind.EXHAUSTED,
        reason="timed out on the last receive",
    )

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    assert f"redriven {letter['MessageId']} (group customer-7) as " in terminal.out.getvalue()
    assert "deduplication id restored" in terminal.out.getvalue()
    [message] = drain(pipeline.queue_url)
    assert message["Body"] == body("order-1")
    assert message["Attributes"]["MessageGroupId"] == "customer-7"
    assert message["Attributes"]["MessageDeduplicationId"] == "order-1#v1"
    assert set(message["MessageAttributes"]) == {"tenant", "trace", REDRIVE_ATTRIBUTE}
    assert attribute(message, "tenant") == "acme"
    redrive = _redrive_value(message)
    assert redrive["source_message_id"] == letter["source_message_id"]
    assert redrive["dedup_id"] == "order-1#v1"


def test_a_message_sqs_moved_keeps_its_message_id_as_key_and_gets_a_fresh_deduplication_id():
    # KEY_SOURCE=fields: the key is in the body; SQS replaced the deduplication id, so a new one is sent.
    pipeline = deploy_pipeline(max_receive_count=1)
    sqs = client("sqs")
    original = sqs.send_message(
        QueueUrl=pipeline.queue_url, MessageBody=body("m1"), MessageGroupId="g", MessageDeduplicationId="m1"
    )["MessageId"]
    for _ in range(2):
        sqs.receive_message(QueueUrl=pipeline.queue_url, VisibilityTimeout=0)
    assert drain(pipeline.queue_url) == []

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    [message] = drain(pipeline.queue_url)
    assert message["Body"] == body("m1") and message["Attributes"]["MessageGroupId"] == "g"
    assert _redrive_value(message)["source_message_id"] == original
    # moto keeps the original deduplication id on a moved message (AWS replaces it with the message id): the
    # tool restores what the dead letter still knows, and sends a fresh one otherwise.
    assert message["Attributes"]["MessageDeduplicationId"] in ("m1", f"redrive-{original}")


@pytest.mark.usefixtures("aws_deduplication")
def test_a_send_sqs_drops_as_a_duplicate_is_detected_and_the_dead_letter_kept():
    # The original is still in the source queue (sent under a minute ago): the restored deduplication id is
    # within SQS's 5-minute window, so SQS answers success with the original's id and enqueues nothing.
    pipeline = deploy_pipeline(environment={"KEY_SOURCE": "dedup_id"})  # restored: the consumer keys by it
    original = client("sqs").send_message(
        QueueUrl=pipeline.queue_url, MessageBody=body("g1"), MessageGroupId="g", MessageDeduplicationId="g1"
    )["MessageId"]
    first = dead_letter(
        body("g1"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="g1", source_message_id=original
    )
    dead_letter(body("g2"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="g2")
    dead_letter(body("h1"), queue_url=pipeline.dlq_url, group_id="h", dedup_id="h1")

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 1
    text = terminal.out.getvalue()
    assert (
        f"kept {first['MessageId']} (group g): SQS accepted the send but dropped it as a duplicate of "
        f"message {original} (deduplication id g1 was used within the last 5 minutes)"
    ) in text
    assert f"group g: stopped at {first['MessageId']}; its later messages stay in the DLQ, in order" in text
    # Group g stays whole and in order in the DLQ; group h went through.
    assert by_group(drain(pipeline.dlq_url)) == {"g": [body("g1"), body("g2")]}
    assert by_group(drain(pipeline.queue_url)) == {"g": [body("g1")], "h": [body("h1")]}


def test_a_failed_send_leaves_the_dead_letter_in_place_and_stops_its_group():
    pipeline = deploy_pipeline()
    dead_letter(body("g1"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="g1")
    dead_letter(body("g2"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="g2")
    dead_letter(body("h1"), queue_url=pipeline.dlq_url, group_id="h", dedup_id="h1")

    connect = failing_entries("SendMessageBatch", lambda _, entry: entry["MessageBody"] == body("g1"))
    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=connect)

    assert code == 1
    assert "the send to the source queue failed" in terminal.out.getvalue()
    assert "injected failure" in terminal.out.getvalue()
    assert by_group(drain(pipeline.dlq_url)) == {"g": [body("g1"), body("g2")]}
    assert by_group(drain(pipeline.queue_url)) == {"h": [body("h1")]}


def test_a_dead_letter_whose_delete_fails_after_its_send_is_reported_and_not_lost():
    pipeline = deploy_pipeline()
    letter = dead_letter(body("g1"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="g1")

    code, terminal = dlq(
        "redrive", "--stack", pipeline.stack, connect=failing("DeleteMessageBatch", lambda p: True)
    )

    assert code == 1
    assert f"{letter['MessageId']} (group g) was sent as " in terminal.out.getvalue()
    assert "the dead letter could not be deleted" in terminal.out.getvalue()
    assert len(drain(pipeline.dlq_url)) == 1 and len(drain(pipeline.queue_url)) == 1


@pytest.mark.parametrize("limit", [["--limit", "1"], []], ids=["limit-1", "no-limit"])
def test_a_role_that_may_not_delete_sends_one_copy_and_stops(limit):
    # Without sqs:DeleteMessage every send leaves the dead letter in the DLQ too: the run stops after the
    # first, instead of copying the whole DLQ into the source queue.
    pipeline = deploy_pipeline()
    for n in range(3):
        dead_letter(body(f"g{n}"), queue_url=pipeline.dlq_url, group_id="g", dedup_id=f"g{n}")
    dead_letter(body("h0"), queue_url=pipeline.dlq_url, group_id="h", dedup_id="h0")
    denied = ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "not authorized to perform: sqs:DeleteMessage"}},
        "DeleteMessageBatch",
    )

    code, terminal = dlq(
        "redrive",
        "--stack",
        pipeline.stack,
        *limit,
        connect=failing("DeleteMessageBatch", lambda params: True, denied),
    )

    assert code == 1
    assert "1 not deleted" in terminal.lines
    assert any(
        line.startswith("stopped: the DLQ refused DeleteMessage (")
        and line.endswith("): every further send would leave a copy in both queues")
        for line in terminal.lines
    ), terminal.lines
    assert "stopped after --limit 1" not in terminal.lines
    assert by_group(drain(pipeline.queue_url)) == {"g": [body("g0")]}
    assert by_group(drain(pipeline.dlq_url)) == {"g": [body(f"g{n}") for n in range(3)], "h": [body("h0")]}


LIMIT = 2048  # the queues' MaximumMessageSize in these tests (AWS allows 1,024 to 1,048,576)


def _moved_at_the_size_limit(pipeline) -> str:
    """A message exactly at the queues' size limit, and a small one behind it in its group, both moved to
    the DLQ by SQS; returns the big one's body."""
    sqs = client("sqs")
    for url in (pipeline.queue_url, pipeline.dlq_url):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": str(LIMIT)})
    tenant = {"tenant": {"DataType": "String", "StringValue": "acme"}}
    request = {"MessageBody": body("big", pad=""), "MessageAttributes": tenant}
    big = body("big", pad="p" * (LIMIT - sqs_size(request)))
    for message_body, dedup_id in ((big, "big"), (body("small"), "small")):
        sqs.send_message(
            QueueUrl=pipeline.queue_url,
            MessageBody=message_body,
            MessageAttributes=tenant,
            MessageGroupId="g",
            MessageDeduplicationId=dedup_id,
        )
    for _ in range(10):  # each receive that is not deleted counts; then SQS moves the message
        sqs.receive_message(QueueUrl=pipeline.queue_url, VisibilityTimeout=0)
    assert drain(pipeline.queue_url) == []  # both moved
    return big


def test_a_message_at_the_size_limit_goes_back_without_the_redrive_attribute_the_consumer_does_not_need():
    pipeline = deploy_pipeline(max_receive_count=1)  # KEY_SOURCE=fields: keyed by the body
    big = _moved_at_the_size_limit(pipeline)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=size_limited())

    assert code == 0, terminal.out.getvalue()
    assert "2 redriven" in terminal.lines
    assert (
        f"    note: sent without {REDRIVE_ATTRIBUTE}: the message is {LIMIT:,} bytes and {REDRIVE_ATTRIBUTE} "
        f"would make it "
    ) in terminal.out.getvalue()
    moved = drain(pipeline.queue_url)
    assert by_group(moved) == {"g": [big, body("small")]}
    assert set(moved[0]["MessageAttributes"]) == {"tenant"}
    assert set(moved[1]["MessageAttributes"]) == {"tenant", REDRIVE_ATTRIBUTE}
    assert drain(pipeline.dlq_url) == []


def test_a_message_at_the_size_limit_whose_key_needs_the_redrive_attribute_stays_and_says_why():
    pipeline = deploy_pipeline(max_receive_count=1, environment={"KEY_SOURCE": "message_id"})
    big = _moved_at_the_size_limit(pipeline)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=size_limited())

    assert code == 1
    [line] = [line for line in terminal.lines if line.startswith("kept ")]
    found = re.search(
        f": the message is {LIMIT:,} bytes and {REDRIVE_ATTRIBUTE} would make it ([0-9,]+), over the source "
        f"queue's MaximumMessageSize of {LIMIT:,} bytes, so there is no room for {REDRIVE_ATTRIBUTE}, which "
        "the consumer needs to key it as before; --force redrives it with a new key$",
        line,
    )
    assert found and int(found[1].replace(",", "")) > LIMIT, line
    assert drain(pipeline.queue_url) == []

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--force", "--yes", connect=size_limited())

    assert code == 0, terminal.out.getvalue()
    assert "redriven anyway (--force): the consumer keys it afresh" in terminal.out.getvalue()
    moved = drain(pipeline.queue_url)
    assert by_group(moved) == {"g": [big, body("small")]}
    assert set(moved[0]["MessageAttributes"]) == {"tenant"}
    assert drain(pipeline.dlq_url) == []


def test_ctrl_c_between_send_and_delete_names_the_message_and_leaves_every_dead_letter_visible():
    pipeline = deploy_pipeline()
    letter = dead_letter(body("g1"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="g1")
    dead_letter(body("g2"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="g2")

    connect = failing("DeleteMessageBatch", lambda params: True, KeyboardInterrupt())
    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=connect)

    assert code == 130
    assert (
        f"interrupted while redriving {letter['MessageId']}: it may be in the source queue" in terminal.error
    )
    assert "every message the command held is visible in the DLQ again" in terminal.error
    assert by_group(drain(pipeline.dlq_url)) == {"g": [body("g1"), body("g2")]}
    assert by_group(drain(pipeline.queue_url)) == {"g": [body("g1")]}


def test_filters_choose_by_group_and_by_reason_and_leave_the_rest_in_order():
    pipeline = deploy_pipeline()
    dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="orders-1", dedup_id="a1")
    timed_out = {"kind": DeadLetterKind.EXHAUSTED, "reason": "timed out"}
    for name, group in (("a2", "orders-1"), ("b1", "orders-2"), ("c1", "refunds-1")):
        dead_letter(body(name), queue_url=pipeline.dlq_url, group_id=group, dedup_id=name, **timed_out)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--group", "orders-*", "--reason", "exhausted")

    assert code == 0, terminal.error
    assert "2 redriven" in terminal.out.getvalue()
    assert by_group(drain(pipeline.queue_url)) == {"orders-1": [body("a2")], "orders-2": [body("b1")]}
    assert by_group(drain(pipeline.dlq_url)) == {"orders-1": [body("a1")], "refunds-1": [body("c1")]}


def test_messages_behind_ten_that_the_filters_leave_are_reported_as_not_reached():
    pipeline = deploy_pipeline()
    for n in range(10):
        dead_letter(
            body(f"k{n}"), queue_url=pipeline.dlq_url, group_id="g", dedup_id=f"k{n}", reason="bad input"
        )
    for n in range(3):
        dead_letter(
            body(f"t{n}"),
            queue_url=pipeline.dlq_url,
            group_id="g",
            dedup_id=f"t{n}",
            kind=DeadLetterKind.EXHAUSTED,
            reason="table throttled",
        )

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--reason", "throttled")

    # The ten the filter leaves fill the group's receive: SQS hands out no more of the group while they are
    # held, so the three behind them cannot be reached without removing them first. The tool says so, and
    # does not claim success: they may be among the chosen.
    assert code == 1, terminal.error
    assert (
        "not finished: 3 message(s) could not be read (see above) and may be among those chosen; they "
        "stay in the DLQ"
    ) in terminal.lines
    assert "13 message(s): 13 visible, 0 in flight" in terminal.lines
    assert "10 left by the filters" in terminal.lines
    assert any(
        line.startswith("! 3 message(s) not read: a FIFO queue hands out at most 10")
        for line in terminal.lines
    )
    assert drain(pipeline.queue_url) == []
    assert by_group(drain(pipeline.dlq_url)) == {
        "g": [body(f"k{n}") for n in range(10)] + [body(f"t{n}") for n in range(3)]
    }


def test_dry_run_previews_what_the_run_does_and_names_the_groups_it_stops():
    # KEY_SOURCE=dedup_id: a dead letter whose original deduplication id is unknown stays, and its group
    # stops behind it. The preview must not promise the message behind it, and must name the group.
    pipeline = deploy_pipeline(environment={"KEY_SOURCE": "dedup_id"})
    stuck = dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="a", dedup_id=None)
    behind = dead_letter(body("a2"), queue_url=pipeline.dlq_url, group_id="a", dedup_id="a2")
    dead_letter(body("b1"), queue_url=pipeline.dlq_url, group_id="b", dedup_id="b1")

    preview_code, preview = dlq("redrive", "--stack", pipeline.stack, "--dry-run")
    code, run = dlq("redrive", "--stack", pipeline.stack)

    assert preview_code == code == 1
    [line] = [line for line in preview.lines if line.startswith(stuck["MessageId"])]
    assert ": new: a redrive processes it; kept: its original deduplication id is unknown" in line
    assert line.endswith("; --force redrives it with a new key")
    assert not any(behind["MessageId"] in line for line in preview.lines)
    assert "dry run: 2 new; 1 would be redriven, 1 kept; nothing was changed" in preview.lines
    for terminal in (preview, run):
        assert (
            f"group a: stopped at {stuck['MessageId']}; its later messages stay in the DLQ, in order"
            in terminal.lines
        )
        assert "1 later message(s) of stopped groups left in place" in terminal.lines
    assert "1 kept, 1 redriven" in run.lines
    assert by_group(drain(pipeline.queue_url)) == {"b": [body("b1")]}
    assert by_group(drain(pipeline.dlq_url)) == {"a": [body("a1"), body("a2")]}


def test_dry_run_stops_where_limit_stops_the_run():
    pipeline = deploy_pipeline()
    letters = [
        dead_letter(body(f"m{n}"), queue_url=pipeline.dlq_url, group_id="g", dedup_id=f"m{n}")
        for n in range(3)
    ]

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--dry-run", "--limit", "2")

    assert code == 0, terminal.error
    previewed = [letter for letter in letters if any(letter["MessageId"] in line for line in terminal.lines)]
    assert previewed == letters[:2]
    assert "stopped after --limit 2" in terminal.lines
    assert "dry run: 2 new; 2 would be redriven; nothing was changed" in terminal.lines


def test_dead_letters_held_by_another_reader_are_not_redriven_and_the_run_fails_saying_why():
    # A killed earlier run (or another reader) holds them: their visibility timeout has not ended.
    pipeline = deploy_pipeline()
    dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="a", dedup_id="a1")
    dead_letter(body("b1"), queue_url=pipeline.dlq_url, group_id="b", dedup_id="b1")
    sqs = client("sqs")
    held = sqs.receive_message(QueueUrl=pipeline.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=600)
    assert len(held["Messages"]) == 2

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 1
    assert "no message" in terminal.lines
    assert any(line.startswith("! 2 message(s) in flight elsewhere (") for line in terminal.lines)
    assert (
        "not finished: 2 message(s) could not be read (see above) and may be among those chosen; they "
        "stay in the DLQ"
    ) in terminal.lines
    assert drain(pipeline.queue_url) == []
    for message in held["Messages"]:
        sqs.change_message_visibility(
            QueueUrl=pipeline.dlq_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    assert by_group(drain(pipeline.dlq_url)) == {"a": [body("a1")], "b": [body("b1")]}


def test_copies_of_one_dead_letter_are_redriven_once_and_deleted_after_the_send():
    pipeline = deploy_pipeline(fifo=False)  # a standard DLQ keeps both copies the runtime sent
    for _ in range(2):
        dead_letter(body("o-1"), queue_url=pipeline.dlq_url, group_id=None, source_message_id="src-1")
    dead_letter(body("o-2"), queue_url=pipeline.dlq_url, group_id=None)

    code, preview = dlq("redrive", "--stack", pipeline.stack, "--dry-run")
    assert code == 0, preview.error
    assert "dry run: 2 new; 2 would be redriven, 1 copy deleted; nothing was changed" in preview.lines

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    assert "1 copy deleted, 2 redriven" in terminal.lines
    assert sorted(m["Body"] for m in drain(pipeline.queue_url)) == [body("o-1"), body("o-2")]
    assert drain(pipeline.dlq_url) == []


def test_copies_stay_when_the_send_of_their_dead_letter_fails():
    pipeline = deploy_pipeline(fifo=False)
    for _ in range(2):
        dead_letter(body("o-1"), queue_url=pipeline.dlq_url, group_id=None, source_message_id="src-1")
    dead_letter(body("o-2"), queue_url=pipeline.dlq_url, group_id=None)

    connect = failing_entries("SendMessageBatch", lambda _, entry: entry["MessageBody"] == body("o-1"))
    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=connect)

    assert code == 1
    assert "1 copy left, 1 redriven, 1 send failed" in terminal.lines
    assert [m["Body"] for m in drain(pipeline.queue_url)] == [body("o-2")]
    assert [m["Body"] for m in drain(pipeline.dlq_url)] == [body("o-1"), body("o-1")]


@pytest.mark.usefixtures("aws_deduplication")
def test_a_later_copy_in_a_fifo_group_is_deleted_after_its_dead_letter_went_back_in_order(
    aws_deduplication,
):
    # A FIFO DLQ drops the runtime's second send within 5 minutes; after that the copy lands behind the
    # group's newer dead letters.
    pipeline = deploy_pipeline()
    dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="g", source_message_id="src-a1")
    dead_letter(body("a2"), queue_url=pipeline.dlq_url, group_id="g")
    aws_deduplication.elapse(301)
    dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="g", source_message_id="src-a1")
    assert by_group(peek(pipeline.dlq_url)) == {"g": [body("a1"), body("a2"), body("a1")]}

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    assert "1 copy deleted, 2 redriven" in terminal.lines
    assert by_group(drain(pipeline.queue_url)) == {"g": [body("a1"), body("a2")]}
    assert drain(pipeline.dlq_url) == []


def test_a_count_that_lags_behind_the_runs_own_deletes_is_not_taken_for_another_reader():
    # SQS's approximate counts are eventually consistent: right after the run deleted its messages,
    # ApproximateNumberOfMessagesNotVisible may still count them. That is not a reader holding dead letters.
    pipeline = deploy_pipeline()
    sent = _dead_letters(pipeline, groups=1, each=3)
    deleted: list[str] = []
    stale = iter(range(2))  # the next two counts after the deletes still include them

    def lagging(parsed: dict[str, Any], **_: Any) -> None:
        counts = parsed.get("Attributes", {})
        if deleted and "ApproximateNumberOfMessagesNotVisible" in counts and next(stale, None) is not None:
            counts["ApproximateNumberOfMessagesNotVisible"] = str(len(deleted))

    connect = hooked(
        "after-call.sqs.GetQueueAttributes",
        lagging,
        ("after-call.sqs.DeleteMessageBatch", lambda parsed, **_: deleted.extend(parsed["Successful"])),
    )
    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=connect)

    assert code == 0, terminal.out.getvalue()
    assert "3 redriven" in terminal.lines
    assert not any("in flight elsewhere" in line or "not finished" in line for line in terminal.lines)
    assert len(terminal.sleeps) >= 1
    assert by_group(drain(pipeline.queue_url)) == sent


def test_rate_limit_waits_between_sends():
    pipeline = deploy_pipeline()
    sent = _dead_letters(pipeline, groups=1, each=5)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--rate", "2")

    assert code == 0, terminal.error
    assert terminal.sleeps == [0.5, 0.5, 0.5, 0.5]
    assert by_group(drain(pipeline.queue_url)) == sent


def test_limit_redrives_the_oldest_first_and_leaves_the_rest_in_order():
    pipeline = deploy_pipeline()
    sent = _dead_letters(pipeline, groups=1, each=4)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--limit", "1")

    assert code == 0 and "stopped after --limit 1" in terminal.lines
    assert by_group(drain(pipeline.queue_url)) == {"g0": sent["g0"][:1]}
    assert by_group(drain(pipeline.dlq_url)) == {"g0": sent["g0"][1:]}


def test_a_long_run_on_a_terminal_draws_a_progress_bar_and_plain_output_has_none():
    pipeline = deploy_pipeline()
    _dead_letters(pipeline, groups=5, each=5)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, terminal=Terminal(tty=True))

    assert code == 0
    output = terminal.out.getvalue()
    assert "\r[" + "#" * 30 + "] 25/25 done (25 redriven)" in output
    assert output.count("redriven ") == 25  # one line per message above the bar

    _dead_letters(pipeline, groups=5, each=5, prefix="n")
    code, terminal = dlq("redrive", "--stack", pipeline.stack)
    assert code == 0 and "\r" not in terminal.out.getvalue()
    assert sum(line.startswith("redriven ") for line in terminal.lines) == 25


def test_a_message_that_fails_again_during_the_run_is_not_sent_again():
    # The consumer is live: a redriven message that fails at once is quarantined again, back into the DLQ,
    # while the run is still reading it. The run leaves it there instead of cycling.
    pipeline = deploy_pipeline()
    dead_letter(body("p1"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="p1")

    from idempotent_cli import aws

    def connect(args: Any) -> Any:
        clients = aws.connect(local=False)
        sqs = clients("sqs")

        def bounce(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
            [sent] = bounce.request["Entries"]  # type: ignore[attr-defined]
            dead_letter(
                sent["MessageBody"],
                queue_url=pipeline.dlq_url,
                group_id=sent["MessageGroupId"],
                dedup_id=sent["MessageDeduplicationId"],
                source_message_id=parsed["Successful"][0]["MessageId"],
                extra_attributes={REDRIVE_ATTRIBUTE: sent["MessageAttributes"][REDRIVE_ATTRIBUTE]},
            )

        def remember(params: dict[str, Any], **_: Any) -> None:
            bounce.request = params  # type: ignore[attr-defined]

        sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", remember)
        sqs.meta.events.register("after-call.sqs.SendMessageBatch", bounce)
        return clients

    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=connect)

    assert code == 0, terminal.error
    assert "1 back again, 1 redriven" in terminal.lines
    assert len(drain(pipeline.queue_url)) == 1
    assert len(drain(pipeline.dlq_url)) == 1


def test_standard_queues_redrive_without_group_or_deduplication_id():
    pipeline = deploy_pipeline(fifo=False)
    letter = dead_letter(body("s1"), queue_url=pipeline.dlq_url, group_id=None)

    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    [message] = drain(pipeline.queue_url)
    assert "MessageGroupId" not in message["Attributes"]
    assert "MessageDeduplicationId" not in message["Attributes"]
    assert _redrive_value(message)["source_message_id"] == letter["source_message_id"]


def test_redrive_from_a_queue_url_finds_the_source_queue_and_the_consumer():
    pipeline = deploy_pipeline()
    dead_letter(body("u1"), queue_url=pipeline.dlq_url, group_id="g", dedup_id="u1")

    code, terminal = dlq("redrive", "--queue-url", pipeline.dlq_url)

    assert code == 0, terminal.error
    assert f" of ?/{pipeline.function}, in region" in terminal.lines[0]
    assert by_group(drain(pipeline.queue_url)) == {"g": [body("u1")]}


def test_the_subscription_dlq_redrives_into_the_subscribed_queue_as_sns_would_have_delivered():
    pipeline = deploy_pipeline()
    subscription_dlq = make_subscription_dlq(pipeline, fifo=True)
    letter_id = client(
        "sqs"
    ).send_message(  # what SNS leaves in the subscription's DLQ when it cannot deliver
        QueueUrl=subscription_dlq,
        MessageBody=body("s1"),
        MessageGroupId="customer-1",
        MessageDeduplicationId="s1#published",
        MessageAttributes={
            "ErrorCode": {"DataType": "String", "StringValue": "KMS.AccessDeniedException"},
            "tenant": {"DataType": "String", "StringValue": "acme"},
        },
    )["MessageId"]

    code, terminal = dlq("list", "--stack", pipeline.stack, "--which", "subscription")
    assert code == 0, terminal.error
    assert terminal.lines[0].startswith("subscription dead-letter queue ")
    assert any(line.split()[:2] == ["undeliverable", "1"] for line in terminal.lines)
    assert any(
        "SNS could not deliver it to the queue (ErrorCode=KMS.AccessDeniedException)" in line
        for line in terminal.lines
    )

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--which", "subscription")

    assert code == 0, terminal.error
    [message] = drain(pipeline.queue_url)
    assert message["Body"] == body("s1")
    assert message["Attributes"]["MessageGroupId"] == "customer-1"
    # The consumer keys by body fields: a deduplication id SQS has not seen, the original in the attribute.
    assert message["Attributes"]["MessageDeduplicationId"] == f"redrive-{letter_id}"
    # Never delivered, never keyed: keyed by its id in the subscription's DLQ, whichever copy arrives.
    redrive = _redrive_value(message)
    assert (redrive["source_message_id"], redrive["dedup_id"]) == (letter_id, "s1#published")
    assert drain(subscription_dlq) == []


def test_a_subscription_dead_letter_sent_twice_is_applied_once_with_message_id_keys():
    # KEY_SOURCE=message_id on a standard queue: a run sends the dead letter but cannot delete it, the next
    # run sends it again. Both copies must reach the consumer under one key, or the charge applies twice.
    pipeline = deploy_pipeline(fifo=False, environment={"KEY_SOURCE": "message_id"})
    subscription_dlq = make_subscription_dlq(pipeline)
    charge = json.dumps({"x": "charge-1", "amount": 10})
    letter_id = client("sqs").send_message(
        QueueUrl=subscription_dlq,
        MessageBody=charge,
        MessageAttributes={"ErrorCode": {"DataType": "String", "StringValue": "KMS.AccessDeniedException"}},
    )["MessageId"]

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--which", "subscription", "--dry-run")
    assert code == 0, terminal.error
    assert f"{letter_id} group - key {letter_id}#message_id: new: a redrive processes it" in terminal.lines

    code, terminal = dlq(
        "redrive",
        "--stack",
        pipeline.stack,
        "--which",
        "subscription",
        connect=failing("DeleteMessageBatch", lambda params: True),
    )
    assert code == 1 and "the dead letter could not be deleted" in terminal.out.getvalue()
    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--which", "subscription")
    assert code == 0, terminal.error
    assert drain(subscription_dlq) == []

    # One at a time: the keys are under test here, not the consumer's threads (a standard queue's batch runs
    # its records in parallel, and the emulator holds no lock between a conditional write's check and its
    # write, as DynamoDB does).
    assert consume(pipeline, consumer(pipeline), batch=1) == [(charge, "processed"), (charge, "duplicate")]
    items = client("dynamodb").scan(TableName=pipeline.table)["Items"]
    assert [(item["pk"]["S"], item["sk"]["S"]) for item in items] == [(letter_id, "message_id")]


# -- at volume: ten groups a request, what a run cannot read -------------------------------------------------


def test_redrive_sends_ten_groups_a_request_one_message_of_each_and_keeps_every_group_in_order():
    pipeline = deploy_pipeline()
    sent = _dead_letters(pipeline, groups=12, each=5)
    requests: list[list[str]] = []
    calls: list[str] = []

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append(model.name)
        if model.name == "SendMessageBatch":
            requests.append([entry["MessageGroupId"] for entry in params["Entries"]])

    code, terminal = dlq(
        "redrive", "--stack", pipeline.stack, connect=hooked("before-parameter-build", count)
    )

    assert code == 0, terminal.out.getvalue()
    assert "60 redriven" in terminal.lines
    assert by_group(drain(pipeline.queue_url)) == sent
    assert drain(pipeline.dlq_url) == []
    assert all(len(groups) == len(set(groups)) for groups in requests)  # never two of a group in one
    assert sum(len(groups) for groups in requests) == 60
    # The first carries one (a role that may not delete copies one message, not ten); then full requests.
    assert len(requests[0]) == 1 and max(len(groups) for groups in requests) == 10
    assert calls.count("SendMessageBatch") <= 10 and calls.count("DeleteMessageBatch") <= 10
    assert calls.count("BatchGetItem") <= 10 and "GetItem" not in calls and "SendMessage" not in calls


def test_an_entry_that_fails_in_a_batch_stops_its_group_and_the_other_groups_go_on():
    pipeline = deploy_pipeline()
    sent = _dead_letters(pipeline, groups=2, each=3)  # g0: 0-0 0-1 0-2, g1: 1-0 1-1 1-2
    requests: list[list[str]] = []

    def remember(params: dict[str, Any], entry: dict[str, Any]) -> bool:
        if entry is params["Entries"][0]:
            requests.append([each["MessageBody"] for each in params["Entries"]])
        return entry["MessageBody"] == body("0-1")

    code, terminal = dlq(
        "redrive", "--stack", pipeline.stack, connect=failing_entries("SendMessageBatch", remember)
    )

    assert code == 1
    assert [body("1-0"), body("0-1")] in requests  # it failed beside an entry that went through
    assert "4 redriven, 1 send failed" in terminal.lines
    assert any(
        "the send to the source queue failed: InternalError: injected failure" in line
        for line in terminal.lines
    )
    # 0-2 never went ahead of 0-1: its group stopped there, in order, in the DLQ.
    assert by_group(drain(pipeline.queue_url)) == {"g0": sent["g0"][:1], "g1": sent["g1"]}
    assert by_group(drain(pipeline.dlq_url)) == {"g0": sent["g0"][1:]}


def _hold_ends_at(line: str, before: float, after: float) -> None:
    """The in-flight line names when the messages are visible again: the hold, from now."""
    found = re.search(r"visible again within 120 s, by (\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ) at the latest", line)
    assert found, line
    when = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert before + 120 - 1 <= when <= after + 121, (before, when, after)


def test_a_run_killed_between_a_batch_send_and_its_delete_loses_and_doubles_nothing():
    pipeline = deploy_pipeline()  # KEY_SOURCE=fields: the same deduplication id on every run
    sent = _dead_letters(pipeline, groups=6, each=8)
    held: list[str] = []
    deletes: list[int] = []
    killed: list[bool] = []

    def received(parsed: dict[str, Any], **_: Any) -> None:
        held.extend(message["ReceiptHandle"] for message in parsed.get("Messages", []))

    def kill(params: dict[str, Any], model: Any, **_: Any) -> None:
        if killed:  # the process is gone: it makes nothing visible again
            raise ClientError({"Error": {"Code": "Killed", "Message": "no process"}}, model.name)
        if model.name == "DeleteMessageBatch":
            deletes.append(len(params["Entries"]))
            if len(deletes) == 3:  # its batch is in the source queue, and still in the DLQ
                killed.append(True)
                raise KeyboardInterrupt

    connect = hooked("before-parameter-build.sqs", kill, ("after-call.sqs.ReceiveMessage", received))
    code, _ = dlq("redrive", "--stack", pipeline.stack, connect=connect)
    assert code == 130 and deletes[-1] > 1

    before = time.time()
    code, terminal = dlq("redrive", "--stack", pipeline.stack)  # at once: the killed run's hold is on
    after = time.time()
    assert code == 1
    [line] = [line for line in terminal.lines if " in flight elsewhere " in line]
    assert line.startswith(f"! {deletes[-1]} message(s) in flight elsewhere (")
    _hold_ends_at(line, before, after)

    for handle in held:  # the hold runs out
        with contextlib.suppress(ClientError):  # deleted since
            client("sqs").change_message_visibility(
                QueueUrl=pipeline.dlq_url, ReceiptHandle=handle, VisibilityTimeout=0
            )
    code, terminal = dlq("redrive", "--stack", pipeline.stack)

    assert code == 0, terminal.out.getvalue()
    assert drain(pipeline.dlq_url) == []
    assert by_group(drain(pipeline.queue_url)) == sent  # every message once, every group in order


def test_a_dry_run_at_volume_says_how_many_it_could_not_read_in_which_groups_and_that_their_fate_is_unknown():
    pipeline = deploy_pipeline()
    _dead_letters(pipeline, groups=3, each=12)

    code, terminal = dlq("redrive", "--stack", pipeline.stack, "--dry-run")

    assert code == 1
    assert (
        "! 6 message(s) not read: a FIFO queue hands out at most 10 messages of a group while they are "
        "held (by this run or another reader), and these are behind them, in group(s) g0, g1, g2 (each read "
        "up to its 10th); redrive and purge reach them as they remove the ones before"
    ) in terminal.lines
    assert (
        "dry run: 30 new; 30 would be redriven; 6 not read: their keys, and what a redrive would do with "
        "them, are unknown until it reads them; nothing was changed"
    ) in terminal.lines
    assert len(drain(pipeline.dlq_url)) == 36 and drain(pipeline.queue_url) == []


def test_a_standard_dlq_explains_what_it_could_not_read_without_fifo_groups():
    pipeline = deploy_pipeline(fifo=False)
    dead_letter(body("s1"), queue_url=pipeline.dlq_url, group_id=None)

    def more_visible(parsed: dict[str, Any], **_: Any) -> None:  # two counted that no receive returns
        counts = parsed.get("Attributes", {})
        if "ApproximateNumberOfMessages" in counts:
            counts["ApproximateNumberOfMessages"] = str(int(counts["ApproximateNumberOfMessages"]) + 2)

    connect = hooked("after-call.sqs.GetQueueAttributes", more_visible)
    code, terminal = dlq("redrive", "--stack", pipeline.stack, connect=connect)

    assert code == 1
    [line] = [line for line in terminal.lines if line.startswith("! 2 message(s) not read: ")]
    assert "FIFO" not in line and "group" not in line
    assert "the queue counts them visible but no receive returned them" in line
    assert [m["Body"] for m in drain(pipeline.queue_url)] == [body("s1")]
