"""resume_tailoring domain pieces: job parsing, keyphrases, matching, the ATS score, reflexion."""

from __future__ import annotations

import pytest

from activities.resume_tailoring.ats import WEIGHTS, bullet_is_good, score_resume
from activities.resume_tailoring.jobs import keyphrases, onet_occupations, parse_job
from activities.resume_tailoring.reflexion import directives_from_ats, directives_from_feedback
from activities.resume_tailoring.resume import (
    diff_markdown,
    normalise_resume,
    render_markdown,
    sample_job,
    sample_resume,
)
from activities.resume_tailoring.text import phrase_in, same_term, stem, stems


@pytest.mark.parametrize(("a", "b"), [("developing", "develop"), ("developed", "develop"),
                                      ("development", "develop"), ("applications", "application"),
                                      ("databases", "database")])
def test_stemming_meets_word_forms(a, b):
    assert stem(a) == stem(b)


@pytest.mark.parametrize(("a", "b", "same"), [
    ("Javascript", "JavaScript", True), ("Node.js", "NodeJS", True), ("SQL", "NoSQL", False),
    ("React", "Create", False), ("Power BI", "PowerBI", True), ("Java", "Javascript", False),
])
def test_fuzzy_term_matching(a, b, same):
    assert same_term(a, b) is same


def test_phrase_matching_by_stems_and_fuzzily():
    text = "Developed web applications in Javascript; maintained the databases"
    s, n = set(stems(text)), "developed web applications in javascript maintained the databases"
    assert phrase_in("develop web application", s, n)
    assert phrase_in("JavaScript", s, n)
    assert not phrase_in("React", s, n)
    assert not phrase_in("SQL", s, n)


def test_onet_background_is_the_real_occupation_list():
    occupations = onet_occupations()
    assert len(occupations) > 900
    titles = {o["title"] for o in occupations}
    assert {"Web Developers", "Software Developers", "Chief Executives"} <= titles


def test_keyphrases_rank_job_specific_terms_above_common_job_words():
    web = next(o for o in onet_occupations() if o["title"] == "Web Developers")
    ranked = [p.lower() for p, _ in keyphrases(web["description"])]
    assert any("website" in p for p in ranked[:5])
    assert "develop" not in ranked[:5]
    assert keyphrases(web["description"]) == keyphrases(web["description"])  # deterministic


def test_json_job_and_text_job_are_structured():
    job = parse_job(sample_job())
    assert job["title"] == "Web Developer"
    assert job["required_skills"][:3] == ["HTML", "CSS", "JavaScript"]
    assert [k["source"] for k in job["keywords"][:8]] == ["listed"] * 8
    text = parse_job("Backend Engineer\n\nResponsibilities:\n- Design APIs\n- Run Postgres\n"
                     "Skills:\nPython, Go, Kubernetes\nBenefits\nFree lunch for everyone")
    assert text["title"] == "Backend Engineer"
    assert text["required_skills"] == ["Python", "Go", "Kubernetes"]
    assert "lunch" not in " ".join(k["phrase"].lower() for k in text["keywords"])
    assert text["sentences"]


def test_score_reports_every_component_and_stays_in_range():
    job = parse_job(sample_job())
    report = score_resume(sample_resume(), job)
    assert 0.0 <= report["score"] <= 1.0
    assert set(report["components"]) == set(WEIGHTS)
    recomputed = sum(c["score"] * c["weight"] for c in report["components"].values())
    assert report["score"] == pytest.approx(recomputed, abs=1e-3)
    kw = report["keywords"]
    assert set(kw["matched"]) | set(kw["missing"]) == {k["phrase"] for k in job["keywords"]}
    assert report["coverage_ceiling"] == report["components"]["keyword_coverage"]["score"]
    empty = score_resume({"basics": {"name": "X"}}, job)
    assert empty["score"] < report["score"]
    assert empty["components"]["sections"]["missing"] == ["summary", "work", "education", "skills"]


def test_bullet_quality_rule():
    assert bullet_is_good("Optimized an algorithm that holds the world record")
    assert not bullet_is_good("Successfully won Techcrunch Disrupt")
    assert not bullet_is_good("Led")


def test_reflexion_turns_report_and_notes_into_honest_directives():
    base = sample_resume()
    report = score_resume(base, parse_job(sample_job()))
    kinds = {d["kind"] for d in directives_from_ats(report)}
    assert "gap" in kinds and "strengthen_bullets" in kinds
    notes = directives_from_feedback("Please emphasise Javascript and add React; make it shorter."
                                     " Remove Techcrunch.", base)
    by_kind = {(d["kind"], d["target"]) for d in notes}
    assert ("emphasise", "Javascript") in by_kind
    assert ("declined", "React") in by_kind
    assert ("exclude", "Techcrunch") in by_kind
    assert ("tighten", "length") in by_kind


def test_text_resume_keeps_lines_verbatim_and_markdown_diff_shows_changes():
    resume = normalise_resume("Sam Lee\nEngineer\n\nExperience\nEngineer at Acme (2019 - 2021)\n"
                              "- Shipped the billing service\n\nSkills\nGo, SQL")
    assert resume["work"] == [{"position": "Engineer", "name": "Acme", "startDate": "2019",
                               "endDate": "2021", "highlights": ["Shipped the billing service"]}]
    md = render_markdown(resume)
    assert "### Engineer — Acme (2019 – 2021)" in md
    assert diff_markdown(md, md) == ""
    assert "+## Summary" in diff_markdown(md, render_markdown(
        {**resume, "basics": {**resume["basics"], "summary": "Engineer."}}))
