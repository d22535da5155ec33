#!/usr/bin/env python3
"""Example code grader: checks the converted answer text AND the raw file the agent produced.

stdin is the code-grader payload: ``output`` is the answer with files already converted to text by the
suite's (or this grader's) preprocessors; ``files`` lists private copies of the raw bytes
(``path``, ``original_path``, ``media_type``, ``sha256``), so the script can open the workbook itself.
"""

import hashlib
import json
import sys
from typing import Any

payload = json.load(sys.stdin)
output = payload.get("output") or ""
assertions: list[dict[str, Any]] = [{"text": "Converted answer mentions Revenue", "passed": "Revenue" in output}]
for entry in payload.get("files", []):
    if entry.get("path") is None:
        assertions.append(
            {"text": f"{entry['original_path']} is available", "passed": False, "evidence": entry.get("error")}
        )
        continue
    with open(entry["path"], "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    assertions.append({"text": f"{entry['original_path']} is intact", "passed": digest == entry["sha256"]})
passed = sum(a["passed"] for a in assertions)
print(json.dumps({"score": passed / len(assertions), "assertions": assertions}))
