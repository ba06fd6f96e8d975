"""Whole-string checks: a value ending in a newline is never taken for the value before it (Python's `$` also
matches before a trailing newline)."""

from __future__ import annotations

import pytest
from idempotent_runtime.message import Key, join_key
from runtime_helpers import REGION, dlq_reason, drain, event, record, scan

TARGET = f"arn:aws:sns:{REGION}:123456789012:payments.fifo"


@pytest.mark.parametrize("parts", [("o-1", "1\n"), ("o-1\n",), ("a" * 127 + "\n",)])
def test_a_part_ending_in_a_newline_is_never_plain(parts):
    joined = join_key(parts)
    assert "\n" not in joined and len(joined) == 64  # the SHA-256 form
    assert joined != join_key(tuple(part.rstrip("\n") for part in parts))


def test_the_idempotency_key_of_a_sort_value_ending_in_a_newline_is_printable_and_its_own():
    assert Key("o-1", "1\n").idempotency_key != Key("o-1", "1").idempotency_key
    assert Key("o-1", "1\n").idempotency_key.isprintable()


def test_a_key_ending_in_a_newline_is_stored_as_it_is_beside_the_one_without(make_handler, dynamodb):
    handler, _ = make_handler()
    handler(event(record({"x": "o-1", "y": "1\n"}), record({"x": "o-1", "y": "1"})), None)
    assert sorted((item["pk"]["S"], item["sk"]["S"]) for item in scan(dynamodb)) == [
        ("o-1", "1"),
        ("o-1", "1\n"),
    ]


def test_an_emitted_group_id_ending_in_a_newline_is_refused_before_anything_commits(
    make_handler, dynamodb, dlq_url, sqs
):
    def emit_to_newline_group(message):
        message.emit({"ship": True}, group_id="warehouse-1\n")
        return []

    handler, _ = make_handler(
        fn=emit_to_newline_group, mode="transaction", emit_target_arn=TARGET, dlq_url=dlq_url
    )
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1"})), None)
    assert result.outcome == "quarantined"
    assert "group_id" in result.reason and "'warehouse-1\\n'" in result.reason
    assert [
        item for item in scan(dynamodb) if not item["pk"]["S"].startswith("idempotency#quarantine#")
    ] == []
    (dead,) = drain(sqs, dlq_url)
    assert "warehouse-1" in dlq_reason(dead)
