"""Issue 28 item 5, end to end: a misbehaving model must not cost the user the result.

The real stack (API and worker processes on the session's Temporal dev server and Postgres,
on their own task queue) talks to an OpenAI-compatible endpoint served by this test
(:mod:`tests.scripted_llm`, the only fake: the model). The endpoint behaves like a small
local model behind a busy server: first a 429 with ``Retry-After: 1``, then a 500, one answer
slower than the client's time-out, then plain prose where JSON or a tool call was asked,
invented values (a grade the form does not have, a quote the agreement does not contain,
code ids the codebook does not have, numbers the pricing facts do not have), and, for the
pricing report, a server that ignores ``stream: true``.

Each of the five pipelines runs the README's own example and must give an honest result:
document intake goes to a person with its reasons; the others finish with the offline
strategy (``rules``) recorded for the steps the model botched, having re-asked at most once
per step; nothing the model invented is applied; and the run's ``llm_usage`` counts exactly
the calls the endpoint received (pricing's intent classifier in the API included).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from tests.e2e.conftest import EXAMPLES, Stack, _base_env, _launch, _stop
from tests.e2e.test_user_graph_api import wait_for
from tests.scripted_llm import (
    PROSE,
    Action,
    Computed,
    Fail,
    Json,
    NoStream,
    ScriptedLLM,
    Seen,
    Slow,
    Text,
    ToolCall,
    message_text,
    system_text,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TIMEOUT_SECONDS = 5.0
"""``OVERSEER_LLM_TIMEOUT_SECONDS`` of the stack: :class:`Slow` answers take longer."""
MODEL = "gpt-4o-mini"

INVENTED_GRADE_QUOTE = "Grade Level: 9"
"""A line the degraded scan does not have (its grade line is blank)."""
INVENTED_CLAUSE = ("This Agreement renews automatically for successive terms and shall be "
                   "governed by the laws of the Republic of Atlantis.")
"""A sentence the Crunchbase licence does not contain."""
INVENTED_CODE_ID = "code-that-does-not-exist"
INVENTED_NUMBERS = ("37.5", "999.99")
INVENTED_SUMMARY = ("Leadership summary: raise every New price by 37.5% and sell ASTR 4 at "
                    "$999.99 to lift margin.")
"""A pricing summary whose numbers are in no fact the template gives."""
REASK_MARKER = "could not be used"
"""What every pipeline's re-ask message says (``REASK`` in each pipeline's model step)."""


def classify(body: dict[str, Any]) -> str:
    """Which pipeline step a chat-completions request comes from, by its system prompt."""
    system = system_text(body)
    kinds = (("You read essay-contest entry forms", "intake"),
             ("You review a commercial agreement", "due_diligence"),
             ("Code the sentences below for a thematic analysis", "thematic_coder"),
             ("Group these codes into themes", "thematic_theme"),
             ("You tailor a resume to a job", "resume"),
             ("You are a pricing analyst writing for leadership", "pricing_report"),
             ("Classify a pricing analyst's request", "pricing_intent"))
    return next((kind for marker, kind in kinds if marker in system), "other")


def _prompt(body: dict[str, Any]) -> str:
    return "\n".join(message_text(m) for m in body["messages"])


def invented_clause(body: dict[str, Any]) -> Action:
    """The clause agent proposes, for the first clause type it is asked about, a made-up quote."""
    asked = re.search(r"Clause types: (\w+) \(", _prompt(body))
    assert asked is not None, "the clause agent's prompt names no clause type"
    return ToolCall("propose_clause", {"clause_type": asked.group(1), "quote": INVENTED_CLAUSE})


def theme_with_an_invented_code(body: dict[str, Any]) -> Action:
    """A theme coder's answer citing one real code id of the prompt and one invented one."""
    real = re.search(r'"code_id": "([^"]+)"', _prompt(body))
    assert real is not None, "the theme prompt lists no code ids"
    return Json({"themes": [{"name": "Invented theme", "description": "made up",
                             "code_ids": [real.group(1), INVENTED_CODE_ID]}]})


