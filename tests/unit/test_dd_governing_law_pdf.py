"""Governing law on real agreements rendered to PDF and read back through the pipeline.

Two labelled sets of ``licensedcode-data`` agreements, chosen and labelled by reading
before any extraction ran: ``dev`` (``governing_law_pdf.yaml``, 33 agreements; the rules
were written against its errors) and ``holdout`` (``governing_law_pdf_holdout.yaml``, 12
agreements labelled after that and scored once). Each is read three ways:

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
from activities.due_diligence.report import render_report
from activities.due_diligence.text import sentences

pytest.importorskip("licensedcode")
from activities.due_diligence.samples import license_text, render_pdf, typeset_pdf  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "due_diligence"
LABEL_SETS = {"dev": DATA / "governing_law_pdf.yaml", "holdout": DATA / "governing_law_pdf_holdout.yaml"}

READERS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "text": lambda key, text: ingest_text(text),
    "pdf": lambda key, text: ingest_bytes(render_pdf(text, title=key), "pdf"),
    "pdf_typeset": lambda key, text: ingest_bytes(typeset_pdf(text, title=key), "pdf"),
}
"""How an agreement's text becomes the pipeline's ingestion result, by variant name."""


@lru_cache(maxsize=2)
def labels(split: str = "dev") -> dict[str, dict[str, Any]]:
    """The labelled agreements of one :data:`LABEL_SETS` set by licence key."""
    return yaml.safe_load(LABEL_SETS[split].read_text(encoding="utf-8"))["agreements"]


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


def evaluate(variant: str = "text", split: str = "dev", keys: list[str] | None = None) -> dict[str, Any]:
    """Scores the governing-law finding on every labelled agreement read one way.

    Args:
        variant: a :data:`READERS` name.
        split: a :data:`LABEL_SETS` name.
        keys: only these agreements.

    Returns:
        ``{agreements, clause: [correct, total], name: [correct, total], places: [correct,
        total], sentences: [carried, total], bad_quotes, errors: [str]}``; ``bad_quotes``
        counts quotes and attribute spans that are not slices of the extracted text.
    """
    report: dict[str, Any] = {
        "clause": [0, 0],
        "name": [0, 0],
        "places": [0, 0],
        "sentences": [0, 0],
        "bad_quotes": 0,
        "errors": [],
    }
    errors: list[str] = report["errors"]
    chosen = [k for k in labels(split) if not keys or k in keys]
    for key in chosen:
        label = labels(split)[key]
        ingestion = _ingested(key, variant)
        text = ingestion["text"]
        result = extract_clauses(ingestion)
        finding = next(f for f in result["findings"] if f["clause_type"] == "governing_law")
        found = finding["status"] == "found"
        if found:
            if text[finding["start"] : finding["end"]] != finding["quote"]:
                report["bad_quotes"] += 1
            report["bad_quotes"] += sum(
                text[s["start"] : s["end"]] != s["text"] for s in _spans(finding["attributes"])
            )
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
            errors.append(
                f"PLACES {key}: {sorted(named_places(jurisdiction))} lacks "
                f"{sorted(want_places - named_places(jurisdiction))}"
            )
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
    lines = [
        "| read as | clause found / absent right | jurisdiction named right "
        "| every place named | law sentences carried | quotes not in the text |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for variant, r in reports.items():
        cells = [f"{r[k][0]}/{r[k][1]}" for k in ("clause", "name", "places", "sentences")]
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {r['bad_quotes']} |")
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("split", "variant"), [("dev", "pdf_typeset"), ("holdout", "pdf_typeset"), ("holdout", "pdf")]
)
def test_governing_law_read_whole_from_a_pdf(split: str, variant: str) -> None:
    """The place, the section's law sentences and verbatim evidence, on PDF-extracted text.

    (The report also reads the clean text and the dev set as a plain PDF; the test keeps
    to the PDF readings so that it stays fast.)
    """
    report = evaluate(variant, split)
    assert report["bad_quotes"] == 0, report["errors"]
    assert report["clause"][0] == report["clause"][1], report["errors"]
    assert report["name"][0] == report["name"][1], report["errors"]
    assert report["places"][0] >= report["places"][1] - 1, report["errors"]
    assert report["sentences"][0] >= 0.9 * report["sentences"][1], report["errors"]


if __name__ == "__main__":
    for name in LABEL_SETS:
        reports = {v: evaluate(v, name) for v in READERS}
        print(f"# {name}\n\n{render(reports)}\n")
        if "--errors" in sys.argv:
            for variant, r in reports.items():
                print(f"## {name} {variant}\n" + "\n".join(r["errors"]) + "\n")


# --- the shapes a PDF's text layer gives, one at a time ------------------------------------

_LEAD = (
    "These license terms are an agreement between the licensor and you. By using the "
    "software, you accept these terms. The licensor hereby grants you a licence to use "
    "the software.\n\n"
)
_PDF_LAW = (
    "Applicable Law\n"
    "United States . If you acquired the software in the United States , Washington "
    "state law governs the interpretation of this agreement and applies to claims for "
    "breach of it, regardless of conflict of laws principles . The laws of the state "
    "where you live govern all other claims , including claims under state consumer\n"
    "protection laws , unfair competition laws , and in tort.\n"
    "Outside the United States . If you acquired the software in any other country , "
    "the laws of that country\napply . Legal Effect\n"
    "This agreement describes certain legal rights . You may have other rights under "
    "the laws of your country .\n"
)


def _governing_law(ingestion: dict[str, Any]) -> dict[str, Any]:
    result = extract_clauses(ingestion)
    return next(f for f in result["findings"] if f["clause_type"] == "governing_law")


def test_spaces_before_punctuation_keep_the_whole_section_and_its_place() -> None:
    """The issue's shape: the finding names Washington and quotes the section, verbatim."""
    ingestion = ingest_text(_LEAD + _PDF_LAW)
    text = ingestion["text"]
    finding = _governing_law(ingestion)
    assert finding["status"] == "found"
    assert text[finding["start"] : finding["end"]] == finding["quote"]
    assert "Washington state law governs" in finding["quote"]
    assert "The laws of the state where you live govern all other claims" in finding["quote"]
    assert "the laws of that country\napply ." in finding["quote"]
    assert "Legal Effect" not in finding["quote"] and "legal rights" not in finding["quote"]
    jurisdiction = finding["attributes"]["jurisdiction"]
    assert jurisdiction["name"] == "Washington"
    assert text[jurisdiction["start"] : jurisdiction["end"]] == "Washington"
    split = {part["where"]: [law["name"] for law in part["laws"]] for part in jurisdiction["split"]}
    assert split == {"United States": ["Washington", None], "any other country": [None]}


