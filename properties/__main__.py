"""``python -m properties`` runs the ``cowcheck`` command line."""

import sys

from properties.cli import main

sys.exit(main())
