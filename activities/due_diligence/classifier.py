"""A sentence classifier that checks and completes the clause patterns.

The trigger patterns of :mod:`.clause_types` are precise on phrasings they know and blind
to the rest; five rule passes fixed seen phrasings without generalising to new vendors
(docs/due-diligence.md, "Accuracy"). This module adds a second, independent judge: one
logistic regression per clause type over TF-IDF word 1–2-grams and character 3–5-grams of
a sentence, its list lead-in and its section heading (scikit-learn), trained on every sentence of the labelled
agreements in ``tests/data/due_diligence/`` (a sentence is positive for a type when it
overlaps one of the type's anchors). The trained weights ship with the package as
``clause_classifier.npz`` (plain arrays, no pickle); ``python -m
activities.due_diligence.classifier`` retrains them from the labels.

How the two combine (:func:`select`, after near-duplicate merging, per clause type):

* the patterns' best candidate stays the finding when the classifier scores it ≥
  :data:`KEEP_SCORE`; otherwise the best-scored candidate that reaches it moves ahead;
* when every pattern candidate scores below it and some other sentence of the text
  scores ≥ :data:`PROPOSE_SCORE`, that sentence becomes the finding and the pattern
  candidates are kept behind it as supporting quotes;
* a type with no pattern candidate gets the text's best sentence when it scores ≥
  :data:`PROPOSE_SCORE`, else stays ``not_found``.

A model's verified quotes (``strategy: llm:…``) are left first. Every proposal is a whole
sentence of the text, so its quote is the verbatim slice ``text[start:end]``: nothing is
re-typed. The thresholds were chosen on the pooled held-out sets 3–5, each scored with
the rules of its time and a classifier trained without it (docs/due-diligence.md, pass 6).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from activities.due_diligence.clause_types import CLAUSE_TYPE_NAMES
from activities.due_diligence.text import Sentence, sentences, words

MODEL_PATH = Path(__file__).with_name("clause_classifier.npz")
"""The shipped weights (vocabulary, idf, coefficients, intercepts, metadata)."""

KEEP_SCORE = 0.2
"""A pattern candidate scored below this (0..1) by the classifier is doubted."""

PROPOSE_SCORE = 0.5
"""The classifier alone proposes a sentence scored at least this (0..1)."""

MIN_WORDS = 6
"""Sentences shorter than this are neither trained on nor proposed (as the patterns)."""

C = 16.0
"""Inverse L2 regularisation strength of each logistic regression."""

MIN_DF = 3
"""A 1- or 2-gram must occur in at least this many training sentences."""

_LEAD_WORDS = 8
_LABELS = Path(__file__).resolve().parents[2] / "tests" / "data" / "due_diligence"
TRAINING_LABEL_FILES = ("labels.yaml", "labels_holdout.yaml", "labels_holdout2.yaml",
                        "labels_holdout3.yaml", "labels_holdout4.yaml", "labels_holdout5.yaml",
                        "labels_holdout6.yaml")
"""The label files the shipped model is trained on (later held-out sets stay unseen)."""


def scored_sentences(text: str) -> list[Sentence]:
    """The sentences the classifier scores: not headings, at least :data:`MIN_WORDS` words."""
    return [s for s in sentences(text)
            if not s.is_heading and len(words(text[s.start:s.end])) >= MIN_WORDS]


def sentence_document(text: str, start: int, end: int, context_start: int, heading: str) -> str:
    """The classifier's input for one sentence: its words, lead-in and heading, tagged.

    ``"<sentence> || lead_<w> … head_<w> …"``: the last eight words of the list lead-in
    (``text[context_start:start]``, "You may not:") and the section heading's words carry
    a prefix so they count apart from the sentence's own words.
    """
    lead = text[context_start:start] if context_start < start else ""
    lead_words = lead[-200:].split()[-_LEAD_WORDS:]
    return (text[start:end] + " || " + " ".join("lead_" + w for w in lead_words) + " "
            + " ".join("head_" + w for w in heading.split()))


VIEWS = (("word", (1, 2)), ("char_wb", (3, 5)))
"""The TF-IDF views concatenated as features: word 1–2-grams and character 3–5-grams
within words (the latter carries inflections and compounds — "sub-license", "renewals" —
that whole words miss; chosen by leave-one-set-out cross-validation, docs/due-diligence.md, pass 6)."""


@dataclass
class ClauseClassifier:
    """One logistic regression per clause type over concatenated TF-IDF views (:data:`VIEWS`).

    Attributes:
        vocabularies: per view, its terms in column order.
        idfs: per view, inverse document frequency per column.
        coef: weights, shape ``(len(CLAUSE_TYPE_NAMES), total columns)``.
        intercept: shape ``(len(CLAUSE_TYPE_NAMES),)``.
        meta: how it was trained (label files and their SHA-256, sentence counts,
            hyper-parameters, scikit-learn version).
    """

    vocabularies: list[list[str]]
    idfs: list[np.ndarray[Any, Any]]
    coef: np.ndarray[Any, Any]
    intercept: np.ndarray[Any, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def _vectorizers(self) -> list[Any]:
        vecs = self.__dict__.get("_vecs")
        if vecs is None:
            from sklearn.feature_extraction.text import TfidfVectorizer  # first use only

            vecs = []
            for (analyzer, ngrams), vocab, idf in zip(VIEWS, self.vocabularies, self.idfs, strict=True):
                vec = TfidfVectorizer(analyzer=analyzer, ngram_range=ngrams, sublinear_tf=True,
                                      vocabulary={t: i for i, t in enumerate(vocab)})
                vec.idf_ = idf
                vecs.append(vec)
            self.__dict__["_vecs"] = vecs
        return vecs

    def scores(self, documents: Sequence[str]) -> np.ndarray[Any, Any]:
        """Probability per document and clause type, shape ``(len(documents), 10)``, 0..1."""
        if not documents:
            return np.zeros((0, len(CLAUSE_TYPE_NAMES)))
        from scipy.sparse import hstack

        x = hstack([v.transform(list(documents)) for v in self._vectorizers]).tocsr()
        logits = np.asarray(x @ self.coef.T) + self.intercept
        probabilities: np.ndarray[Any, Any] = 1.0 / (1.0 + np.exp(-logits))
        return probabilities

    def save(self, path: Path = MODEL_PATH) -> None:
        """Writes the weights as a compressed ``.npz`` of plain arrays (no pickle; float16 weights)."""
        # ``Any`` values: numpy 2's stub types ``**kwds`` next to ``allow_pickle: bool``.
        arrays: dict[str, Any] = {"coef": self.coef.astype(np.float16), "intercept": self.intercept,
                                  "meta": np.array(json.dumps(self.meta, sort_keys=True))}
        for i, (vocab, idf) in enumerate(zip(self.vocabularies, self.idfs, strict=True)):
            arrays[f"vocabulary_{i}"] = np.array(vocab)
            arrays[f"idf_{i}"] = idf.astype(np.float32)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> ClauseClassifier:
        """Reads weights written by :meth:`save`.

        Raises:
            FileNotFoundError: no model at ``path``.
        """
        with np.load(path, allow_pickle=False) as z:
            return cls(vocabularies=[[str(t) for t in z[f"vocabulary_{i}"]] for i in range(len(VIEWS))],
                       idfs=[z[f"idf_{i}"].astype(np.float64) for i in range(len(VIEWS))],
                       coef=z["coef"].astype(np.float64), intercept=z["intercept"],
                       meta=json.loads(str(z["meta"])))


@lru_cache(maxsize=1)
def shipped_model() -> ClauseClassifier:
    """The package's trained classifier, loaded once per process."""
    return ClauseClassifier.load(MODEL_PATH)


