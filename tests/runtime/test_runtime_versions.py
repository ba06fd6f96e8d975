"""versioned mode's versions: numbers by exact value, RFC 3339 timestamps by instant, one kind per key, and
every other value refused with a reason that names the field - through the bundled handler against moto."""

from __future__ import annotations

import pytest
from idempotent_runtime.modes.versioned import read_version
from runtime_helpers import dlq_details, dlq_reason, drain, event, record, scan

VERSIONED = {"mode": "versioned", "version_field": "meta.version", "queue_type": "standard"}


def state(version: object, **fields: object) -> str:
    """A body with the version written exactly as given (``version`` as JSON text when it is a str)."""
    import json

    text = version if isinstance(version, str) else json.dumps(version)
    extra = "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items())
    return f'{{"x": "e-1", "y": "profile", "meta": {{"version": {text}}}{extra}}}'


def outcomes(handler, *versions: object, **fields: object) -> list[str]:
    return [
        r.outcome.value
        for version in versions
        for r in handler.process_batch(event(record(state(version, **fields), group=None)), None)
    ]


def stored(dynamodb) -> dict:
    (item,) = scan(dynamodb)
    return item["idempotency:version"]


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("1", "2"),
        ("-5", "-1"),
        ("-1", "0"),
        ("1.25", "1.5"),
        ("0.1", "0.1000000000000000000000000000000000001"),  # beyond a double's precision: exact
        ("12345678901234567890123456789012345678", "12345678901234567890123456789012345679"),  # 38 digits
        ("999", "1e3"),
        ("1E-130", "2E-130"),
        ("9E+125", "9.1E+125"),
    ],
)
def test_numbers_are_ordered_by_their_exact_value(make_handler, dynamodb, older, newer):
    handler, _ = make_handler(**VERSIONED)
    assert outcomes(handler, newer, older) == ["processed", "stale"]
    assert outcomes(handler, newer) == ["duplicate"]


def test_one_number_written_two_ways_is_one_version_and_one_payload(make_handler, dynamodb):
    handler, _ = make_handler(**VERSIONED)
    assert outcomes(handler, "1000", "1e3", "1E+3", "1000.000", "999.9999") == [
        "processed",
        "duplicate",
        "duplicate",
        "duplicate",
        "stale",
    ]
    assert stored(dynamodb) == {"N": "1000"}


