"""The worker starts without the heavy libraries only some activities need (issue 16).

A parked run costs memory on top of what the worker holds at start, so the worker's idle
RSS bounds how many parked runs fit within the 300 MB target of docs/performance.md.
OpenCV, pytesseract (pandas),
bm25s (numba, scipy), jsonschema and scikit-learn together were ~300 MB of a 400 MB idle
worker; each is loaded by the first activity that needs it.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("cv2", "pandas", "pytesseract", "bm25s", "numba", "scipy", "jsonschema", "sklearn",
         "fastapi", "starlette")
"""Libraries a worker loads only when an activity needs them; the web framework never (a
worker serves no route, so no pipeline imports its routes at module level)."""

PROBE = """
import json, sys
import services.worker.main
services.worker.main.check_graphs()
loaded = [name for name in %r
          if name in sys.modules and type(sys.modules[name]).__name__ != "_LazyModule"]
rss_mb = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
print(json.dumps({"loaded": loaded, "rss_mb": rss_mb}))
"""


def test_worker_import_leaves_heavy_libraries_unloaded() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE % (HEAVY,)], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    probe = json.loads(out.strip().splitlines()[-1])
    assert probe["loaded"] == [], f"imported at worker start: {probe['loaded']}"
    assert probe["rss_mb"] < 220, probe  # measured 144 MB; 268 MB before the lazy imports


def test_lazy_ocr_modules_load_on_first_use() -> None:
    from overseer.documents import ocr as documents

    assert documents.pytesseract.Output.DICT == "dict"
    assert documents.cv2.INTER_CUBIC == 2
