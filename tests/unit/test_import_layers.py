"""The import layers of pyproject's ``[tool.importlinter]`` hold (``make lint`` runs the same).

Run here too so that ``make test`` (CI) breaks when shipped code imports the tests or the
bench, the API imports the worker, the core imports the workflows or names a pipeline,
workflow code imports an I/O client or LangGraph, a pipeline imports the API or the
workflows, or a pipeline imports any of the runtime but ``overseer.plugin`` (the plug-in
API) and the ``overseer.documents`` and ``overseer.embeddings`` libraries.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "7 kept" in done.stdout
