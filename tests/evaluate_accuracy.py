"""Field accuracy and auto-completion rate of document_intake on the labelled corpus.

Runs every document of :func:`tests.corpus.labelled_set` through the real workflow
(Temporal dev server, embedded Postgres, the real worker in-process) and compares
each run's record with the values written on the form::

    .venv/bin/python -m tests.evaluate_accuracy [--n 40] [--out docs/accuracy.md]

Measures, per document kind: how many runs completed without a human, how many
waited for one, and for auto-completed runs how many field values were right,
wrong or missing. A wrong value in an auto-completed run is the worst outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from activities.document_intake.schema import load_field_schema
from activities.document_intake.validate import normalise_value
from overseer import resources as runtime
from overseer.run_types import SEARCH_ATTRIBUTES
from overseer.settings import Settings
from overseer.store.db import create_pool
from services.local import embedded
from services.worker.main import build_worker
from tests import corpus
from tests.helpers import submit_document
from workflows.segment_run import SegmentRunWorkflow


@dataclass
class Outcome:
    """One document's result."""

    name: str
    kind: str
    expect: str
    status: str
    correct: int = 0
    wrong: list[str] = field(default_factory=list)
    missing: int = 0
    seconds: float = 0.0
    fields: dict[str, str] = field(default_factory=dict)
    """Every field the form states → ``right``, ``wrong`` or ``missed`` in the run's record
    (auto-completed runs: the result; runs waiting for a human: the record shown to them)."""


def field_outcomes(record: dict[str, Any], truth: dict[str, str | None]) -> dict[str, str]:
    """Field → ``right``/``wrong``/``missed`` over the fields the form states."""
    schema = load_field_schema()
    out: dict[str, str] = {}
    for name, value in truth.items():
        if value is None:
            continue
        got = record.get(name)
        out[name] = ("missed" if got is None else
                     "right" if got == normalise_value(schema.field(name), value) else "wrong")
    return out


def score(record: dict[str, Any], truth: dict[str, str | None]) -> tuple[int, list[str], int]:
    """(correct, wrong field names, missing) over the fields the form states."""
    schema = load_field_schema()
    correct, wrong, missing = 0, [], 0
    for name, value in truth.items():
        if value is None:
            continue
        got = record.get(name)
        if got is None:
            missing += 1
        elif got == normalise_value(schema.field(name), value):
            correct += 1
        else:
            wrong.append(name)
    return correct, wrong, missing


async def evaluate(n: int) -> list[Outcome]:
    """Run the labelled set through the workflow; returns one Outcome per document."""
    docs = corpus.labelled_set(n)
    data_dir = Path(tempfile.mkdtemp(prefix="overseer-eval-"))
    pg = embedded.start_postgres(data_dir)
    outcomes: list[Outcome] = []
    try:
        pool = await create_pool(pg.url)
        runtime.configure(pool, Settings(environment="test", database_url=pg.url))
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=embedded.temporal_binary(),
            search_attributes=SEARCH_ATTRIBUTES, dev_server_log_level="error")
        async with env, build_worker(env.client, task_queue="eval"):
            for doc in docs:
                started = time.monotonic()
                inp = await submit_document(pool, doc.data, doc.filename)
                handle = await env.client.start_workflow(
                    SegmentRunWorkflow.run, inp, id=f"document_intake-{inp.run_id}",
                    task_queue="eval")
                status = await _settle(handle)
                row = await pool.fetchrow("SELECT result FROM runs WHERE run_id = $1",
                                          uuid.UUID(inp.run_id))
                import json

                result = json.loads(row["result"]) if row and row["result"] else {}
                out = Outcome(doc.name, doc.name.split("_", 1)[1], doc.expect, status,
                              seconds=time.monotonic() - started)
                if status == "completed":
                    out.correct, out.wrong, out.missing = score(result.get("record", {}),
                                                                doc.truth)
                    out.fields = field_outcomes(result.get("record", {}), doc.truth)
                elif status == "awaiting_approval":
                    view = await handle.query(SegmentRunWorkflow.get_status)
                    shown = ((view.approval or {}).get("payload") or {}).get("record") or {}
                    out.fields = field_outcomes(shown, doc.truth)
                outcomes.append(out)
                if status == "awaiting_approval":
                    await handle.cancel()
        await pool.close()
    finally:
        pg.stop()
    return outcomes


