"""docs/calibration.md is what its commands print, and the numbers in it follow from the example.

``examples/calibration/walkthrough.py --check`` runs every command of the page for real (the stand-in
agent, the stand-in judge on a free port, the CLI) and fails when the page differs from what they
printed. The second test derives the confusion matrix of each prompt independently, from the agent's
planted mistakes, the judge's rules and the labels file, and checks ``agreement --json`` against it.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from e2e_helpers import EVALSTORE, REPO, SUBPROCESS_TIMEOUT

EXAMPLE = REPO / "examples" / "calibration"


def _module(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"calibration_{name}", EXAMPLE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_walkthrough_page_is_what_its_commands_print() -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("EVALSTORE_") or k == "EVALSTORE_CEILING_DIRECTORIES"
    }
    env["PATH"] = f"{EVALSTORE.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "walkthrough.py"), "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "docs/calibration.md is current" in done.stdout


def _expected(prompt: str) -> Counter[str]:
    """The confusion cells of one prompt on the labelled tests, from first principles: what the agent
    answered (its planted mistakes), what the judge's rule says about it, and the majority label."""
    agent, judge = _module("agent/sales_agent"), _module("judge")
    cases = {}
    for block in (EXAMPLE / "evals" / "cases.yaml").read_text().split("- id: ")[1:]:
        test_id = block.split("\n", 1)[0].strip()
        cases[test_id] = block.split('input: "', 1)[1].split('"\n', 1)[0]
    votes: dict[str, list[bool]] = {}
    with (EXAMPLE / "labels.csv").open() as f:
        for row in csv.DictReader(f):
            votes.setdefault(row["test_id"], []).append(row["verdict"] == "pass")
    cells: Counter[str] = Counter()
    text = (EXAMPLE / "prompts" / prompt).read_text()
    for test_id, vs in votes.items():
        if vs.count(True) * 2 == len(vs):
            continue  # an even split is left out
        human = vs.count(True) * 2 > len(vs)
        task = cases[test_id]
        rendered = text.replace("{{input}}", task).replace("{{output}}", agent.answer(task))
        judged, _, _ = judge.grade(rendered)
        cells[
            {(True, True): "tp", (True, False): "fn", (False, True): "fp", (False, False): "tn"}[(human, judged)]
        ] += 1
    return cells


def test_agreement_matches_the_confusion_derived_from_the_example(tmp_path: Path) -> None:
    work = tmp_path / "calibration"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns(".evalstore", "__pycache__"))
    judge = subprocess.Popen([sys.executable, "judge.py", "--port", "0"], cwd=work, stdout=subprocess.PIPE, text=True)
    try:
        port = int(judge.stdout.readline().split()[-1])  # type: ignore[union-attr]
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("EVALSTORE_") or k == "EVALSTORE_CEILING_DIRECTORIES"
        }
        env.update(EVALSTORE_JUDGE_BASE_URL=f"http://127.0.0.1:{port}/v1", EVALSTORE_JUDGE_MODEL="stand-in")

        def es(*args: str) -> str:
            done = subprocess.run(
                [str(EVALSTORE), *args], cwd=work, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
            )
            assert done.returncode in (0, 1), done.stderr
            return done.stdout

        run = json.loads(es("run", "evals/sales.eval.yaml", "--json"))["run_id"]
        es("labels", "import", "labels.csv", "--run", run)
        variants = {"quality.md": run}
        for prompt in ("quality.regions.md", "quality.arithmetic.md"):
            out = es("replay", run, "--prompt", f"quality=file://../prompts/{prompt}", "--json")
            variants[prompt] = json.loads(out)["run_id"]
        report = json.loads(es("agreement", *variants.values(), "--grader", "quality", "--json"))
    finally:
        judge.terminate()
        judge.wait(timeout=30)
    rows = {r["run_id"]: r for r in report["rows"]}
    for prompt, run_id in variants.items():
        got = rows[run_id]["confusion"]
        assert {k: got[k] for k in ("tp", "fn", "fp", "tn")} == {
            k: _expected(prompt)[k] for k in ("tp", "fn", "fp", "tn")
        }
    accuracy = {p: rows[r]["accuracy"]["value"] for p, r in variants.items()}
    assert accuracy["quality.arithmetic.md"] > accuracy["quality.regions.md"] > accuracy["quality.md"]
