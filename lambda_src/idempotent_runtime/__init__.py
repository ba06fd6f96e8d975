"""Consumer runtime: exactly-once effects from at-least-once SQS delivery, with DynamoDB.

Lambda handler ``idempotent_runtime.handler.handler``; ``idempotent_runtime.flow.build_handler`` builds it
from an explicit configuration. Processors raise :class:`PermanentError` (never retried) or
:class:`TransientError` (retried); guarded mode's ``message.lease.extend()`` raises :class:`LeaseLost`.
"""

from idempotent_runtime.errors import LeaseLost, PermanentError, TransientError

# The version of the distribution, said once: pyproject.toml reads it from here (the Lambda asset has no
# package metadata to ask) and the runtime's User-Agent carries it.
__version__ = "0.5.0"

__all__ = ["LeaseLost", "PermanentError", "TransientError", "__version__"]
