"""The processors of the reference app's two hops (``-c outbox=true``): orders -> payments -> shipping.

An order records its line and emits a payment request; a payment records the charge and emits a shipment.
Both run in transaction mode: what they emit is written with their writes, in one transaction, and the
consumers downstream are keyed by the deduplication id the relay publishes each emitted message with.
"""

from __future__ import annotations

from typing import Any

from idempotent_runtime import PermanentError


def _cents(data: dict[str, Any]) -> int:
    cents = data.get("cents", 100)
    if not isinstance(cents, int) or isinstance(cents, bool) or cents <= 0:
        raise PermanentError(f"cents must be a positive integer, got {cents!r}")
    return cents


def order(message: Any) -> list[dict[str, Any]]:
    """orders: the line of an order (``x``: order id, ``y``: line), and a payment request for it."""
    line = message.json_object()
    cents = _cents(line)
    message.emit({"order": line["x"], "line": line["y"], "cents": cents})
    item = {"pk": {"S": f"order#{line['x']}"}, "sk": {"S": f"line#{line['y']}"}, "cents": {"N": str(cents)}}
    return [{"Put": {"Item": item}}]  # TableName left out: the runtime's TABLE_NAME


def payment(message: Any) -> list[dict[str, Any]]:
    """payments: the charge of an order line, and its shipment."""
    request = message.json_object()
    cents = _cents(request)
    message.emit({"order": request["order"], "line": request["line"], "paid_cents": cents})
    charge = message.key.idempotency_key
    item = {"pk": {"S": f"payment#{request['order']}"}, "sk": {"S": charge}, "cents": {"N": str(cents)}}
    return [{"Put": {"Item": item}}]
