"""Distributed fuzz campaigns on Spark, with the verdicts decided in pure Python.

- :mod:`cowcheck.spark_fuzz.executor`: ``run_seed(seed, config) -> Outcome`` (swarm walks
  or Hypothesis), tested without Spark;
- :mod:`cowcheck.spark_fuzz.ranges`: a seed range under a guard (forked child, hard
  time limit) -> ``RangeResult``;
- :mod:`cowcheck.spark_fuzz.driver`: the Spark job that spreads seed ranges and gathers
  results (imports pyspark); :mod:`cowcheck.spark_fuzz.session`: a quiet, quick session;
- :mod:`cowcheck.spark_fuzz.store`: Parquet tables and counterexamples, written atomically;
- :mod:`cowcheck.spark_fuzz.report`: rows -> report.md / report.html / plots, pure;

Run one with ``cowcheck campaign`` (:mod:`cowcheck.spark_fuzz.command`, registered with
the command line through an entry point; docs/campaigns.md).
"""

from cowcheck.spark_fuzz.executor import (
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
from cowcheck.spark_fuzz.ranges import RangeResult, run_range

__all__ = ["CampaignConfig", "Outcome", "RangeResult", "run_seed", "run_range", "KINDS", "PASS",
           "DIVERGENCE", "INVARIANT", "CRASH", "TIMEOUT"]
