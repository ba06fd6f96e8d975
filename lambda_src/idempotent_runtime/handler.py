"""Lambda entry point ``idempotent_runtime.handler.handler``: the consumer configured from the environment.

Built at import, so a bad environment or an unimportable PROCESSOR fails the cold start with a clear error.
"""

import os

from idempotent_runtime.config import Config
from idempotent_runtime.consumer import build_handler

handler = build_handler(Config.from_env(os.environ))
