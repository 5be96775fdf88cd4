"""The import layers of pyproject's ``[tool.importlinter]`` hold (``make lint`` runs the same).

Run here too so that ``make test`` (CI) breaks when shipped code imports the tests or the
bench, the API imports the worker, the core imports the workflows or names a pipeline,
workflow code imports an I/O client or LangGraph, a pipeline imports the API or the
workflows, a pipeline imports any of the runtime but ``overseer.plugin`` (the plug-in
API) and the ``overseer.documents`` and ``overseer.embeddings`` libraries, or one pipeline
imports another.
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
    """A new module of ``overseer`` or of the runtime's activities is forbidden to pipelines by default."""
    import pkgutil
    import tomllib

    import activities
    import overseer

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["name"].startswith("Pipelines import the runtime only"))
    allowed = {"overseer.plugin", "overseer.documents", "overseer.embeddings"}
    modules = {f"overseer.{m.name}" for m in pkgutil.iter_modules(overseer.__path__)}
    assert allowed <= modules
    pipelines = set(contract["source_modules"])
    modules |= {f"activities.{m.name}" for m in pkgutil.iter_modules(activities.__path__)
                if f"activities.{m.name}" not in pipelines}  # the runtime's activity side
    assert modules - allowed <= set(contract["forbidden_modules"]), \
        sorted(modules - allowed - set(contract["forbidden_modules"]))
