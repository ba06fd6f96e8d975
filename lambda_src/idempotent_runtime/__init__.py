"""Consumer runtime: exactly-once effects from at-least-once SQS delivery, with DynamoDB.

The Lambda entry point is ``idempotent_runtime.handler.handler``;
``idempotent_runtime.consumer.build_handler`` builds the same handler from an explicit configuration (tests,
local runner). Processing functions raise :class:`PermanentError` for input that can never succeed and
:class:`TransientError` to be retried later; in guarded mode ``message.lease.extend()`` raises
:class:`LeaseLost` when another invocation took the key over.
"""

from idempotent_runtime.errors import LeaseLost, PermanentError, TransientError

__all__ = ["LeaseLost", "PermanentError", "TransientError"]
