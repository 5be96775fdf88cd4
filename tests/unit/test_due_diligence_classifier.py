"""The clause classifier (issue 13, pass 6): shipped weights, combination with the patterns."""

from __future__ import annotations

import numpy as np
import pytest

from activities.due_diligence import classifier as clf
from activities.due_diligence.clause_types import CLAUSE_TYPE_NAMES
from activities.due_diligence.clauses import extract_clauses
from activities.due_diligence.ingest import ingest_text

AGREEMENT = """SOFTWARE LICENSE AGREEMENT

1. Grant. Licensor hereby grants to Licensee a non-exclusive licence to use the Software.
Licensee agrees to the terms of this Agreement by installing the Software.

2. Law. This contract will be governed by Ontario and controlling Canadian federal law.

3. Delivery. The pizza must be baked for twelve minutes at two hundred degrees in the oven.
"""


def _sentence(text: str, fragment: str) -> dict:
    start = text.index(fragment)
    sent = next(s for s in clf.scored_sentences(text) if s.start <= start < s.end)
    return {"clause_type": "governing_law", "start": sent.start, "end": sent.end,
            "quote": text[sent.start:sent.end], "context_start": sent.context_start,
            "heading": sent.heading, "strength": 1.0, "pattern_rank": 0, "bm25": 1.0, "attempt": 1}


def test_shipped_model_is_trained_on_the_current_labels() -> None:
    """A label change without retraining (``python -m activities.due_diligence.classifier``) fails."""
    model = clf.shipped_model()
    files = [clf._LABELS / name for name in clf.TRAINING_LABEL_FILES]
    assert model.meta["label_files"] == clf.label_digest(files)
    assert model.meta["types"] == list(CLAUSE_TYPE_NAMES)
    assert model.coef.shape == (len(CLAUSE_TYPE_NAMES), sum(len(v) for v in model.vocabularies))
    assert "labels_holdout7.yaml" not in model.meta["label_files"], "held-out 7 must stay unseen"


def test_retraining_reproduces_the_shipped_weights() -> None:
    """The .npz is what the labels and the code produce (no hand-edited weights)."""
    pytest.importorskip("licensedcode")
    from activities.due_diligence.samples import license_text

    fresh = clf.train_from_label_files()
    shipped = clf.shipped_model()
    assert fresh.vocabularies == shipped.vocabularies
    text = license_text("crunchbase-data-2019-12-17")
    docs = [clf.sentence_document(text, s.start, s.end, s.context_start, s.heading)
            for s in clf.scored_sentences(text)]
    assert np.abs(fresh.scores(docs) - shipped.scores(docs)).max() < 0.01  # float16 weights


def test_classifier_proposes_a_clause_the_patterns_miss() -> None:
    """No pattern reads "governed by Ontario … law" (no "laws of"); the classifier does, verbatim."""
    merged = {name: [] for name in CLAUSE_TYPE_NAMES}
    out = clf.select(AGREEMENT, merged)
    best = out["governing_law"][0]
    assert best["method"] == "classifier"
    assert best["classifier_score"] >= clf.PROPOSE_SCORE
    assert best["quote"] == AGREEMENT[best["start"]:best["end"]]
    assert best["quote"].startswith("This contract will be governed by Ontario")
    assert not out["auto_renewal"], "nothing proposed without a confident sentence"


def test_a_doubted_pattern_candidate_gives_way_and_stays_as_support() -> None:
    """A pattern candidate the classifier scores < KEEP_SCORE loses to a confident sentence."""
    wrong = _sentence(AGREEMENT, "The pizza must be baked")
    out = clf.select(AGREEMENT, {"governing_law": [wrong]}, types=["governing_law"])
    first, second = out["governing_law"]
    assert first["method"] == "classifier" and "Ontario" in first["quote"]
    assert second["method"] == "patterns, doubted" and second["classifier_score"] < clf.KEEP_SCORE


def test_an_agreed_pattern_candidate_keeps_its_place() -> None:
    right = _sentence(AGREEMENT, "This contract will be governed")
    out = clf.select(AGREEMENT, {"governing_law": [right]}, types=["governing_law"])
    assert [c["method"] for c in out["governing_law"]] == ["patterns"]
    assert out["governing_law"][0]["start"] == right["start"]


def test_a_models_verified_quote_stays_first() -> None:
    """With a model configured its verified quotes are the primary strategy."""
    wrong = {**_sentence(AGREEMENT, "The pizza must be baked"), "strategy": "llm:fake"}
    out = clf.select(AGREEMENT, {"governing_law": [wrong]}, types=["governing_law"])
    assert out["governing_law"][0]["strategy"] == "llm:fake"


def test_findings_name_the_method_and_the_option_turns_it_off() -> None:
    on = {f["clause_type"]: f for f in extract_clauses(ingest_text(AGREEMENT))["findings"]}
    off = {f["clause_type"]: f for f in
           extract_clauses(ingest_text(AGREEMENT), use_classifier=False)["findings"]}
    assert on["governing_law"]["status"] == "found" and on["governing_law"]["method"] == "classifier"
    assert on["governing_law"]["strategy"] == "rules"
    assert 0.5 < on["governing_law"]["confidence"] < 0.8
    assert off["governing_law"]["status"] == "not_found" and "method" not in off["governing_law"]


def test_the_report_says_what_the_classifier_alone_found() -> None:
    from activities.due_diligence.report import render_report

    ingestion = ingest_text(AGREEMENT)
    report = render_report({"ingestion": ingestion, "clauses": extract_clauses(ingestion)})
    law = report.split("### Governing law", 1)[1].split("###", 1)[0]
    assert "found by the classifier alone (classifier score 0." in law
    assert "This contract will be governed by Ontario" in law


def test_non_agreement_gets_no_clause_from_the_classifier() -> None:
    """A recipe that mentions a law is still not an agreement: no findings at all."""
    text = ("Bake the bread for forty minutes. The dough rises overnight under a cloth. "
            "This recipe is governed by the laws of the kitchen, my grandmother used to say. ") * 3
    result = extract_clauses(ingest_text(text))
    assert result["is_agreement"] is False and not result["found_types"]
