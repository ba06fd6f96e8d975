"""User processing functions for the modes that need one (PROCESSOR=benchmarks.processors:...).

They do the least work their mode allows, like the Powertools peer's record handler, so the numbers
compare the idempotency machinery, not the business logic.
"""

from __future__ import annotations

from typing import Any


def ledger_append(message: Any) -> list[dict[str, Any]]:
    """transaction mode: add the message's amount to an account balance (a non-commutative change).

    The runtime commits this Update and its idempotency marker in one TransactWriteItems.
    """
    body = message.json_object()
    return [
        {
            "Update": {
                "Key": {"pk": {"S": body["x"]}, "sk": {"S": "balance"}},
                "UpdateExpression": "ADD #balance :amount",
                "ExpressionAttributeNames": {"#balance": "balance"},
                "ExpressionAttributeValues": {":amount": {"N": str(body["amount"])}},
            }
        }
    ]


def charge(message: Any) -> dict[str, Any]:
    """guarded mode: the effect outside DynamoDB (here a no-op) and the small result stored with it."""
    body = message.json_object()
    return {"charged": body["amount"], "currency": body["currency"], "reference": message.key.idempotency_key}
