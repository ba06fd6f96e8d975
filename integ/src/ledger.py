"""The processor of integ_transaction.py: a payment adds its cents to its account's balance and writes a
ledger line, in the one transaction that also writes the runtime's marker. A payment applied twice would show
in the balance."""

from __future__ import annotations

from typing import Any

from idempotent_runtime import PermanentError


def apply_payment(message: Any) -> list[dict[str, Any]]:
    payment = message.json_object()
    cents = payment.get("cents")
    if not isinstance(cents, int) or isinstance(cents, bool) or cents <= 0:
        raise PermanentError(f"cents must be a positive integer, got {cents!r}")
    account = {"S": f"account#{payment['account']}"}
    return [
        {
            "Update": {  # TableName left out: the runtime's TABLE_NAME
                "Key": {"pk": account, "sk": {"S": "balance"}},
                "UpdateExpression": "ADD #balance :cents",
                "ExpressionAttributeNames": {"#balance": "balance"},
                "ExpressionAttributeValues": {":cents": {"N": str(cents)}},
            }
        },
        {
            "Put": {
                "Item": {
                    "pk": account,
                    "sk": {"S": f"ledger#{payment['payment']}"},
                    "cents": {"N": str(cents)},
                }
            }
        },
    ]
