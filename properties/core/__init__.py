"""The core layer: what every machine, command and driver shares.

Programs and their tables of operations (``program``), failures and the
suite's own errors (``failures``, ``errors``), time limits (``limits``), the
harness base (``harness``), machine kinds and the Hypothesis driver base
(``machine``), implementations (``impls``), the seeded-bug registry
(``mutants``), hunting (``hunt``), shrinking (``shrink``), replay
(``replay``), counterexample files (``counterexample``), regression tests
(``regression``), profiles, reports, atomic files (``files``), and the
CrossHair contract runner (``contracts``). Nothing here imports a machine
package, the Flink bridge, the command line or ``spark_fuzz``
(docs/ARCHITECTURE.md).
"""
