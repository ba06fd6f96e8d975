"""Processing functions for the DLQ tool's tests, one per mode, with a switch that stands for a bug fix.

Configure with PROCESSOR=dlq_processors:<function> (the tests pass the function to build_handler too).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from idempotent_runtime import PermanentError

FIXED = threading.Event()  # set: the processor's bug is fixed
EFFECTS: list[str] = []  # guarded mode's side effect: one entry per effect
WHILE_CLAIMED: list[Callable[[], Any]] = []  # run by claim_and_run while it holds its claim


def reset() -> None:
    FIXED.clear()
    EFFECTS.clear()
    WHILE_CLAIMED.clear()


def _checked(message: Any) -> dict[str, Any]:
    body = message.json_object()
    if body.get("reject") and not FIXED.is_set():
        raise PermanentError(f"rejected by the processor: {body['reject']}")
    return body


# document mode: the stored document's total is 100 x the amount once fixed (1 x before: the bug).
def store_total(message: Any) -> dict[str, Any]:
    body = _checked(message)
    return {"total": body.get("amount", 0) * (100 if FIXED.is_set() else 1)}


# transaction mode: add the amount to the account's balance.
def add_to_balance(message: Any) -> list[dict[str, Any]]:
    body = _checked(message)
    return [
        {
            "Update": {
                "Key": {"pk": {"S": f"account#{body['x']}"}, "sk": {"S": "balance"}},
                "UpdateExpression": "ADD #balance :amount",
                "ExpressionAttributeNames": {"#balance": "balance"},
                "ExpressionAttributeValues": {":amount": {"N": str(body.get("amount", 0))}},
            }
        }
    ]


# transaction mode, for an order line (the first hop of deploy_hops): add its amount to the order's total.
def add_to_order(message: Any) -> list[dict[str, Any]]:
    body = _checked(message)
    return [
        {
            "Update": {
                "Key": {"pk": {"S": f"order#{body['order_id']}"}, "sk": {"S": "total"}},
                "UpdateExpression": "ADD #total :amount",
                "ExpressionAttributeNames": {"#total": "total"},
                "ExpressionAttributeValues": {":amount": {"N": str(body.get("amount", 0))}},
            }
        }
    ]


# guarded mode: an effect outside DynamoDB.
def claim_and_run(message: Any) -> dict[str, Any]:
    body = _checked(message)
    for callback in WHILE_CLAIMED:
        callback()
    EFFECTS.append(f"{body['x']}#{body['y']}")
    return {"effects": len(EFFECTS)}


PROCESSORS = {"document": store_total, "transaction": add_to_balance, "guarded": claim_and_run}
