"""The outbox benchmark counts what it says: the outbox's write units, the relay's requests."""

from __future__ import annotations

from benchmarks import outbox_bench


def test_emitting_costs_two_write_units_and_a_tenth_of_a_publish_per_message_and_no_relay_read(
    monkeypatch,
):
    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
    ):
        monkeypatch.setenv(name, value)
    cost = outbox_bench.measure()
    assert (cost.emitted, cost.published) == (100, 100)  # every emitted message published, once
    assert cost.outbox_write_units == 200  # one Put of under 1 KB per message: 2 transactional units
    assert cost.transaction_write_units == 400  # the processor's Put and the marker, as without emitting
    assert (cost.relay_publish_requests, cost.relay_dynamodb_requests) == (10, 0)
