"""The dataset of a run: parsing, windowing, sentences and their quote ids (seed 002 R1.1, R2).

A run uploads CSV or JSONL rows ``interaction_id, account_id, occurred_at, text``. Parsing
and windowing are pure (:func:`parse_dataset`, :func:`window`); :func:`build_corpus` splits
each windowed interaction into sentences with ``pysbd`` and gives every sentence a stable
quote id (:func:`quote_id`: a hash of the interaction id plus the sentence's index), so
state carries ids only.

**Where the text lives.** Never in graph state. Nodes call :func:`load_corpus` with the
dataset reference (``{sha256, account_id, start_date, end_date}``); it re-reads the stored
upload by hash and re-derives the same sentences deterministically, cached per process
(a few corpora), so the fan-out coders on one worker parse once. A quote is always
``text[start:end]`` of the interaction's own text: verbatim by construction.
"""

from __future__ import annotations

import asyncio
import csv
import functools
import hashlib
import io
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from overseer.plugin import OverseerError

REQUIRED_COLUMNS = ("interaction_id", "account_id", "occurred_at", "text")
MAX_REPORTED_PROBLEMS = 10
MIN_QUOTE_WORDS = 3
"""Sentences with fewer words are not quotable (``Great!``, ``5 stars.``)."""

CORPUS_CACHE_SIZE = 4


class DatasetError(OverseerError):
    """The upload or the run's metadata cannot be analysed (permanent, 422)."""

    code = "invalid_dataset"
    http_status = 422


@dataclass(frozen=True)
class Interaction:
    """One row of the upload."""

    interaction_id: str
    account_id: str
    occurred_at: date
    text: str


@dataclass
class Corpus:
    """The windowed interactions split into quotable sentences.

    Attributes:
        interaction_ids: windowed interactions, in upload order.
        quote_ids: every quotable sentence's id, in order (interaction, then sentence).
        text: quote id → the sentence, verbatim.
        interaction_of: quote id → interaction id.
        cache: per-corpus analysis results (TF-IDF, embeddings); fill it through
            :meth:`memo` only.
    """

    interaction_ids: list[str]
    quote_ids: list[str]
    text: dict[str, str]
    interaction_of: dict[str, str]
    cache: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: Any = field(default_factory=threading.RLock, init=False, repr=False, compare=False)

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """``cache[key]``, computed once by ``compute()`` on the first call.

        The nodes compute in worker threads (several coders share one cached corpus), so
        the first computation holds the corpus's lock and the others wait for its value
        instead of computing it again or reading a half-filled cache. Re-entrant: a
        ``compute`` may memoise other keys of the same corpus.
        """
        value = self.cache.get(key)
        if value is None:
            with self._lock:
                value = self.cache.get(key)
                if value is None:
                    value = self.cache[key] = compute()
        return value

    def order(self) -> dict[str, int]:
        """Quote id → its position in :attr:`quote_ids` (memoised)."""
        order: dict[str, int] = self.memo(
            "order", lambda: {q: i for i, q in enumerate(self.quote_ids)})
        return order

    def sentences(self, ids: Iterable[str] | None = None) -> list[str]:
        """Texts of ``ids`` (default: all), in the order given."""
        return [self.text[q] for q in (self.quote_ids if ids is None else ids)]


# --- parsing and windowing (pure) -----------------------------------------------------------


def parse_dataset(content: bytes, filename: str = "", content_type: str | None = None
                  ) -> list[Interaction]:
    """Parse an upload of CSV (header row) or JSONL (one object a line).

    The format comes from the file name or media type (``.jsonl``/``.ndjson``,
    ``application/jsonl``/``x-ndjson``), else from the first character (``{`` → JSONL).

    Args:
        content: the uploaded bytes (UTF-8, a BOM is allowed).
        filename: the upload's name (format hint only).
        content_type: the upload's media type (format hint only).

    Returns:
        The rows in file order.

    Raises:
        DatasetError: not UTF-8, no rows, a missing column, an empty field, a date that is
            not ISO-8601, or a repeated interaction_id; the message lists up to ten bad rows.
    """
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DatasetError("the dataset is not UTF-8 text", details={"byte": err.start}) from None
    if not text.strip():
        raise DatasetError("the dataset is empty: no rows", details={"filename": filename})
    if _looks_like_jsonl(text, filename, content_type):
        records = list(_jsonl_records(text))
    else:
        records = list(_csv_records(text))
    if not records:
        raise DatasetError("the dataset has no rows", details={"filename": filename})
    rows: list[Interaction] = []
    problems: list[str] = []
    seen: set[str] = set()
    for line, record in records:
        if isinstance(record, str):
            problems.append(f"row {line}: {record}")
            continue
        try:
            row = _row(record)
        except ValueError as err:
            problems.append(f"row {line}: {err}")
            continue
        if row.interaction_id in seen:
            problems.append(f"row {line}: duplicate interaction_id {row.interaction_id!r}")
            continue
        seen.add(row.interaction_id)
        rows.append(row)
    if problems:
        shown = problems[:MAX_REPORTED_PROBLEMS]
        more = f" (and {len(problems) - len(shown)} more)" if len(problems) > len(shown) else ""
        raise DatasetError(f"{len(problems)} bad row(s): " + "; ".join(shown) + more,
                           details={"bad_rows": len(problems), "problems": shown})
    return rows