def test_a_sentence_cut_by_a_page_break_and_a_running_header_is_read_whole() -> None:
    """Page 1 ends mid-sentence; page 2 starts with its header: both halves are the section."""
    first = _LEAD + "9. Governing Law.\nThis agreement and any claim arising from it shall be governed"
    second = (
        "Acme End User License\nPage 2\nby the laws of the State of Texas, without regard "
        "to its conflict of laws rules.\n10. Notices.\nNotices must be in writing."
    )
    ingestion = ingest_text(first + "\f" + second)
    text = ingestion["text"]
    finding = _governing_law(ingestion)
    assert finding["status"] == "found"
    assert text[finding["start"] : finding["end"]] == finding["quote"]
    assert finding["quote"].startswith("This agreement and any claim")
    assert finding["quote"].endswith("conflict of laws rules.")
    assert finding["attributes"]["jurisdiction"]["name"] == "Texas"
    assert finding["page"] == 1


def test_a_section_naming_several_laws_lists_them_all() -> None:
    """ "(a) California … (b) Japan … Japanese law": every place whose law may govern."""
    section = (
        "7. Governing Law.\nThis Agreement will be governed by the laws of the State of "
        "California if you are in the Americas, and by Japanese law if you are in Asia. "
        "If you are anywhere else, English law governs this Agreement.\n\n"
        "8. Export.\nYou must comply with the export laws of the United States that apply."
    )
    finding = _governing_law(ingest_text(_LEAD + section))
    jurisdiction = finding["attributes"]["jurisdiction"]
    assert jurisdiction["name"] == "California"
    assert [law["name"] for law in jurisdiction["laws"]] == ["California", "Japan", "England"]
    assert "English law governs" in finding["quote"] and "export" not in finding["quote"]


def test_a_typeset_pdf_of_the_issue_licence_names_washington() -> None:
    """ms-sysinternals-sla set word by word and read back through PDFium's text layer."""
    ingestion = _ingested("ms-sysinternals-sla", "pdf_typeset")
    assert ingestion["text_sources"] == ["text_layer"]
    text = ingestion["text"]
    finding = _governing_law(ingestion)
    assert text[finding["start"] : finding["end"]] == finding["quote"]
    assert finding["attributes"]["jurisdiction"]["name"] == "Washington"
    squeezed = "".join(finding["quote"].split())
    assert "Washingtonstatelawgoverns" in squeezed
    assert "Thelawsofthestatewhereyoulivegovernallotherclaims" in squeezed


def test_an_abbreviation_with_a_space_before_its_full_stop_ends_no_sentence() -> None:
    """ "the U.S . Export Administration Regulations" is one sentence; "States . If" is two."""
    text = (
        "You must comply with the U.S . Export Administration Regulations. "
        "United States . If you acquired it here, Texas law applies."
    )
    got = [text[s.start : s.end] for s in sentences(text)]
    assert got == [
        "You must comply with the U.S . Export Administration Regulations.",
        "United States .",
        "If you acquired it here, Texas law applies.",
    ]


def test_the_lines_of_one_long_comment_sentence_do_not_join_the_section() -> None:
    """autodesk-3d-sft-3.0 is a source comment (" * " lines) read as one long sentence: the
    section takes the governing-law line and the line naming the U.S.A., not the liability
    lines before it or the severability lines after it."""
    text = license_text("autodesk-3d-sft-3.0")
    finding = _governing_law(ingest_text(text))
    assert text[finding["start"] : finding["end"]] == finding["quote"]
    assert "governed by the laws of the State of California" in finding["quote"]
    assert "conflicts of law rules" in finding["quote"]
    assert "LIABLE TO YOU" not in finding["quote"] and "void and unenforceable" not in finding["quote"]
    assert finding["attributes"]["jurisdiction"]["name"] == "California"


def test_the_report_names_every_law_of_the_section() -> None:
    """report.md's attribute line names the choice and the other laws the section names."""
    section = (
        "7. Governing Law.\nThis Agreement will be governed by the laws of the State of "
        "California if you are in the Americas, and by Japanese law if you are in Asia.\n"
    )
    ingestion = ingest_text(_LEAD + section)
    result = extract_clauses(ingestion)
    report = render_report({"ingestion": ingestion, "clauses": result})
    assert "jurisdiction: California (the section also names the law of Japan)" in report
