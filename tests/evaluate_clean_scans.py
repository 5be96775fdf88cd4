"""Score the wider clean-scan set (``tests/clean_scans.py``) through ``run_pipeline``, on any code.

    .venv/bin/python -m tests.evaluate_clean_scans [--n 60] [--seed 53] [--root DIR ...]

Renders the set once, then for each ``--root`` (a checkout of the repository; default: this
one) runs that code's own ``run_pipeline`` subgraph (read → extract → score, and where the
code has it the 400 dpi re-read of the fields only calibration would complete) on every
form, in a subprocess whose ``PYTHONPATH`` is the root. Only the two readers that need the
runtime's Postgres page cache are replaced, by the same OCR calls on the bytes in memory
(``extract_pages`` and, where present, ``reread_regions``), so each root uses its own OCR,
extraction, confidence and routing. Whole-page readings are cached per root's OCR code in
``.overseer/cache/clean_scans/``.

Per root it prints: forms auto-completed, wrong values among them (with the values), the
forms read entirely right and how many of those completed, and every form sent to review
or escalated with its route reason and reason codes (an empty list is a bug).
``--labelled`` scores the clean and skewed scans of ``bench.corpus.labelled_set(n, seed)``
instead (the project's older labelled set) the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CACHE_DIR = REPO / ".overseer" / "cache" / "clean_scans"

_SCORER = r"""
import asyncio, hashlib, json, sys
from pathlib import Path

from activities.document_intake.schema import load_field_schema
from activities.document_intake.routing import RoutingThresholds, explain_route, route_after_pipeline
from overseer.documents import DocumentLimits, PageText, extract_pages, sniff_kind

try:
    from activities.document_intake import node_run_pipeline as node
except ImportError:
    from activities.document_intake import nodes as node

forms_dir, cache_dir = Path(sys.argv[1]), Path(sys.argv[2])
cache_dir.mkdir(parents=True, exist_ok=True)
schema = load_field_schema()
thresholds = RoutingThresholds()
options = {
    "thresholds": thresholds.to_dict(), "exact_text_ocr_score": 1.0, "unknown_ocr_score": 0.5,
    "review_min_evidence_score": 0.85, "ocr_dpi": 300, "retry_ocr_dpi": 400,
    "retry_ocr_region": True, "max_pages": 200, "max_pixels_per_page": 50_000_000,
    "ocr_timeout_seconds": 120.0,
}
docs = {}

async def load_pages(document, *, dpi, force_ocr=False, pages=None, limits=None):
    data, kind = docs[document["sha256"]]
    path = cache_dir / f"{document['sha256'][:24]}_{dpi}_{int(force_ocr)}.json"
    if pages is None and path.is_file():
        return [PageText.from_dict(p) for p in json.loads(path.read_text())]
    read = extract_pages(data, kind, dpi=dpi, pages=pages, force_ocr=force_ocr,
                         limits=limits or DocumentLimits())
    if pages is None:
        path.write_text(json.dumps([p.to_dict() for p in read]))
    return read

async def load_region_reread(document, pages, schema, *, extract, check, evidence, dpi,
                             limits=None):
    from activities.document_intake.reread import reread_regions
    data, kind = docs[document["sha256"]]
    return reread_regions(data, kind, pages, schema, extract=extract, check=check,
                          evidence=evidence, dpi=dpi, limits=limits or DocumentLimits())

node.load_pages = load_pages
if hasattr(node, "load_region_reread"):
    node.load_region_reread = load_region_reread
graph = node.build_run_pipeline_graph().compile()

async def main():
    out = {}
    for path in sorted(forms_dir.glob("*.json")):
        meta = json.loads(path.read_text())
        data = (forms_dir / meta["filename"]).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        docs[sha] = (data, sniff_kind(data, meta["filename"], meta["content_type"]))
        document = {"sha256": sha, "kind": docs[sha][1].value, "page_count": meta["pages"]}
        state = await graph.ainvoke({"document": document, "span": None,
                                     "field_schema": schema.model_dump(), "options": options})
        a = state["assessment"]
        routed = {**a, "tries": 1, "tools_used": ["run_pipeline"]}
        out[meta["name"]] = {
            "record": state["record"], "confidence": a["confidence"],
            "needs_review": a["needs_review"], "reasons": a["review_reason_codes"],
            "route": route_after_pipeline(routed, thresholds),
            "route_reason": explain_route(routed, thresholds),
            "field_confidence": state.get("field_ocr_confidence", {}),
            "page_confidence": state.get("ocr_confidence_avg"),
            "calibration": a.get("scan_calibration"),
            "reread": state["report"].get("calibration_reread", {}).get("checks"),
        }
        print(meta["name"], out[meta["name"]]["route"], a["confidence"], file=sys.stderr, flush=True)
    print(json.dumps(out))

