"""Numbers are stored exactly, or rejected with a reason naming the field: never rounded, never zeroed."""

from __future__ import annotations

import json
import sys
from decimal import Decimal

import pytest
from runtime_helpers import dlq_details, dlq_reason, drain, event, failures, metrics, record, scan


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("1234567890.123456789", "1234567890.123456789"),  # json.loads: 1234567890.1234567
        ("12345678901234567.89", "12345678901234567.89"),  # json.loads: 1.2345678901234568e+16
        ("0.1", "0.1"),
        ("1.50", "1.50"),
        ("1e2", "1E+2"),
        ("-7", "-7"),
        ("12345678901234567890123456789012345678", "12345678901234567890123456789012345678"),  # 38 digits
        ("1E-130", "1E-130"),  # the smallest magnitude DynamoDB holds
        ("9.9999999999999999999999999999999999999E+125", "9.9999999999999999999999999999999999999E+125"),
        ("-0.0", "0"),
    ],
)
def test_json_numbers_are_stored_with_their_exact_value(make_handler, dynamodb, text, stored):
    handler, _ = make_handler()
    assert failures(handler(event(record(f'{{"x": "a", "y": "b", "n": {text}}}')), None)) == []
    (item,) = scan(dynamodb)
    assert item["n"] == {"N": stored}
    assert Decimal(item["n"]["N"]) == Decimal(text)


def test_nested_numbers_are_stored_exactly(make_handler, dynamodb):
    handler, _ = make_handler()
    body = '{"x": "a", "y": "b", "order": {"lines": [{"price": 19.99}, {"price": 1234567890.123456789}]}}'
    handler(event(record(body)), None)
    (item,) = scan(dynamodb)
    prices = [line["M"]["price"]["N"] for line in item["order"]["M"]["lines"]["L"]]
    assert prices == ["19.99", "1234567890.123456789"]


BAD_NUMBERS = [
    pytest.param("1e-400", "has a magnitude of about 1E-400, outside DynamoDB's range", id="too-small"),
    pytest.param("1e126", "has a magnitude of about 1E+126, outside DynamoDB's range", id="too-large"),
    pytest.param(
        "1234567890123456789012345678901234567891",
        "has 40 significant digits; DynamoDB numbers hold at most 38",
        id="40-digits",
    ),
    pytest.param(
        "0.123456789012345678901234567890123456789",
        "has 39 significant digits; DynamoDB numbers hold at most 38",
        id="39-fraction-digits",
    ),
]


@pytest.mark.parametrize(("text", "reason"), BAD_NUMBERS)
def test_number_dynamodb_cannot_hold_is_quarantined_naming_its_path(
    make_handler, dynamodb, sqs, dlq_url, text, reason
):
    handler, _ = make_handler(dlq_url=dlq_url)
    body = f'{{"x": "a", "y": "b", "order": {{"lines": [{{}}, {{}}, {{}}, {{"price": {text}}}]}}}}'
    poison = record(body, group="g")
    after = record({"x": "c", "y": "d"}, group="g")
    assert failures(handler(event(poison, after), None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead).startswith("body field order.lines[3].price number ")
    assert reason in dlq_reason(dead)
    assert dlq_details(dead)["kind"] == "invalid"
    assert dead["Body"] == body  # the original text, unchanged
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["c"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_quarantined_naming_the_field(make_handler, sqs, dlq_url, dynamodb, constant):
    handler, _ = make_handler(dlq_url=dlq_url)
    handler(event(record(f'{{"x": "a", "y": "b", "m": {{"v": [1, {constant}]}}}}')), None)
    (dead,) = drain(sqs, dlq_url)
    assert (
        dlq_reason(dead)
        == f"m.v[1] is {constant}, which is not a JSON number and cannot be stored in dynamodb"
    )
    assert scan(dynamodb) == []


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "processor attribute total number nan is nan, which DynamoDB cannot store"),
        (float("inf"), "processor attribute total number inf is inf, which DynamoDB cannot store"),
        (1e-200, "processor attribute total number 1e-200 has a magnitude of about 1E-200"),
        (10**126, "has a magnitude of about 1E+126"),
        (Decimal("1." + "1" * 38), "has 39 significant digits"),
        (
            {"a": [Decimal("NaN")]},
            "processor attribute total.a[0] number NaN is NaN, which DynamoDB cannot store",
        ),
    ],
)
def test_processor_numbers_follow_the_same_rule(make_handler, sqs, dlq_url, dynamodb, value, reason):
    handler, _ = make_handler(fn=lambda message: {"total": value}, dlq_url=dlq_url)
    handler(event(record({"x": "a", "y": "b"})), None)
    (dead,) = drain(sqs, dlq_url)
    assert reason in dlq_reason(dead)
    assert scan(dynamodb) == []


def test_processor_numbers_are_stored_exactly(make_handler, dynamodb):
    values = {"f": 0.1, "d": Decimal("1234567890.123456789"), "i": 10**37, "big": 10**125}
    handler, _ = make_handler(fn=lambda message: values)
    handler(event(record({"x": "a", "y": "b"})), None)
    (item,) = scan(dynamodb)
    assert {name: item[name]["N"] for name in values} == {
        "f": "0.1",
        "d": "1234567890.123456789",
        "i": str(10**37),
        "big": str(10**125),
    }


