"""dlq list and dlq show: counts by group and by reason, one message in full; nothing moved or reordered."""

from __future__ import annotations

import json
import time

import pytest
from dlq_helpers import (
    Terminal,
    body,
    by_group,
    client,
    dead_letter,
    deploy_pipeline,
    dlq,
    drain,
    hooked,
)
from idempotent_runtime.contract import DeadLetterKind

from idempotent_cli.dlq import main

pytestmark = pytest.mark.usefixtures("cloud")


def _moved_by_sqs(queue_url: str, message_body: str, group: str, dedup_id: str, receives: int) -> str:
    """Send a message to the source queue and fail it ``receives`` times: SQS moves it to the DLQ."""
    sqs = client("sqs")
    message_id = sqs.send_message(
        QueueUrl=queue_url, MessageBody=message_body, MessageGroupId=group, MessageDeduplicationId=dedup_id
    )["MessageId"]
    for _ in range(receives + 1):
        for message in sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=0).get("Messages", []):
            assert message["MessageId"] == message_id
    return message_id


def test_list_counts_by_group_and_by_reason_oldest_first_and_moves_nothing():
    pipeline = deploy_pipeline(max_receive_count=2)
    dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="orders-a")
    dead_letter(
        body("b1"),
        queue_url=pipeline.dlq_url,
        group_id="orders-b",
        kind=DeadLetterKind.EXHAUSTED,
        reason="throttled on the last receive",
    )
    dead_letter(body("a2"), queue_url=pipeline.dlq_url, group_id="orders-a")
    moved = _moved_by_sqs(pipeline.queue_url, body("c1"), "orders-c", "c1", receives=2)
    before = [
        m["MessageId"]
        for m in client("sqs")
        .receive_message(QueueUrl=pipeline.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        .get("Messages", [])
    ]

    code, terminal = dlq("list", "--stack", pipeline.stack)

    assert code == 0, terminal.error
    lines = terminal.lines
    dlq_name = pipeline.dlq_url.rsplit("/", 1)[-1]
    assert lines[0].startswith("dead-letter queue ")
    assert f"/{dlq_name} (FIFO) of {pipeline.stack}/{pipeline.function}, in region us-east-1" in lines[0]
    assert "4 message(s): 4 visible, 0 in flight" in lines
    assert "4 read" in lines
    groups = lines[lines.index("by group, oldest first:") + 2 : lines.index("by reason, oldest first:")]
    assert [line.split() for line in groups] == [
        ["orders-a", "2", *groups[0].split()[2:]],
        ["orders-b", "1", *groups[1].split()[2:]],
        ["orders-c", "1", *groups[2].split()[2:]],
    ]
    reasons = lines[lines.index("by reason, oldest first:") + 2 :]
    assert reasons[0].split()[:2] == ["invalid", "2"]
    assert "partition key field 'x' is missing from the body" in reasons[0]
    assert reasons[1].split()[:2] == ["exhausted", "1"]
    assert reasons[2].split()[:2] == ["moved", "1"]
    assert "moved by SQS after 2 receives, no reason from the runtime (receive count " in reasons[2]
    assert reasons[2].endswith(", reads of the DLQ included)")
    # Nothing was deleted or reordered: the DLQ hands out the same messages, groups in the same order.
    remaining = drain(pipeline.dlq_url)
    assert sorted(m["MessageId"] for m in remaining) == sorted(before)
    assert moved in {m["MessageId"] for m in remaining}
    assert by_group(remaining) == {
        "orders-a": [body("a1"), body("a2")],
        "orders-b": [body("b1")],
        "orders-c": [body("c1")],
    }


def test_list_counts_every_message_of_groups_it_holds_and_says_what_it_could_not_read():
    pipeline = deploy_pipeline()
    for n in range(3):
        dead_letter(body(f"a{n}"), queue_url=pipeline.dlq_url, group_id="a")
    for n in range(12):
        dead_letter(body(f"b{n}"), queue_url=pipeline.dlq_url, group_id="b")
    for n in range(2):
        dead_letter(body(f"c{n}"), queue_url=pipeline.dlq_url, group_id="c")

    code, terminal = dlq("list", "--stack", pipeline.stack, "--json")

    assert code == 0, terminal.error
    report = json.loads(terminal.out.getvalue())
    assert report["messages_in_queue"] == 17
    counted = {g["group"]: g["messages"] for g in report["groups"]}
    # Every message is either counted in its group or reported as not read: none is missing.
    assert sum(counted.values()) + report["not_reached"] == 17
    assert counted["a"] == 3 and counted["c"] == 2
    assert report["read"] == sum(counted.values())
    remaining = drain(pipeline.dlq_url)
    assert by_group(remaining) == {
        "a": [body(f"a{n}") for n in range(3)],
        "b": [body(f"b{n}") for n in range(12)],
        "c": [body(f"c{n}") for n in range(2)],
    }


def test_list_does_not_stop_early_on_an_empty_receive_while_it_holds_a_group():
    # 10 messages of one group fill the first receive; the message of group z behind them is only
    # handed out after the tool makes what it holds visible again.
    pipeline = deploy_pipeline()
    for n in range(10):
        dead_letter(body(f"a{n}"), queue_url=pipeline.dlq_url, group_id="a")
    dead_letter(body("a10"), queue_url=pipeline.dlq_url, group_id="a")
    dead_letter(body("z"), queue_url=pipeline.dlq_url, group_id="z")

    code, terminal = dlq("list", "--stack", pipeline.stack, "--json")

    assert code == 0
    report = json.loads(terminal.out.getvalue())
    counted = {g["group"]: g["messages"] for g in report["groups"]}
    assert counted.get("z") == 1
    assert sum(counted.values()) + report["not_reached"] == 12
    assert len(drain(pipeline.dlq_url)) == 12


def test_list_messages_and_filters():
    pipeline = deploy_pipeline()
    first = dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="orders-1")
    dead_letter(
        body("b1"),
        queue_url=pipeline.dlq_url,
        group_id="orders-2",
        kind=DeadLetterKind.REJECTED,
        reason="the processor rejected it: card declined",
    )
    dead_letter(body("c1"), queue_url=pipeline.dlq_url, group_id="refunds-1")

    code, terminal = dlq(
        "list", "--stack", pipeline.stack, "--group", "orders-*", "--reason", "invalid", "--messages"
    )

    assert code == 0
    assert "3 read, 1 matching group orders-* , reason 'invalid'".replace(" ,", ",") in terminal.lines
    messages = terminal.lines[terminal.lines.index("messages, oldest first:") + 1 :]
    assert len(messages) == 1 and messages[0].split()[:2] == [first["MessageId"], "orders-1"]

    code, terminal = dlq("list", "--stack", pipeline.stack, "--reason", "card declined", "--json")
    report = json.loads(terminal.out.getvalue())
    assert report["matching"] == 1 and report["reasons"][0]["kind"] == "rejected"
    assert len(drain(pipeline.dlq_url)) == 3