def window(rows: Sequence[Interaction], account_id: str, start: date | str, end: date | str
           ) -> list[Interaction]:
    """The rows of ``account_id`` with ``start <= occurred_at <= end`` (inclusive), in order.

    Raises:
        DatasetError: a date is not ISO-8601, or ``start`` is after ``end``.
    """
    first, last = _as_date(start, "start_date"), _as_date(end, "end_date")
    if first > last:
        raise DatasetError("start_date is after end_date",
                           details={"start_date": first.isoformat(), "end_date": last.isoformat()})
    return [r for r in rows if r.account_id == account_id and first <= r.occurred_at <= last]


def parse_window_metadata(metadata: dict[str, Any]) -> tuple[str, date, date]:
    """``(account_id, start, end)`` from a run's metadata.

    Raises:
        DatasetError: a missing ``account_id``/``start_date``/``end_date``, a bad date, or
            start after end.
    """
    missing = [k for k in ("account_id", "start_date", "end_date") if not metadata.get(k)]
    if missing:
        raise DatasetError(f"metadata is missing {', '.join(missing)}",
                           details={"missing": missing})
    first = _as_date(metadata["start_date"], "start_date")
    last = _as_date(metadata["end_date"], "end_date")
    if first > last:
        raise DatasetError("start_date is after end_date",
                           details={"start_date": first.isoformat(), "end_date": last.isoformat()})
    return str(metadata["account_id"]), first, last


# --- sentences and quote ids ------------------------------------------------------------------


