"""Each clause extractor on real agreements (ScanCode licence texts), and its attributes."""

from __future__ import annotations

import re

import pytest

from activities.due_diligence import attributes as attrs
from activities.due_diligence.clause_types import CLAUSE_TYPE_NAMES
from activities.due_diligence.clauses import extract_clauses, validate
from activities.due_diligence.ingest import ingest_text
from activities.due_diligence.risk import score_risks
from activities.due_diligence.text import Sentence, sentences

pytest.importorskip("licensedcode")
from activities.due_diligence.samples import license_text  # noqa: E402
from tests.unit.test_due_diligence_accuracy import anchor_spans, labels  # noqa: E402


def _findings(key: str) -> dict[str, dict]:
    result = extract_clauses(ingest_text(license_text(key)))
    return {f["clause_type"]: f for f in result["findings"]}


def _cases() -> list[tuple[str, str]]:
    """Per clause type, up to three labelled agreements where it is present."""
    cases = []
    for ctype in CLAUSE_TYPE_NAMES:
        keys = [k for k, label in labels("dev").items() if ctype in label][:3]
        cases += [(ctype, k) for k in keys]
    return cases


@pytest.mark.parametrize(("clause_type", "key"), _cases())
def test_extractor_finds_the_labelled_clause(clause_type: str, key: str) -> None:
    finding = _findings(key)[clause_type]
    assert finding["status"] == "found"
    text = license_text(key)
    assert text[finding["start"]:finding["end"]] == finding["quote"]
    spans = anchor_spans(text, labels("dev")[key][clause_type]["anchors"])
    assert any(s < finding["end"] and finding["start"] < e for s, e in spans)
    assert 0 < finding["confidence"] <= 1


@pytest.mark.parametrize(("clause_type", "key"), [
    ("governing_law", "amazon-redshift-jdbc"), ("indemnification", "intel-scl"),
    ("confidentiality", "intel-scl"), ("auto_renewal", "couchbase-enterprise"),
    ("audit_rights", "android-sdk-2021"), ("assignment", "netapp-sdk-aug2020"),
])
def test_absent_clause_is_not_found(clause_type: str, key: str) -> None:
    finding = _findings(key)[clause_type]
    assert finding["status"] == "not_found"
    assert finding["quote"] is None and finding["searches"] == 3


def test_attributes_on_real_agreements() -> None:
    def attributes(key: str, clause_type: str) -> dict:
        return _findings(key)[clause_type]["attributes"]

    for key, place in [("crunchbase-data-2019-12-17", "California"),
                       ("oxygen-xml-webhelp-eula", "England and Wales"),
                       ("slint-commercial-2.0", "Germany"), ("jide-sla", "California")]:
        assert attributes(key, "governing_law")["jurisdiction"]["name"] == place
    cap = attributes("netapp-sdk-aug2020", "limitation_of_liability")["cap"]
    assert cap["amounts"][0]["amount"] == 100.0 and cap["amounts"][0]["currency"] == "USD"
    assert attributes("cloudera-express", "limitation_of_liability")["cap"]["basis"] == "fees_paid"
    assert attributes("intel-scl", "limitation_of_liability")["cap_stated"] is False
    assert attributes("cloudera-express", "indemnification")["indemnitor"] == "licensee"
    termination = attributes("couchbase-enterprise", "termination")
    assert termination["notice_period_days"] == 10 and termination["for_convenience"] is True
    assignment = attributes("crunchbase-data-2019-12-17", "assignment")
    assert assignment["change_of_control"] is True and assignment["consent_required"] is True
    assert attributes("appsflyer-framework", "auto_renewal")["renewal_period_days"] == 360


def test_attribute_spans_are_slices() -> None:
    text = "This Agreement shall be governed by the laws of the State of New York, USA."
    found = attrs.jurisdiction(text, 0, len(text))
    assert found["name"] == "New York" and text[found["start"]:found["end"]] == "New York"
    text = "Total liability shall not exceed the greater of US$5,000 or the fees paid."
    cap = attrs.liability_cap(text, 0, len(text))
    assert cap["basis"] == "fixed_or_fees" and cap["amounts"][0]["amount"] == 5000.0
    assert text[cap["start"]:cap["end"]] == cap["text"]
    assert attrs.periods("thirty (30) days' prior written notice", 0, 38)[0]["days"] == 30


