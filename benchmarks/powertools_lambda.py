"""Lambda entry point of the Powertools peer, built at import like ours (`idempotent_runtime.handler`).

Only the cold-init benchmark imports this module, in a fresh interpreter, with TABLE_NAME set.
"""

import os

from benchmarks.powertools_peer import build_powertools_handler

handler = build_powertools_handler(os.environ["TABLE_NAME"])
