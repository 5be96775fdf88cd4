"""The import layers of pyproject's ``[tool.importlinter]`` hold (``make lint`` runs the same).

Run here too so that ``make test`` (CI) breaks when an import goes against the layers (the
bench, the services, the workflows and pipelines, the core, observability; inside the core
the plug-in API, the worker's runtime, the run service, the graphs, the base), the API and
the worker import each other, the services name a pipeline, shipped code imports the tests,
workflow code imports an I/O client or LangGraph, a pipeline imports any of Overseer but
``overseer.plugin`` (the plug-in API) and the ``overseer.documents`` and
``overseer.embeddings`` libraries, or one pipeline imports another.
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
    assert "0 broken" in done.stdout and "8 kept" in done.stdout


def test_the_plugin_contract_forbids_every_runtime_module_but_the_plugin_api() -> None:
    """A new module of ``overseer`` is forbidden to pipelines by default."""
    import pkgutil
    import tomllib

    import overseer

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["name"].startswith("Pipelines import of Overseer only"))
    allowed = {"overseer.plugin", "overseer.documents", "overseer.embeddings"}
    modules = {f"overseer.{m.name}" for m in pkgutil.iter_modules(overseer.__path__)}
    assert allowed <= modules
    assert contract["source_modules"] == ["activities.*"]  # every pipeline package
    assert modules - allowed <= set(contract["forbidden_modules"]), \
        sorted(modules - allowed - set(contract["forbidden_modules"]))
