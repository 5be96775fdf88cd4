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


def test_the_worker_loads_every_pipeline_without_the_web_framework() -> None:
    """A worker imports every pipeline's graph and worker parts but serves no route.

    So no pipeline imports its routes (or ``overseer.plugin``'s HTTP names) at module level:
    FastAPI stays out of the worker's memory.
    """
    probe = ("import sys, services.worker.main\n"
             "from overseer.registry import get_registry\n"
             "for p in get_registry():\n"
             "    get_registry().builder(p.name)\n"
             "    p.worker_parts and p.worker_parts()\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'starlette')))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout[-2000:]
