"""Splitting batch uploads into entry forms, and slicing out one entry's text."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from activities.document_intake.batch import EntrySpan, PageSlice, slice_pages, split_entries
from activities.document_intake.extract import extract_fields
from activities.document_intake.schema import load_field_schema

SCHEMA = load_field_schema()

ESSAYS = [
    """My father is the strongest person I know. He wakes up before the sun every morning
and drives a delivery truck across the city so that my brother and I can have what we need.

When I was in third grade, he taught me how to ride a bike in the parking lot behind our
apartment. He never yelled when I fell, and he always told me that falling is part of learning.
""",
    """My grandfather has been my father figure since I was two years old. He taught me to fish
on the river, to fix the old radio in our kitchen, and to say thank you to the bus driver.

He did not finish school himself, but he reads every report card I bring home, and he asks
me what I learned each day before he asks about anything else at the dinner table.
""",
    """When my stepdad moved in, I did not want to talk to him at all. He kept showing up to my
games anyway, and he stood by the fence in the rain when nobody else from my family came.

Now he is the first person I call when something good happens, and the first one I call
when something goes wrong. He is what my father means to me, even though he is not my dad.
""",
]
STUDENTS = [("Maria Lopez", "Lincoln Middle School", "8"),
            ("Jamal Washington", "Douglass High School", "10"),
            ("Aisha Patel", "Oak Grove Elementary", "5")]


@dataclass(frozen=True)
class Page:
    page_number: int
    text: str
    ocr_confidence: float | None = None
    source: str = "text_layer"


def entry(k: int, *, header: str | None = "IFI Essay Contest 2026 — Entry Form",
          order: str = "name_first") -> str:
    name, school, grade = STUDENTS[k]
    fields = [f"Student Name: {name}", f"School: {school}", f"Grade: {grade}"]
    if order == "school_first":
        fields = [fields[1], fields[2], fields[0]]
    head = [header, ""] if header else []
    return "\n".join([*head, *fields, "", ESSAYS[k]]) + "\n"


def names(pages, spans) -> list[str | None]:
    return [extract_fields(slice_pages(pages, s), SCHEMA).values["student_name"] for s in spans]


def test_one_form_is_one_span_covering_everything() -> None:
    pages = [Page(1, entry(0)), Page(2, ESSAYS[1])]
    assert split_entries(pages, SCHEMA) == [
        EntrySpan(index=0, start_page=1, start_offset=0, end_page=2, end_offset=len(ESSAYS[1]))
    ]


def test_pdf_with_one_form_per_page_splits_at_page_boundaries() -> None:
    pages = [Page(i + 1, entry(i)) for i in range(3)]
    spans = split_entries(pages, SCHEMA)
    assert [(s.start_page, s.start_offset, s.end_page, s.end_offset) for s in spans] == [
        (1, 0, 1, len(pages[0].text)),
        (2, 0, 2, len(pages[1].text)),
        (3, 0, 3, len(pages[2].text)),
    ]
    assert [s.index for s in spans] == [0, 1, 2]
    assert names(pages, spans) == ["Maria Lopez", "Jamal Washington", "Aisha Patel"]


def test_two_page_forms_with_a_running_header_are_not_split_in_the_middle() -> None:
    pages = []
    for k in range(3):
        pages.append(Page(2 * k + 1, entry(k)))
        pages.append(Page(2 * k + 2, "IFI Essay Contest 2026 — Entry Form\n\n" + ESSAYS[k]))
    spans = split_entries(pages, SCHEMA)
    assert [(s.start_page, s.end_page) for s in spans] == [(1, 2), (3, 4), (5, 6)]
    assert [(s.start_offset, s.end_offset) for s in spans] == [
        (0, len(pages[k].text)) for k in (1, 3, 5)
    ]


def test_plain_text_forms_one_after_another_split_at_their_headers() -> None:
    text = "".join(entry(k) for k in range(3))
    pages = [Page(1, text, None, "plain_text")]
    spans = split_entries(pages, SCHEMA)
    assert len(spans) == 3
    for span in spans[1:]:
        assert text[span.start_offset:].startswith("IFI Essay Contest 2026")
    assert names(pages, spans) == ["Maria Lopez", "Jamal Washington", "Aisha Patel"]


@pytest.mark.parametrize("order", ["name_first", "school_first"])
def test_plain_text_without_headers_splits_at_the_next_name_label(order: str) -> None:
    text = "".join(entry(k, header=None, order=order) for k in range(3))
    pages = [Page(1, text, None, "plain_text")]
    spans = split_entries(pages, SCHEMA)
    assert len(spans) == 3
    first_line = "School:" if order == "school_first" else "Student Name:"
    for span in spans[1:]:
        assert text[span.start_offset:].startswith(first_line)
    for span, (name, school, grade) in zip(spans, STUDENTS, strict=True):
        values = extract_fields(slice_pages(pages, span), SCHEMA).values
        assert (values["student_name"], values["school"], values["grade"]) == (name, school, grade)


def test_spans_tile_the_document_without_gaps_or_overlaps() -> None:
    text = "".join(entry(k) for k in range(3))
    pages = [Page(1, "Cover note for the judges.\n"), Page(2, text), Page(3, entry(0))]
    spans = split_entries(pages, SCHEMA)
    rebuilt = "".join(p.text for s in spans for p in slice_pages(pages, s))
    assert rebuilt == "".join(p.text for p in pages)


def test_a_cover_page_joins_the_first_entry() -> None:
    cover = ("Dear contest committee,\n\nPlease find enclosed the essays of our students for this\n"
             "year's contest. We are proud of every one of them and of the fathers they honour.\n")
    pages = [Page(1, cover), Page(2, entry(0)), Page(3, entry(1))]
    spans = split_entries(pages, SCHEMA)
    assert [(s.start_page, s.end_page) for s in spans] == [(1, 2), (3, 3)]


def test_a_stray_line_above_the_header_snaps_to_the_page_start() -> None:
    pages = [Page(1, entry(0)), Page(2, "Page 2 of 3\n" + entry(1))]
    spans = split_entries(pages, SCHEMA)
    assert [(s.start_page, s.start_offset, s.end_page) for s in spans] == [(1, 0, 1), (2, 0, 2)]


def test_two_forms_on_one_pdf_page_split_inside_it() -> None:
    pages = [Page(1, entry(0) + entry(1))]
    spans = split_entries(pages, SCHEMA)
    assert len(spans) == 2
    assert spans[0].end_page == spans[1].start_page == 1
    assert spans[0].end_offset == spans[1].start_offset == len(entry(0))


def test_essay_words_that_look_like_labels_do_not_split_an_entry() -> None:
    essay = ESSAYS[0] + ("\nName calling never bothered my dad, and he taught me to ignore it.\n"
                         "Student of the month was the proudest day of his year.\n")
    pages = [Page(1, entry(0).replace(ESSAYS[0], essay))]
    assert len(split_entries(pages, SCHEMA)) == 1


def test_an_essay_line_starting_with_a_label_word_in_lower_case_is_not_a_new_entry() -> None:
    # A wrapped sentence of a real essay (sotu; the corpus form of seed 11 was split in two).
    essay = ESSAYS[0] + ("At a time when Americans owe more in tuition debt than credit card "
                         "debt, this Congress needs to stop the interest rates on\n"
                         "student loans from doubling in July.\n"
                         "Extend the tuition tax credit we started.\n")
    pages = [Page(1, entry(0).replace(ESSAYS[0], essay))]
    assert len(split_entries(pages, SCHEMA)) == 1


def test_no_pages_no_spans_and_a_blank_page_is_one_span() -> None:
    assert split_entries([], SCHEMA) == []
    assert split_entries([Page(1, "")], SCHEMA) == [
        EntrySpan(index=0, start_page=1, start_offset=0, end_page=1, end_offset=0)
    ]


def test_duplicate_page_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate page numbers"):
        split_entries([Page(1, "a"), Page(1, "b")], SCHEMA)


def test_slice_pages_keeps_page_metadata() -> None:
    pages = [Page(1, entry(0), 0.91, "ocr"), Page(2, ESSAYS[0], None, "text_layer")]
    span = EntrySpan(index=0, start_page=1, start_offset=5, end_page=2, end_offset=10)
    sliced = slice_pages(pages, span)
    assert sliced == [
        PageSlice(page_number=1, text=entry(0)[5:], ocr_confidence=0.91, source="ocr"),
        PageSlice(page_number=2, text=ESSAYS[0][:10], ocr_confidence=None, source="text_layer"),
    ]


def test_span_round_trips_through_a_dict() -> None:
    span = split_entries([Page(1, entry(0))], SCHEMA)[0]
    assert EntrySpan(**span.model_dump()) == span