# --- combining with the patterns --------------------------------------------------------------


def select(text: str, merged: Mapping[str, Sequence[Mapping[str, Any]]],
           model: ClauseClassifier | None = None,
           types: Sequence[str] = CLAUSE_TYPE_NAMES) -> dict[str, list[dict[str, Any]]]:
    """Re-orders and completes the merged candidates with the classifier (see the module doc).

    Args:
        text: the agreement's text (offsets refer to it).
        merged: :func:`.clauses.deduplicate`'s output, best first per type.
        model: defaults to :func:`shipped_model`.
        types: clause types to decide.

    Returns:
        ``{clause_type: [candidate, …]}`` best first. Every candidate gains
        ``classifier_score`` (0..1) and ``method``: ``"patterns"`` (a pattern matched and
        the classifier agrees), ``"patterns, doubted"`` (kept although it scored below
        :data:`KEEP_SCORE`, no better sentence) or ``"classifier"`` (proposed by the
        classifier alone; ``quote == text[start:end]``).
    """
    model = model or shipped_model()
    sents = scored_sentences(text)
    docs = [sentence_document(text, s.start, s.end, s.context_start, s.heading) for s in sents]
    cand_docs: list[str] = []
    owners: list[tuple[str, int]] = []
    for name in types:
        for i, cand in enumerate(merged.get(name, [])):
            start, end = int(cand["start"]), int(cand["end"])
            context_start = min(start, int(cand.get("context_start", start)))
            cand_docs.append(sentence_document(text, start, end, context_start,
                                               str(cand.get("heading") or "")))
            owners.append((name, i))
    all_scores = model.scores(docs + cand_docs)
    sent_scores, cand_scores = all_scores[:len(docs)], all_scores[len(docs):]
    by_owner = {owner: cand_scores[k] for k, owner in enumerate(owners)}
    out: dict[str, list[dict[str, Any]]] = {}
    for name in types:
        j = CLAUSE_TYPE_NAMES.index(name)
        cands = [{**c, "classifier_score": round(float(by_owner[(name, i)][j]), 4)}
                 for i, c in enumerate(merged.get(name, []))]
        top = int(np.argmax(sent_scores[:, j])) if len(sents) else -1
        proposal = None
        if top >= 0 and sent_scores[top, j] >= PROPOSE_SCORE:
            proposal = _proposal(text, name, sents[top], float(sent_scores[top, j]))
        if any(str(c.get("strategy") or "rules") != "rules" for c in cands):
            out[name] = [{**c, "method": c.get("method", "patterns")} for c in cands]
        elif cands:
            agreed = [c for c in cands if c["classifier_score"] >= KEEP_SCORE]
            if agreed:
                # The patterns' best stays when the classifier agrees with it; else the
                # best-scored candidate it agrees with moves ahead.
                best = (cands[0] if any(c is cands[0] for c in agreed)
                        else max(agreed, key=lambda c: c["classifier_score"]))
                rest = [c for c in cands if c is not best]
                out[name] = [{**best, "method": "patterns"}, *({**c, "method": "patterns"} for c in rest)]
            elif proposal is not None:
                out[name] = [proposal, *({**c, "method": "patterns, doubted"} for c in cands)]
            else:
                out[name] = [{**c, "method": "patterns, doubted"} for c in cands]
        else:
            out[name] = [proposal] if proposal is not None else []
    return out


