"""``python -m sweeps.sandbox [KEY=VALUE ...]``: the sandbox's command line (sweeps/sandbox/trainer.py main)."""

import sys

from .trainer import main

sys.exit(main())
