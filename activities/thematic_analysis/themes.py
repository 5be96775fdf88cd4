"""Theme stage (seed 002 R3.5, R3.6): theme coders per identity and the theme aggregator.

A **theme proposal** (one theme coder's output) is ``{name, description, code_ids,
identity_id, strategy}``. A **theme** is ``{theme_id, name, description, code_ids,
quote_ids, prevalence, sentiment, identities, count, interactions, strategy}``.

Offline, a theme coder clusters the codes its identity finds relevant (lens similarity at
or above the median, plus the codes it coded itself) by the mean embedding of each code's
label and sentences (Ward linkage on unit vectors). The aggregator builds the consensus of
all proposals: two codes share a theme when at least half of the theme coders that saw
both grouped them together (co-association, average linkage). Names are class-based
TF-IDF terms of each theme's sentences; quotes are the sentences closest to its centroid.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from activities.thematic_analysis import nlp
from activities.thematic_analysis.coding import code_members
from activities.thematic_analysis.dataset import Corpus
from activities.thematic_analysis.identities import Identity
from activities.thematic_analysis.options import ThematicOptions
from overseer.plugin import OverseerError

CODE_SENTENCES_FOR_VECTOR = 60
SENTIMENT_SAMPLE = 1000


class ThemeStageError(OverseerError):
    """Every theme coder failed, so no theme can be formed (permanent: the run fails)."""

    code = "theme_stage_failed"
    http_status = 500


def code_vectors(codebook: Sequence[Mapping[str, Any]], corpus: Corpus) -> np.ndarray[Any, Any]:
    """One unit vector per code: the label's embedding plus the mean of its sentences'."""
    labels = nlp.embed([str(c["label"]) for c in codebook])
    rows = []
    for label_vector, code in zip(labels, codebook, strict=True):
        members = code_members(code, corpus)[:CODE_SENTENCES_FOR_VECTOR]
        mean = nlp.vectors_of(corpus, members).mean(axis=0) if members else label_vector
        rows.append(label_vector + nlp.normalise(mean[None, :])[0])
    return nlp.normalise(np.asarray(rows, dtype=np.float32)) if rows else np.zeros((0, 256))


def rules_theme_coder(identity: Identity, codebook: Sequence[Mapping[str, Any]], corpus: Corpus,
                      options: ThematicOptions) -> list[dict[str, Any]]:
    """One identity's theme proposals over the codes it finds relevant.

    Returns:
        Proposals ``{name, description, code_ids, identity_id, strategy}``, at most
        ``max_themes`` (k = round(sqrt(relevant codes)), at least 1).
    """
    if not codebook:
        return []
    vectors = code_vectors(codebook, corpus)
    relevance = vectors @ nlp.embed([identity.lens])[0]
    cut = float(np.median(relevance))
    chosen = [i for i, c in enumerate(codebook)
              if relevance[i] >= cut or identity.id in c.get("identities", [])]
    k = max(1, min(options.max_themes, round(math.sqrt(len(chosen)))))
    labels = _cluster(vectors[chosen], k)
    proposals = []
    for cluster in sorted(set(labels)):
        members = [codebook[chosen[i]] for i, lab in enumerate(labels) if lab == cluster]
        proposals.append({
            "name": " / ".join(str(c["label"]) for c in members[:3]),
            "description": f"{identity.name}: " + ", ".join(str(c["label"]) for c in members),
            "code_ids": sorted(str(c["code_id"]) for c in members),
            "identity_id": identity.id,
            "strategy": "rules",
        })
    return sorted(proposals, key=lambda p: p["code_ids"])


def _cluster(vectors: np.ndarray[Any, Any], k: int) -> list[int]:
    if len(vectors) <= 1 or k <= 1:
        return [0] * len(vectors)
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(n_clusters=min(k, len(vectors)), linkage="ward")
    return [int(x) for x in model.fit_predict(vectors)]


def aggregate_themes(proposals: Sequence[Mapping[str, Any]], codebook: Sequence[Mapping[str, Any]],
                     corpus: Corpus, options: ThematicOptions) -> list[dict[str, Any]]:
    """The final themes: the consensus of every theme coder's proposals (seed 002 R3.6).

    Returns:
        Themes, most prevalent first; codes no proposal placed stay out of every theme.

    Raises:
        ThemeStageError: codes exist but no theme coder proposed anything.
    """
    if not codebook:
        return []
    index = {str(c["code_id"]): i for i, c in enumerate(codebook)}
    n = len(codebook)
    together = np.zeros((n, n))
    seen = np.zeros((n, n))
    by_identity: dict[str, list[set[int]]] = {}
    for proposal in proposals:
        ids = [index[c] for c in proposal.get("code_ids", []) if c in index]
        by_identity.setdefault(str(proposal.get("identity_id", "")), []).append(set(ids))
    if not by_identity:
        raise ThemeStageError("no theme coder proposed a theme", details={"codes": n})
    for groups in by_identity.values():
        covered = sorted(set().union(*groups))
        seen[np.ix_(covered, covered)] += 1
        for group in groups:
            members = sorted(group)
            together[np.ix_(members, members)] += 1
    placed = [i for i in range(n) if seen[i, i] > 0]
    share = np.divide(together, seen, out=np.zeros_like(together), where=seen > 0)
    labels = _consensus(1.0 - share[np.ix_(placed, placed)])
    clusters: dict[int, list[int]] = {}
    for position, label in enumerate(labels):
        clusters.setdefault(label, []).append(placed[position])
    ordered = sorted(clusters.values(), key=lambda g: sorted(codebook[i]["code_id"] for i in g))
    themes = [_theme([codebook[i] for i in group], proposals, corpus, options) for group in ordered]
    _name_themes(themes, corpus)
    return sorted(themes, key=lambda t: (-t["prevalence"], -t["count"], t["theme_id"]))


def _consensus(distance: np.ndarray[Any, Any]) -> list[int]:
    if len(distance) <= 1:
        return [0] * len(distance)
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(n_clusters=None, metric="precomputed", linkage="average",
                                    distance_threshold=0.5)
    return [int(x) for x in model.fit_predict(distance)]


def _theme(codes: Sequence[Mapping[str, Any]], proposals: Sequence[Mapping[str, Any]],
           corpus: Corpus, options: ThematicOptions) -> dict[str, Any]:
    code_ids = sorted(str(c["code_id"]) for c in codes)
    members = sorted({q for c in codes for q in code_members(c, corpus)},
                     key=corpus.order().__getitem__)
    interactions = {corpus.interaction_of[q] for q in members}
    vectors = nlp.vectors_of(corpus, members)
    quotes: list[str] = []
    if len(members):
        centroid = nlp.normalise(vectors.mean(axis=0)[None, :])[0]
        closeness = vectors @ centroid
        order = sorted(range(len(members)), key=lambda i: (-round(float(closeness[i]), 6),
                                                           members[i]))
        used: set[str] = set()
        for i in order:  # one quote per interaction: representative, not repetitive
            interaction = corpus.interaction_of[members[i]]
            if interaction in used or len(corpus.text[members[i]]) > 400:
                continue
            used.add(interaction)
            quotes.append(members[i])
            if len(quotes) >= options.max_quotes_per_theme:
                break
    step = max(1, len(members) // SENTIMENT_SAMPLE)
    proposers = sorted({str(p.get("identity_id")) for p in proposals
                        if len(set(p.get("code_ids", [])) & set(code_ids)) * 2 >= len(code_ids)})
    llm_names = [str(p["name"]) for p in proposals
                 if str(p.get("strategy", "rules")) != "rules" and set(p.get("code_ids", [])) & set(code_ids)]
    return {
        "theme_id": "t_" + hashlib.sha256("|".join(code_ids).encode()).hexdigest()[:8],
        "name": llm_names[0] if llm_names else "",
        "description": "",
        "code_ids": code_ids,
        "code_labels": [str(c["label"]) for c in sorted(codes, key=lambda c: -int(c["count"]))],
        "quote_ids": quotes,
        "prevalence": round(len(interactions) / max(len(corpus.interaction_ids), 1), 4),
        "interactions": len(interactions),
        "count": len(members),
        "sentiment": nlp.sentiment(corpus.sentences(members[::step])),
        "identities": proposers,
        "strategy": "llm" if llm_names else "rules",
        "_members": members,
    }


def _name_themes(themes: list[dict[str, Any]], corpus: Corpus) -> None:
    documents = [" ".join(corpus.sentences(t["_members"])) for t in themes]
    terms = nlp.class_terms(documents, top_n=3)
    for theme, top in zip(themes, terms, strict=True):
        members = theme.pop("_members")
        if not theme["name"]:
            theme["name"] = " / ".join(top) or " / ".join(theme["code_labels"][:3])
        theme["key_terms"] = top
        theme["description"] = (
            f"Codes: {', '.join(theme['code_labels'][:8])}"
            f"{' …' if len(theme['code_labels']) > 8 else ''}. "
            f"{len(members)} sentences in {theme['interactions']} interactions "
            f"({theme['prevalence']:.0%} of the window); sentiment {theme['sentiment']['label']} "
            f"(VADER {theme['sentiment']['compound']:+.2f})."
        )