asyncio.run(main())
"""


def write_forms(n: int, seed: int, folder: Path) -> dict[str, dict[str, Any]]:
    """Render :func:`tests.clean_scans.clean_scan_set` into ``folder`` (a file and its truth each).

    Returns:
        Form name → ``{name, filename, content_type, pages, truth, layout, font, fmt, tilt}``.
    """
    from PIL import Image

    from tests.clean_scans import clean_scan_set

    metas = {}
    for scan in clean_scan_set(n, seed):
        (folder / scan.filename).write_bytes(scan.data)
        with Image.open(folder / scan.filename) as image:
            pages = getattr(image, "n_frames", 1)
        meta = {
            "name": scan.name,
            "filename": scan.filename,
            "content_type": scan.content_type,
            "pages": pages,
            "truth": scan.truth,
            "layout": scan.layout,
            "font": scan.font,
            "fmt": scan.fmt,
            "tilt": scan.tilt_degrees,
        }
        (folder / f"{scan.name}.json").write_text(json.dumps(meta))
        metas[scan.name] = meta
    return metas


def write_labelled_scans(n: int, seed: int, folder: Path) -> dict[str, dict[str, Any]]:
    """Write the scanned documents of ``bench.corpus.labelled_set(n, seed)`` as :func:`write_forms` does.

    Its typed PDFs and text are left out (nothing to OCR), and so are the OCR-hostile faxes
    and the forms missing a required field (not clean). Blank optional fields keep a None truth.
    """
    from bench.corpus import labelled_set

    metas = {}
    for doc in labelled_set(n, seed=seed):
        kind = doc.name.split("_", 1)[1]
        if not kind.startswith(("scan_", "scanned_pdf")):
            continue
        (folder / doc.filename).write_bytes(doc.data)
        pages = 1
        if doc.filename.endswith((".tiff", ".pdf")):
            from overseer.documents import inspect_document, sniff_kind

            pages = inspect_document(doc.data, sniff_kind(doc.data, doc.filename, None)).page_count
        meta = {
            "name": doc.name,
            "filename": doc.filename,
            "content_type": doc.content_type,
            "pages": pages,
            "truth": doc.truth,
            "layout": kind,
            "font": "",
            "fmt": kind,
            "tilt": doc.degrade.get("skew_degrees", 0.0),
        }
        (folder / f"{doc.name}.json").write_text(json.dumps(meta))
        metas[doc.name] = meta
    return metas


def score_root(root: Path, folder: Path) -> dict[str, dict[str, Any]]:
    """Each form's outcome after ``run_pipeline`` under the code in ``root`` (see the module doc).

    Raises:
        subprocess.CalledProcessError: that code failed.
    """
    ocr_code = hashlib.sha256(
        b"".join(
            p.read_bytes()
            for p in sorted((root / "overseer").glob("documents*/**/*.py"))
            + sorted((root / "overseer").glob("documents*.py"))
        )
    ).hexdigest()[:12]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", _SCORER, str(folder), str(CACHE_DIR / ocr_code)],
        env=env,
        cwd=root,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return dict(json.loads(done.stdout))


def summarise(
    metas: dict[str, dict[str, Any]],
    results: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Counts over one root's outcomes.

    Returns:
        ``{forms, auto, wrong_values, read_right, read_right_auto, to_person, empty_reasons}``
        with ``wrong_values`` as ``(form, field, value, truth)`` among auto-completed forms,
        ``to_person`` as ``(form, route, route_reason, confidence, reasons)`` and
        ``empty_reasons`` the forms sent to a person whose reason list is empty.
    """
    from activities.document_intake.schema import load_field_schema
    from activities.document_intake.validate import normalise_value

    schema = load_field_schema()
    out: dict[str, Any] = {
        "forms": len(results),
        "auto": 0,
        "wrong_values": [],
        "read_right": 0,
        "read_right_auto": 0,
        "to_person": [],
        "empty_reasons": [],
        "by_layout": Counter(),
        "by_fmt": Counter(),
    }
    for name, res in sorted(results.items()):
        truth = {
            k: None if v is None else normalise_value(schema.field(k), v)
            for k, v in metas[name]["truth"].items()
        }
        wrong = [
            (k, v, truth.get(k)) for k, v in res["record"].items() if v is not None and v != truth.get(k)
        ]
        right = not wrong and all(res["record"].get(k) == v for k, v in truth.items() if v)
        auto = res["route"] == "complete"
        out["auto"] += auto
        out["read_right"] += right
        out["read_right_auto"] += right and auto
        if auto:
            out["by_layout"][metas[name]["layout"]] += 1
            out["by_fmt"][metas[name]["fmt"]] += 1
            out["wrong_values"] += [(name, *w) for w in wrong]
        else:
            out["to_person"].append(
                (
                    name,
                    res["route"],
                    res["route_reason"],
                    res["confidence"],
                    res["reasons"],
                    "right" if right else f"wrong {wrong}",
                )
            )
            if not res["reasons"]:
                out["empty_reasons"].append(name)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument(
        "--root", type=Path, action="append", help="a checkout to score (repeatable; default: this one)"
    )
    parser.add_argument("--json", type=Path, help="also write every outcome here")
    parser.add_argument(
        "--labelled",
        action="store_true",
        help="score the scans of bench.corpus.labelled_set(n, seed) instead",
    )
    args = parser.parse_args(argv)
    roots = args.root or [REPO]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write = write_labelled_scans if args.labelled else write_forms
        metas = write(args.n, args.seed, folder)
        everything = {}
        for root in roots:
            results = score_root(root.resolve(), folder)
            everything[str(root)] = results
            s = summarise(metas, results)
            print(f"\n== {root} ({args.n} forms, seed {args.seed})")  # noqa: T201
            print(
                f"auto-completed {s['auto']}/{s['forms']}; wrong values among them "  # noqa: T201
                f"{len(s['wrong_values'])}; read entirely right {s['read_right']}, of those "
                f"auto-completed {s['read_right_auto']}; sent to a person with no reason "
                f"{len(s['empty_reasons'])}"
            )
            print(f"auto by layout {dict(s['by_layout'])}; by format {dict(s['by_fmt'])}")  # noqa: T201
            for w in s["wrong_values"]:
                print("  WRONG auto-completed:", *w)  # noqa: T201
            reasons = Counter(r for p in s["to_person"] for r in p[4] or ["<none>"])
            print("  reasons of forms not completed:", dict(reasons.most_common()))  # noqa: T201
            for p in s["to_person"]:
                print("  ", *p)  # noqa: T201
        if args.json:
            args.json.write_text(json.dumps({"forms": metas, "results": everything}, indent=1))


if __name__ == "__main__":
    main()