def _proposal(text: str, name: str, sent: Sentence, score: float) -> dict[str, Any]:
    quote = text[sent.start:sent.end]
    return {"clause_type": name, "start": sent.start, "end": sent.end, "quote": quote,
            "context_start": sent.context_start, "pattern_rank": None, "strength": 1.0,
            "heading": sent.heading, "heading_match": False, "bm25": 0.0, "attempt": 1,
            "merged": 1, "classifier_score": round(score, 4), "method": "classifier"}


# --- training ---------------------------------------------------------------------------------


def anchor_spans(text: str, anchors: Sequence[str]) -> list[tuple[int, int]]:
    """Each labelled anchor's occurrences widened to their sentences (whitespace-insensitive).

    Returns:
        ``[(start, end)]`` offsets into ``text``: every sentence an anchor overlaps (from
        its lead-in when a long sentence was split) and the anchor's own span.

    Raises:
        ValueError: an anchor that does not occur in the text (a labelling error).
    """
    sents = sentences(text)
    spans: list[tuple[int, int]] = []
    for anchor in anchors:
        pattern = r"\s+".join(re.escape(w) for w in anchor.split())
        hits = list(re.finditer(pattern, text))
        if not hits:
            raise ValueError(f"anchor not in text: {anchor!r}")
        for hit in hits:
            covering = [s for s in sents if s.start < hit.end() and hit.start() < s.end]
            spans.extend((min(s.context_start, s.start), s.end) for s in covering)
            spans.append((hit.start(), hit.end()))
    return spans


