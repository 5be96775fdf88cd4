"""identities.yaml (seed 002 R1.2, R1.3, R6): loaded once, validated, failing fast with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.thematic_analysis.identities import (
    DEFAULT_IDENTITIES_PATH,
    IdentitiesConfigError,
    load_identities,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "thematic_analysis"


def test_default_identities_load_with_required_fields():
    identities = load_identities()
    assert [i.id for i in identities] == ["experience", "outcomes", "practicalities"]
    assert all(i.name and i.prompt_prefix for i in identities)


def test_loaded_once_per_process():
    assert load_identities() is load_identities(DEFAULT_IDENTITIES_PATH)


def test_description_is_optional():
    identities = load_identities(DATA / "identities_four.yaml")
    assert len(identities) == 4
    assert identities[0].description is None
    assert identities[1].description == "results, side effects, symptoms"


@pytest.mark.parametrize(("name", "message"), [
    ("identities_missing_prefix.yaml", "identities.0.prompt_prefix: Field required"),
    ("identities_duplicate.yaml", "duplicate identity id 'one'"),
    ("identities_empty.yaml", "identities: List should have at least 1 item"),
    ("identities_not_yaml.yaml", "is not valid YAML"),
    ("no_such_file.yaml", "cannot read identities file"),
])
def test_bad_file_fails_fast_with_a_clear_message(name, message):
    with pytest.raises(IdentitiesConfigError) as caught:
        load_identities(DATA / name)
    assert message in caught.value.message
    assert name in caught.value.message
    assert caught.value.code == "invalid_identities"


def test_unknown_key_is_refused(tmp_path):
    bad = tmp_path / "typo.yaml"
    bad.write_text("identities:\n  - id: a\n    name: A\n    prompt_prefx: x\n    prompt_prefix: y\n")
    with pytest.raises(IdentitiesConfigError, match="prompt_prefx: Extra inputs are not permitted"):
        load_identities(bad)
