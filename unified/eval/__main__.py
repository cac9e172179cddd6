"""`python -m unified.eval ...`: greedy pass@1 of a model or a samples file on hidden tests (see `cli`)."""

import sys

from unified.eval.cli import main

sys.exit(main())