def test_validation_refuses_quotes_that_are_not_slices() -> None:
    text = "This Agreement shall be governed by the laws of the State of Delaware."
    good = {"start": 0, "end": len(text), "quote": text, "strength": 1.0}
    forged = {**good, "quote": text.replace("Delaware", "Texas")}
    unrelated = {"start": 0, "end": 14, "quote": text[:14], "strength": 1.0}
    valid, missing = validate(text, {"governing_law": [good, forged, unrelated]}, ["governing_law"])
    assert valid["governing_law"] == [good] and missing == []


def test_missing_protective_clause_is_a_risk() -> None:
    result = extract_clauses(ingest_text(license_text("amazon-redshift-jdbc")))
    risks = score_risks(result)
    assert "risk:no_governing_law" in {r["id"] for r in risks["items"]}


# --- pass 4 rules (issue 13): real sentences from the seen sets (dev, held-out 1-3) ----------


def _sentence_with(key: str, fragment: str) -> tuple[str, Sentence]:
    """The text of a seen agreement and the sentence holding ``fragment`` (whitespace-insensitive)."""
    text = license_text(key)
    hit = re.search(r"\s+".join(re.escape(w) for w in fragment.split()), text)
    assert hit, (key, fragment)
    return text, next(s for s in sentences(text) if s.start <= hit.start() < s.end)


def _validates(clause_type: str, key: str, fragment: str) -> bool:
    """Whether that sentence passes its type's validation (a trigger, no exclusion)."""
    text, sent = _sentence_with(key, fragment)
    cand = {"start": sent.start, "end": sent.end, "quote": text[sent.start:sent.end],
            "context_start": sent.context_start, "strength": 1.0}
    valid, _ = validate(text, {clause_type: [cand]}, [clause_type])
    return bool(valid[clause_type])


@pytest.mark.parametrize(("clause_type", "key", "fragment"), [
    # A company suffix's full stop does not end the window ("Inc. be liable", "LTD. OR").
    ("limitation_of_liability", "openvpn-as-eula", "In no event shall OpenVPN Technologies, Inc. be liable"),
    ("limitation_of_liability", "jgraph-general", "IN NO EVENT SHALL JGRAPH LTD. OR ITS SUPPLIERS BE LIABLE"),
    # "Law" wrapped in emphasis marks.
    ("governing_law", "jgraph-general", "governed by the _Law of England and Wales_"),
    # The cue before "termination"; a permission that lapses; a licence key revoked or expired.
    ("termination", "rar-winrar-eula", "the allowance lapses immediately and automatically"),
    ("termination", "rar-winrar-eula", "shall result in immediate and automatic termination of this license"),
    ("termination", "nvidia-apex-sdk-eula-2011", "will result in automatic termination of this license"),
    ("termination", "openvpn-as-eula", "will be subject to revocation and deactivation"),
    ("termination", "openvpn-as-eula", "Once an activated license key expires or becomes invalid"),
    # A licence transfer named by what goes with it.
    ("assignment", "jgraph-general", "You may transfer the Software and documentation on a permanent basis"),
    ("assignment", "ati-eula", "transfer all your license rights in the Software"),
    ("assignment", "rar-winrar-eula",
     "may be permanently transferred, in its entirety, if the recipient agrees"),
    # A duty to defend without the word "indemnify".
    ("indemnification", "vnc-viewer-ios",
     "will be solely responsible for the investigation, defense, settlement and discharge"),
    # "does not include any right to: (i) redistribute" still prohibits.
    ("license_restrictions", "duende-sla-2022", "does not include any right to: (i) redistribute"),
])
def test_pass4_rule_accepts_real_sentence(clause_type: str, key: str, fragment: str) -> None:
    assert _validates(clause_type, key, fragment)


@pytest.mark.parametrize(("clause_type", "key", "fragment"), [
    # Assigning the agreement itself is assignment, not a use restriction.
    ("license_restrictions", "openvpn-as-eula", "may not be assigned, sublicensed, or otherwise transferred"),
    # A support-scope statement prohibits nothing.
    ("license_restrictions", "tanuki-maintenance",
     "TSIMS shall not include, without limitation, relocation or transfer"),
])
def test_pass4_rule_refuses_real_sentence(clause_type: str, key: str, fragment: str) -> None:
    assert not _validates(clause_type, key, fragment)


def test_pass4_negated_defence_duty_is_not_an_indemnity() -> None:
    text = ("Licensor will not be responsible for the defense of any claim arising from "
            "modifications made by you.")
    cand = {"start": 0, "end": len(text), "quote": text, "strength": 1.0}
    valid, _ = validate(text, {"indemnification": [cand]}, ["indemnification"])
    assert valid["indemnification"] == []


