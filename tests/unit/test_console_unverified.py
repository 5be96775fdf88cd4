"""Issue 17: a model's value whose quote is not in the document is shown plainly in the
console as unverified, and never pre-filled as the value to approve."""

from types import SimpleNamespace

from services.api.routes.console.items import _field_rows
from services.api.routes.console.render import templates


def test_an_unverified_value_is_shown_with_its_note_and_not_prefilled():
    approval = SimpleNamespace(pipeline="document_intake", payload={
        "kind": "review", "record": {"student_name": "Ana Ruiz", "grade": None},
        "missing_fields": ["grade"],
        "proposal": {"updates": {}, "evidence": {}, "suggestions": {"grade": "9"},
                     "notes": {"grade": "quote not found in the document"}}})
    rows = {r["name"]: r for r in _field_rows(approval, None)}
    assert rows["grade"]["value"] == ""  # nothing pre-filled
    assert rows["grade"]["unverified"] == "9"
    html = templates.get_template("_fields.html").render(
        fields=list(rows.values()), readonly=False, payload_kind="review", error_fields={})
    assert "quote not found in the document" in html
    assert 'id="field-grade" value=""' in html
