"""Honest estimates of the clause classifier (issue 13, pass 6): held-out sets it never saw.

Every labelled set is now seen by the rules, the classifier or both, so two estimates are
computed without the scored set:

1. **Classifier alone, leave one set out**: for each of the six label sets, a classifier
   trained on the other five scores it (the top sentence per type, when ≥
   :data:`~activities.due_diligence.classifier.PROPOSE_SCORE`).
2. **Patterns + classifier, as first scored**: held-outs 3, 4 and 5 each with the rules of
   the commit it was first scored at (pass 3: ``e094475^``; pass 4: ``9ac649a^``; pass 5:
   ``9ac649a``, checked out with ``git worktree``) and a classifier trained on every other
   set, combined by the current :func:`~activities.due_diligence.classifier.select` and
   scored by the current ``score_findings``. The same runs with the patterns alone
   reproduce the published first scorings (docs/due-diligence.md, "Unseen sets as first
   scored").

Run: ``.venv/bin/python -m tests.unit.due_diligence_crossval`` (needs the git history and
``licensedcode-data``; about a minute). Not collected by pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from activities.due_diligence import classifier as clf
from activities.due_diligence.clauses import clauses_result, score_findings
from activities.due_diligence.ingest import ingest_text
from tests.unit.test_due_diligence_accuracy import LABEL_SETS, _rates, evaluate, render

ROOT = Path(__file__).resolve().parents[2]
TRAINING_SETS = ("dev", "holdout", "holdout2", "holdout3", "holdout4", "holdout5")
FIRST_SCORED_AT = {"holdout3": "e094475^", "holdout4": "9ac649a^", "holdout5": "9ac649a"}
"""The commit whose rules first scored each held-out set."""

_DUMP = r"""
import json, sys, yaml
from activities.due_diligence import clauses as C
from activities.due_diligence.samples import license_text
out = {}
for key in yaml.safe_load(open(sys.argv[1]))["agreements"]:
    text = license_text(key)
    if not C.agreement_signals(text)["is_agreement"]:
        out[key] = None
        continue
    index, pending, valid, attempts = C.DocumentIndex(text), list(C.CLAUSE_TYPE_NAMES), {}, 0
    while pending and attempts < 3:
        attempts += 1
        checked, pending = C.validate(text, C.search(index, pending, attempts), pending)
        valid.update({n: c for n, c in checked.items() if c})
    out[key] = C.deduplicate(valid)
json.dump(out, sys.stdout)
"""


def merged_candidates_at(commit: str, split: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The patterns' merged candidates per agreement of ``split`` with the rules of ``commit``.

    Returns:
        ``{key: {clause_type: [candidate]}}``, ``None`` for a text not read as an agreement.

    Raises:
        subprocess.CalledProcessError: the commit is not in the history (a shallow clone).
    """
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(tree), commit],
                       check=True, capture_output=True)
        try:
            done = subprocess.run([sys.executable, "-c", _DUMP, str(LABEL_SETS[split])], cwd=tree,
                                  env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                                  check=True, capture_output=True, text=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=False, capture_output=True)
    return json.loads(done.stdout)


def _model_without(split: str) -> clf.ClauseClassifier:
    files = [LABEL_SETS[s] for s in TRAINING_SETS if s != split]
    return clf.train_from_label_files(files)


def _from_merged(merged: Mapping[str, Any], model: clf.ClauseClassifier | None):
    def extract(key: str, text: str) -> dict[str, Any]:
        candidates = merged[key]
        if candidates is None:  # not read as an agreement: no clauses
            return clauses_result([], attempts=0, signals={"is_agreement": False})
        if model is not None:
            candidates = clf.select(text, candidates, model)
        findings = score_findings(ingest_text(text), candidates)
        return clauses_result(findings, attempts=3, signals={"is_agreement": True})
    return extract


def _classifier_alone(model: clf.ClauseClassifier):
    def extract(key: str, text: str) -> dict[str, Any]:
        return clauses_result(score_findings(ingest_text(text), clf.select(text, {}, model)),
                              attempts=1, signals={"is_agreement": True})
    return extract


def _pool(reports: list[dict[str, Any]]) -> dict[str, Any]:
    types = reports[0]["per_type"]
    per_type = {}
    for t in types:
        c = {k: sum(r["per_type"][t][k] for r in reports) for k in ("tp", "fp", "fn")}
        per_type[t] = {**c, **_rates(c)}
    micro = {k: sum(r["micro"][k] for r in reports) for k in ("tp", "fp", "fn")}
    return {"per_type": per_type, "micro": {**micro, **_rates(micro)},
            "attributes": {a: [sum(r["attributes"][a][i] for r in reports) for i in (0, 1)]
                           for a in ("jurisdiction", "cap")},
            "bad_quotes": sum(r["bad_quotes"] for r in reports),
            "errors": [e for r in reports for e in r["errors"]]}


def _met(report: Mapping[str, Any]) -> int:
    return sum(r["precision"] >= 0.9 and r["recall"] >= 0.8 for r in report["per_type"].values())


def main(argv: list[str]) -> int:
    """Prints both estimates as Markdown tables (``--errors`` lists the misses)."""
    alone = []
    for split in TRAINING_SETS:
        alone.append(evaluate(split, extract=_classifier_alone(_model_without(split))))
    pooled = _pool(alone)
    print(f"## Classifier alone, leave one set out ({len(TRAINING_SETS)} sets), "  # noqa: T201
          f"types meeting the target: {_met(pooled)}\n\n{render(pooled)}\n")
    rules, combined = [], []
    for split, commit in FIRST_SCORED_AT.items():
        merged = merged_candidates_at(commit, split)
        rules.append(evaluate(split, extract=_from_merged(merged, None)))
        combined.append(evaluate(split, extract=_from_merged(merged, _model_without(split))))
        print(f"## {split}: rules of {commit} | + classifier\n\n"  # noqa: T201
              f"{render(rules[-1])}\n\n{render(combined[-1])}\n")
    for name, reports in (("patterns alone", rules), ("patterns + classifier", combined)):
        pooled = _pool(reports)
        print(f"## Held-outs 3-5 as first scored, {name}; types meeting the target: "  # noqa: T201
              f"{_met(pooled)}\n\n{render(pooled)}\n")
        if "--errors" in argv:
            print("\n".join(pooled["errors"]) + "\n")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
