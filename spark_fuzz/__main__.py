"""``python -m spark_fuzz ARGS`` is ``cowcheck campaign ARGS``; give this file's path
to ``spark-submit`` to run a campaign on a cluster (docs/campaigns.md)."""

import sys

from cowcheck.cli import main
from cowcheck.spark_fuzz import command

if __name__ == "__main__":
    sys.exit(main(["campaign", *sys.argv[1:]], commands=(command,)))
