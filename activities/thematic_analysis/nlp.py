"""Offline NLP of the rules strategy: embeddings, key phrases, class-based TF-IDF, sentiment.

- **Embeddings**: :mod:`overseer.embeddings` (``wordllama``'s 256-d weights shipped in the
  wheel, L2-normalised so a dot product is the cosine similarity).
- **Key phrases**: scikit-learn TF-IDF over the window's sentences (1-2 word phrases,
  English stop words removed).
- **Theme names**: class-based TF-IDF (BERTopic's c-TF-IDF): a theme's sentences form one
  document; a term scores ``tf(term, theme) * log(1 + mean words per theme / freq(term))``.
- **Sentiment**: VADER compound scores, averaged.

Everything here is deterministic for the same input.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from activities.thematic_analysis.dataset import Corpus
from overseer.embeddings import embed, normalise

__all__ = ["embed", "normalise"]  # the embeddings live in overseer.embeddings (the store uses them)

VADER_POSITIVE = 0.05
VADER_NEGATIVE = -0.05
EXTRA_STOP_WORDS = frozenset({
    "just", "like", "really", "did", "does", "don", "got", "ve", "ll", "im", "didn", "doesn",
    "isn", "wasn", "won", "quot", "039", "amp", "br", "href", "http", "www", "com", "taking",
    "took", "take", "day", "days", "started", "start", "going", "know", "think", "time",
    "years", "year", "months", "month", "weeks", "week", "get", "getting", "went", "make",
    "made", "use", "used", "using", "bit", "lot", "way", "thing", "things", "say", "said",
    "tried", "try", "want", "feel", "felt", "good", "great", "bad", "better", "best",
    "amazon", "product", "order", "ordered", "buy", "bought", "ago", "having", "experienced",
    "experiencing", "noticed", "put", "ive", "far", "little", "lots", "pretty", "definitely",
    "actually",
})
"""Words that carry no theme on their own (fillers, time words, HTML entity residue)."""

KEPT_WORDS = frozenset({"side", "bill", "call", "fill", "fire", "system", "thick", "thin", "full",
                        "empty", "back", "cry", "sincere"})
"""Words in scikit-learn's stop list that carry themes in reviews (``side effects``, ``back pain``)."""

