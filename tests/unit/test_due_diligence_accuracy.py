"""Accuracy of the offline clause extractor on the labelled sets (106 real agreements).

Eight label sets: ``dev`` (30 agreements, used while writing the rules), ``holdout``
(6 agreements labelled before the extractor first ran on them; its errors have since been
read and its labels adjudicated, so it is seen), ``holdout2`` (4 agreements; seen since
rule pass 3 used its errors), ``holdout3`` (12 agreements; scored once after pass 3, seen
since rule pass 4 used its errors) and ``holdout4`` (14 agreements labelled and committed
before the extractor ever ran on them, scored once after the last rule change of pass 4;
seen since rule pass 5 used its errors), ``holdout5`` (16 agreements, scored once after
pass 5; seen since pass 6 used its errors and trained the classifier on it) and
``holdout6`` (18 agreements of vendors in no other set, scored once after pass 6; seen
since pass 7) and ``holdout7`` (6 other agreements of seen vendors, labelled and committed
before the extractor or the classifier ever ran on them, scored once after pass 7; pass 8
used its errors; the classifier is not trained on it). Run the report:
``.venv/bin/python -m tests.unit.test_due_diligence_accuracy`` (add ``--errors`` to list
every miss). The test asserts the floors the doc reports.

Scoring per clause type and agreement (labels in ``tests/data/due_diligence/labels.yaml``):
a ``found`` finding is a true positive when the type is labelled present and its quote
overlaps a labelled sentence (an anchor's sentence); a finding on a type labelled absent,
or on the wrong sentence, is a false positive (the wrong-sentence case is also a false
negative); a labelled type with no finding is a false negative.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.due_diligence.classifier import anchor_spans
from activities.due_diligence.clause_types import CLAUSE_TYPE_NAMES
from activities.due_diligence.clauses import extract_clauses
from activities.due_diligence.ingest import ingest_text
from activities.due_diligence.samples import license_text

DATA = Path(__file__).resolve().parents[1] / "data" / "due_diligence"
LABEL_SETS = {"dev": DATA / "labels.yaml", "holdout": DATA / "labels_holdout.yaml",
              "holdout2": DATA / "labels_holdout2.yaml", "holdout3": DATA / "labels_holdout3.yaml",
              "holdout4": DATA / "labels_holdout4.yaml", "holdout5": DATA / "labels_holdout5.yaml",
              "holdout6": DATA / "labels_holdout6.yaml", "holdout7": DATA / "labels_holdout7.yaml"}


@lru_cache(maxsize=8)
def labels(split: str = "dev") -> dict[str, dict[str, Any]]:
    """The labelled agreements by licence key (a :data:`LABEL_SETS` name)."""
    return yaml.safe_load(LABEL_SETS[split].read_text(encoding="utf-8"))["agreements"]


def evaluate(split: str = "dev", keys: list[str] | None = None,
             extract: Callable[[str, str], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Scores the extractor on the labelled set.

    Args:
        split: a :data:`LABEL_SETS` name.
        keys: only these agreements.
        extract: ``(key, text) -> clauses result``; default :func:`extract_clauses` on the
            ingested text (the cross-validation plugs in other extractors).

    Returns:
        ``{per_type: {type: {tp, fp, fn, precision, recall}}, micro: {...},
        attributes: {jurisdiction: [correct, total], cap: [correct, total]},
        bad_quotes, errors: [str]}``.
    """
    counts: dict[str, dict[str, int]] = {t: {"tp": 0, "fp": 0, "fn": 0} for t in CLAUSE_TYPE_NAMES}
    attrs = {"jurisdiction": [0, 0], "cap": [0, 0]}
    errors: list[str] = []
    bad_quotes = 0
    for key, label in labels(split).items():
        if keys and key not in keys:
            continue
        text = license_text(key)
        result = extract(key, text) if extract else extract_clauses(ingest_text(text))
        by_type = {f["clause_type"]: f for f in result["findings"]}
        for finding in result["findings"]:
            if finding["status"] == "found" and text[finding["start"]:finding["end"]] != finding["quote"]:
                bad_quotes += 1
        for ctype in CLAUSE_TYPE_NAMES:
            finding = by_type.get(ctype)
            found = bool(finding and finding["status"] == "found")
            truth = label.get(ctype)
            c = counts[ctype]
            if truth is None:
                if found:
                    c["fp"] += 1
                    errors.append(f"FP {key} {ctype}: {_short(finding['quote'])}")
                continue
            if not found:
                c["fn"] += 1
                errors.append(f"FN {key} {ctype}")
                continue
            spans = anchor_spans(text, truth["anchors"])
            if any(s < finding["end"] and finding["start"] < e for s, e in spans):
                c["tp"] += 1
                _score_attributes(ctype, truth, finding, attrs, errors, key)
            else:
                c["fp"] += 1
                c["fn"] += 1
                errors.append(f"WRONG {key} {ctype}: {_short(finding['quote'])}")
    per_type = {t: {**c, **_rates(c)} for t, c in counts.items()}
    total = {k: sum(c[k] for c in counts.values()) for k in ("tp", "fp", "fn")}
    return {"per_type": per_type, "micro": {**total, **_rates(total)}, "attributes": attrs,
            "bad_quotes": bad_quotes, "errors": errors}