@pytest.mark.parametrize(
    ("written", "utc"),
    [
        ("2026-11-26T10:00:00Z", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-26t10:00:00z", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-26 10:00:00Z", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-26T12:00:00+02:00", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-26T04:30:00-0530", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-26T11:00:00+01", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-26T10:00:00-00:00", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-27T00:30:00+14:30", "2026-11-26T10:00:00.000000000Z"),
        ("2026-11-26T10:00:00.5Z", "2026-11-26T10:00:00.500000000Z"),
        ("2026-11-26T10:00:00.123456789Z", "2026-11-26T10:00:00.123456789Z"),
        ("2026-11-26T10:00:00.100000000000Z", "2026-11-26T10:00:00.100000000Z"),  # trailing zeros only
        ("2027-01-01T00:30:00+01:00", "2026-12-31T23:30:00.000000000Z"),  # across a year
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000000Z"),
    ],
)
def test_a_timestamp_is_stored_as_fixed_width_utc_text(make_handler, dynamodb, written, utc):
    handler, _ = make_handler(**VERSIONED)
    assert outcomes(handler, f'"{written}"') == ["processed"]
    assert stored(dynamodb) == {"S": utc}
    assert scan(dynamodb)[0]["meta"] == {"M": {"version": {"S": written}}}  # the body as sent


def test_timestamps_are_ordered_by_instant_whatever_their_offset(make_handler, dynamodb):
    handler, _ = make_handler(**VERSIONED)
    versions = (
        '"2026-11-26T11:00:00+02:00"',  # 09:00 UTC, although its local hour is later than the next one's
        '"2026-11-26T10:00:00Z"',
        '"2026-11-26T10:00:00.000000001Z"',  # one nanosecond later
        '"2026-11-26T10:00:00Z"',
        '"2026-11-26T09:59:59.999999999Z"',
    )
    assert outcomes(handler, *versions) == ["processed", "processed", "processed", "stale", "stale"]
    assert stored(dynamodb) == {"S": "2026-11-26T10:00:00.000000001Z"}


def test_the_same_instant_written_with_another_offset_is_a_duplicate_not_a_conflict(make_handler, dynamodb):
    handler, _ = make_handler(**VERSIONED)
    versions = ('"2026-11-26T12:00:00+02:00"', '"2026-11-26T10:00:00Z"', '"2026-11-26T10:00:00.000Z"')
    assert outcomes(handler, *versions, name="Ada") == ["processed", "duplicate", "duplicate"]
    assert outcomes(handler, '"2026-11-26T10:00:00Z"', name="Bob") == ["failed"]  # a conflict (no DLQ here)


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ('"2026-11-26"', "version field 'meta.version' is a date without a time: '2026-11-26'"),
        (
            '"2026-11-26T10:00:00"',
            "version field 'meta.version' is a timestamp without a UTC offset: '2026-11-26T10:00:00'",
        ),
        ('"yesterday"', "version field 'meta.version' is a string that is not a timestamp: 'yesterday'"),
        ('"7"', "version field 'meta.version' is a string that is not a timestamp: '7'"),
        ('"2026-11-26T10:00Z"', "version field 'meta.version' is a string that is not a timestamp"),
        (
            '"2026-11-26T10:00:00.1234567891Z"',
            "version field 'meta.version' '2026-11-26T10:00:00.1234567891Z' has a fraction of a second finer "
            "than nanoseconds (9 digits): it would be rounded",
        ),
        ('"2026-02-30T10:00:00Z"', "'meta.version' '2026-02-30T10:00:00Z' is not a valid timestamp"),
        ('"2026-12-31T23:59:60Z"', "'meta.version' '2026-12-31T23:59:60Z' is not a valid timestamp"),
        ('"2026-11-26T10:00:00+24:00"', "is not a valid timestamp (the UTC offset +24:00 is not under 24"),
        ('"2026-11-26T10:00:00+01:60"', "is not a valid timestamp (the UTC offset +01:60 is not under 24"),
        ('"0001-01-01T00:30:00+01:00"', "is not a valid timestamp"),  # before year 1 in UTC
        ('"2026-11-26T10:00:00\u0660Z"', "is a string that is not a timestamp"),  # an Arabic-Indic digit
        ("true", "version field 'meta.version' is true; a version is a JSON number or an RFC 3339 timestamp"),
        ("null", "version field 'meta.version' is null; a version is a JSON number"),
        ('{"n": 1}', "version field 'meta.version' is a JSON object; a version is a JSON number"),
        ("[1]", "version field 'meta.version' is a JSON array"),
        (
            "123456789012345678901234567890123456789",
            "version field 'meta.version' is the number 123456789012345678901234567890123456789, which "
            "has 39 significant digits; DynamoDB numbers hold at most 38",
        ),
        ("1E-131", "'meta.version' is the number 1E-131, which has a magnitude of about 1E-131"),
    ],
)
def test_a_version_that_is_no_number_or_timestamp_is_quarantined_naming_the_field(
    make_handler, dynamodb, dlq_url, sqs, version, reason
):
    handler, _ = make_handler(dlq_url=dlq_url, **VERSIONED)
    assert outcomes(handler, version) == ["quarantined"]
    (dead,) = drain(sqs, dlq_url)
    assert reason in dlq_reason(dead)
    assert dlq_details(dead)["kind"] == "invalid"
    assert scan(dynamodb) == []


def test_a_missing_version_field_is_quarantined(make_handler, dynamodb, dlq_url, sqs):
    handler, _ = make_handler(dlq_url=dlq_url, **VERSIONED)
    handler(event(record({"x": "e-1", "y": "profile", "meta": {}}, group=None)), None)
    (dead,) = drain(sqs, dlq_url)
    assert dlq_reason(dead).startswith("version field 'meta.version' is missing from the body")


@pytest.mark.parametrize(
    ("first", "second", "held"),
    [
        ("5", '"2026-11-26T10:00:00Z"', "number 5"),
        ('"2026-11-26T10:00:00Z"', "5", "timestamp 2026-11-26T10:00:00.000000000Z"),
    ],
)
def test_a_key_keeps_one_kind_of_version_and_a_message_of_the_other_is_invalid(
    make_handler, dynamodb, dlq_url, sqs, first, second, held
):
    handler, _ = make_handler(dlq_url=dlq_url, **VERSIONED)
    assert outcomes(handler, first, second) == ["processed", "quarantined"]
    (dead,) = drain(sqs, dlq_url)
    assert f"cannot be compared with the one key e-1#profile holds ({held}): a key's versions are all " in (
        dlq_reason(dead)
    )
    assert dlq_details(dead)["kind"] == "invalid"
    before = stored(dynamodb)
    assert outcomes(handler, first) == ["duplicate"] and stored(dynamodb) == before
    # Another key may use the other kind.
    other = handler.process_batch(event(record(state(second).replace("e-1", "e-2"), group=None)), None)
    assert [r.outcome.value for r in other] == ["processed"]


def test_read_version_keeps_every_digit_and_tells_the_kinds_apart():
    from decimal import Decimal

    big = read_version(Decimal("0.1000000000000000000000000000000000001"), "v")
    assert (big.kind, big.attribute) == ("number", {"N": "0.1000000000000000000000000000000000001"})
    assert read_version(-0, "v").value == read_version(Decimal("-0.0"), "v").value
    stamp = read_version("2026-11-26T10:00:00+02:00", "v")
    assert (stamp.kind, stamp.attribute) == ("timestamp", {"S": "2026-11-26T08:00:00.000000000Z"})
