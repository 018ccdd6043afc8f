"""Reading the JSON the store holds, fast and whole.

orjson parses a 100k-fact chunk or bundle several times faster than ``json``, but
refuses integers past 64 bits, which JSON and canonical JSON allow (a suggestor may
promote ``2**70``); :func:`loads` falls back to ``json`` for those.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["loads"]


def loads(text: str | bytes) -> Any:
    """JSON text → value (orjson, or ``json`` for what orjson refuses but JSON
    allows). Raises ``ValueError`` (``json.JSONDecodeError``) for text that is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
