"""Integration test: guarded mode (FIFO). The processor (``src/charges.py``) stands in for a payment provider
and counts its runs per idempotency key in the table: a charge run twice, or a conflicting one run at all,
would show in the count.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from steps import DeadLetter, Item, Message, Scenario, build_test

from idempotent_pipeline import ConsumerOptions, Mode

TEA = '{"customer":"cust-7","payment":"pay-1","cents":250}'
CAKE = '{"customer":"cust-7","payment":"pay-2","cents":100}'
CAKE_MORE = '{"customer":"cust-7","payment":"pay-2","cents":999}'
NOTHING = '{"customer":"cust-8","payment":"pay-3","cents":0}'
KEYLESS = '{"payment":"pay-4","cents":5}'

SCENARIO = Scenario(
    first=[Message(TEA, group="cust-7"), Message(CAKE, group="cust-7")],
    then=[
        # the producer resends a charge after SNS's 5-minute window: same body, new deduplication id
        Message(TEA, group="cust-7", dedup="pay-1-resent"),
        Message(CAKE_MORE, group="cust-7"),  # same payment id, another amount: a conflict, never charged
        Message(NOTHING, group="cust-8"),  # the processor refuses it: PermanentError
        Message(KEYLESS, group="cust-9"),
    ],
    items=[
        Item({"pk": "charge#cust-7#pay-1", "sk": "runs"}, {"runs": {"N": "1"}, "cents": {"N": "250"}}),
        Item({"pk": "charge#cust-7#pay-2", "sk": "runs"}, {"runs": {"N": "1"}, "cents": {"N": "100"}}),
        Item(
            {"pk": "cust-7", "sk": "pay-1"},
            {"idempotency:status": {"S": "COMPLETED"}, "idempotency:result": {"S": '{"charged":250}'}},
        ),
    ],
    dead_letters=[
        DeadLetter(
            CAKE_MORE,
            r"^conflict: key cust-7#pay-2 is already done with another payload",
            {"kind": "conflict", "key": {"partition": "cust-7", "sort": "pay-2"}},
        ),
        DeadLetter(NOTHING, r"^cents must be a positive integer, got 0$", {"kind": "rejected"}),
        DeadLetter(KEYLESS, r"partition key field 'customer' is missing from the body", {"kind": "invalid"}),
    ],
)


def build(app: cdk.App) -> None:
    consumer = ConsumerOptions(
        mode=Mode.GUARDED,
        partition_key_field="customer",
        sort_key_field="payment",
        processor="charges:charge",
        code_directory=str(Path(__file__).resolve().parent / "src"),
    )
    build_test(app, "Guarded", "Charges", SCENARIO, consumer)


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    app.synth()
