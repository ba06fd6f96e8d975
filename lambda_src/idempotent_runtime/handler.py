"""Lambda entry point ``idempotent_runtime.handler.handler``: the consumer configured from the environment.

Built at import: a configuration that cannot work fails the cold start, after one JSON ERROR line saying
why, so the batch comes back (nothing is quarantined because of the deployment).
"""

import os

from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from idempotent_runtime.observability import configured

handler = configured(
    lambda: build_handler(Config.from_env(os.environ)), "configuration refused at cold start"
)
