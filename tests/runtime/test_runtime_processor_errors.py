"""A processor's unexpected exception leaves a trace: one ERROR line per record with its type, where in the
user's code it was raised and the traceback; the dead letter's details name the type and the place."""

from __future__ import annotations

import json
from typing import Any

from idempotent_runtime import PermanentError
from runtime_helpers import (
    dlq_details,
    dlq_reason,
    drain,
    event,
    inject_errors,
    record,
    record_logs,
    scan,
)

PRICES = {"EUR": 100}


def priced(message):
    order = message.json_object()
    return {**order, "cents": PRICES[order["currency"]]}  # KeyError for a currency with no price


PRICED_LINE = f"{__file__}:{priced.__code__.co_firstlineno + 2} in priced"


def parsed_note(message):
    return {"note": json.loads(message.json_object()["note"])}  # JSONDecodeError, raised inside json


PARSED_LINE = f"{__file__}:{parsed_note.__code__.co_firstlineno + 1} in parsed_note"


def _one_record_line(stream) -> dict[str, Any]:
    (line,) = record_logs(stream)
    return line


def test_an_unexpected_exception_is_logged_once_at_error_with_where_it_was_raised(make_handler, dynamodb):
    handler, stream = make_handler(fn=priced, log_level="INFO")
    (result,) = handler.process_batch(event(record({"x": "o-1", "y": "1", "currency": "GBP"})), None)
    assert (result.outcome, result.reason) == ("failed", "retry later: KeyError: 'GBP'")
    line = _one_record_line(stream)  # on main: a WARNING without type, place or traceback
    assert (line["level"], line["error_type"], line["error_location"]) == ("ERROR", "KeyError", PRICED_LINE)
    assert 'cents": PRICES[order["currency"]]' in line["traceback"]
    assert line["traceback"].rstrip().endswith("KeyError: 'GBP'")
    assert scan(dynamodb) == []


def test_an_exception_raised_inside_a_library_is_placed_at_the_processors_line(make_handler):
    handler, stream = make_handler(fn=parsed_note, log_level="INFO")
    handler(event(record({"x": "o-1", "y": "1", "note": "{"})), None)
    line = _one_record_line(stream)
    assert (line["error_type"], line["error_location"]) == ("JSONDecodeError", PARSED_LINE)
    assert "json/decoder.py" in line["traceback"]  # the whole way down is in the traceback


def test_the_dead_letter_of_an_exhausted_record_names_the_processors_error(make_handler, sqs, dlq_url):
    handler, stream = make_handler(fn=priced, dlq_url=dlq_url, max_receive_count=3, log_level="INFO")
    poison = record({"x": "o-1", "y": "1", "currency": "GBP"}, receive_count=3)
    (result,) = handler.process_batch(event(poison), None)
    assert result.outcome == "quarantined"
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead) == "failed on its last receive (3 of MAX_RECEIVE_COUNT 3): KeyError: 'GBP'"
    details = dlq_details(dead)
    assert (details["kind"], details["error_type"], details["error_location"]) == (
        "exhausted",
        "KeyError",
        PRICED_LINE,
    )
    assert "traceback" not in details  # the dead letter stays small: the log line has it
    line = _one_record_line(stream)
    assert (line["level"], line["outcome"], line["error_location"]) == ("ERROR", "quarantined", PRICED_LINE)


def test_a_guarded_processors_exception_is_located_and_its_claim_released(make_handler, dynamodb):
    handler, stream = make_handler(fn=priced, mode="guarded", log_level="INFO")
    handler(event(record({"x": "o-1", "y": "1", "currency": "GBP"})), None)
    line = _one_record_line(stream)
    assert (line["level"], line["error_location"]) == ("ERROR", PRICED_LINE)
    assert scan(dynamodb) == []  # released: the next delivery runs the effect


def test_the_processors_own_answers_and_the_runtimes_own_failures_carry_no_traceback(
    make_handler, dynamodb, sqs, dlq_url, fresh_dynamodb
):
    def reject(message):
        raise PermanentError("unknown currency GBP")

    handler, stream = make_handler(fn=reject, dlq_url=dlq_url, log_level="INFO")
    handler(event(record({"x": "o-1", "y": "1"})), None)
    line = _one_record_line(stream)
    assert line["level"] == "WARNING" and "traceback" not in line
    assert "error_type" not in dlq_details(drain(sqs, dlq_url)[0])

    inject_errors(fresh_dynamodb, "PutItem", "ProvisionedThroughputExceededException")
    handler, stream = make_handler(client=fresh_dynamodb, log_level="INFO")
    handler(event(record({"x": "o-1", "y": "1"})), None)
    line = _one_record_line(stream)
    assert line["level"] == "WARNING" and "traceback" not in line
