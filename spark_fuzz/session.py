"""A Spark context for campaigns: quiet and quick to start on a laptop, unchanged on a cluster.

Campaigns use the RDD API only (parallelize, foreach, an accumulator), so
they need a ``SparkContext``, not a ``SparkSession``: the SQL layer would add
seconds of start-up and nothing the campaign uses. Parquet is
written by the driver with pyarrow (cowcheck.spark_fuzz.store), so ``DIR`` is always
on the driver's file system.

What :func:`start` sets, before the JVM starts (it cannot change afterwards):

- logging: ``spark_fuzz/log4j2.properties`` (WARN, one line per message) via
  ``-Dlog4j2.configurationFile``, and ``setLogLevel("WARN")``; the JVM's
  stderr is passed on line by line without the notice Java prints for the
  incubator module Spark 4 adds (``WARNING: Using incubator modules:
  jdk.incubator.vector``), which is not for the user;
- no web UI and no console progress bars (the campaign draws its own line);
- the Python workers run with ``PYTHONSAFEPATH=1`` (``spark.executorEnv``): Spark
  starts them as ``python -m pyspark.daemon`` in its working directory, which
  ``-m`` puts first on ``sys.path``, so an ``attrs.py`` lying in the campaign's
  directory would be imported by every worker (Python 3.11 and later honour it;
  under spark-submit it is set unless the submitter set it);
- for ``local[...]`` masters only: ``SPARK_LOCAL_IP=127.0.0.1`` (no network
  lookups, no "resolves to a loopback address" warning), the workers run this
  interpreter (``PYSPARK_PYTHON``), and the driver JVM runs with the C1 JIT and
  the serial collector, which start faster; the driver JVM only schedules
  tasks, the work is in the Python workers.

Under ``spark-submit`` none of this is applied: its ``--master`` and
``--conf`` settings stand as given (docs/campaigns.md lists the ones to pass);
only the log level is set to WARN once the context runs.

>>> conf = campaign_conf("local[2]")
>>> conf["spark.ui.enabled"], conf["spark.master"]
('false', 'local[2]')
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

from cowcheck.core.processes import SAFE_PATH_ENV

__all__ = ["LOG4J2_PROPERTIES", "DEFAULT_MASTER", "campaign_conf", "start", "started_under_spark_submit"]

LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
DEFAULT_MASTER = "local[*]"
_LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Lines of the JVM's stderr that are not passed on.
JVM_NOTICES = (b"WARNING: Using incubator modules",)


def _pass_on_stderr(stream) -> None:
    """Copy the JVM's stderr to ours (file descriptor 2, whatever ``sys.stderr``
    is meanwhile), dropping :data:`JVM_NOTICES`; keeps reading to the end so
    the JVM never blocks on a full pipe."""
    for line in iter(stream.readline, b""):
        if not line.startswith(JVM_NOTICES):
            try:
                os.write(2, line)
            except OSError:
                pass


def started_under_spark_submit() -> bool:
    """True when spark-submit (or the pyspark shell) launched this Python process."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def campaign_conf(master: str | None, app_name: str = "cowcheck campaign") -> dict[str, str]:
    """The Spark settings :func:`start` applies for ``master`` (None: spark-submit's)."""
    local = master is not None and master.startswith("local")
    java_options = f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}"
    if local:
        java_options += " " + _LOCAL_JVM_OPTIONS
    conf = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": java_options,
        "spark.python.worker.reuse": "true",
        **{f"spark.executorEnv.{name}": value for name, value in SAFE_PATH_ENV.items()},
    }
    if master is not None:
        conf["spark.master"] = master
    return conf


def start(master: str | None = None, app_name: str = "cowcheck campaign"):
    """The active SparkContext, or a new quiet one for ``master`` (default
    ``local[*]``; under spark-submit, the master it was given). Returns
    ``(context, seconds it took)``."""
    from pyspark import SparkConf, SparkContext

    began = time.perf_counter()
    active = SparkContext._active_spark_context
    if active is not None:
        return active, 0.0
    # pyspark imports its test helpers on the first JVM call, which warn about pandas 3.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    conf = SparkConf()
    if not started_under_spark_submit():  # under spark-submit its settings stand as given
        master = master or DEFAULT_MASTER
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        for key, value in campaign_conf(master, app_name).items():
            conf.set(key, value)
        from pyspark.java_gateway import launch_gateway

        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        threading.Thread(target=_pass_on_stderr, args=(gateway.proc.stderr,), name="cowcheck-jvm-stderr",
                         daemon=True).start()
        context = SparkContext(conf=conf, gateway=gateway)
    else:
        for name, value in SAFE_PATH_ENV.items():
            conf.setIfMissing(f"spark.executorEnv.{name}", value)
        context = SparkContext.getOrCreate(conf)
    context.setLogLevel("WARN")
    return context, time.perf_counter() - began