def test_pass4_attributes_on_seen_sentences() -> None:
    text, sent = _sentence_with("jgraph-general", "governed by the _Law of England and Wales_")
    found = attrs.jurisdiction(text, sent.start, sent.end)
    assert found["name"] == "England and Wales"  # across the line break inside the name
    assert text[found["start"]:found["end"]] == found["text"]
    text, sent = _sentence_with("actuate-birt-ihub-ftype-sla",
                                "governed by California and controlling U.S. federal law")
    found = attrs.jurisdiction(text, sent.start, sent.end)
    assert found["name"] == "California"  # no "laws of": the place right after "governed by"
    assert text[found["start"]:found["end"]] == "California"
    text, sent = _sentence_with("embedthis-tou-2022", "shall be limited 100% of the fees paid")
    cap = attrs.liability_cap(text, sent.start, sent.end)
    assert cap is not None and cap["basis"] == "fees_paid"


# Pass 5: rules learnt from held-out 4's errors (seen), each checked on a real sentence.
@pytest.mark.parametrize(("clause_type", "key", "fragment"), [
    # A renewal named "extended" ("shall be automatically extended to one or more Renewal Term(s)").
    ("auto_renewal", "qt-commercial-agreement-4.4.1",
     "shall be automatically extended to one or more Renewal Term"),
    # A right to terminate with words between "right" and "to terminate".
    ("termination", "vaadin-cvdl-4.0", "Licensor has the right, in addition and without prejudice"),
    # A licence transfer whose object comes after a qualifying phrase.
    ("assignment", "winzip-eula",
     "You may, however, transfer subject to WinZip's license transfer authorization"),
    # Limits of the grant without "may not".
    ("license_restrictions", "jsel-2.0", "Commercial Use of Original Software requires a signed approval"),
    ("license_restrictions", "jsel-2.0", "The grant explicitly does not apply to Commercial Use"),
])
def test_pass5_rule_accepts_real_sentence(clause_type: str, key: str, fragment: str) -> None:
    assert _validates(clause_type, key, fragment)


@pytest.mark.parametrize(("clause_type", "key", "fragment"), [
    # Assigning the agreement itself, active voice, is assignment, not a use restriction.
    ("license_restrictions", "telerik-eula",
     "You may not assign, sublicense, sub-contract, or otherwise transfer this Agreement"),
    ("license_restrictions", "tenable-nessus",
     "You may not assign or otherwise transfer this Agreement without"),
    # A definition ("can not be compiled ... without a copy") prohibits nothing.
    ("license_restrictions", "vaadin-cvdl-4.0", "Developer who edits source code that can not be compiled"),
    # Saying what is Confidential Information imposes no duty.
    ("confidentiality", "winzip-eula",
     "If the Software You have received with this EULA is a pre-commercial release"),
    # An assignment of copyright ownership is not an assignment of the agreement.
    ("assignment", "jsel-2.0", "Contributor hereby assigns to JSG joint ownership"),
    # A privacy notice's purpose for collected data is not an audit right.
    ("audit_rights", "leap-motion-sdk-2019", "Leap Motion may use the information collected to facilitate"),
])
def test_pass5_rule_refuses_real_sentence(clause_type: str, key: str, fragment: str) -> None:
    assert not _validates(clause_type, key, fragment)


def test_pass5_a_license_restriction_with_a_prohibited_use_still_counts() -> None:
    # The active-voice assignment exclusion keeps sentences that also prohibit a use.
    text = "You may not assign this Agreement or distribute the Software to any third party."
    cand = {"start": 0, "end": len(text), "quote": text, "strength": 1.0}
    valid, _ = validate(text, {"license_restrictions": [cand]}, ["license_restrictions"])
    assert valid["license_restrictions"]


def test_pass5_cap_read_across_an_abbreviation() -> None:
    text, sent = _sentence_with("zendesk-appdev-api-2022",
                                "SHALL IN NO EVENT EXCEED ONE HUNDRED U.S. DOLLARS")
    cap = attrs.liability_cap(text, sent.start, sent.end)
    assert cap is not None and cap["basis"] == "fixed_amount"
    assert {a["amount"] for a in cap["amounts"]} == {100.0}
    assert text[cap["start"]:cap["end"]] == cap["text"]


