"""Integration test: transaction mode (FIFO). The processor (``src/ledger.py``) adds each payment to its
account's balance and writes a ledger line, in one transaction with the runtime's marker: a payment applied
twice, or a conflicting one applied at all, would show in the balance.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from steps import DeadLetter, Item, Message, Scenario, build_test

from idempotent_pipeline import ConsumerOptions, Mode

RENT = '{"account":"a-1","payment":"p-1","cents":250}'
FEE = '{"account":"a-1","payment":"p-2","cents":100}'
FEE_AGAIN_MORE = '{"account":"a-1","payment":"p-2","cents":999}'
NEGATIVE = '{"account":"a-2","payment":"p-3","cents":-5}'
INVALID = '{"account":"a-3","payment":'

SCENARIO = Scenario(
    first=[Message(RENT, group="a-1"), Message(FEE, group="a-1")],
    then=[
        # the producer resends a payment after SNS's 5-minute window: same body, new deduplication id
        Message(RENT, group="a-1", dedup="p-1-resent"),
        Message(FEE_AGAIN_MORE, group="a-1"),  # same payment id, another amount: a conflict
        Message(NEGATIVE, group="a-2"),  # the processor refuses it: PermanentError
        Message(INVALID, group="a-3"),
    ],
    items=[
        Item({"pk": "account#a-1", "sk": "balance"}, {"balance": {"N": "350"}}),
        Item({"pk": "account#a-1", "sk": "ledger#p-1"}, {"cents": {"N": "250"}}),
        Item({"pk": "account#a-1", "sk": "ledger#p-2"}, {"cents": {"N": "100"}}),
        # the runtime's markers, one per payment
        Item({"pk": "a-1", "sk": "idempotency#p-1"}, {}),
        Item({"pk": "a-1", "sk": "idempotency#p-2"}, {}),
    ],
    dead_letters=[
        DeadLetter(
            FEE_AGAIN_MORE,
            r"^conflict: key a-1#p-2 is already done with another payload",
            {"kind": "conflict", "key": {"partition": "a-1", "sort": "p-2"}},
        ),
        DeadLetter(NEGATIVE, r"^cents must be a positive integer, got -5$", {"kind": "rejected"}),
        DeadLetter(INVALID, r"^body is not valid json", {"kind": "invalid"}),
    ],
)


def build(app: cdk.App) -> None:
    consumer = ConsumerOptions(
        mode=Mode.TRANSACTION,
        partition_key_field="account",
        sort_key_field="payment",
        processor="ledger:apply_payment",
        code_directory=str(Path(__file__).resolve().parent / "src"),
    )
    build_test(app, "Transaction", "Payments", SCENARIO, consumer)


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    app.synth()
