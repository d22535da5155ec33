"""The example's agent: it "fixes" calc.py in its workspace the simplest way, and says what it did.

A stand-in for a coding agent (no model is called): it edits a file, as a real one would.
"""

import argparse
import os
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--output", required=True)
args = parser.parse_args()

workspace = Path(os.environ["AGENTV_WORKSPACE_PATH"])
calc = workspace / "calc.py"
calc.write_text(calc.read_text().replace("return a - b", "return a + b"))
(workspace / "NOTES.md").write_text("Fixed add(): it subtracted.\n")
Path(args.output).write_text("I fixed add() in calc.py: it subtracted instead of adding.")