RATE_LIMITED = Fail(429, retry_after=1)
SLOW = Slow(TIMEOUT_SECONDS + 2)
SCRIPTS: dict[str, list[Action]] = {
    # review_agent (3 attempts): the transients, then prose, and prose again when re-asked; a
    # second run gets an invented grade
    "intake": [RATE_LIMITED, Fail(500), Text(PROSE), Text(PROSE)],
    # search step 1: a made-up quote, then a 429 ends that step's agent; step 2: a 500;
    # step 3: prose instead of a tool call
    "due_diligence": [Computed(invented_clause), RATE_LIMITED, Fail(500)],
    # three coders in parallel: one is rate limited, one gets a 500, then all answer prose
    "thematic_coder": [RATE_LIMITED, Fail(500)],
    # one theme coder cites a code id that does not exist, the others answer prose
    "thematic_theme": [Computed(theme_with_an_invented_code)],
    # attempts 1-3 of the first draft: 429, 500, time-out; then prose
    "resume": [RATE_LIMITED, Fail(500), SLOW],
    # attempts 1-2: 429, 500; attempt 3: a server that does not stream, then invented numbers
    "pricing_report": [RATE_LIMITED, Fail(500), NoStream(Text(INVENTED_SUMMARY))],
}
DEFAULTS: dict[str, Action] = {
    "intake": Json({"grade": {"value": "9", "quote": INVENTED_GRADE_QUOTE}}),
    "pricing_report": Text(INVENTED_SUMMARY),
}


@pytest.fixture(scope="module")
def misbehaving(dev_server: WorkflowEnvironment, pg_url: str, pool: object,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, ScriptedLLM]]:
    """The stack pointed at a scripted endpoint; yields both (the endpoint's log is shared)."""
    llm = ScriptedLLM(classify, SCRIPTS, DEFAULTS).start()
    tokens = {"submitter": "e2e-llm-submitter-token-0000001",
              "reviewer": "e2e-llm-reviewer-token-00000001",
              "admin": "e2e-llm-admin-token-000000000001"}
    grants = {token: {"role": role, "subject": f"llm-{role}"} for role, token in tokens.items()}
    env = _base_env(dev_server, pg_url, tmp_path_factory.mktemp("overseer-misbehaving"), grants,
                    f"e2e-misbehaving-{uuid.uuid4().hex[:6]}", "")
    for key in [k for k in env if k.startswith("OVERSEER_LLM_")] + [
            "OVERSEER_DRY_RUN", "DRY_RUN", "OTEL_EXPORTER_OTLP_ENDPOINT"]:
        env.pop(key, None)
    env.update(OVERSEER_LLM_BASE_URL=llm.base_url, OVERSEER_LLM_API_KEY="scripted-key",
               OVERSEER_LLM_MODEL=MODEL, OVERSEER_LLM_TIMEOUT_SECONDS=str(TIMEOUT_SECONDS),
               OVERSEER_METRICS_PORT_WORKER="0")
    stack, api = _launch(env, tokens)
    try:
        yield stack, llm
    finally:
        _stop(stack, api)
        llm.stop()


# --- helpers ---------------------------------------------------------------------------------


def submit_and_wait(client: httpx.Client, path: str, statuses: set[str],
                    **request: Any) -> dict[str, Any]:
    """POST a run to ``path`` and poll ``GET /v1/runs/{id}`` until it reaches ``statuses``."""
    started = client.post(path, **request)
    assert started.status_code == 202, started.text
    return wait_for(client, started.json()["run_id"], statuses | {"failed"}, timeout=150)


