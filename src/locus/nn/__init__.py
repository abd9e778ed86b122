"""The LOCUS networks: the LLM encoder, the correctness predictor and their training.

This is the only package (with the facade and `locus.artifact.torch_io`) that imports torch.

    config.py         NetworkConfig, TrainingConfig, build_networks (all an artifact load needs)
    encoder.py        LLMEncoder: evidence set -> LLM embedding
    predictor.py      CorrectnessPredictor: (LLM embedding, query vector) -> logit of P(correct)
    standardize.py    QueryStandardizer: query vectors centred and scaled by training statistics
    embedding.py      embed / embed_many / embed_indexed: numpy evidence -> LLM embeddings
    training.py       train -> TrainingResult
    seeding.py        reproducible(seed): seeded, deterministic torch (the same networks twice)
    losses.py         objectives beside the per-cell BCE (the listwise ranking loss)
    optim.py          AdamW without torch's compiler stack; the learning-rate schedule
    checks.py         training's input checks and validation after each evaluation
    factor_models.py  training of the MF and IRT baseline routers
"""

from locus.nn.config import NetworkConfig, TrainingConfig, build_networks
from locus.nn.embedding import embed, embed_indexed, embed_many, evidence_chunks
from locus.nn.encoder import LLMEncoder
from locus.nn.predictor import CorrectnessPredictor
from locus.nn.training import ProgressCallback, TrainingResult, train

__all__ = [
    "CorrectnessPredictor",
    "LLMEncoder",
    "NetworkConfig",
    "ProgressCallback",
    "TrainingConfig",
    "TrainingResult",
    "build_networks",
    "embed",
    "embed_indexed",
    "embed_many",
    "evidence_chunks",
    "train",
]
