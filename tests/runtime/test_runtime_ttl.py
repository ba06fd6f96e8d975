"""Two lifetimes: records that exist only for idempotency keep the dedup TTL; users' documents never
expire unless DOCUMENT_TTL_SECONDS asks for it."""

from __future__ import annotations

import pytest
from runtime_helpers import event, quarantine_records, record, scan

NOW = 1_800_000_000
DAY = 24 * 3600


def _clock() -> float:
    return float(NOW)


def _by_sort(dynamodb) -> dict[str, dict]:
    return {i["sk"]["S"]: i for i in scan(dynamodb, quarantine_records=True)}


def test_each_record_gets_its_own_lifetime(make_handler, dynamodb, dlq_url):
    document, _ = make_handler(clock=_clock, dlq_url=dlq_url)
    transaction, _ = make_handler(
        clock=_clock, mode="transaction", processor="runtime_examples:apply_payment"
    )
    guarded, _ = make_handler(clock=_clock, mode="guarded", fn=lambda message: None)
    document(event(record({"x": "d", "y": "document"})), None)
    document(event(record({"y": "no partition key"})), None)  # quarantined
    transaction(event(record({"x": "t", "y": "payment", "cents": 1})), None)
    guarded(event(record({"x": "g", "y": "guarded"})), None)
    items = _by_sort(dynamodb)
    assert "expires_at" not in items["document"]  # the user's document: never expires
    assert items["idempotency#payment"]["expires_at"] == {"N": str(NOW + 7 * DAY)}  # the marker
    assert items["guarded"]["expires_at"] == {"N": str(NOW + 7 * DAY)}
    assert items["idempotency#quarantine"]["expires_at"] == {"N": str(NOW + 14 * DAY)}  # outlives SQS


def test_dedup_ttl_seconds_zero_keeps_idempotency_records_for_good(make_handler, dynamodb, dlq_url):
    transaction, _ = make_handler(
        clock=_clock, mode="transaction", processor="runtime_examples:apply_payment", dedup_ttl_seconds=0
    )
    guarded, _ = make_handler(
        clock=_clock, mode="guarded", fn=lambda m: None, dedup_ttl_seconds=0, dlq_url=dlq_url
    )
    transaction(event(record({"x": "t", "y": "payment", "cents": 1})), None)
    guarded(event(record({"x": "g", "y": "guarded"})), None)
    guarded(event(record({"y": "no partition key"})), None)  # quarantined
    items = _by_sort(dynamodb)
    for sort in ("idempotency#payment", "guarded", "idempotency#quarantine"):
        assert "expires_at" not in items[sort], sort


@pytest.mark.parametrize("seconds", [60, 400 * DAY])
def test_document_ttl_seconds_is_the_documents_lifetime(make_handler, dynamodb, seconds):
    handler, _ = make_handler(clock=_clock, document_ttl_seconds=seconds)
    handler(event(record({"x": "d", "y": "document"})), None)
    (item,) = scan(dynamodb)
    assert item["expires_at"] == {"N": str(NOW + seconds)}


def test_a_long_dedup_ttl_also_keeps_quarantine_records_longer(make_handler, dynamodb, dlq_url):
    handler, _ = make_handler(clock=_clock, dlq_url=dlq_url, dedup_ttl_seconds=30 * DAY)
    handler(event(record({"y": "no partition key"})), None)
    (quarantine,) = quarantine_records(dynamodb)
    assert quarantine["expires_at"] == {"N": str(NOW + 30 * DAY)}
