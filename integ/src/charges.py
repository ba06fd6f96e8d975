"""The processor of integ_guarded.py: a charge, the kind of effect guarded mode exists for.

It stands in for a payment provider by counting, in the table, how often it ran for each idempotency key
(``charge#<key>``, ``runs``): a run is the effect, so a count above 1 is a double charge.
"""

from __future__ import annotations

import os
from typing import Any

from idempotent_runtime import PermanentError

_client: Any = None


def _dynamodb() -> Any:
    global _client
    if _client is None:
        import boto3

        _client = boto3.client("dynamodb")
    return _client


def charge(message: Any) -> dict[str, Any]:
    payment = message.json_object()
    cents = payment.get("cents")
    if not isinstance(cents, int) or isinstance(cents, bool) or cents <= 0:
        raise PermanentError(f"cents must be a positive integer, got {cents!r}")
    _dynamodb().update_item(
        TableName=os.environ["TABLE_NAME"],
        Key={"pk": {"S": f"charge#{message.key.idempotency_key}"}, "sk": {"S": "runs"}},
        UpdateExpression="ADD #runs :one SET #cents = :cents",
        ExpressionAttributeNames={"#runs": "runs", "#cents": "cents"},
        ExpressionAttributeValues={":one": {"N": "1"}, ":cents": {"N": str(cents)}},
    )
    return {"charged": cents}
