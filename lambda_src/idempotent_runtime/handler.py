"""Lambda entry point ``idempotent_runtime.handler.handler``: the consumer configured from the environment.

Built at import: a configuration that cannot work fails the cold start, after one JSON ERROR line saying
why, so the batch comes back (nothing is quarantined because of the deployment).
"""

import os

from idempotent_runtime.config import Config
from idempotent_runtime.contract import ConfigurationError, LogLevel
from idempotent_runtime.flow import build_handler
from idempotent_runtime.observability import Log

try:
    handler = build_handler(Config.from_env(os.environ))
except ConfigurationError as refused:
    log = Log(LogLevel.ERROR, os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or "local")
    log.emit(
        LogLevel.ERROR,
        "configuration refused at cold start: batches are retried until it is fixed",
        error=str(refused),
    )
    log.flush()
    raise
