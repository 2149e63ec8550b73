"""`python -m rollout_cards` runs the `rcard` command line."""

import sys

from .cli import main

sys.exit(main())