def ledger(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """The run's ``llm.called`` events' data, in order."""
    events = client.get(f"/v1/runs/{run_id}/events").json()["items"]
    return [e["data"] for e in events if e["type"] == "llm.called"]


def assert_ledger_is_the_endpoint(client: httpx.Client, run: dict[str, Any],
                                  seen: list[Seen], *, failed: int) -> list[dict[str, Any]]:
    """``llm_usage``, the ledger and the endpoint agree: one ``llm.called`` per request received.

    Args:
        client: reads the run's events.
        run: ``GET /v1/runs/{id}``.
        seen: the requests the endpoint received for this run.
        failed: how many of them were failed calls (an error status, a time-out, an answer
            the client or the step could not read as JSON).

    Returns:
        The ledger entries.
    """
    entries = ledger(client, run["run_id"])
    total = run["llm_usage"]["total"]
    shown = [(s.kind, type(s.action).__name__) for s in seen]
    assert total["calls"] == len(entries) == len(seen), (total, len(entries), shown)
    assert total["failed"] == failed, (total, shown)
    assert {e["model"] for e in entries} == {MODEL}
    assert sum(e["input_tokens"] for e in entries) == total["input_tokens"]
    codes = [e.get("error_code") for e in entries]
    rate_limited = sum(isinstance(s.action, Fail) and s.action.status == 429 for s in seen)
    assert codes.count("llm_rate_limited") == rate_limited, codes
    return entries


def reasks(seen: list[Seen]) -> list[Seen]:
    """The requests that were a re-ask (their last user message names what was wrong)."""
    return [s for s in seen if REASK_MARKER in s.last_user]


# --- the five pipelines ----------------------------------------------------------------------


def test_document_intake_goes_to_a_person_with_its_reasons(
        misbehaving: tuple[Stack, ScriptedLLM]):
    """README example 2 (the degraded scan with a blank grade), twice: prose, then an invented grade.

    The scan scores under 0.5 with a field missing (its name and e-mail are read weakly), so
    seed §1.3 routes it to ``retry_extraction`` first, which asks the model for the missing
    grade; then to the review agent, whose proposal the reviewer sees.
    """
    stack, llm = misbehaving
    sub = stack.client("submitter")
    scan = {"files": {"file": ("scan.png", (EXAMPLES / "degraded_scan_missing_grade.png")
                               .read_bytes(), "image/png")}}
    waiting = {"awaiting_approval", "completed", "rejected"}

    # 429, 500, then prose on the last attempt and again when re-asked: a person decides,
    # told why
    run = submit_and_wait(sub, "/v1/submissions", waiting, **scan)
    seen = llm.requests("intake")
    assert run["status"] == "awaiting_approval", run.get("error")
    result, pending = run["result"], run["pending_approval"]
    assert result["record"]["grade"] is None and "grade" in result["missing_fields"]
    assert {"llm_malformed_response", "missing_grade"} <= set(result["review_reason_codes"])
    assert {"llm_malformed_response", "missing_grade"} <= set(pending["reason_codes"])
    # the retry's model call failed for good: straight to a person, no proposal to show
    assert result["tools_used"] == ["run_pipeline", "retry_extraction"]
    assert pending["payload"]["proposal"] is None
    assert result["strategy"] == "rules" and result["strategies"] == ["rules"]
    assert [type(s.action) for s in seen] == [Fail, Fail, Text, Text]
    assert len(reasks(seen)) == 1  # bounded: one re-ask naming what was wrong
    assert_ledger_is_the_endpoint(sub, run, seen, failed=4)

    # the model invents a grade with a line the form does not have: proposed, never applied
    since = seen[-1].at
    run = submit_and_wait(sub, "/v1/submissions", waiting, **scan)
    seen = llm.requests("intake", since=since)
    assert run["status"] == "awaiting_approval", run.get("error")
    assert run["result"]["record"]["grade"] is None
    proposal = run["pending_approval"]["payload"]["proposal"]
    assert proposal["updates"] == {} and proposal["acceptable"] is False
    assert proposal["suggestions"] == {"grade": "9"}
    assert proposal["unverified_fields"] == ["grade"]
    assert run["result"]["tools_used"] == ["run_pipeline", "retry_extraction", "review_agent"]
    assert [type(s.action) for s in seen] == [Json, Json]  # the retry's ask, the agent's
    assert_ledger_is_the_endpoint(sub, run, seen, failed=0)


def test_due_diligence_completes_with_verbatim_quotes(misbehaving: tuple[Stack, ScriptedLLM]):
    """README: the Crunchbase licence PDF, without sign-off; every agent turn misbehaves."""
    stack, llm = misbehaving
    sub = stack.client("submitter")
    pdf = EXAMPLES / "due_diligence" / "crunchbase_data_license.pdf"
    run = submit_and_wait(
        sub, "/v1/pipelines/due_diligence/runs", {"completed", "awaiting_approval", "rejected"},
        files={"file": (pdf.name, pdf.read_bytes(), "application/pdf")},
        data={"metadata": json.dumps({"require_signoff": False})})
    seen = llm.requests("due_diligence")
    assert run["status"] == "completed", run.get("error")
    output = run["result"]["output"]
    text, clauses = output["ingestion"]["text"], output["clauses"]
    found = [f for f in clauses["findings"] if f["status"] == "found"]
    assert len(found) >= 5
    # the model's only proposal was made up: refused, and every finding is the rules' own
    # verbatim slice of the agreement
    assert all(text[f["start"]:f["end"]] == f["quote"] for f in found)
    assert {f["strategy"] for f in found} == {"rules"}
    assert "Atlantis" not in json.dumps([clauses["findings"], output["summary"], output["risks"],
                                         output["checklist"]])
    assert [(r["quote"], r["reason"]) for r in clauses["rejected"]] == [
        (INVENTED_CLAUSE, "quote not found verbatim in the agreement")]
    # the model gave no finding: the labels say rules, not the model that was asked
    assert clauses["strategy"] == "rules" and clauses["strategies"] == ["rules"]
    assert run["result"]["strategies"] == ["rules"]
    # why each search step fell back to the rules, in the result and the final event
    fallbacks = [(f["step"], f["code"]) for f in run["result"]["fallbacks"]]
    assert fallbacks == [(1, "llm_rate_limited"), (2, "llm_unavailable"),
                         (3, "llm_malformed_response")]
    assert clauses["fallbacks"] == run["result"]["fallbacks"]
    events = sub.get(f"/v1/runs/{run['run_id']}/events").json()["items"]
    final = next(e for e in events if e["type"] == "run.completed")
    assert final["data"]["snapshot"]["fallbacks"] == run["result"]["fallbacks"]
    # step 3: prose instead of a tool call, asked once more naming it, prose again
    assert [type(s.action) for s in seen] == [Computed, Fail, Fail, Text, Text]
    assert [s is seen[4] for s in reasks(seen)] == [True]
    assert "called no tool" in seen[4].last_user
    entries = assert_ledger_is_the_endpoint(sub, run, seen, failed=4)
    assert [e["error_code"] for e in entries] == [None, "llm_rate_limited", "llm_unavailable",
                                                  "llm_malformed_response",
                                                  "llm_malformed_response"]
    report = sub.get(f"/v1/runs/{run['run_id']}/report.md")
    assert report.status_code == 200 and "Atlantis" not in report.text


def test_thematic_analysis_codes_with_the_rules(misbehaving: tuple[Stack, ScriptedLLM]):
    """README: the BrewBox reviews; coders answer prose (the run used to fail coding_failed)."""
    stack, llm = misbehaving
    sub = stack.client("submitter")
    data = (EXAMPLES / "thematic_analysis" / "reviews.csv").read_bytes()
    run = submit_and_wait(
        sub, "/v1/pipelines/thematic_analysis/runs", {"completed", "awaiting_approval", "rejected"},
        files={"file": ("reviews.csv", data, "text/csv")},
        data={"metadata": json.dumps({"account_id": "brewbox", "start_date": "2024-01-01",
                                      "end_date": "2024-12-31"})})
    coders, theme_coders = llm.requests("thematic_coder"), llm.requests("thematic_theme")
    assert run["status"] == "completed", run.get("error")
    out = run["result"]["output"]
    assert out["errors"] == [] and out["outcome"] == "themes" and out["themes"]
    # every coder fell back to the rules after one re-ask; two theme coders did too
    assert sorted(r["strategy"] for r in out["coder_results"]) == ["rules"] * 3
    assert {r["fallback"]["code"] for r in out["coder_results"]} == {"llm_malformed_response"}
    by_stage = [(f["stage"], f["code"]) for f in out["fallbacks"]]
    assert sorted(by_stage) == [("coding", "llm_malformed_response")] * 3 + [
        ("themes", "llm_malformed_response")] * 2
    assert out["strategies"] == [f"llm:{MODEL}", "rules"]
    # 3 coders: 429 + 500 + 3 × (prose, re-ask); 3 theme coders: 1 JSON + 2 × (prose, re-ask)
    assert len(coders) == 8 and len(reasks(coders)) == 3
    assert len(theme_coders) == 5 and len(reasks(theme_coders)) == 2
    entries = assert_ledger_is_the_endpoint(sub, run, coders + theme_coders, failed=2 + 6 + 4)
    # token_usage counts every call that got a reply (the 429 and the 500 did not)
    usage = out["token_usage"]
    assert usage["calls"] == len(entries) - 2
    assert usage["prompt_tokens"] == run["llm_usage"]["total"]["input_tokens"]
    # the invented code id is nowhere; every theme stands on codes of the codebook
    codebook = {c["code_id"] for c in out["codebook"]}
    assert all(set(t["code_ids"]) <= codebook for t in out["themes"])
    assert INVENTED_CODE_ID not in json.dumps(out)
    ids = sorted({q for t in out["themes"] for q in t["quote_ids"]})
    quotes = stack.client("reviewer").get(f"/v1/runs/{run['run_id']}/quotes",
                                          params={"ids": ",".join(ids)}).json()["quotes"]
    assert set(quotes) == set(ids) and all(q in data.decode() for q in quotes.values())


def test_resume_tailoring_drafts_with_the_rules(misbehaving: tuple[Stack, ScriptedLLM]):
    """README: the JSON Resume sample × O*NET Web Developers; 429, 500, time-out, then prose."""
    stack, llm = misbehaving
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    body = json.loads((EXAMPLES / "resume_tailoring" / "request.json").read_text())
    run = submit_and_wait(sub, "/v1/pipelines/resume_tailoring/runs",
                          {"awaiting_approval", "completed", "rejected"}, json=body)
    seen = llm.requests("resume")
    assert run["status"] == "awaiting_approval", run.get("error")
    assert run["result"]["strategy"] == "rules"
    assert any(c["action"] == "drafted_by_rules" and "llm_malformed_response" in c["detail"]
               for c in run["result"]["change_log"])
    entries = assert_ledger_is_the_endpoint(sub, run, seen, failed=len(seen))
    assert [e["error_code"] for e in entries[:3]] == ["llm_rate_limited", "llm_unavailable",
                                                      "llm_unavailable"]
    assert entries[2]["latency_ms"] >= TIMEOUT_SECONDS * 1000  # the client gave up waiting
    # each drafting round: the prose, one re-ask naming the parse error, then the rules draft
    answered = [s for s in seen if isinstance(s.action, Text)]
    rounds = sorted({e["step"] for e in entries})
    assert len(answered) == 2 * len(rounds) and len(reasks(seen)) == len(rounds)
    assert all("no JSON object" in s.last_user for s in reasks(seen))

    decided = rev.post(f"/v1/admin/approvals/{run['run_id']}/decision",
                       json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    done = wait_for(sub, run["run_id"], {"completed", "rejected", "failed"}, timeout=60)
    assert done["status"] == "completed", done.get("error")
    from activities.resume_tailoring.honesty import find_violations
    from activities.resume_tailoring.resume import schema_errors

    report = done["result"]["output"]["finalization_report"]
    assert schema_errors(report["resume"]) == []
    assert find_violations(report["resume"], body["input"]["base_resume"]) == []
    assert len(llm.requests("resume")) == len(seen)  # approving asks the model nothing


def test_pricing_composite_ask_reports_from_the_template(misbehaving: tuple[Stack, ScriptedLLM]):
    """README: the composite ask; the report's model does not stream, then invents numbers."""
    stack, llm = misbehaving
    with httpx.Client(base_url=stack.base_url, timeout=150, headers={
            "Authorization": f"Bearer {stack.tokens['submitter']}"}) as chat:
        paused = chat.post("/api/v1/chat", json={
            "message": "Propose Q1 pricing updates ensuring hierarchy; summarize"})
    assert paused.status_code == 202, paused.text
    assert paused.json()["awaiting_approval"] is True
    thread_id = paused.json()["thread_id"]
    final = stack.client("reviewer").post("/api/v1/chat/approve", json={"thread_id": thread_id})
    assert final.status_code == 200, final.text
    event = final.json()
    sub = stack.client("submitter")
    run = wait_for(sub, thread_id, {"completed", "rejected", "failed"}, timeout=60)
    assert run["status"] == "completed", run.get("error")
    result = run["result"]
    # the template report, recorded as such, with why the model's summary was not used
    assert event["strategy"] == result["strategy"] == "rules"
    assert result["strategies"] == ["rules"]
    assert event["fallback"]["code"] == result["fallback"]["code"] == "llm_invented_numbers"
    assert all(n in result["fallback"]["message"] for n in INVENTED_NUMBERS)
    for text in (event["message"], result["report"]):
        assert text.startswith("Pricing review") and not any(n in text for n in INVENTED_NUMBERS)
    # attempt 1: 429; attempt 2: 500; attempt 3: an unreadable stream, one re-ask naming it
    seen = llm.requests("pricing_report")
    assert [type(s.action) for s in seen] == [Fail, Fail, NoStream, Text]
    assert all(s.stream for s in seen)
    assert [s is seen[3] for s in reasks(seen)] == [True]
    assert "could not be read" in seen[3].last_user
    # the API's optional intent classifier, asked before the run exists (its prose is
    # ignored and the rules route), is in the run's ledger too (issue 28 item 6)
    asked = llm.requests("pricing_intent")
    assert [type(s.action) for s in asked] == [Text]
    entries = assert_ledger_is_the_endpoint(sub, run, [*asked, *seen], failed=3)
    assert [(e["attempt"], e["call"], e["outcome"]) for e in entries
            if e["node"] != "intent_classifier"] == [
        (1, 1, "error"), (2, 1, "error"), (3, 1, "error"), (3, 2, "ok")]
    assert [(e["task"], e["outcome"]) for e in entries if e["node"] == "intent_classifier"] == [
        ("routing", "ok")]