def test_show_prints_the_message_its_reason_details_and_what_a_redrive_would_send():
    pipeline = deploy_pipeline()
    dead_letter(body("a0"), queue_url=pipeline.dlq_url, group_id="g")
    letter = dead_letter(
        body("a1"),
        queue_url=pipeline.dlq_url,
        group_id="g",
        dedup_id="order-1#v1",
        key={"partition": "a1", "sort": "1"},
        attributes={"tenant": "acme"},
        dropped=["trace"],
    )

    for wanted in (letter["MessageId"], letter["source_message_id"]):
        code, terminal = dlq("show", wanted, "--stack", pipeline.stack)
        assert code == 0, terminal.error
        text = terminal.out.getvalue()
        assert f"message            {letter['MessageId']}" in text
        assert f"source message id  {letter['source_message_id']}" in text
        assert "deduplication id   order-1#v1 (in the DLQ: " in text
        assert "kind               invalid" in text
        assert "reason             partition key field 'x' is missing from the body" in text
        assert "key                a1#1" in text
        assert "  tenant (String): acme" in text
        assert f"  {body('a1')}" in text
        # The consumer keys by body fields: a deduplication id SQS has not seen (the original's would be
        # dropped within 5 minutes of its first send).
        assert f"redrive sends      group g, deduplication id redrive-{letter['MessageId']} (new)" in text
        assert (
            "note: attributes dropped when it was dead-lettered (SQS allows 10) cannot be restored: trace"
            in text
        )
    assert by_group(drain(pipeline.dlq_url)) == {"g": [body("a0"), body("a1")]}


