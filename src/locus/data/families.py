"""An LLM's family as its name says it, for LLMs without family metadata.

Used to hold out whole families in the onboarding benchmark and to compare clusters with
families in the atlas when the workspace has no `family` metadata.
"""

from __future__ import annotations

import re

__all__ = ["family_of"]

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
