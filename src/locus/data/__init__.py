"""Data layer: the score table, validation, importers and splits."""

from locus.data.batch import ImportBatch
from locus.data.splits import assign_splits, held_out_llms, split_of
from locus.data.table import ScoreTable

__all__ = ["ImportBatch", "ScoreTable", "assign_splits", "held_out_llms", "split_of"]