def test_show_of_a_message_sqs_moved_says_so_with_its_receive_count():
    pipeline = deploy_pipeline(max_receive_count=2)
    moved = _moved_by_sqs(pipeline.queue_url, body("c1"), "orders-c", "c1", receives=2)

    code, terminal = dlq("show", moved, "--stack", pipeline.stack, "--json")

    assert code == 0, terminal.error
    shown = json.loads(terminal.out.getvalue())
    assert shown["kind"] == "moved" and shown["origin"] == "sqs"
    assert shown["reason"].startswith("moved by SQS after 2 receives without a reason from the runtime")
    assert f"receive count {shown['receive_count']}" in shown["reason"]
    assert shown["receive_count"] >= 3
    assert shown["source_message_id"] == moved


def test_show_of_an_unknown_id_fails_naming_it_and_leaves_the_queue_as_it_was():
    pipeline = deploy_pipeline()
    dead_letter(body("a1"), queue_url=pipeline.dlq_url)

    code, terminal = dlq("show", "no-such-id", "--stack", pipeline.stack)

    assert code == 1
    assert (
        "error: no message no-such-id (its id in the DLQ, the original's, or a redriven copy's)"
        in terminal.error
    )
    assert "`dlq list --messages` shows their ids" in terminal.error
    assert len(drain(pipeline.dlq_url)) == 1


def _twice(pipeline, message_body: str, source_message_id: str, **kwargs) -> tuple[str, str]:
    """One dead letter the runtime sent twice (its first SendMessage answer was lost): two messages with
    the same details; returns their ids in the DLQ."""
    return tuple(  # type: ignore[return-value]
        dead_letter(message_body, queue_url=pipeline.dlq_url, source_message_id=source_message_id, **kwargs)[
            "MessageId"
        ]
        for _ in range(2)
    )


def test_copies_of_one_dead_letter_are_counted_once_and_shown_with_their_number():
    pipeline = deploy_pipeline(fifo=False)  # a standard DLQ keeps both copies
    copies = _twice(pipeline, body("o-1"), "src-1", group_id=None)
    other = dead_letter(body("o-2"), queue_url=pipeline.dlq_url, group_id=None)

    code, terminal = dlq("list", "--stack", pipeline.stack, "--messages")

    assert code == 0, terminal.error
    assert "3 read; 2 dead letter(s), counted once: 1 of them in several copies" in terminal.lines
    groups = terminal.lines[terminal.lines.index("by group, oldest first:") + 2]
    assert groups.split()[:2] == ["-", "2"]
    reasons = terminal.lines[terminal.lines.index("by reason, oldest first:") + 2]
    assert reasons.split()[:2] == ["invalid", "2"]
    listed = terminal.lines[terminal.lines.index("messages, oldest first:") + 1 :]
    assert len(listed) == 2
    [twice] = [line for line in listed if "2 copies" in line]
    assert twice.split()[0] in copies and other["MessageId"] not in twice

    code, terminal = dlq("list", "--stack", pipeline.stack, "--messages", "--json")
    report = json.loads(terminal.out.getvalue())
    assert (report["read"], report["matching"]) == (3, 2)
    assert sorted(len(m["copies"]) for m in report["message_list"]) == [1, 2]

    code, terminal = dlq("show", copies[1], "--stack", pipeline.stack)
    assert code == 0, terminal.error
    [line] = [line for line in terminal.lines if line.startswith("copies ")]
    assert line.startswith("copies             2: ") and all(id_ in line for id_ in copies)
    assert len(drain(pipeline.dlq_url)) == 3


