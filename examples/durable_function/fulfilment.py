"""The reference app's demo durable function (``cdk synth -c durable=true``): one durable execution per
order, started by the consumer's dispatcher (``examples/durable/order_dispatch.py``).

It reads Lambda's durable invocation input itself, so it needs no dependency: the order is the input payload
of the EXECUTION operation; it returns the durable execution output (``Status`` and ``Result``). A real
workflow builds on the durable execution SDK (``aws-durable-execution-sdk-python``: steps, waits,
callbacks), which does both for it.
"""

from __future__ import annotations

import json


def handler(event, context):
    """Fulfil one order: log it, and return what was fulfilled as the execution's result."""
    execution = event["InitialExecutionState"]["Operations"][0]
    order = json.loads(execution["ExecutionDetails"]["InputPayload"])
    print(
        json.dumps({"message": "fulfilling order", "execution": event["DurableExecutionArn"], "order": order})
    )
    return {
        "Status": "SUCCEEDED",
        "Result": json.dumps({"fulfilled": order.get("y"), "customer": order.get("x")}),
    }
