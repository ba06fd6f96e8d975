"""dlq redrive at volume: ten groups a request, each group in order, a failed entry or a killed run losing and
doubling nothing; and what a run cannot read, said with its reason and when it can be read."""

from __future__ import annotations

import contextlib
import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from dlq_helpers import (
    body,
    by_group,
    client,
    dead_letter,
    deploy_pipeline,
    dlq,
    drain,
    failing_entries,
    hooked,
)

pytestmark = pytest.mark.usefixtures("cloud")


def _dead_letters(pipeline: Any, groups: int, each: int) -> dict[str, list[str]]:
    """``each`` dead letters in each of ``groups`` groups, interleaved as a busy DLQ has them: their bodies by
    group, in order."""
    sent: dict[str, list[str]] = {}
    for n in range(each):
        for g in range(groups):
            sent.setdefault(f"g{g}", []).append(body(f"{g}-{n}"))
            dead_letter(sent[f"g{g}"][-1], queue_url=pipeline.dlq_url, group_id=f"g{g}", dedup_id=f"{g}-{n}")
    return sent


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
        "held, and these are behind them, in group(s) g0, g1, g2 (each read up to its 10th); redrive and "
        "purge reach them as they remove the ones before"
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
