"""A real Prometheus scrapes the embedded stack: every dashboard and alert expression returns data.

The module starts its own API and worker processes (like the ``stack`` fixture, on the
session's Temporal dev server and Postgres, with its own task queue) because it needs
settings the shared stack does not have: a worker ``/metrics`` port, a 2-second approval
SLA, JSON logs captured to files, and an OpenAI-compatible endpoint served by this test
(the only fake: the model), whose first answer is a 500 so one activity attempt fails.

Then it submits a few documents, approves one escalated run, lets another breach its
SLA, and asks Prometheus (Debian's ``prometheus`` package, scraping every second) for
every expression of every dashboard panel and alert rule. The log test feeds a form
whose essay holds a unique sentence and asserts the sentence never reaches a log line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from observability.dashboards import DASHBOARD_DIR, expressions
from tests import corpus
from tests.e2e.conftest import EXAMPLES, _free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "observability" / "prometheus" / "alerts.yml"
PROMETHEUS = shutil.which("prometheus")
UNIQUE_SENTENCE = f"Purple elephants negotiate quietly with the lighthouse keeper {uuid.uuid4().hex[:8]}"
TOKENS = {"submitter": "obs-submitter-token-000000000001", "reviewer": "obs-reviewer-token-00000000001",
          "admin": "obs-admin-token-0000000000000001"}


class FakeOpenAI(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: 500 on the first call, then a JSON answer with usage."""

    calls = 0
    saw_sentence = False
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        with FakeOpenAI.lock:
            FakeOpenAI.calls += 1
            first = FakeOpenAI.calls == 1
            FakeOpenAI.saw_sentence |= "Purple elephants negotiate" in json.dumps(body)
        if first:
            self._send(500, {"error": {"message": "upstream overloaded", "type": "server_error"}})
            return
        answer = {"grade": {"value": "8", "quote": "Grade: 8"},
                  "school": {"value": "Lincoln Middle School", "quote": "School: Lincoln"}}
        self._send(200, {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "gpt-4o-mini"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(answer)}}],
            "usage": {"prompt_tokens": 321, "completion_tokens": 42, "total_tokens": 363},
        })

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class ObservedStack:
    base_url: str
    worker_metrics: str
    logs: list[Path]
    prometheus_url: str

    def client(self, role: str) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30,
                            headers={"Authorization": f"Bearer {TOKENS[role]}"})

    def query(self, expr: str) -> list[dict[str, Any]]:
        res = httpx.get(f"{self.prometheus_url}/api/v1/query", params={"query": expr}, timeout=10)
        body = res.json()
        assert body.get("status") == "success", (expr, body)
        return body["data"]["result"]  # type: ignore[no-any-return]


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up ({url})")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def observed(dev_server: WorkflowEnvironment, pg_url: str, pool: object,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObservedStack]:
    if PROMETHEUS is None:
        pytest.skip("Debian's prometheus package is not installed (make system-deps installs it as root)")
    tmp = tmp_path_factory.mktemp("observability")
    llm = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=llm.serve_forever, daemon=True).start()
    api_port, worker_port, prom_port = _free_port(), _free_port(), _free_port()
    grants = {token: {"role": role, "subject": f"obs-{role}"} for role, token in TOKENS.items()}
    target = dev_server.client.service_client.config.target_host
    env = dict(
        os.environ, OVERSEER_DATABASE_URL=pg_url, OVERSEER_TEMPORAL_ADDRESS=target,
        OVERSEER_DATA_DIR=str(tmp), OVERSEER_API_TOKENS=json.dumps(grants),
        OVERSEER_ENVIRONMENT="test", OVERSEER_API_PORT=str(api_port),
        OVERSEER_TASK_QUEUE=f"e2e-observability-{uuid.uuid4().hex[:6]}",
        OVERSEER_METRICS_PORT_WORKER=str(worker_port), OVERSEER_METRICS_HOST_WORKER="127.0.0.1",
        OVERSEER_APPROVAL_SLA_SECONDS="2", OVERSEER_LOG_LEVEL="INFO", OVERSEER_LOG_FORMAT="json",
        OVERSEER_LLM_BASE_URL=f"http://127.0.0.1:{llm.server_address[1]}/v1",
        OVERSEER_LLM_API_KEY="test-key", OVERSEER_LLM_MODEL="gpt-4o-mini",
    )
    for key in ("OVERSEER_DRY_RUN", "DRY_RUN", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(key, None)
    logs = [tmp / "api.log", tmp / "worker.log"]
    api = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "services.api.main:app", "--host",
         "127.0.0.1", "--port", str(api_port)],
        env=env, stdout=logs[0].open("wb"), stderr=subprocess.STDOUT)
    worker = subprocess.Popen([sys.executable, "-m", "services.worker.main"], env=env,
                              stdout=logs[1].open("wb"), stderr=subprocess.STDOUT)
    config = tmp / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [
            {"job_name": "overseer-api", "static_configs": [{"targets": [f"127.0.0.1:{api_port}"]}]},
            {"job_name": "overseer-worker",
             "static_configs": [{"targets": [f"127.0.0.1:{worker_port}"]}]},
        ],
    }))
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn",
         "--enable-feature=exemplar-storage"],
        stdout=(tmp / "prometheus.log").open("wb"), stderr=subprocess.STDOUT)
    procs = [api, worker, prom]
    try:
        _wait_http(f"http://127.0.0.1:{api_port}/readyz", api, "the API")
        _wait_http(f"http://127.0.0.1:{worker_port}/metrics", worker, "the worker's /metrics")
        _wait_http(f"http://127.0.0.1:{prom_port}/-/ready", prom, "Prometheus")
        stack = ObservedStack(base_url=f"http://127.0.0.1:{api_port}",
                              worker_metrics=f"http://127.0.0.1:{worker_port}/metrics",
                              logs=logs, prometheus_url=f"http://127.0.0.1:{prom_port}")
        _run_documents(stack)
        yield stack
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        llm.shutdown()


