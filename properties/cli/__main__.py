"""``python -m properties.cli`` runs the ``cowcheck`` command line (as ``python -m properties`` does)."""

import sys

from properties.cli import main

sys.exit(main())