def stop_words() -> list[str]:
    """scikit-learn's English stop words less :data:`KEPT_WORDS`, plus :data:`EXTRA_STOP_WORDS`."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return sorted((ENGLISH_STOP_WORDS - KEPT_WORDS) | EXTRA_STOP_WORDS)


def phrase_table(corpus: Corpus) -> dict[str, Any]:
    """TF-IDF key phrases of the corpus (memoised on it).

    Returns:
        ``{"terms": [phrase], "mass": array (sum of TF-IDF per phrase), "matrix": CSC
        sentences × phrases (binary presence), "embeddings": array per phrase}``; empty
        arrays when the window has too few sentences.
    """
    table: dict[str, Any] = corpus.memo("phrases", lambda: _phrase_table(corpus))
    return table


def _phrase_table(corpus: Corpus) -> dict[str, Any]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = corpus.sentences()
    table: dict[str, Any] = {"terms": [], "mass": np.zeros(0), "matrix": None,
                             "embeddings": np.zeros((0, 256), dtype=np.float32)}
    if len(texts) >= 2:
        vectorizer = TfidfVectorizer(
            ngram_range=(1, 2), stop_words=stop_words(), min_df=2, max_df=0.4,
            sublinear_tf=True, token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]{2,}\b",
            max_features=4000, lowercase=True,
        )
        try:
            weights = vectorizer.fit_transform(texts)
        except ValueError:  # every word is a stop word, or none occurs twice
            weights = None
        if weights is not None:
            terms = [str(t) for t in vectorizer.get_feature_names_out()]
            presence = weights.copy().tocsc()
            presence.data[:] = 1.0
            table = {"terms": terms, "mass": np.asarray(weights.sum(axis=0)).ravel(),
                     "matrix": presence, "embeddings": embed(terms)}
    return table


def sentences_with(corpus: Corpus, terms: Sequence[str]) -> list[str]:
    """Quote ids (corpus order) of sentences containing any of ``terms`` (TF-IDF tokenisation)."""
    table = phrase_table(corpus)
    index = corpus.memo("term_index", lambda: {t: i for i, t in enumerate(table["terms"])})
    rows: set[int] = set()
    matrix = table["matrix"]
    for term in terms:
        column = index.get(term)
        if column is not None and matrix is not None:
            start, end = matrix.indptr[column], matrix.indptr[column + 1]
            rows.update(int(r) for r in matrix.indices[start:end])
    return [corpus.quote_ids[r] for r in sorted(rows)]


def sentence_embeddings(corpus: Corpus) -> np.ndarray[Any, Any]:
    """Embeddings of every corpus sentence, in corpus order (memoised on the corpus)."""
    matrix: np.ndarray[Any, Any] = corpus.memo("sentence_embeddings", lambda: embed(corpus.sentences()))
    return matrix


def vectors_of(corpus: Corpus, ids: Sequence[str]) -> np.ndarray[Any, Any]:
    """Sentence embeddings of quote ``ids`` (rows in the order given)."""
    matrix = sentence_embeddings(corpus)
    row_of = corpus.order()
    return matrix[[row_of[q] for q in ids]] if ids else np.zeros((0, matrix.shape[1]))


def class_terms(documents: Sequence[str], *, top_n: int = 3) -> list[list[str]]:
    """Top ``top_n`` class-based TF-IDF terms of each document (one document per theme)."""
    from sklearn.feature_extraction.text import CountVectorizer

    if not documents:
        return []
    vectorizer = CountVectorizer(ngram_range=(1, 2), stop_words=stop_words(),
                                 token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]{2,}\b")
    try:
        counts = vectorizer.fit_transform(documents).toarray().astype(float)
    except ValueError:
        return [[] for _ in documents]
    terms = vectorizer.get_feature_names_out()
    tf = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    avg_words = counts.sum() / len(documents)
    idf = np.log(1.0 + avg_words / np.maximum(counts.sum(axis=0), 1.0))
    scores = tf * idf
    out: list[list[str]] = []
    for row in scores:
        order = sorted(range(len(terms)), key=lambda i: (-row[i], str(terms[i])))
        chosen: list[str] = []
        for i in order[: top_n * 4]:
            if row[i] <= 0:
                break
            term = str(terms[i])
            words = set(term.split())
            if any(words <= set(c.split()) for c in chosen):
                continue  # "side" next to "side effects" says nothing new
            inside = [c for c in chosen if set(c.split()) < words]
            if inside:  # the phrase replaces the words it contains, where the first stood
                at = chosen.index(inside[0])
                chosen = [c for c in chosen if c not in inside]
                chosen.insert(at, term)
            elif len(chosen) < top_n:
                chosen.append(term)
        out.append(chosen[:top_n])
    return out


@lru_cache(maxsize=1)
def _vader() -> Any:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def sentiment(texts: Sequence[str]) -> dict[str, Any]:
    """VADER over ``texts``: ``{label, compound, positive, negative, neutral}`` (shares 0..1)."""
    if not texts:
        return {"label": "neutral", "compound": 0.0, "positive": 0.0, "negative": 0.0,
                "neutral": 0.0, "strategy": "rules"}
    analyzer = _vader()
    scores = [analyzer.polarity_scores(t)["compound"] for t in texts]
    mean = float(np.mean(scores))
    label = "positive" if mean >= VADER_POSITIVE else "negative" if mean <= VADER_NEGATIVE \
        else "mixed" if any(s >= VADER_POSITIVE for s in scores) and any(
            s <= VADER_NEGATIVE for s in scores) else "neutral"
    n = len(scores)
    return {
        "label": label, "compound": round(mean, 4),
        "positive": round(sum(s >= VADER_POSITIVE for s in scores) / n, 4),
        "negative": round(sum(s <= VADER_NEGATIVE for s in scores) / n, 4),
        "neutral": round(sum(VADER_NEGATIVE < s < VADER_POSITIVE for s in scores) / n, 4),
        "strategy": "rules",
    }