def _score_attributes(ctype: str, truth: dict[str, Any], finding: dict[str, Any],
                      attrs: dict[str, list[int]], errors: list[str], key: str) -> None:
    if ctype == "governing_law" and truth.get("jurisdiction"):
        got = (finding["attributes"].get("jurisdiction") or {}).get("name")
        attrs["jurisdiction"][1] += 1
        if got == truth["jurisdiction"]:
            attrs["jurisdiction"][0] += 1
        else:
            errors.append(f"JURISDICTION {key}: {got!r} != {truth['jurisdiction']!r}")
    if ctype == "limitation_of_liability" and "cap" in truth:
        got = bool(finding["attributes"].get("cap_stated"))
        attrs["cap"][1] += 1
        if got == bool(truth["cap"]):
            attrs["cap"][0] += 1
        else:
            errors.append(f"CAP {key}: {got} != {truth['cap']}")


def _rates(c: dict[str, int]) -> dict[str, float]:
    precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 1.0
    recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 1.0
    return {"precision": round(precision, 3), "recall": round(recall, 3)}


def _short(quote: str | None) -> str:
    return " ".join((quote or "").split())[:140]


def render(report: dict[str, Any]) -> str:
    """A Markdown table of the report."""
    lines = ["| clause type | TP | FP | FN | precision | recall |",
             "| --- | --- | --- | --- | --- | --- |"]
    rows = [*report["per_type"].items(), ("**all (micro)**", report["micro"])]
    for ctype, r in rows:
        lines.append(f"| {ctype} | {r['tp']} | {r['fp']} | {r['fn']} "
                     f"| {r['precision']:.2f} | {r['recall']:.2f} |")
    j, cap = report["attributes"]["jurisdiction"], report["attributes"]["cap"]
    lines += ["", f"Jurisdiction correct: {j[0]}/{j[1]}; cap stated/not stated correct: "
              f"{cap[0]}/{cap[1]}; quotes that are not verbatim slices: {report['bad_quotes']}."]
    return "\n".join(lines)


def test_accuracy_on_labelled_agreements() -> None:
    """Floors on the labelled set; every quote is a verbatim slice."""
    pytest.importorskip("licensedcode")
    report = evaluate()
    assert report["bad_quotes"] == 0
    assert report["micro"]["precision"] >= 0.9, render(report)
    assert report["micro"]["recall"] >= 0.85, render(report)
    for ctype, r in report["per_type"].items():
        assert r["precision"] >= 0.75, (ctype, render(report))
        assert r["recall"] >= 0.6, (ctype, render(report))


HELD_OUT = {
    "holdout": "6 agreements; seen since pass 1 (errors read, labels adjudicated)",
    "holdout2": "4 agreements labelled before the extractor ran on them; seen since pass 3",
    "holdout3": "12 agreements; scored once after pass 3: micro 0.97 / 0.86",
    "holdout4": "14 agreements; scored once after pass 4: micro 0.96 / 0.94; per type not met "
                "for license_restrictions, audit_rights and auto_renewal recall",
    "holdout5": "16 agreements; scored once after pass 5: micro 0.95 / 0.85; per type met for "
                "5 of 10, not for indemnification, confidentiality, auto_renewal, "
                "audit_rights and license_restrictions",
    "holdout6": "18 agreements; scored once after pass 6 (classifier): micro 0.97 / 0.93; per "
                "type met for 8 of the 9 types with clauses, not for license_restrictions "
                "precision (0.88); no auto_renewal clause in the set; seen since pass 7 used its "
                "errors and trained the classifier on it",
    "holdout7": "6 agreements (unseen documents of seen vendors); scored once after pass 7: "
                "micro 1.00 / 0.93; per type met for 9 of 10, not for indemnification recall "
                "(4 of 6); auto_renewal 2 of 2; seen since pass 8 used its errors",
}
"""Each held-out set, labelled and committed before the extractor ran on it, and its history."""


@pytest.mark.parametrize("split", list(HELD_OUT))
def test_accuracy_on_each_held_out_set(split: str) -> None:
    """The issue's micro targets (P ≥ 0.9, R ≥ 0.8) and no quote that is not in the text."""
    pytest.importorskip("licensedcode")
    report = evaluate(split)
    assert report["bad_quotes"] == 0
    assert report["micro"]["precision"] >= 0.9, render(report)
    assert report["micro"]["recall"] >= 0.8, render(report)


def test_every_anchor_is_in_its_agreement() -> None:
    """The labels themselves are consistent with the texts."""
    pytest.importorskip("licensedcode")
    assert set(LABEL_SETS) == {"dev", *HELD_OUT}, "a label set without its accuracy test"
    every = [key for split in LABEL_SETS for key in labels(split)]
    assert len(every) == len(set(every)), "an agreement is in two label sets"
    for key, label in {k: v for split in LABEL_SETS for k, v in labels(split).items()}.items():
        text = license_text(key)
        for ctype, truth in label.items():
            assert ctype in CLAUSE_TYPE_NAMES, (key, ctype)
            assert anchor_spans(text, truth["anchors"]), (key, ctype)


def main(argv: list[str]) -> int:
    """Prints every set's accuracy table (and with ``--errors`` every miss)."""
    for split in LABEL_SETS:
        report = evaluate(split)
        print(f"\n## {split} ({len(labels(split))} agreements)\n")  # noqa: T201
        print(render(report))  # noqa: T201
        if "--errors" in argv:
            print("\n".join(report["errors"]))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