async def _settle(handle: Any) -> str:
    while True:
        view = await handle.query(SegmentRunWorkflow.get_status)
        if view.status in ("awaiting_approval", "completed", "rejected", "failed"):
            return str(view.status)
        await asyncio.sleep(0.2)


def report(outcomes: list[Outcome]) -> str:
    """Markdown tables of the outcomes."""
    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_kind[o.kind].append(o)
    lines = ["| document kind | docs | auto-completed | to a human | failed | fields right "
             "(auto) | fields wrong (auto) | fields missed (auto) | s/doc |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    totals = [0] * 7
    for kind, items in sorted(by_kind.items()):
        auto = [o for o in items if o.status == "completed"]
        human = [o for o in items if o.status == "awaiting_approval"]
        failed = [o for o in items if o.status == "failed"]
        right = sum(o.correct for o in auto)
        wrong = sum(len(o.wrong) for o in auto)
        missed = sum(o.missing for o in auto)
        secs = sum(o.seconds for o in items) / len(items)
        lines.append(f"| {kind} | {len(items)} | {len(auto)} | {len(human)} | {len(failed)} | "
                     f"{right} | {wrong} | {missed} | {secs:.1f} |")
        for i, v in enumerate((len(items), len(auto), len(human), len(failed), right, wrong,
                               missed)):
            totals[i] += v
    lines.append("| **all** | " + " | ".join(str(t) for t in totals) + " | |")
    wrong_runs = [o for o in outcomes if o.status == "completed" and o.wrong]
    lines.append("")
    lines.append(f"Auto-completion rate: {totals[1]}/{totals[0]} "
                 f"({100 * totals[1] / max(totals[0], 1):.0f} %). Field accuracy of "
                 f"auto-completed runs: {totals[4]}/{totals[4] + totals[5] + totals[6]} "
                 f"({100 * totals[4] / max(totals[4] + totals[5] + totals[6], 1):.1f} %). "
                 f"Auto-completed runs with a wrong value: {len(wrong_runs)}"
                 + (" (" + ", ".join(f"{o.name}: {', '.join(o.wrong)}" for o in wrong_runs)
                    + ")" if wrong_runs else "") + ".")
    expected_human = [o for o in outcomes if o.expect == "human"]
    caught = [o for o in expected_human if o.status != "completed"]
    lines.append(f"Documents that need a human (a required field missing, or unreadable): "
                 f"{len(caught)}/{len(expected_human)} went to a human or failed.")
    lines += ["", field_recall_table(outcomes)]
    return "\n".join(lines)


def field_recall_table(outcomes: list[Outcome]) -> str:
    """Per-field recall over every run that reached a record (auto-completed or waiting).

    Recall = right / forms stating the field; wrong values are counted apart (in an
    auto-completed run they are the worst outcome; in a waiting run a person sees them).
    """
    schema = load_field_schema()
    lines = ["| field | required | forms stating it | right | wrong (auto) | wrong (to a human) "
             "| missed | recall |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for spec in schema.fields:
        marks = [(o.status, o.fields[spec.name]) for o in outcomes if spec.name in o.fields]
        right = sum(1 for _, m in marks if m == "right")
        wrong_auto = sum(1 for st, m in marks if m == "wrong" and st == "completed")
        wrong_human = sum(1 for st, m in marks if m == "wrong" and st != "completed")
        missed = sum(1 for _, m in marks if m == "missed")
        recall = f"{100 * right / len(marks):.0f} %" if marks else "—"
        lines.append(f"| {spec.name} | {'yes' if spec.required else 'no'} | {len(marks)} | "
                     f"{right} | {wrong_auto} | {wrong_human} | {missed} | {recall} |")
    return "\n".join(lines)


def main() -> None:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    outcomes = asyncio.run(evaluate(args.n))
    text = report(outcomes)
    print(text)  # noqa: T201
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