def test_processors_see_integers_as_int_and_other_numbers_exactly_as_decimal(make_handler):
    seen = {}

    def look(message):
        seen.update(message.data)
        return None

    handler, _ = make_handler(fn=look)
    handler(event(record('{"x": "a", "y": "b", "qty": 3, "price": 1234567890.123456789}')), None)
    assert type(seen["qty"]) is int and seen["qty"] == 3
    assert seen["price"] == Decimal("1234567890.123456789")


def test_guarded_mode_passes_big_numbers_it_does_not_store(make_handler, dynamodb):
    seen = []
    handler, _ = make_handler(fn=lambda message: seen.append(message.data["n"]), mode="guarded")
    assert failures(handler(event(record('{"x": "a", "y": "b", "n": 1e400}')), None)) == []
    assert seen == [Decimal("1e400")]


@pytest.mark.parametrize("digits", [4001, 4300, 5000], ids=lambda n: f"{n}-digits")
def test_an_integer_too_long_to_store_is_quarantined_naming_the_field(
    make_handler, dynamodb, sqs, dlq_url, digits
):
    # Python parses at most 4300 digits as an int; longer ones are numbers like any other.
    handler, stream = make_handler(dlq_url=dlq_url)
    for text in ("7" * digits, "7" * digits + ".0"):
        (result,) = handler.process_batch(
            event(record('{"x": "a", "y": "b", "m": {"n": ' + text + "}}")), None
        )
        assert result.outcome == "quarantined"
        (dead,) = drain(sqs, dlq_url)
        assert dlq_reason(dead) == (
            f"body field m.n number {'7' * 57}... has {digits} significant digits; DynamoDB numbers hold at "
            "most 38"
        )
    assert scan(dynamodb) == []
    assert [line["quarantined"] for line in metrics(stream)] == [1, 1]


@pytest.mark.parametrize(
    ("first", "again"),
    [
        pytest.param("1" + "0" * 4000, "1E+4000", id="4001-digits-and-exponent"),
        pytest.param("1" + "0" * 4299, "1E+4299", id="4300-digits-and-exponent"),
        pytest.param("1" + "0" * 4300, "1E+4300", id="4301-digits-and-exponent"),
        pytest.param("9" * 5000, "9" * 5000 + ".0", id="5000-digits-and-fraction"),
        pytest.param("-" + "1" * 4500, "-" + "1" * 4500 + "E0", id="negative-4500-digits"),
    ],
)
@pytest.mark.parametrize("mode", ["transaction", "guarded"])
def test_a_long_integer_is_the_same_payload_however_it_is_written(
    make_handler, sqs, dlq_url, mode, first, again
):
    seen = []

    def look(message):
        seen.append(message.data["n"])
        return [] if mode == "transaction" else None

    handler, stream = make_handler(fn=look, mode=mode, dlq_url=dlq_url)
    outcomes = [
        handler.process_batch(event(record(f'{{"x": "a", "y": "b", "n": {text}}}')), None)[0].outcome
        for text in (first, again)
    ]
    assert outcomes == ["processed", "duplicate"]  # one fingerprint, not a conflict
    assert drain(sqs, dlq_url) == []
    assert seen[0] == Decimal(first)  # the processor gets the exact value
    assert [line["conflicts"] for line in metrics(stream)] == [0, 0]


@pytest.mark.parametrize("limit", [0, 640, 100_000], ids=lambda n: f"limit-{n}")
def test_one_fingerprint_per_value_whatever_the_interpreters_integer_limit(limit):
    from idempotent_runtime.payload import Fingerprinter, parse_json

    fingerprint = Fingerprinter()
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)  # a processor's module may change it
    try:
        for digits in (1000, 4300, 4301, 5000):
            texts = ("1" + "0" * (digits - 1), f"1E+{digits - 1}", "1" + "0" * (digits - 1) + ".0")
            assert len({fingerprint(parse_json(f'{{"n": {text}}}')) for text in texts}) == 1, digits
    finally:
        sys.set_int_max_str_digits(before)


def test_the_body_of_a_quarantined_message_is_the_original_text(make_handler, sqs, dlq_url):
    handler, _ = make_handler(dlq_url=dlq_url)
    text = '{"y": "b", "n": 1.10}'
    handler(event(record(text)), None)
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == text and json.loads(dead["Body"]) == {"y": "b", "n": 1.1}


def test_a_processor_integer_too_long_to_print_is_rejected_with_a_reason(make_handler, sqs, dlq_url):
    handler, _ = make_handler(fn=lambda message: {"n": 10**5000}, dlq_url=dlq_url)
    (result,) = handler.process_batch(event(record({"x": "a", "y": "b"})), None)
    assert result.outcome == "quarantined"
    assert dlq_reason(drain(sqs, dlq_url)[0]).startswith(
        "processor attribute n number <an integer of 16610 bits>"
    )


def test_a_text_is_never_taken_for_a_number_in_canonical_json():
    # Decimals are written through a placeholder text: a body holding that very text keeps it as text.
    from idempotent_runtime.payload import canonical_json

    text = canonical_json.placeholder
    data = {"a": text, "b": [Decimal("1.50"), 'x"' + text, {text: 1}], "n": Decimal("-0.0")}
    assert canonical_json(data) == f'{{"a":"{text}","b":[15E-1,"x\\"{text}",{{"{text}":1}}],"n":0}}'
