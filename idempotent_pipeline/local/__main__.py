import sys

from idempotent_pipeline.local.cli import main

sys.exit(main())