def training_rows(text: str, label: Mapping[str, Mapping[str, Any]]
                  ) -> tuple[list[str], np.ndarray[Any, Any]]:
    """One agreement's sentences as classifier inputs and their 0/1 labels per clause type.

    Args:
        text: the agreement.
        label: ``{clause_type: {anchors: [...]}}`` as in the label files (absent = no clause).

    Returns:
        ``(documents, y)`` with ``y.shape == (len(documents), 10)``.
    """
    spans = {t: anchor_spans(text, label[t]["anchors"]) for t in label}
    docs, ys = [], []
    for s in scored_sentences(text):
        docs.append(sentence_document(text, s.start, s.end, s.context_start, s.heading))
        ys.append([int(any(a < s.end and s.start < b for a, b in spans.get(t, [])))
                   for t in CLAUSE_TYPE_NAMES])
    return docs, np.array(ys, dtype=np.int8).reshape(-1, len(CLAUSE_TYPE_NAMES))


def train(agreements: Sequence[tuple[str, Mapping[str, Mapping[str, Any]]]], *,
          c: float = C, min_df: int = MIN_DF, meta: Mapping[str, Any] | None = None) -> ClauseClassifier:
    """Fits the classifier on labelled agreements.

    Args:
        agreements: ``[(text, label)]`` (see :func:`training_rows`).
        c: inverse regularisation strength.
        min_df: minimum sentence frequency of a 1/2-gram.
        meta: extra metadata to store (label files, digests).

    Raises:
        ValueError: a clause type with no positive sentence (it could not be learnt).
    """
    from scipy.sparse import hstack
    from sklearn import __version__ as sklearn_version
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    docs: list[str] = []
    blocks: list[np.ndarray[Any, Any]] = []
    for text, label in agreements:
        d, y = training_rows(text, label)
        docs.extend(d)
        blocks.append(y)
    y_all = np.concatenate(blocks)
    empty = [t for j, t in enumerate(CLAUSE_TYPE_NAMES) if not y_all[:, j].any()]
    if empty:
        raise ValueError(f"no positive training sentence for {empty}")
    vecs = [TfidfVectorizer(analyzer=analyzer, ngram_range=ngrams, sublinear_tf=True, min_df=min_df)
            for analyzer, ngrams in VIEWS]
    x = hstack([v.fit_transform(docs) for v in vecs]).tocsr()
    fits = [LogisticRegression(C=c, max_iter=3000).fit(x, y_all[:, j])
            for j in range(len(CLAUSE_TYPE_NAMES))]
    info = {**(meta or {}), "agreements": len(agreements), "sentences": len(docs),
            "positives": {t: int(y_all[:, j].sum()) for j, t in enumerate(CLAUSE_TYPE_NAMES)},
            "C": c, "min_df": min_df, "views": [list(v) for v in VIEWS],
            "scikit_learn": sklearn_version, "types": list(CLAUSE_TYPE_NAMES)}
    return ClauseClassifier(
        vocabularies=[[t for t, _ in sorted(v.vocabulary_.items(), key=lambda kv: kv[1])] for v in vecs],
        idfs=[np.asarray(v.idf_) for v in vecs], coef=np.stack([f.coef_[0] for f in fits]),
        intercept=np.array([f.intercept_[0] for f in fits]), meta=info)


def label_digest(files: Sequence[Path]) -> dict[str, str]:
    """SHA-256 of each label file, by file name (stored in the model's metadata)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def train_from_label_files(files: Sequence[Path] | None = None) -> ClauseClassifier:
    """Trains on the labelled agreements of ``files`` (default :data:`TRAINING_LABEL_FILES`).

    The texts come from ``licensedcode-data`` (a test dependency: training is a development
    step; the worker only loads the shipped weights).

    Raises:
        FileNotFoundError: ``licensedcode-data`` is not installed.
    """
    import yaml

    from activities.due_diligence.samples import license_text

    paths = [Path(p) for p in files] if files else [_LABELS / n for n in TRAINING_LABEL_FILES]
    agreements = []
    for path in paths:
        for key, label in yaml.safe_load(path.read_text(encoding="utf-8"))["agreements"].items():
            agreements.append((license_text(key), label))
    return train(agreements, meta={"label_files": label_digest(paths)})


def main(argv: Sequence[str]) -> int:
    """``python -m activities.due_diligence.classifier [OUT.npz]``: retrain and save."""
    out = Path(argv[0]) if argv else MODEL_PATH
    model = train_from_label_files()
    model.save(out)
    print(f"{out}: {model.meta['agreements']} agreements, {model.meta['sentences']} sentences, "  # noqa: T201
          f"{sum(len(v) for v in model.vocabularies)} features; positives {model.meta['positives']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
