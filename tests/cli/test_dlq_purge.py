"""dlq purge: asks first (or --yes), deletes what the filters choose and nothing else."""

from __future__ import annotations

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
)
from idempotent_runtime.contract import DeadLetterKind

pytestmark = pytest.mark.usefixtures("cloud")


def _fill(pipeline) -> None:
    dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="a")
    dead_letter(
        body("a2"),
        queue_url=pipeline.dlq_url,
        group_id="a",
        kind=DeadLetterKind.EXHAUSTED,
        reason="timed out",
    )
    dead_letter(body("b1"), queue_url=pipeline.dlq_url, group_id="b")


def test_purge_asks_and_deletes_nothing_unless_the_answer_is_yes():
    pipeline = deploy_pipeline()
    _fill(pipeline)

    code, terminal = dlq(
        "purge", "--stack", pipeline.stack, terminal=Terminal(interactive=True, answers=["n"])
    )

    assert code == 1
    assert len(terminal.questions) == 1
    assert terminal.questions[0].startswith("purge deletes all 3 dead letter(s) from ")
    assert terminal.questions[0].endswith("for good. Type yes to continue: ")
    assert "error: not confirmed: nothing was changed" in terminal.error
    assert len(drain(pipeline.dlq_url)) == 3


def test_purge_without_a_terminal_needs_yes():
    pipeline = deploy_pipeline()
    _fill(pipeline)

    code, terminal = dlq("purge", "--stack", pipeline.stack)

    assert code == 1
    assert "Pass --yes to confirm (stdin is not a terminal)" in terminal.error
    assert len(drain(pipeline.dlq_url)) == 3


def test_purge_after_yes_deletes_every_message():
    pipeline = deploy_pipeline()
    _fill(pipeline)

    code, terminal = dlq(
        "purge", "--stack", pipeline.stack, terminal=Terminal(interactive=True, answers=["yes"])
    )

    assert code == 0, terminal.error
    assert "deleted 3; 0 left in the queue" in terminal.lines
    assert drain(pipeline.dlq_url) == []
    assert drain(pipeline.queue_url) == []


def test_purge_with_filters_deletes_only_what_they_choose():
    pipeline = deploy_pipeline()
    _fill(pipeline)

    code, terminal = dlq("purge", "--stack", pipeline.stack, "--reason", "invalid", "--group", "a", "--yes")

    assert code == 0, terminal.error
    assert "deleted 1; 2 left in the queue by the filters" in terminal.lines
    assert by_group(drain(pipeline.dlq_url)) == {"a": [body("a2")], "b": [body("b1")]}


def _invalid_and_an_exhausted_letter_saying_invalid(pipeline) -> None:
    dead_letter(
        "not json",
        queue_url=pipeline.dlq_url,
        group_id="a",
        reason="body is not valid json (Expecting value: line 1 column 1 (char 0))",
    )
    dead_letter(
        body("o-2"),
        queue_url=pipeline.dlq_url,
        group_id="b",
        kind=DeadLetterKind.EXHAUSTED,
        reason="failed on its last receive (5 of 5): TransientError: Invalid session token, retry",
    )


def test_purge_reason_invalid_deletes_the_invalid_kind_only_not_reasons_that_say_invalid():
    # The guide's own example: an exhausted (transient, recoverable) dead letter whose error text says
    # "Invalid" must not go with the invalid ones.
    pipeline = deploy_pipeline()
    _invalid_and_an_exhausted_letter_saying_invalid(pipeline)

    code, terminal = dlq("purge", "--stack", pipeline.stack, "--reason", "invalid", "--yes")

    assert code == 0, terminal.error
    assert "deleted 1; 1 left in the queue by the filters" in terminal.lines
    assert "deleted by kind: 1 invalid" in terminal.lines
    [left] = drain(pipeline.dlq_url)
    assert left["Body"] == body("o-2") and left["Attributes"]["MessageGroupId"] == "b"


def test_reason_text_finds_reasons_containing_the_text_whatever_their_kind():
    pipeline = deploy_pipeline()
    _invalid_and_an_exhausted_letter_saying_invalid(pipeline)

    code, terminal = dlq("list", "--stack", pipeline.stack, "--reason-text", "INVALID SESSION")
    assert code == 0, terminal.error
    assert "2 read, 1 matching reason text 'INVALID SESSION'" in terminal.lines

    code, terminal = dlq("purge", "--stack", pipeline.stack, "--reason-text", "valid", "--yes")
    assert code == 0, terminal.error
    assert "deleted 2; 0 left in the queue by the filters" in terminal.lines
    assert "deleted by kind: 1 invalid, 1 exhausted" in terminal.lines
    assert drain(pipeline.dlq_url) == []


