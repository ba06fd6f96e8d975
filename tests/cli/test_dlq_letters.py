"""How a dead letter is read and what a redrive sends back for it (no queue needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from idempotent_runtime.contract import DLQ_DETAILS_ATTRIBUTE, DLQ_REASON_ATTRIBUTE

from idempotent_cli.console import Console, Pace
from idempotent_cli.dlq.letters import (
    REDRIVE_ATTRIBUTE,
    DeadLetter,
    Filters,
    Which,
    message_size,
    outgoing,
)
from idempotent_cli.errors import DlqError


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def _message(
    message_id: str = "m-1",
    *,
    dedup: str | None = None,
    group: str | None = "g",
    attributes: dict[str, Any] | None = None,
    details: Any = None,
    reason: str | None = None,
    body: str = '{"x": "1", "y": "2"}',
) -> dict[str, Any]:
    system = {"SentTimestamp": "1700000000000", "ApproximateReceiveCount": "6"}
    if group:
        system["MessageGroupId"] = group
    if dedup:
        system["MessageDeduplicationId"] = dedup
    message_attributes = dict(attributes or {})
    if reason is not None:
        message_attributes[DLQ_REASON_ATTRIBUTE] = _string(reason)
    if details is not None:
        message_attributes[DLQ_DETAILS_ATTRIBUTE] = _string(
            details if isinstance(details, str) else json.dumps(details)
        )
    return {
        "MessageId": message_id,
        "ReceiptHandle": "r",
        "Body": body,
        "Attributes": system,
        "MessageAttributes": message_attributes,
    }


def test_a_message_sqs_moved_into_a_fifo_dlq_has_lost_its_deduplication_id():
    # AWS gives a message moved to a FIFO DLQ its message id as deduplication id.
    letter = DeadLetter.from_message(_message("m-1", dedup="m-1"), Which.DLQ)

    assert letter.kind == "moved" and letter.source_message_id == "m-1"
    assert letter.original_dedup_id is None

    kept = outgoing(letter, source_fifo=True, key_source="dedup_id")
    assert kept.problem is not None and "SQS replaced it with the message id" in kept.problem

    fine = outgoing(letter, source_fifo=True, key_source="fields")
    assert fine.problem is None
    assert fine.dedup_id == "redrive-m-1" and not fine.dedup_restored
    assert fine.redrive == {"source_message_id": "m-1", "dedup_id": None}
    assert fine.group_id == "g"


def test_an_earlier_redrive_names_the_original_ids():
    # A redriven message that failed again: the runtime's details name the redriven copy, the redrive
    # attribute the original the consumer keyed.
    letter = DeadLetter.from_message(
        _message(
            "m-3",
            dedup="m-2",
            details={"kind": "exhausted", "source_message_id": "m-2", "group_id": "g", "dedup_id": "d-0"},
            reason="failed again",
            attributes={
                REDRIVE_ATTRIBUTE: _string(json.dumps({"source_message_id": "m-0", "dedup_id": "d-0"}))
            },
        ),
        Which.DLQ,
    )

    message = outgoing(letter, source_fifo=True, key_source="message_id")

    assert message.redrive == {"source_message_id": "m-0", "dedup_id": "d-0"}
    # Keyed by the attribute, sent under an id SQS has not seen (the original would be dropped within 5 min).
    assert message.dedup_id == "redrive-m-3" and not message.dedup_restored
    assert set(message.attributes) == {REDRIVE_ATTRIBUTE}
    by_dedup_id = outgoing(letter, source_fifo=True, key_source="dedup_id")
    assert by_dedup_id.dedup_id == "d-0" and by_dedup_id.dedup_restored


def test_no_room_for_the_redrive_attribute_keeps_a_message_whose_key_needs_it():
    attributes = {f"a{n}": _string(str(n)) for n in range(10)}
    letter = DeadLetter.from_message(_message("m-1", dedup="orig", attributes=attributes), Which.DLQ)

    needs = outgoing(letter, source_fifo=True, key_source="message_id")
    assert needs.problem is not None and "no room for idempotency.redrive" in needs.problem

    body_keyed = outgoing(letter, source_fifo=True, key_source="fields")
    assert body_keyed.problem is None and body_keyed.redrive is None
    assert set(body_keyed.attributes) == set(attributes)
    assert body_keyed.dedup_id == "redrive-m-1"
    by_dedup_id = outgoing(letter, source_fifo=True, key_source="dedup_id")  # no attribute: the id is the key
    assert by_dedup_id.dedup_id == "orig" and by_dedup_id.dedup_restored


def test_the_size_is_counted_as_sqs_counts_it_and_a_message_too_big_for_the_source_queue_is_blocked():
    # SQS counts the body and each attribute's name, type and value, in bytes.
    attributes = {"tenant": _string("acme"), "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\x02"}}
    assert message_size("é", attributes) == 2 + (6 + 6 + 4) + (4 + 6 + 3)
    letter = DeadLetter.from_message(_message("m-1", body="x" * 1500, attributes=attributes), Which.DLQ)
    size = message_size(letter.body, attributes)

    fits = outgoing(letter, source_fifo=False, key_source="message_id", max_bytes=size + 200)
    assert fits.blocked is None and fits.problem is None and REDRIVE_ATTRIBUTE in fits.attributes

    for key_source in ("message_id", "fields"):
        blocked = outgoing(letter, source_fifo=False, key_source=key_source, max_bytes=size - 1)
        assert blocked.blocked == (
            f"the message is {size:,} bytes, over the source queue's MaximumMessageSize of {size - 1:,} "
            "bytes: raise the queue's limit to redrive it"
        )
        assert REDRIVE_ATTRIBUTE not in blocked.attributes


def test_unreadable_details_are_shown_not_guessed():
    letter = DeadLetter.from_message(_message(details="{not json", reason="why"), Which.DLQ)

    assert letter.kind == "unknown"
    assert "idempotency.details is not JSON" in letter.describe()


def test_a_subscription_dead_letter_keeps_the_published_deduplication_id_and_is_keyed_by_its_dlq_id():
    # Never delivered, never keyed: every copy a redrive sends is keyed by its id in the subscription's DLQ.
    letter = DeadLetter.from_message(
        _message("s-1", dedup="published-1", attributes={"ErrorCode": _string("KMS.AccessDenied")}),
        Which.SUBSCRIPTION,
    )

    message = outgoing(letter, source_fifo=True, key_source="dedup_id")

    assert letter.kind == "undeliverable" and letter.source_message_id is None
    assert message.problem is None
    assert message.redrive == {"source_message_id": "s-1", "dedup_id": "published-1"}
    assert json.loads(message.attributes[REDRIVE_ATTRIBUTE]["StringValue"]) == message.redrive
    assert message.dedup_id == "published-1" and message.dedup_restored
    assert "ErrorCode=KMS.AccessDenied" in letter.describe()

    standard = outgoing(letter, source_fifo=False, key_source="message_id")
    assert standard.redrive == {"source_message_id": "s-1", "dedup_id": None}
    assert standard.dedup_id is None and standard.group_id == "g"


@pytest.mark.parametrize(
    ("filters", "matches"),
    [
        (Filters(groups=("order-*",)), True),
        (Filters(groups=("refund-*",)), False),
        (Filters(reasons=("rejected",)), True),
        (Filters(reasons=("invalid",)), False),
        (Filters(reasons=("CARD DECLINED",)), True),
        (Filters(groups=("order-*",), reasons=("timeout",)), False),
    ],
)
def test_filters_match_group_patterns_and_kinds_or_reason_text(filters, matches):
    letter = DeadLetter.from_message(
        _message(
            group="order-7",
            details={"kind": "rejected", "group_id": "order-7"},
            reason="the processor rejected it: card declined",
        ),
        Which.DLQ,
    )
    assert filters.matches(letter) is matches


def test_a_reason_naming_a_kind_matches_that_kind_only_and_reason_text_matches_text():
    letter = DeadLetter.from_message(
        _message(
            details={"kind": "exhausted", "group_id": "g"},
            reason="failed on its last receive: TransientError: Invalid session token",
        ),
        Which.DLQ,
    )

    assert not Filters(reasons=("invalid",)).matches(letter)
    assert not Filters(reasons=("INVALID",)).matches(letter)
    assert Filters(reasons=("Exhausted",)).matches(letter)
    assert Filters(reasons=("session token",)).matches(letter)  # not a kind: the text
    assert Filters(texts=("invalid",)).matches(letter)
    assert Filters(reasons=("rejected",), texts=("session",)).matches(letter)
    assert not Filters(reasons=("rejected",), texts=("timeout",)).matches(letter)
    assert (
        Filters(reasons=("invalid",), texts=("token",)).describe() == "reason 'invalid', reason text 'token'"
    )


def test_pace_waits_so_sends_are_at_most_the_rate_apart():
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    pace = Pace(4, Console(sleep=sleep, clock=lambda: now[0]))
    for spent in (0.0, 0.1, 0.3, 0.0):
        now[0] += spent
        pace.wait()

    # the first send at once; then 0.25 s apart: 0.1 s spent -> 0.15 s more; 0.3 s spent -> none; 0 -> 0.25 s
    assert slept == pytest.approx([0.15, 0.25])
    for rate in (0, -1, float("nan"), float("inf")):
        with pytest.raises(
            DlqError, match=r"^--rate must be a finite number of messages a second over 0, got"
        ):
            Pace(rate, Console())