# --- pass 6 rules (issue 13): held-out 5's errors, now seen ------------------------------------


def test_pass6_benchmarking_results_are_confidential() -> None:
    # "benchmarking", not only "benchmark", names the results a licensee may not disclose.
    assert _validates("confidentiality", "liferay-dxp-eula-2.0.0-2023-06",
                      "disclose the results of any benchmarking of the Software")


def test_pass6_hyphenated_third_party_is_read() -> None:
    text = "Licensee shall not disclose the source code or any related information to any third-party."
    cand = {"start": 0, "end": len(text), "quote": text, "strength": 1.0}
    valid, _ = validate(text, {"confidentiality": [cand]}, ["confidentiality"])
    assert valid["confidentiality"]


@pytest.mark.parametrize(("text", "automatic"), [
    # A renewal someone may ask for is not automatic ...
    ("This Agreement can be renewed under the terms set forth in Section 6 for a successive "
     "subscription term.", False),
    ("Licensee may renew this license for additional one-year terms by paying the fee.", False),
    # ... unless the sentence says it is.
    ("The term is automatically renewed for successive periods of one year, but the Customer "
     "may cancel the renewal.", True),
])
def test_pass6_a_renewal_on_request_is_not_automatic(text: str, automatic: bool) -> None:
    cand = {"start": 0, "end": len(text), "quote": text, "strength": 1.0}
    valid, _ = validate(text, {"auto_renewal": [cand]}, ["auto_renewal"])
    assert bool(valid["auto_renewal"]) is automatic
    if not automatic:
        assert not _validates("auto_renewal", "jetbrains-toolbox-open-source-3",
                              "This Agreement can be renewed under the terms set forth")


# --- pass 7 rules (issue 13): held-out 6's errors, now seen ------------------------------------


@pytest.mark.parametrize(("clause_type", "key", "fragment"), [
    # A choice of law without "governed": disputes "are exclusively subject to the law of".
    ("governing_law", "linotype-eula", "are exclusively subject to the law of the Federal Republic"),
    # A licence transfer named by its gerund, and "these Terms" transferred in a list.
    ("assignment", "linotype-eula", "Transferring the license to a third party is essentially not"),
    ("assignment", "github-codeql-terms-2020", "or transfer the Software or these Terms to any third"),
])
def test_pass7_rule_accepts_real_sentence(clause_type: str, key: str, fragment: str) -> None:
    assert _validates(clause_type, key, fragment)


@pytest.mark.parametrize(("clause_type", "key", "fragment"), [
    # A definition prohibits nothing, even with "shall not mean any distribution".
    ("license_restrictions", "linotype-eula", "\"Personal or Internal Business Use\" shall mean use"),
    # A covenant not to sue is not a restriction on use.
    ("license_restrictions", "jrunner", "you will not bring any claim for infringement thereof"),
])
def test_pass7_rule_refuses_real_sentence(clause_type: str, key: str, fragment: str) -> None:
    assert not _validates(clause_type, key, fragment)


def test_pass7_confidentiality_heading_without_the_word() -> None:
    # Linotype's Article 5 ("Confidentiality Obligation") never says "confidential" in its
    # sentences; under that heading "prevent unauthorized access" is the duty.
    finding = _findings("linotype-eula")["confidentiality"]
    assert finding["status"] == "found"
    assert "prevent unauthorized access to the Font Software" in finding["quote"]


def test_pass7_attributes_on_seen_sentences() -> None:
    text, sent = _sentence_with("jrunner", "This Agreement will be governed by the laws the State")
    found = attrs.jurisdiction(text, sent.start, sent.end)
    assert found["name"] == "California"  # "laws the State of" (sic)
    text, sent = _sentence_with("slysoft-eula", "entire liability and your exclusive remedy shall be")
    cap = attrs.liability_cap(text, sent.start, sent.end)
    assert cap is not None and cap["basis"] == "fees_paid"  # a refund of the price paid
    assert text[cap["start"]:cap["end"]] == cap["text"]
    assert attrs.liability_cap("Your exclusive remedy is repair or replacement of the media.", 0, 60) is None


# --- pass 8 rules (issue 13): held-out 7's errors, now seen ------------------------------------