def test_the_purge_question_counts_what_it_deletes_by_kind():
    pipeline = deploy_pipeline()
    _fill(pipeline)

    code, terminal = dlq(
        "purge", "--stack", pipeline.stack, terminal=Terminal(interactive=True, answers=["n"])
    )
    dlq_name = pipeline.dlq_url.rsplit("/", 1)[-1]
    assert code == 1
    [question] = terminal.questions
    assert question.startswith("purge deletes all 3 dead letter(s) from ")
    assert question.endswith(
        f"/{dlq_name} (by kind: 2 invalid, 1 exhausted) for good. Type yes to continue: "
    )

    code, terminal = dlq(
        "purge",
        "--stack",
        pipeline.stack,
        "--reason",
        "exhausted",
        terminal=Terminal(interactive=True, answers=["yes"]),
    )
    assert code == 0, terminal.error
    [question] = terminal.questions
    assert question.startswith("purge deletes the 1 dead letter(s) matching reason 'exhausted' from ")
    assert question.endswith(f"/{dlq_name} (by kind: 1 exhausted) for good. Type yes to continue: ")
    assert by_group(drain(pipeline.dlq_url)) == {"a": [body("a1")], "b": [body("b1")]}


def test_purge_of_messages_held_by_another_reader_deletes_nothing_and_fails_saying_why():
    pipeline = deploy_pipeline()
    _fill(pipeline)
    sqs = client("sqs")
    held = sqs.receive_message(QueueUrl=pipeline.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=600)

    code, terminal = dlq("purge", "--stack", pipeline.stack, "--yes")

    assert code == 1
    assert "deleted 0; 0 left in the queue" in terminal.lines
    assert (
        f"not finished: {len(held['Messages'])} message(s) could not be read (see above) and may be among "
        "those chosen; they stay in the DLQ"
    ) in terminal.lines
    for message in held["Messages"]:
        sqs.change_message_visibility(
            QueueUrl=pipeline.dlq_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    assert len(drain(pipeline.dlq_url)) == 3


def test_copies_of_one_dead_letter_are_purged_together_and_counted_once():
    pipeline = deploy_pipeline(fifo=False)
    for _ in range(2):
        dead_letter(
            body("o-1"),
            queue_url=pipeline.dlq_url,
            group_id=None,
            source_message_id="src-1",
            kind=DeadLetterKind.EXHAUSTED,
            reason="timed out",
        )
    dead_letter(body("o-2"), queue_url=pipeline.dlq_url, group_id=None)

    code, terminal = dlq("purge", "--stack", pipeline.stack, "--reason", "exhausted", "--yes")

    assert code == 0, terminal.error
    assert "deleted 1 (and 1 copy of it); 1 left in the queue by the filters" in terminal.lines
    assert "deleted by kind: 1 exhausted" in terminal.lines
    assert [m["Body"] for m in drain(pipeline.dlq_url)] == [body("o-2")]


def test_purge_dry_run_lists_what_it_would_delete_and_deletes_nothing():
    pipeline = deploy_pipeline()
    first = dead_letter(body("a1"), queue_url=pipeline.dlq_url, group_id="a")
    dead_letter(
        body("a2"),
        queue_url=pipeline.dlq_url,
        group_id="a",
        kind=DeadLetterKind.EXHAUSTED,
        reason="timed out",
    )
    second = dead_letter(body("b1"), queue_url=pipeline.dlq_url, group_id="b")

    code, terminal = dlq("purge", "--stack", pipeline.stack, "--reason", "invalid", "--dry-run")

    assert code == 0, terminal.error
    listed = [line.split()[0] for line in terminal.lines if line.startswith("  ")]
    assert listed == [first["MessageId"], second["MessageId"]]
    assert terminal.lines[-1].startswith("dry run: purge would delete the 2 dead letter(s) matching reason ")
    assert terminal.lines[-1].endswith("(by kind: 2 invalid); nothing was changed")
    assert by_group(drain(pipeline.dlq_url)) == {"a": [body("a1"), body("a2")], "b": [body("b1")]}


def test_the_purge_question_comes_after_the_list_of_what_it_deletes():
    pipeline = deploy_pipeline()
    letters = [dead_letter(body(f"m{n}"), queue_url=pipeline.dlq_url, group_id="g") for n in range(3)]

    code, terminal = dlq(
        "purge", "--stack", pipeline.stack, terminal=Terminal(interactive=True, answers=["n"])
    )

    assert code == 1 and len(terminal.questions) == 1
    listed = [line.split()[0] for line in terminal.lines if line.startswith("  ")]
    assert listed == [letter["MessageId"] for letter in letters]
    assert len(drain(pipeline.dlq_url)) == 3
