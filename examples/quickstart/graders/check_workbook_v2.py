"""Code grader, version 2: as version 1, and no region may report zero revenue, and the total must add up."""

import json
import re
import sys

payload = json.load(sys.stdin)
output = payload.get("output") or ""
rows = dict(re.findall(r"^(North|South|West|Total),(\d+)", output, flags=re.M))
values = {k: int(v) for k, v in rows.items()}
regions = [values[r] for r in ("North", "South", "West") if r in values]
has_regions = len(regions) == 3
checks = [
    ("workbook is readable as text", "Region,Revenue" in output),
    ("workbook has North, South and West rows", has_regions),
    ("no region reports zero revenue", has_regions and all(v > 0 for v in regions)),
    ("Total equals the sum of the regions", has_regions and values.get("Total") == sum(regions)),
]
print(
    json.dumps(
        {
            "score": sum(ok for _, ok in checks) / len(checks),
            "assertions": [{"text": text, "passed": ok} for text, ok in checks],
        }
    )
)
