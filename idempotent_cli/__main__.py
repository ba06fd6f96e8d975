import sys

from idempotent_cli.main import main

sys.exit(main())