def _form_with_sentence(missing: tuple[str, ...], seed: int) -> bytes:
    """A plain-text entry form (no OCR needed) whose essay contains UNIQUE_SENTENCE."""
    entry = corpus.make_entry(seed, drop=set(missing))
    entry = dataclasses.replace(entry, essay=f"{UNIQUE_SENTENCE}. {entry.essay}")
    return corpus.render_text([entry])


def _wait_status(client: httpx.Client, run_id: str, statuses: set[str], timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/runs/{run_id}").json()
        if body.get("status") in statuses:
            return body
        assert time.monotonic() < deadline, f"run {run_id} stuck in {body.get('status')}"
        time.sleep(0.2)


def _run_documents(stack: ObservedStack) -> None:
    sub, rev = stack.client("submitter"), stack.client("reviewer")
    submitted: list[str] = []
    clean = sub.post("/v1/submissions", files={"file": (
        "clean.pdf", (EXAMPLES / "clean_typed_form.pdf").read_bytes(), "application/pdf")})
    assert clean.status_code == 202, clean.text
    submitted.append(clean.json()["run_id"])
    for seed in (9101, 9102):
        res = sub.post("/v1/submissions", files={"file": (
            f"form-{seed}.txt", _form_with_sentence(("grade",), seed), "text/plain")})
        assert res.status_code == 202, res.text
        submitted.append(res.json()["run_id"])
    assert sub.get("/v1/runs/not-a-run").status_code in (404, 422)  # a 4xx series too
    runs = [_wait_status(sub, rid, {"completed", "awaiting_approval", "failed", "rejected"})
            for rid in submitted]
    waiting = [r["run_id"] for r in runs if r["status"] == "awaiting_approval"]
    assert len(waiting) >= 2, [(r["run_id"], r["status"]) for r in runs]
    # the 2-second SLA passes for both, then one is approved and one stays in the queue
    deadline = time.monotonic() + 60
    while True:
        types = [e["type"] for e in sub.get(f"/v1/runs/{waiting[0]}/events").json()["items"]]
        if "approval.sla_breached" in types:
            break
        assert time.monotonic() < deadline, types
        time.sleep(0.2)
    decided = rev.post(f"/v1/admin/approvals/{waiting[0]}/decision",
                       json={"decision": "approve", "updates": {"grade": "8"}})
    assert decided.status_code == 200, decided.text


def _promql(expr: str) -> str:
    """A dashboard/alert expression made evaluable on its own.

    Grafana's variables become their widest values; an alert's final ``<op> <number>``
    gets ``bool`` so it returns its series whether or not the alert would fire.
    """
    expr = (expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
            .replace("$__interval", "15s").replace('"$pipeline"', '".+"'))
    return re.sub(r"\s*(==|!=|>=|<=|>|<)\s*(-?[0-9.e]+)\s*$", r" \1 bool \2", expr.strip())


def _all_expressions() -> list[tuple[str, str]]:
    import yaml

    found = []
    for path in sorted(DASHBOARD_DIR.glob("*.json")):
        for title, expr in expressions(json.loads(path.read_text())):
            found.append((f"{path.stem}: {title}", expr))
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            found.append((f"alert {rule['alert']}", rule["expr"]))
    return found


def test_every_dashboard_and_alert_expression_returns_series(observed: ObservedStack):
    pending = dict(_all_expressions())
    assert len(pending) >= 40
    empty: dict[str, str] = {}
    deadline = time.monotonic() + 90
    while pending and time.monotonic() < deadline:
        empty = {}
        for name, expr in list(pending.items()):
            if observed.query(_promql(expr)):
                del pending[name]
            else:
                empty[name] = expr
        if pending:
            time.sleep(2)
    assert not pending, "expressions without data:\n" + "\n".join(
        f"  {name}: {_promql(expr)}" for name, expr in empty.items())


def test_alert_rules_load_and_evaluate(observed: ObservedStack):
    promtool = shutil.which("promtool")
    if promtool:
        checked = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True,
                                 text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    groups = httpx.get(f"{observed.prometheus_url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) >= 8
    assert all(rule["health"] in ("ok", "unknown") for rule in rules), rules


def test_both_targets_are_up_and_worker_exports_temporal_sdk_metrics(observed: ObservedStack):
    up = {r["metric"]["job"]: r["value"][1] for r in observed.query("up")}
    assert up == {"overseer-api": "1", "overseer-worker": "1"}
    text = httpx.get(observed.worker_metrics, timeout=10).text
    for name in ("temporal_workflow_task_schedule_to_start_latency_seconds_bucket",
                 "temporal_request_total", "overseer_runs_started_total",
                 "overseer_node_duration_seconds_bucket", "overseer_build_info"):
        assert name in text, name


def test_node_durations_carry_trace_id_exemplars(observed: ObservedStack):
    res = httpx.get(observed.worker_metrics, timeout=10,
                    headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert res.headers["content-type"].startswith("application/openmetrics-text")
    exemplars = re.findall(
        r'overseer_node_duration_seconds_bucket\{[^}]*\} \S+ # \{trace_id="([0-9a-f]{32})"\}', res.text)
    assert exemplars, res.text[:2000]


def test_the_essay_sentence_never_reaches_the_logs(observed: ObservedStack):
    lines = [line for path in observed.logs for line in path.read_text(errors="replace").splitlines()]
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert records, "no JSON log lines were written"
    assert FakeOpenAI.saw_sentence  # the essay did flow through the worker (into the prompt)
    assert not [line for line in lines if "Purple elephants negotiate" in line]
    stages = [r for r in records if r.get("message") == "stage completed"]
    assert stages and all(r.get("run_id") and r.get("pipeline") and "duration_ms" in r
                          and r.get("trace_id") for r in stages), stages[:3]
    for message in ("run started", "run completed"):
        assert any(r.get("message") == message and r.get("run_id") for r in records), message
