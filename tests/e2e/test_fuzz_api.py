"""Property-based fuzzing of the whole HTTP API from its OpenAPI document (schemathesis).

Every generated request must get a non-5xx answer whose status and body match the
schema. The chat endpoint is excluded: it starts real pricing runs per request and is
covered by its own tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "schemathesis"


def test_fuzzed_requests_never_get_a_server_error_and_match_the_schema(stack: Stack):
    binary = str(Path(sys.executable).parent / "schemathesis")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    report = ARTIFACTS / "report.json"
    proc = subprocess.run(
        [binary, "run", f"{stack.base_url}/openapi.json",
         "--checks", "not_a_server_error,response_schema_conformance,status_code_conformance",
         "-H", f"Authorization: Bearer {stack.tokens['admin']}", "--max-examples", "15",
         "--phases", "examples,coverage,fuzzing", "--generation-deterministic",
         "--exclude-path-regex", "^/api/v1/chat$", "--report", "junit",
         "--report-junit-path", str(ARTIFACTS / "junit.xml")],
        capture_output=True, text=True, timeout=600)
    (ARTIFACTS / "output.txt").write_text(proc.stdout + proc.stderr)
    report.write_text(json.dumps({"returncode": proc.returncode}))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "passed" in proc.stdout
