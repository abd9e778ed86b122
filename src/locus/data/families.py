"""An LLM's family: the one source every view reads (`family_from`): the LLM catalog's
`family` (`locus import llms`), else a guess from its name (`family_of`), said as a guess.

The guess also holds out whole families in the onboarding benchmark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CATALOG", "GUESSED", "Family", "family_from", "family_of"]

CATALOG = "catalog"  # the LLM catalog's family column
GUESSED = "name"  # guessed from the LLM's name

# Families whose name appears inside fine-tunes' names too ("dolphin-2.9-llama3-8b" is a Llama)
_KNOWN_FAMILIES = (
    "llama", "mixtral", "mistral", "qwen", "gemma", "gemini", "claude", "gpt", "deepseek",
    "yi", "phi", "command", "jamba", "grok", "glm", "internlm", "falcon", "olmo", "nemotron",
    "granite", "baichuan", "o1", "o3", "palm", "dbrx", "reka", "starcoder", "mathstral",
    "codestral",
)  # fmt: skip
# fine-tunes named on their own: mathstral and codestral are Mistral-7B / Mistral fine-tunes
_ALIASES = {"mathstral": "mistral", "codestral": "mistral"}


def family_of(llm_id: str) -> str:
    """The family an LLM's name says: a known family named anywhere in it (llama3 ->
    llama), else the first word of the name without its organisation.

    >>> family_of("cognitivecomputations/dolphin-2.9-llama3-8b"), family_of("Llama-2-7b-hf")
    ('llama', 'llama')
    >>> family_of("gemini-1.5-flash-002"), family_of("mathstral-7B"), family_of("acme/zeta-7b")
    ('gemini', 'mistral', 'zeta')
    """
    name = llm_id.lower().rsplit("/", 1)[-1]
    words = [w for w in re.split(r"[^a-z0-9]+", name) if w]
    for family in _KNOWN_FAMILIES:
        if any(re.fullmatch(rf"{family}[0-9.]*[a-z]?", w) for w in words):
            return _ALIASES.get(family, family)
    return re.sub(r"[0-9.]+$", "", words[0]) if words else name


@dataclass(frozen=True)
class Family:
    """An LLM's family and where it comes from: `CATALOG` or `GUESSED` (from its name)."""

    name: str
    source: str

    @property
    def guessed(self) -> bool:
        return self.source == GUESSED

    def shown(self) -> str:
        """The family as a view prints it: a guess says so ("llama (guessed)")."""
        return f"{self.name} (guessed)" if self.guessed else self.name


def family_from(llm_id: str, metadata: Mapping[str, Any] | None) -> Family:
    """`llm_id`'s family: its catalog `family` where the catalog gives one, else the guess
    from its name.

    >>> family_from("Llama-2-7b-hf", {"family": "Meta Llama"}).shown()
    'Meta Llama'
    >>> family_from("Llama-2-7b-hf", {}).shown()
    'llama (guessed)'
    """
    catalog = str((metadata or {}).get("family") or "").strip()
    return Family(catalog, CATALOG) if catalog else Family(family_of(llm_id), GUESSED)
