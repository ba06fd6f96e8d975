"""AWS CDK constructs that turn at-least-once SNS FIFO -> SQS FIFO -> Lambda -> DynamoDB delivery into
exactly-once effects. The Lambda runs the bundled ``idempotent_runtime`` package.

The constructs are imported on first use, so ``idempotent_local`` and other submodules that do not
need aws-cdk-lib do not pay for starting it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from idempotent_pipeline._checks import ConfigurationError
    from idempotent_pipeline.consumer import IdempotentConsumer
    from idempotent_pipeline.messaging import FifoMessaging
    from idempotent_pipeline.pipeline import IdempotentPipeline
    from idempotent_pipeline.table import IdempotencyTable

_EXPORTS = {
    "ConfigurationError": "idempotent_pipeline._checks",
    "FifoMessaging": "idempotent_pipeline.messaging",
    "IdempotencyTable": "idempotent_pipeline.table",
    "IdempotentConsumer": "idempotent_pipeline.consumer",
    "IdempotentPipeline": "idempotent_pipeline.pipeline",
}

__all__ = [
    "ConfigurationError",
    "FifoMessaging",
    "IdempotencyTable",
    "IdempotentConsumer",
    "IdempotentPipeline",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'idempotent_pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
