"""Lambda entry point ``idempotent_runtime.handler.handler``: the consumer configured from the environment.

Built at import: a configuration that cannot work fails the cold start, after one JSON ERROR line saying
why, so the batch comes back (nothing is quarantined because of the deployment).
"""

import os

from idempotent_runtime.config import Config
from idempotent_runtime.contract import ConfigurationError
from idempotent_runtime.flow import build_handler
from idempotent_runtime.observability import cold_start_error

try:
    handler = build_handler(Config.from_env(os.environ))
except ConfigurationError as refused:
    cold_start_error(
        "configuration refused at cold start: batches are retried until it is fixed", error=str(refused)
    )
    raise