def quote_id(interaction_id: str, index: int) -> str:
    """Stable id of the ``index``-th sentence of an interaction: ``q<10 hex of sha256(id)>-<index>``.

    The interaction part lets :func:`quotes_for` split only the interactions asked for.
    """
    return f"q{_interaction_hash(interaction_id)}-{index}"


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text`` (pysbd, English).

    Each span is located in ``text`` itself, so ``text[start:end]`` is verbatim; leading and
    trailing whitespace is trimmed.
    """
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in _segmenter().segment(text):
        sentence = str(piece).strip()
        if not sentence:
            continue
        start = text.find(sentence, cursor)
        if start < 0:  # pysbd normalised something: skip rather than quote a non-verbatim text
            continue
        spans.append((start, start + len(sentence)))
        cursor = start + len(sentence)
    return spans


def build_corpus(rows: Sequence[Interaction]) -> Corpus:
    """Split ``rows`` into quotable sentences (at least :data:`MIN_QUOTE_WORDS` words)."""
    corpus = Corpus(interaction_ids=[], quote_ids=[], text={}, interaction_of={})
    for row in rows:
        corpus.interaction_ids.append(row.interaction_id)
        for index, sentence in enumerate(_sentences(row.text)):
            if len(sentence.split()) < MIN_QUOTE_WORDS:
                continue
            qid = quote_id(row.interaction_id, index)
            corpus.quote_ids.append(qid)
            corpus.text[qid] = sentence
            corpus.interaction_of[qid] = row.interaction_id
    return corpus


# --- loading by reference (per-process cache) -------------------------------------------------

ArtifactLoader = Callable[[str], Awaitable[bytes]]


async def _postgres_loader(sha: str) -> bytes:
    from overseer.plugin import get_runtime, load_artifact

    content, _kind = await load_artifact(get_runtime().pool, sha)
    return content


_loader: ArtifactLoader = _postgres_loader
_corpora: OrderedDict[tuple[str, str, str, str], Corpus] = OrderedDict()
_loading: dict[tuple[str, str, str, str], asyncio.Future[Corpus]] = {}


def set_artifact_loader(loader: ArtifactLoader | None) -> None:
    """Replace how uploads are read by hash (tests: a dict; None restores Postgres); clears the cache."""
    global _loader
    _loader = loader or _postgres_loader
    _corpora.clear()
    _loading.clear()


async def load_corpus(ref: dict[str, Any]) -> Corpus:
    """The corpus of a dataset reference ``{sha256, account_id, start_date, end_date[, filename]}``.

    Cached per process (the last :data:`CORPUS_CACHE_SIZE` references); a miss re-reads the
    upload and re-derives the sentences in a worker thread (pysbd: ~30 s for 5,000 reviews,
    which must not hold the event loop). Concurrent misses for one reference (the coders
    of a run landing on a worker that did not load the dataset) share one derivation.

    Raises:
        NotFoundError: no stored upload with that hash (permanent).
        DatasetError: the upload does not parse (permanent).
    """
    key = (ref["sha256"], str(ref["account_id"]), str(ref["start_date"]), str(ref["end_date"]))
    cached = _corpora.get(key)
    if cached is not None:
        _corpora.move_to_end(key)
        return cached
    loading = _loading.get(key)
    if loading is None or loading.get_loop() is not asyncio.get_running_loop():
        loading = _loading[key] = asyncio.ensure_future(_derive_corpus(ref, key))
        loading.add_done_callback(functools.partial(_loaded, key))
    # shielded: one caller's cancellation (its activity cancelled) leaves the others' load alone
    return await asyncio.shield(loading)


def _loaded(key: tuple[str, str, str, str], done: asyncio.Future[Corpus]) -> None:
    if _loading.get(key) is done:
        del _loading[key]
    if not done.cancelled():
        done.exception()  # retrieved: every waiter may have been cancelled


async def _derive_corpus(ref: dict[str, Any], key: tuple[str, str, str, str]) -> Corpus:
    content = await _loader(ref["sha256"])

    def derive() -> Corpus:
        rows = parse_dataset(content, ref.get("filename") or "", ref.get("content_type"))
        return build_corpus(window(rows, key[1], key[2], key[3]))

    corpus = await asyncio.to_thread(derive)
    _corpora[key] = corpus
    while len(_corpora) > CORPUS_CACHE_SIZE:
        _corpora.popitem(last=False)
    return corpus


async def quotes_for(ids: Iterable[str], sha: str) -> dict[str, str]:
    """Sentence texts of quote ``ids`` in the upload ``sha`` (for the reviewer-only quotes endpoint).

    Only the interactions named by the ids are split. Unknown ids are left out of the answer.

    Raises:
        NotFoundError: no stored upload with that hash.
        DatasetError: the upload does not parse.
    """
    wanted: dict[str, set[int]] = {}
    for qid in ids:
        head, _, index = qid.partition("-")
        if len(head) == 11 and head.startswith("q") and index.isdigit():
            wanted.setdefault(head[1:], set()).add(int(index))
    if not wanted:
        return {}
    content = await _loader(sha)

    def resolve() -> dict[str, str]:
        out: dict[str, str] = {}
        for row in parse_dataset(content):
            indexes = wanted.get(_interaction_hash(row.interaction_id))
            if not indexes:
                continue
            for index, sentence in enumerate(_sentences(row.text)):
                if index in indexes:
                    out[quote_id(row.interaction_id, index)] = sentence
        return out

    return await asyncio.to_thread(resolve)


# --- helpers ----------------------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def _interaction_hash(interaction_id: str) -> str:
    return hashlib.sha256(interaction_id.encode("utf-8")).hexdigest()[:10]


def _looks_like_jsonl(text: str, filename: str, content_type: str | None) -> bool:
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return True
    if name.endswith(".csv"):
        return False
    if content_type and ("jsonl" in content_type or "ndjson" in content_type):
        return True
    return text.lstrip().startswith("{")


def _jsonl_records(text: str) -> Iterable[tuple[int, dict[str, Any] | str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            yield number, f"not JSON ({err.msg})"
            continue
        yield number, value if isinstance(value, dict) else "not a JSON object"


def _csv_records(text: str) -> Iterable[tuple[int, dict[str, Any] | str]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DatasetError(f"the CSV header lacks column(s) {', '.join(missing)}",
                           details={"missing_columns": missing, "header": header[:20]})
    reader.fieldnames = header
    for record in reader:
        yield reader.line_num, record


def _row(record: dict[str, Any]) -> Interaction:
    values: dict[str, str] = {}
    for column in REQUIRED_COLUMNS:
        value = record.get(column)
        if value is None or not str(value).strip():
            raise ValueError(f"empty or missing {column}")
        values[column] = str(value) if column == "text" else str(value).strip()
    return Interaction(values["interaction_id"], values["account_id"],
                       _as_date(values["occurred_at"], "occurred_at", error=ValueError),
                       values["text"])


def _as_date(value: date | str, name: str, *, error: type[Exception] = DatasetError) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return datetime.fromisoformat(str(value).strip().replace("Z", "+00:00")).date()
    except ValueError:
        message = f"{name} {str(value)[:40]!r} is not an ISO-8601 date"
        if error is DatasetError:
            raise DatasetError(message, details={"field": name}) from None
        raise error(message) from None
