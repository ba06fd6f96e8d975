"""python -m idempotent_cli.dlq COMMAND ...: the same as ``idempotent-pipeline dlq COMMAND ...``."""

import sys

from idempotent_cli.dlq import main

sys.exit(main())
