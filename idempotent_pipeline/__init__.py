"""AWS CDK constructs that turn at-least-once SNS -> SQS -> Lambda -> DynamoDB delivery into exactly-once
effects. The Lambda runs the bundled ``idempotent_runtime`` package.

The constructs are imported on first use, so tools that only need ``ConfigurationError`` or the contract's
enums do not pay for starting aws-cdk-lib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from idempotent_runtime.contract import ConfigurationError, KeySource, LogLevel, Mode, OnConflict

if TYPE_CHECKING:
    from idempotent_pipeline.consumer import IdempotentConsumer
    from idempotent_pipeline.dashboard import PipelineDashboard
    from idempotent_pipeline.messaging import Messaging
    from idempotent_pipeline.options import AlarmOptions, ConsumerOptions, MessagingOptions, TableOptions
    from idempotent_pipeline.pipeline import IdempotentPipeline
    from idempotent_pipeline.relay import OutboxRelay
    from idempotent_pipeline.table import IdempotencyTable

_EXPORTS = {
    "AlarmOptions": "idempotent_pipeline.options",
    "ConsumerOptions": "idempotent_pipeline.options",
    "IdempotencyTable": "idempotent_pipeline.table",
    "IdempotentConsumer": "idempotent_pipeline.consumer",
    "IdempotentPipeline": "idempotent_pipeline.pipeline",
    "Messaging": "idempotent_pipeline.messaging",
    "MessagingOptions": "idempotent_pipeline.options",
    "OutboxRelay": "idempotent_pipeline.relay",
    "PipelineDashboard": "idempotent_pipeline.dashboard",
    "TableOptions": "idempotent_pipeline.options",
}

__all__ = [
    "AlarmOptions",
    "ConfigurationError",
    "ConsumerOptions",
    "IdempotencyTable",
    "IdempotentConsumer",
    "IdempotentPipeline",
    "KeySource",
    "LogLevel",
    "Messaging",
    "MessagingOptions",
    "Mode",
    "OnConflict",
    "OutboxRelay",
    "PipelineDashboard",
    "TableOptions",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'idempotent_pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
