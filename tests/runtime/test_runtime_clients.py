"""The boto3 clients the runtime creates itself: one per service and execution environment, on first use."""

from __future__ import annotations

import threading
from collections import Counter

import idempotent_runtime.clients
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from runtime_helpers import event, failures, record, scan


def test_one_dynamodb_client_is_created_and_shared_by_every_group(monkeypatch, table, dynamodb):
    real = idempotent_runtime.clients.create_client
    created: Counter[str] = Counter()
    lock = threading.Lock()

    def counting(service, **kwargs):
        with lock:
            created[service] += 1
        return real(service, **kwargs)

    monkeypatch.setattr(idempotent_runtime.clients, "create_client", counting)
    handler = build_handler(Config(table_name=table))
    records = [record({"x": f"o{i}", "y": "1"}, group=f"g{i}") for i in range(10)]
    assert failures(handler(event(*records), None)) == []
    assert sorted(i["pk"]["S"] for i in scan(dynamodb)) == sorted(f"o{i}" for i in range(10))
    assert created["dynamodb"] == 1
    assert created["sqs"] == 0  # nothing was quarantined
