"""Distributed fuzz campaigns on Spark, with the verdicts decided in pure Python.

- :mod:`spark_fuzz.executor`: ``run_seed(seed, config) -> Outcome`` (swarm walks
  or Hypothesis), tested without Spark;
- :mod:`spark_fuzz.ranges`: a seed range under a guard (forked child, hard
  time limit) -> ``RangeResult``;
- :mod:`spark_fuzz.driver`: the Spark job that spreads seed ranges and gathers
  results (imports pyspark); :mod:`spark_fuzz.session`: a quiet, quick session;
- :mod:`spark_fuzz.store`: Parquet tables and counterexamples, written atomically;
- :mod:`spark_fuzz.report`: rows -> report.md / report.html / plots, pure;

Run one with ``cowcheck campaign`` (:mod:`spark_fuzz.command`, registered with
the command line through an entry point; docs/campaigns.md).
"""

from spark_fuzz.executor import (
    CRASH,
    DIVERGENCE,
    INVARIANT,
    KINDS,
    PASS,
    TIMEOUT,
    CampaignConfig,
    Outcome,
    run_seed,
)
from spark_fuzz.ranges import RangeResult, run_range

__all__ = ["CampaignConfig", "Outcome", "RangeResult", "run_seed", "run_range", "KINDS", "PASS",
           "DIVERGENCE", "INVARIANT", "CRASH", "TIMEOUT"]
