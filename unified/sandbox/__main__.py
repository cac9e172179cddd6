"""`python -m unified.sandbox FILE.py --entry f ...`: run a file's function in the sandbox (see `cli`)."""

import sys

from unified.sandbox.cli import main

sys.exit(main())
