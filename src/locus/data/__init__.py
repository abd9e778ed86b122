"""Data layer: the score table, validation, importers and splits.

table.py            ScoreTable: (n_queries, n_llms) scores, NaN where not evaluated
batch.py            ImportBatch: the validated canonical form of one import
score_cells.py      score and number cells as people write them (87%, true/yes, blanks)
query_identity.py   query identity: a query is its normalised text (text_hash)
splits.py           hash splits and k-fold over queries, held-out LLMs
anchor_choice.py    the shared probe order each LLM is embedded from at fit time
files.py            opening input files with one-line errors
readers.py          reading tables and JSON documents, errors naming the file
file_stamps.py      a cheap fingerprint (path, size, mtime) of the files an import reads
fetch.py            downloading public evaluation results, verified by git blob SHA-1
families.py         an LLM's family from its name
llm_catalog.py      the LLM catalog file: metadata, prices, endpoints
graders.py          grading a raw answer: option letter, final number, exact match
importers/          one importer per evaluation-result format"""

from locus.data.batch import ImportBatch
from locus.data.splits import assign_splits, held_out_llms, split_of
from locus.data.table import ScoreTable

__all__ = ["ImportBatch", "ScoreTable", "assign_splits", "held_out_llms", "split_of"]
