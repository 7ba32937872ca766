"""``python -m cowcheck.cli`` runs the ``cowcheck`` command line (as ``python -m cowcheck`` does)."""

import sys

from cowcheck.cli import main

sys.exit(main())