@pytest.mark.parametrize(("clause_type", "key", "fragment"), [
    # A duty to defend without "indemnify" or "hold harmless".
    ("indemnification", "hp-enterprise-eula", "HPE will defend and/or settle any claims against you"),
    ("indemnification", "ms-developer-services-agreement-2018-06",
     "We will defend you against any claims made by an unaffiliated third-party"),
    # A choice of law whose subject carries a long parenthesis.
    ("governing_law", "ms-developer-services-agreement-2018-06",
     "the laws of the state where you live (or, if a business"),
])
def test_pass8_rule_accepts_real_sentence(clause_type: str, key: str, fragment: str) -> None:
    assert _validates(clause_type, key, fragment)


@pytest.mark.parametrize("text", [
    "QUALCOMM AUSTRIA HAS NO OBLIGATION TO DEFEND, INDEMNIFY OR HOLD YOU HARMLESS UNDER THIS AGREEMENT.",
    "Licensor will not defend any claims arising from your modifications of the Software.",
])
def test_pass8_a_refused_defence_duty_is_not_an_indemnity(text: str) -> None:
    cand = {"start": 0, "end": len(text), "quote": text, "strength": 1.0}
    valid, _ = validate(text, {"indemnification": [cand]}, ["indemnification"])
    assert valid["indemnification"] == []


# --- issue 28 item 1: "<Place> state law governs", and laws split by where you acquired ---------


def _sentence_span(text: str, needle: str) -> tuple[int, int]:
    at = text.index(needle)
    return text.rfind(".", 0, at) + 1, text.index(".", at + len(needle)) + 1


def test_place_state_law_governs_names_the_place() -> None:
    """Real sentences of the class (ms-visual-2008-runtime, ms-visual-studio-2017), not the one
    the issue quotes: "Washington state law governs" / "Washington State law applies"."""
    for key, needle in (("ms-visual-2008-runtime", "Washington state law governs"),
                        ("ms-visual-studio-2017", "Washington State law applies")):
        text = license_text(key)
        start, end = _sentence_span(text, needle)
        found = attrs.jurisdiction(text, start, end)
        assert found is not None and found["name"] == "Washington" and found["country"] == "US"
        assert text[found["start"]:found["end"]] == "Washington"


def test_a_split_jurisdiction_is_reported_with_each_condition_and_no_invented_place() -> None:
    text = license_text("ms-visual-2008-runtime")
    at = text.index("If you acquired the software in the United States")
    end = text.index("laws of that country apply", at) + len("laws of that country apply.")
    found = attrs.jurisdiction(text, at, end)
    assert found is not None and found["name"] == "Washington"
    split = found["split"]
    assert [c["where"] for c in split] == ["United States", "any other country"]
    us, other = split
    assert [law["name"] for law in us["laws"]] == ["Washington", None]
    assert us["laws"][1]["text"].lower() == "the laws of the state where you live"
    assert [law["name"] for law in other["laws"]] == [None]  # "the laws of that country"
    for cond in split:  # every law is a verbatim slice; a place is given only when named
        for law in cond["laws"]:
            assert text[law["start"]:law["end"]] == law["text"]
            assert law["name"] is None or law["name"] in law["text"]


def test_a_law_without_its_place_is_not_given_one() -> None:
    """autoit-eula: "If you acquired this product in the United Kingdom, this EULA is governed
    by the laws of the United Kingdom. If this product was acquired outside the United
    Kingdom, then local law may apply." """
    text = license_text("autoit-eula")
    start = text.index("If you acquired this product in the United Kingdom")
    end = _sentence_span(text, "then local law may apply")[1]
    found = attrs.jurisdiction(text, start, end)
    assert found is not None and found["name"] == "United Kingdom"
    assert [c["where"] for c in found["split"]] == ["United Kingdom", "outside United Kingdom"]
    assert [(law["name"], law["text"]) for law in found["split"][1]["laws"]] == [
        (None, "local law")]
    alone = attrs.jurisdiction(text, *_sentence_span(text, "then local law may apply"))
    assert alone is not None and alone["name"] is None and alone["country"] is None


def test_the_report_states_a_split_as_such() -> None:
    from activities.due_diligence.report import _attributes

    text = license_text("ms-visual-2008-runtime")
    at = text.index("If you acquired the software in the United States")
    end = text.index("laws of that country apply", at) + len("laws of that country apply.")
    line = _attributes({"jurisdiction": attrs.jurisdiction(text, at, end)})
    assert line.startswith("jurisdiction: split by where the licence was acquired")
    assert "if acquired in United States: Washington, “The laws of the state where you live” " \
           "(no place named)" in line
    assert "if acquired in any other country: “the laws of that country” (no place named)" in line
