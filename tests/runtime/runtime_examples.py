"""Example processing functions, one per mode, as a user would ship them beside the runtime.

Configure with PROCESSOR=runtime_examples:<function> (the module sits at the root of the code asset).
docs/runtime.md walks through them.
"""

from __future__ import annotations

import threading

from idempotent_runtime import PermanentError


# document mode: return the attributes to store (Python values), or None to store the body as it is.
def order_document(message):
    order = message.json_object()
    lines = order.get("lines", [])
    if not isinstance(lines, list):
        raise PermanentError(f"lines must be a list, got {type(lines).__name__}")
    return {
        "customer": order.get("customer", "unknown"),
        "line_count": len(lines),
        "total_cents": sum(int(line.get("cents", 0)) for line in lines),
        "source_message_id": message.message_id,
    }


# transaction mode: return TransactWriteItems entries; the runtime adds the idempotency marker and commits
# them together, so the balance moves once per payment however often the message arrives.
def apply_payment(message):
    payment = message.json_object()
    amount = payment.get("cents")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise PermanentError(f"cents must be a positive integer, got {amount!r}")
    account = {"S": f"account#{payment['x']}"}
    return [
        {
            "Update": {  # TableName left out: the runtime's TABLE_NAME
                "Key": {"pk": account, "sk": {"S": "balance"}},
                "UpdateExpression": "ADD #balance :amount",
                "ExpressionAttributeNames": {"#balance": "balance"},
                "ExpressionAttributeValues": {":amount": {"N": str(amount)}},
            }
        },
        {
            "Put": {
                "Item": {"pk": account, "sk": {"S": f"ledger#{payment['y']}"}, "cents": {"N": str(amount)}},
            }
        },
    ]


# guarded mode: perform the side effect, return a small JSON-serialisable result.
SENT: list[tuple[str, str]] = []  # stands in for a mail provider
_SENT_LOCK = threading.Lock()


def send_receipt(message):
    receipt = message.json_object()
    address = receipt.get("email")
    if not isinstance(address, str) or "@" not in address:
        raise PermanentError(f"email must be an address, got {address!r}")
    with _SENT_LOCK:
        SENT.append((message.key.idempotency_key, address))  # what to pass to APIs taking an idempotency key
        number = len(SENT)
    return {"receipt": number, "to": address}


# guarded mode with an external API that honours idempotency keys (as payment providers do): the effect
# runs again only if the execution environment dies between the effect and the key's completion, and the
# re-run carries the same idempotency key, so the customer is charged once end to end.
class PaymentProvider:
    """Stands in for a payment API: a request with an idempotency key it has seen returns the first charge."""

    def __init__(self) -> None:
        self.charges: dict[str, dict] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()

    def charge(self, *, idempotency_key: str, customer: str, cents: int) -> dict:
        with self._lock:
            self.requests.append(idempotency_key)
            if idempotency_key not in self.charges:
                number = len(self.charges) + 1
                self.charges[idempotency_key] = {
                    "charge": f"ch_{number}",
                    "customer": customer,
                    "cents": cents,
                }
            return self.charges[idempotency_key]


PROVIDER = PaymentProvider()


def charge_payment(message):
    payment = message.json_object()
    cents = payment.get("cents")
    if not isinstance(cents, int) or isinstance(cents, bool) or cents <= 0:
        raise PermanentError(f"cents must be a positive integer, got {cents!r}")
    return PROVIDER.charge(idempotency_key=message.key.idempotency_key, customer=payment["x"], cents=cents)
