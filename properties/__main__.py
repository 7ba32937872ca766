"""``python -m cowcheck`` runs the ``cowcheck`` command line."""

import sys

from cowcheck.cli import main

sys.exit(main())
