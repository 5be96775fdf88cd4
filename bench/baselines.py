"""The peers Overseer is measured against.

* :class:`LangGraphBaseline` — the same document_intake pipeline as a plain LangGraph
  graph (``build_document_intake_graph(for_temporal=False)``) with ``AsyncPostgresSaver``
  checkpoints on the same Postgres, run in this process with the same node functions,
  the same page cache and the same event writes as Overseer's activities. It also does
  what the workflow does around the graph (batch split, ``run.finished``), so the two
  sides do the same work and the ratio is the price of Temporal's durability.
* :func:`bare_tesseract_pool` — Tesseract alone (``pytesseract.image_to_data``, same
  ``--psm 3 --dpi`` config, ``OMP_THREAD_LIMIT=1``) in a process pool of one process per
  core, over the very page images Overseer OCRs: the hardware limit for OCR.
"""

from __future__ import annotations

import asyncio
import io
import os
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from typing import Any, cast

import asyncpg

from activities.document_intake.assess import public_snapshot
from activities.document_intake.batch import split_entries
from activities.document_intake.pages import limits_from_options
from activities.document_intake.schema import FieldSchema
from bench.inputs import graph_state
from overseer.run_types import GraphRunInput
from overseer.runtime.document_pages import load_pages
from overseer.runtime.events import append_from_activity
from overseer.store.events import RUN_COMPLETED, NewEvent


async def open_postgres_saver(database_url: str, pool_size: int) -> tuple[Any, Any]:
    """The peer's checkpointer: ``(psycopg pool, AsyncPostgresSaver)`` on ``database_url``.

    Autocommit, no prepared statements, dict rows: what ``AsyncPostgresSaver`` expects.
    Close the pool when done.
    """
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        database_url, min_size=pool_size, max_size=pool_size, open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
    await pool.open(wait=True)
    saver = AsyncPostgresSaver(cast(Any, pool))  # dict rows: what the saver expects
    await saver.setup()
    return pool, saver


class LangGraphBaseline:
    """Plain LangGraph + ``AsyncPostgresSaver`` running document_intake in this process.

    The activity runtime (``overseer.resources.configure``) must be installed in this
    process: the node functions load pages and write events through it.

    Args:
        database_url: the same Postgres Overseer uses (``postgresql://`` URL).
        pool_size: psycopg connections for the checkpointer (>= the concurrency used, so
            checkpoint writes never queue on a connection).
    """

    def __init__(self, database_url: str, *, pool_size: int = 16) -> None:
        self.database_url = database_url
        self.pool_size = pool_size
        self._pool: Any = None
        self.app: Any = None

    async def __aenter__(self) -> LangGraphBaseline:
        from activities.document_intake.graph import build_document_intake_graph

        self._pool, saver = await open_postgres_saver(self.database_url, self.pool_size)
        self.app = build_document_intake_graph(for_temporal=False).compile(checkpointer=saver)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            await self._pool.close()

    async def run(self, inp: GraphRunInput) -> dict[str, Any]:
        """One run, start to finish: split, the checkpointed graph, ``run.finished``.

        Returns:
            The graph's final state (``__interrupt__`` present when it stopped for a human).
        """
        state = graph_state(inp)
        pages = await load_pages(state["document"], dpi=int(state["options"]["ocr_dpi"]),
                                 limits=limits_from_options(state["options"]))
        split_entries(pages, FieldSchema.model_validate(state["field_schema"]))
        out: dict[str, Any] = await self.app.ainvoke(
            state, {"configurable": {"thread_id": inp.run_id}})
        if "__interrupt__" not in out:
            snapshot = public_snapshot(out)
            status = out.get("status", "completed")
            await append_from_activity([NewEvent(
                run_id=inp.run_id, key="run.finished", type=RUN_COMPLETED, actor="bench:langgraph",
                occurred_at=datetime.now(UTC).isoformat(),
                data={"status": status, "outcome": out.get("outcome"),
                      "snapshot": {**snapshot, "outcome": out.get("outcome")}})])
        return out


async def truncate_checkpoints(pool: asyncpg.Pool) -> None:
    """Empty the checkpointer's tables between trials (so every trial starts alike)."""
    for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
        try:
            await pool.execute(f"TRUNCATE {table}")
        except asyncpg.UndefinedTableError:
            pass


# --- OCR ---------------------------------------------------------------------------------------


def render_pages_png(data: bytes, dpi: int) -> list[bytes]:
    """The page images Overseer OCRs for an image-only PDF, as PNG bytes (grayscale at ``dpi``)."""
    from overseer.documents import DocumentLimits
    from overseer.documents.pdf import _open_pdf, _render_pdf_page

    limits = DocumentLimits()
    out: list[bytes] = []
    with _open_pdf(data, limits) as pdf:
        for index in range(len(pdf)):
            image, _ = _render_pdf_page(pdf, index, dpi, limits)
            buf = io.BytesIO()
            image.convert("L").save(buf, format="PNG")
            out.append(buf.getvalue())
    return out


def _init_tesseract_worker() -> None:
    os.environ["OMP_THREAD_LIMIT"] = "1"


def _bare_tesseract(png: bytes, dpi: int) -> int:
    """Tesseract on one page, nothing else; returns the number of words read."""
    import pytesseract
    from PIL import Image

    data = pytesseract.image_to_data(Image.open(io.BytesIO(png)), lang="eng",
                                     config=f"--psm 3 --dpi {dpi}",
                                     output_type=pytesseract.Output.DICT)
    return sum(1 for t in data["text"] if str(t).strip())


def _overseer_ocr(png: bytes, dpi: int) -> int:
    """Overseer's own page OCR (deskew, denoise, binarise, Tesseract, coverage) on one page."""
    from PIL import Image

    from overseer.documents import ocr_image

    return len(ocr_image(Image.open(io.BytesIO(png)), dpi=dpi).words)


def ocr_pool_pages_per_second(pages: list[bytes], dpi: int, *, workers: int,
                              preprocess: bool = False) -> tuple[float, int]:
    """Pages/s of a warm process pool (one process per core) OCR'ing ``pages``.

    Args:
        pages: PNG page images.
        dpi: their resolution.
        workers: pool processes.
        preprocess: False = bare Tesseract (the docs/performance.md baseline); True = Overseer's
            full per-page OCR (preprocessing + Tesseract + coverage), to split Overseer's
            gap between OCR work and orchestration.

    Returns:
        ``(pages_per_second, words_read)``; pool start-up is excluded (the pool is warmed
        with one page per process first).
    """
    import multiprocessing

    fn = _overseer_ocr if preprocess else _bare_tesseract
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_tesseract_worker) as pool:
        list(pool.map(fn, pages[:workers], [dpi] * workers))  # warm: imports, traineddata
        start = time.perf_counter()
        words = sum(pool.map(fn, pages, [dpi] * len(pages)))
        elapsed = time.perf_counter() - start
    return len(pages) / elapsed, words


async def ocr_pool_async(pages: list[bytes], dpi: int, *, workers: int,
                         preprocess: bool = False) -> tuple[float, int]:
    """:func:`ocr_pool_pages_per_second` off the event loop."""
    return await asyncio.to_thread(ocr_pool_pages_per_second, pages, dpi, workers=workers,
                                   preprocess=preprocess)
