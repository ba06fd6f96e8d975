import sys

from idempotent_local.cli import main

sys.exit(main())
