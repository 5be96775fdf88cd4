"""Offline text embeddings: ``wordllama``'s 256-d ``l2_supercat`` model, shipped inside its wheel.

Used by thematic analysis (clustering, labels) and by the store's semantic search
(:mod:`overseer.graph_store`). Loaded with ``disable_download=True``, once per process;
vectors are L2-normalised, so a dot product is the cosine similarity. Deterministic for
the same input.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

DIMENSIONS = 256
"""Length of one embedding."""

_lock = threading.Lock()


@lru_cache(maxsize=1)
def _wordllama() -> Any:
    """The model shipped in the wheel (256-d ``l2_supercat``), never a download.

    Both wheels seen so far ship ``wordllama/weights/l2_supercat_256.safetensors`` and
    ``wordllama/tokenizers/l2_supercat_tokenizer_config.json`` but look for the tokenizer
    elsewhere: 0.4 under ``wordllama/tokenizer/`` (naming the package folder as the cache
    directory, read as ``<dir>/tokenizers`` and ``<dir>/weights``, finds both), 0.3 only in
    ``~/.cache``; there the same files are assembled the way ``WordLlama.load`` does.

    Raises:
        FileNotFoundError: the wheel's files are missing (nothing is downloaded).
    """
    import wordllama
    from wordllama import WordLlama

    package = Path(wordllama.__file__).parent
    try:
        return WordLlama.load(disable_download=True, cache_dir=package)
    except (FileNotFoundError, TypeError):
        from safetensors import safe_open
        from wordllama.config import Config
        from wordllama.inference import WordLlamaInference

        config = Config._configurations["l2_supercat"]
        tokenizer = WordLlama.load_tokenizer(
            package / "tokenizers" / "l2_supercat_tokenizer_config.json", config)
        with safe_open(str(package / "weights" / "l2_supercat_256.safetensors"), framework="np",
                       device="cpu") as weights:
            embedding = weights.get_tensor("embedding.weight")
        return WordLlamaInference(embedding, config, tokenizer, binary=False)


def embed(texts: Sequence[str]) -> np.ndarray[Any, Any]:
    """L2-normalised wordllama embeddings, shape ``(len(texts), 256)`` (float32).

    Raises:
        FileNotFoundError: the wheel's weights are missing (never downloads).
    """
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    with _lock:  # the tokenizer is not documented as thread-safe
        vectors = np.asarray(_wordllama().embed(list(texts)), dtype=np.float32)
    return normalise(vectors)


def normalise(vectors: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: np.ndarray[Any, Any] = vectors / np.where(norms == 0, 1.0, norms)
    return unit
