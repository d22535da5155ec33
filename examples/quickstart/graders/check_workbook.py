"""Code grader: the workbook, as this grader reads it (its `preprocessors:` ask for converted text), has a row per region and a total.

Reads AgentV's code-grader payload on stdin; prints the JSON protocol {score, assertions}.
"""

import json
import sys

payload = json.load(sys.stdin)
output = payload.get("output") or ""
checks = [
    ("workbook is readable as text", "Region,Revenue" in output),
    ("workbook has North, South and West rows", all(f"{r}," in output for r in ("North", "South", "West"))),
    ("workbook has a Total row", "Total," in output),
]
print(
    json.dumps(
        {
            "score": sum(ok for _, ok in checks) / len(checks),
            "assertions": [{"text": text, "passed": ok} for text, ok in checks],
        }
    )
)
