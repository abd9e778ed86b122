"""The LOCUS networks: the LLM encoder, the correctness predictor and their training.

This is the only package (with the facade) that imports torch.

    encoder.py        LLMEncoder: evidence set -> LLM embedding
    predictor.py      CorrectnessPredictor: (LLM embedding, query vector) -> logit of P(correct)
    standardize.py    QueryStandardizer: query vectors centred and scaled by training statistics
    embedding.py      embed / embed_many / embed_indexed: numpy evidence -> LLM embeddings
    training.py       TrainingConfig, train -> TrainingResult
    serialization.py  weights <-> safetensors
"""

from locus.nn.embedding import embed, embed_indexed, embed_many
from locus.nn.encoder import LLMEncoder
from locus.nn.predictor import CorrectnessPredictor
from locus.nn.serialization import (
    load_state,
    load_state_from_safetensors,
    save_state,
    state_to_safetensors,
)
from locus.nn.training import (
    ProgressCallback,
    TrainingConfig,
    TrainingResult,
    build_networks,
    train,
)

__all__ = [
    "CorrectnessPredictor",
    "LLMEncoder",
    "ProgressCallback",
    "TrainingConfig",
    "TrainingResult",
    "build_networks",
    "embed",
    "embed_indexed",
    "embed_many",
    "load_state",
    "load_state_from_safetensors",
    "save_state",
    "state_to_safetensors",
    "train",
]
