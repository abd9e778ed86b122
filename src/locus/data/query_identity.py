"""Query identity: a query is its text.

`normalise_text` fixes what should not make two texts differ (Unicode composition, line endings,
surrounding whitespace); `text_hash` is the sha256 of the normalised text, the key of the query
vector cache and of query identity across every source.
"""

from __future__ import annotations

import hashlib
import unicodedata

__all__ = ["normalise_text", "text_hash"]


def normalise_text(text: str) -> str:
    """NFC-compose, turn CRLF/CR into LF and strip surrounding whitespace.

    Inner whitespace is kept: in code and maths it carries meaning.
    """
    return unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n").strip()


def text_hash(text: str) -> str:
    """Hex sha256 of the normalised text (64 characters)."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()
