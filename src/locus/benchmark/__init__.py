"""Benchmark protocols: every method fitted on the same evidence, scored on the same queries.

    methods.py   the methods (LOCUS and the baseline routers), Fold, fit_method with a cache
    anchors.py   the anchors suite: seen LLMs, unseen queries, A scores of evidence per LLM
    efficiency.py  the evidence each method needs to match LOCUS (read off an anchors result)
    onboarding.py  whole families held out of training, onboarded from k of their scores
    newcomers.py   one LLM at a time left out of the fit, onboarded from k scores as
                 `locus onboard` does (the pool's hit@1 with it, its P(correct), MF / IRT / kNN)
    cost.py      accuracy against dollars, k-fold over queries: frontiers, AIQ, cost shares,
                 budgets re-checked on test
    stream.py    a production replay, one outcome seen per query: locus against Thompson,
                 epsilon-greedy and LinUCB; a swapped endpoint; off-policy estimates
                 (stream_bandits.py: the bandits; stream_report.py: its summary,
                 table and regret curves)
    _stats.py    mean ± sd over seeds, log-loss over observed cells
    report.py    results as JSON (commit, machine), PNG plots, Markdown tables

`locus benchmark SUITE` runs a suite on a workspace; benchmarks/README.md holds the tables.
"""

from locus.benchmark.anchors import DEFAULT_EVIDENCE, run_anchors
from locus.benchmark.efficiency import efficiency_from_anchors, efficiency_table
from locus.benchmark.methods import METHODS, Fold, fit_method
from locus.benchmark.report import anchors_table, plot_anchors, write_suite_json

__all__ = [
    "DEFAULT_EVIDENCE",
    "METHODS",
    "Fold",
    "anchors_table",
    "efficiency_from_anchors",
    "efficiency_table",
    "fit_method",
    "plot_anchors",
    "run_anchors",
    "write_suite_json",
]
