"""Governing law on real agreements rendered to PDF and read back through the pipeline.

The labelled set (``tests/data/due_diligence/governing_law_pdf.yaml``, 33 agreements of the
``licensedcode-data`` package, chosen and labelled by reading before any extraction ran)
is read three ways:

* ``text`` — the clean text (:func:`ingest_text`);
* ``pdf`` — typeset one text run per line (:func:`render_pdf`) and read back by
  :func:`ingest_bytes` (PDFium's text layer): paragraphs lose their blank lines;
* ``pdf_typeset`` — typeset word by word, justified, punctuation placed apart from its
  word, long words hyphenated, a running header and page numbers (:func:`typeset_pdf`),
  read back the same way: "United States , Washington state law governs …".

Scored per agreement: the jurisdiction the finding names (``name``), whether every place
the section chooses is named (``places``), and how many of the section's law sentences
the finding's quote carries (``sentences``); an agreement without a governing-law clause
must have no finding. Every quote and every attribute span must be a slice of the text
the pipeline extracted. Run the report: ``.venv/bin/python -m tests.unit.test_dd_governing_law_pdf``
(``--errors`` lists every miss).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.due_diligence.clauses import extract_clauses
from activities.due_diligence.ingest import ingest_bytes, ingest_text

pytest.importorskip("licensedcode")
from activities.due_diligence.samples import license_text, render_pdf, typeset_pdf  # noqa: E402

LABELS = Path(__file__).resolve().parents[1] / "data" / "due_diligence" / "governing_law_pdf.yaml"

READERS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "text": lambda key, text: ingest_text(text),
    "pdf": lambda key, text: ingest_bytes(render_pdf(text, title=key), "pdf"),
    "pdf_typeset": lambda key, text: ingest_bytes(typeset_pdf(text, title=key), "pdf"),
}
"""How an agreement's text becomes the pipeline's ingestion result, by variant name."""


@lru_cache(maxsize=1)
def labels() -> dict[str, dict[str, Any]]:
    """The labelled agreements by licence key."""
    return yaml.safe_load(LABELS.read_text(encoding="utf-8"))["agreements"]


@lru_cache(maxsize=256)
def _ingested(key: str, variant: str) -> dict[str, Any]:
    return READERS[variant](key, license_text(key))


def anchor_span(text: str, anchor: str) -> tuple[int, int] | None:
    """Where ``anchor`` sits in ``text`` ignoring all whitespace (a PDF adds and drops spaces).

    Returns:
        ``(start, end)`` offsets into ``text`` or None when it is not there.
    """
    kept = [i for i, ch in enumerate(text) if not ch.isspace()]
    squeezed = "".join(text[i] for i in kept)
    needle = "".join(anchor.split())
    at = squeezed.find(needle)
    if at < 0:
        return None
    return kept[at], kept[at + len(needle) - 1] + 1


def named_places(jurisdiction: dict[str, Any] | None) -> set[str]:
    """Every place a ``jurisdiction`` attribute names (its choice, its split laws, its laws)."""
    if not jurisdiction:
        return set()
    names = {jurisdiction.get("name")}
    names |= {law.get("name") for part in jurisdiction.get("split", []) for law in part["laws"]}
    names |= {law.get("name") for law in jurisdiction.get("laws", [])}
    return {n for n in names if n}


def _spans(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if {"text", "start", "end"} <= set(value):
            yield value
        for item in value.values():
            yield from _spans(item)
    elif isinstance(value, list):
        for item in value:
            yield from _spans(item)


def evaluate(variant: str = "text", keys: list[str] | None = None) -> dict[str, Any]:
    """Scores the governing-law finding on every labelled agreement read one way.

    Args:
        variant: a :data:`READERS` name.
        keys: only these agreements.

    Returns:
        ``{agreements, clause: [correct, total], name: [correct, total], places: [correct,
        total], sentences: [carried, total], bad_quotes, errors: [str]}``; ``bad_quotes``
        counts quotes and attribute spans that are not slices of the extracted text.
    """
    report: dict[str, Any] = {"clause": [0, 0], "name": [0, 0], "places": [0, 0],
                              "sentences": [0, 0], "bad_quotes": 0, "errors": []}
    errors: list[str] = report["errors"]
    chosen = [k for k in labels() if not keys or k in keys]
    for key in chosen:
        label = labels()[key]
        ingestion = _ingested(key, variant)
        text = ingestion["text"]
        result = extract_clauses(ingestion)
        finding = next(f for f in result["findings"] if f["clause_type"] == "governing_law")
        found = finding["status"] == "found"
        if found:
            if text[finding["start"]:finding["end"]] != finding["quote"]:
                report["bad_quotes"] += 1
            report["bad_quotes"] += sum(text[s["start"]:s["end"]] != s["text"]
                                        for s in _spans(finding["attributes"]))
        present = label.get("present", True)
        report["clause"][1] += 1
        if found != present:
            errors.append(f"CLAUSE {key}: found={found}, labelled present={present}")
        else:
            report["clause"][0] += 1
        if not present:
            continue
        jurisdiction = finding["attributes"].get("jurisdiction") if found else None
        got = (jurisdiction or {}).get("name")
        report["name"][1] += 1
        if found and got == label["jurisdiction"]:
            report["name"][0] += 1
        else:
            errors.append(f"NAME {key}: {got!r} != {label['jurisdiction']!r}")
        want_places = set(label.get("places") or [])
        report["places"][1] += 1
        if found and want_places <= named_places(jurisdiction):
            report["places"][0] += 1
        else:
            errors.append(f"PLACES {key}: {sorted(named_places(jurisdiction))} lacks "
                          f"{sorted(want_places - named_places(jurisdiction))}")
        for anchor in label["sentences"]:
            report["sentences"][1] += 1
            where = anchor_span(text, anchor)
            if where is None:
                errors.append(f"ANCHOR NOT IN TEXT {key}: {anchor}")
                continue
            if found and finding["start"] <= where[0] and where[1] <= finding["end"]:
                report["sentences"][0] += 1
            else:
                errors.append(f"SENTENCE {key}: not carried: {anchor[:70]}")
    report["agreements"] = len(chosen)
    return report


def render(reports: dict[str, dict[str, Any]]) -> str:
    """A Markdown table: one row per variant."""
    lines = ["| read as | clause found / absent right | jurisdiction named right "
             "| every place named | law sentences carried | quotes not in the text |",
             "| --- | --- | --- | --- | --- | --- |"]
    for variant, r in reports.items():
        cells = [f"{r[k][0]}/{r[k][1]}" for k in ("clause", "name", "places", "sentences")]
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {r['bad_quotes']} |")
    return "\n".join(lines)


@pytest.mark.parametrize("variant", list(READERS))
def test_governing_law_read_whole_however_the_text_was_read(variant: str) -> None:
    """The place, the section's law sentences and verbatim evidence, on text and on PDF."""
    report = evaluate(variant)
    assert report["bad_quotes"] == 0, report["errors"]
    assert report["clause"][0] == report["clause"][1], report["errors"]
    assert report["name"][0] >= report["name"][1] - 1, report["errors"]
    assert report["sentences"][0] >= 0.9 * report["sentences"][1], report["errors"]


if __name__ == "__main__":
    reports = {v: evaluate(v) for v in READERS}
    print(render(reports))
    if "--errors" in sys.argv:
        for variant, r in reports.items():
            print(f"\n## {variant}")
            print("\n".join(r["errors"]))