def test_messages_sqs_moved_are_each_their_own_dead_letter():
    pipeline = deploy_pipeline(max_receive_count=1)
    for n in range(2):
        _moved_by_sqs(pipeline.queue_url, body("same"), f"g{n}", f"d{n}", receives=1)

    code, terminal = dlq("list", "--stack", pipeline.stack, "--json")

    assert code == 0, terminal.error
    report = json.loads(terminal.out.getvalue())
    assert (report["read"], report["matching"]) == (2, 2)


class _SlowReceives:
    """A ``connect`` for the DLQ tool whose ReceiveMessage takes ``latency`` seconds more (a slow network),
    and fails once the walk has received more often than any walk of ``messages`` messages needs: a walk that
    would never end fails instead of hanging."""

    def __init__(self, messages: int, latency: float = 0.0) -> None:
        self.left, self.latency = 2 * (messages + 10), latency

    def __call__(self, args):
        return hooked("before-call.sqs.ReceiveMessage", self._receive)(args)

    def _receive(self, **_):
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("the walk does not end: it keeps receiving the messages it holds")
        time.sleep(self.latency)


def _four_dead_letters(fifo: bool):
    pipeline = deploy_pipeline(fifo=fifo)
    for n in range(3):
        dead_letter(body(f"a{n}"), queue_url=pipeline.dlq_url, group_id="a")
    dead_letter(body("b0"), queue_url=pipeline.dlq_url, group_id="b")
    return pipeline


def _listed_groups(terminal: Terminal) -> list[str]:
    lines = terminal.lines
    listed = lines[lines.index("messages, oldest first:") + 1 :]
    return sorted(line.split()[1] for line in listed if line.startswith("  "))


@pytest.mark.parametrize("fifo", [True, False], ids=["fifo", "standard"])
@pytest.mark.parametrize("hold", [1, 2])
def test_list_ends_and_counts_each_message_once_when_the_hold_is_shorter_than_the_long_poll(hold, fifo):
    # The default long poll (1 s) outlasts a hold of 1 or 2 seconds: the held messages become visible again
    # during the poll and come back.
    pipeline = _four_dead_letters(fifo)
    terminal = Terminal()

    code = main(
        ["list", "--stack", pipeline.stack, "--visibility-timeout", str(hold), "--messages"],
        console=terminal.console(),
        connect=_SlowReceives(4),
    )

    assert code == 0, terminal.error
    assert "4 read" in terminal.lines
    assert _listed_groups(terminal) == ["a", "a", "a", "b"]
    assert len(drain(pipeline.dlq_url)) == 4


@pytest.mark.slow
@pytest.mark.parametrize("fifo", [True, False], ids=["fifo", "standard"])
def test_list_ends_when_a_receive_takes_longer_than_the_hold(fifo):
    # Each receive takes longer than the 1-second hold: what the walk holds is visible again by the time the
    # next receive answers, and comes back with it.
    pipeline = _four_dead_letters(fifo)
    terminal = Terminal()

    code = main(
        ["list", "--stack", pipeline.stack, "--visibility-timeout", "1", "--messages", "--wait-seconds", "0"],
        console=terminal.console(),
        connect=_SlowReceives(4, latency=1.5),
    )

    assert code == 0, terminal.error
    assert "4 read" in terminal.lines
    assert _listed_groups(terminal) == ["a", "a", "a", "b"]
    assert len(drain(pipeline.dlq_url)) == 4
