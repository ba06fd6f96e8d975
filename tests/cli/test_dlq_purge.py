"""dlq purge: asks first (or --yes), deletes what the filters choose and nothing else."""

from __future__ import annotations

import pytest
from dlq_helpers import (
    Terminal,
    body,
    by_group,
    cloud,  # noqa: F401  (fixture)
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
    assert terminal.questions[0].startswith("purge deletes all 3 message(s) from ")
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
