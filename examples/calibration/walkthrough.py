"""Run the calibration walkthrough end to end and write docs/calibration.md from what it printed.

    python3 examples/calibration/walkthrough.py           # rewrite docs/calibration.md
    python3 examples/calibration/walkthrough.py --check   # exit 1 (with a diff) if the page is stale

Every command of the page runs for real, in a copy of this folder, with ``judge.py`` (the local stand-in
judge) on a free port, and the page shows its output. Run ids (which carry the time) are replaced by
fixed ids of the same length, and the judge's port by 8765, so the page is the same on every run; every
other character is as printed. The numbers the prose quotes are read from ``agreement --json``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent.parent / "docs" / "calibration.md"
PORT_SHOWN = 8765
RUN_ID = re.compile(r"\b(rec|rpl)-\d{8}T\d{6}-[0-9a-f]{6}\b")
FIXED_IDS = {
    "RUN": "rec-20261201T090000-c0ffee",
    "REGIONS": "rpl-20261201T091500-4e6101",
    "ARITH": "rpl-20261201T092000-a417e5",
}
PRELUDE = "run_id() { python3 -c 'import json,sys; print(json.load(sys.stdin)[\"run_id\"])'; }\n"


class Session:
    """One shell session's worth of state: the folder, the environment, the run ids seen so far."""

    def __init__(self, cwd: Path, env: dict[str, str], port: int) -> None:
        self.cwd, self.env, self.port = cwd, env, port
        self.ids: dict[str, str] = {}

    def sh(self, command: str, stdin: str | None = None, *, stdout_only: bool = False) -> str:
        """What the command printed (stdout, then stderr, as a terminal would show the notes)."""
        done = subprocess.run(
            ["bash", "-c", PRELUDE + command],
            cwd=self.cwd,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode not in (0, 1):
            raise SystemExit(f"walkthrough: `{command}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done.stdout if stdout_only else done.stdout + done.stderr

    def set(self, name: str, command: str) -> str:
        value = self.sh(command, stdout_only=True).strip()
        self.env[name] = value
        self.ids[value] = FIXED_IDS[name]
        return f"{name}=$({command})"

    def shown(self, text: str) -> str:
        for real, fixed in self.ids.items():
            text = text.replace(real, fixed)
        text = text.replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{PORT_SHOWN}")
        # When the run was made is today's date on every run of this script; the page shows a fixed one.
        text = re.sub(r"started=\d{4}-\d\d-\d\d \d\d:\d\d UTC", "started=2026-12-01 09:00 UTC", text)
        unknown = RUN_ID.search(text)
        if unknown and unknown.group(0) not in FIXED_IDS.values():
            raise SystemExit(f"walkthrough: run id {unknown.group(0)} is not one the page names")
        return "\n".join(line.rstrip() for line in text.splitlines())

    def block(self, command: str, *, stdin: str | None = None, head: int | None = None, tail: int | None = None) -> str:
        """```bash  $ command  output```, the output cut to its first/last lines when asked."""
        lines = self.shown(self.sh(command, stdin)).splitlines()
        if head is not None and len(lines) > head:
            lines = [*lines[:head], "…"]
        if tail is not None and len(lines) > tail:
            lines = ["…", *lines[-tail:]]
        return f"```console\n$ {command}\n" + "\n".join(lines) + "\n```"


def start_judge(cwd: Path) -> tuple[subprocess.Popen[str], int]:
    judge = subprocess.Popen([sys.executable, "judge.py", "--port", "0"], cwd=cwd, stdout=subprocess.PIPE, text=True)
    line = judge.stdout.readline() if judge.stdout else ""
    if not line.startswith("listening on "):
        judge.kill()
        raise SystemExit(f"walkthrough: the stand-in judge did not start ({line!r})")
    return judge, int(line.split()[-1])


def row(report: dict, run: str, grader: str = "quality") -> dict:
    [found] = [r for r in report["rows"] if r["run_id"] == run and r["grader"] == grader]
    return found


def fmt(estimate: dict) -> str:
    return f"{estimate['value']:.2f} [{estimate['low']:.2f}, {estimate['high']:.2f}]"


def generate() -> str:
    with tempfile.TemporaryDirectory(prefix="evalstore-calibration-") as tmp:
        cwd = Path(tmp) / "calibration"
        shutil.copytree(HERE, cwd, ignore=shutil.ignore_patterns(".evalstore", "__pycache__", "walkthrough.py"))
        judge, port = start_judge(cwd)
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSTORE_")}
            # The page's store is the one its commands make here: not one someone left in /tmp or above.
            env["EVALSTORE_CEILING_DIRECTORIES"] = tmp
            env.update(
                EVALSTORE_JUDGE_BASE_URL=f"http://127.0.0.1:{port}/v1",
                EVALSTORE_JUDGE_MODEL="stand-in",
                COLUMNS="200",
                NO_COLOR="1",
            )
            return page(Session(cwd, env, port))
        finally:
            judge.terminate()
            judge.wait(timeout=30)


def page(s: Session) -> str:
    set_run = s.set("RUN", "evalstore run evals/sales.eval.yaml --json | run_id")
    runs_summary = s.block("evalstore show $RUN", head=8)
    next_demo = s.block("printf 'p\\nq\\n' | evalstore label $RUN --next --by carol")
    imported = s.block("evalstore labels import labels.csv --run $RUN")
    set_regions = s.set(
        "REGIONS", "evalstore replay $RUN --prompt quality=file://../prompts/quality.regions.md --json | run_id"
    )
    set_arith = s.set(
        "ARITH", "evalstore replay $RUN --prompt quality=file://../prompts/quality.arithmetic.md --json | run_id"
    )
    agreement = s.block("evalstore agreement $RUN $REGIONS $ARITH --grader quality")
    pair = s.block("evalstore compare $REGIONS $ARITH", tail=8)
    many = s.block("evalstore compare $RUN $REGIONS $ARITH --cluster-by category")
    report = json.loads(s.sh("evalstore agreement $RUN $REGIONS $ARITH --grader quality --json", stdout_only=True))
    cur, reg, ari = (row(report, s.env[n]) for n in ("RUN", "REGIONS", "ARITH"))
    alpha = report["labeller_alpha"]["quality"]["value"]
    return TEMPLATE.format(
        set_run=set_run,
        set_regions=set_regions,
        set_arith=set_arith,
        runs_summary=runs_summary,
        next_demo=next_demo,
        imported=imported,
        agreement=agreement,
        pair=pair,
        many=many,
        n=ari["labelled"],
        people=", ".join(report["people"]),
        alpha=f"{alpha:.2f}",
        acc_cur=fmt(cur["accuracy"]),
        tnr_cur=fmt(cur["tnr"]),
        acc_reg=fmt(reg["accuracy"]),
        acc_ari=fmt(ari["accuracy"]),
        kappa_ari=fmt(ari["kappa"]),
        tpr_ari=fmt(ari["tpr"]),
        raw_ari=fmt(ari["raw_pass_rate"]),
        corr_ari=fmt(ari["corrected_pass_rate"]),
        fn_ari=ari["confusion"]["fn"],
    )


TEMPLATE = """\
# Which grader prompt should I ship? A calibration walkthrough

<!-- Generated by examples/calibration/walkthrough.py from what the commands printed; do not edit by hand.
     tests/e2e/test_e2e_calibration_walkthrough.py fails when this page is stale. -->

An LLM grader is only as good as its prompt. Two prompts that score differently tell you that they
differ, not which one is right. This walkthrough measures grader prompts against human labels and picks
the one that grades like the people who labelled.

The example is `examples/calibration/`: a stand-in agent adds up a shop's sales by region for 40 shops
(`evals/cases.yaml`), with planted mistakes (a wrong total, a region left out, a subtotal written before
a correct total). One LLM grader, `quality`, judges each answer. Its prompt as recorded,
`prompts/quality.md`, asks only for a total; two variants ask more: `quality.regions.md` (every region
listed) and `quality.arithmetic.md` (every region listed and the total right). The judge is
`judge.py`, a local OpenAI-compatible stand-in that needs no network: it follows the instruction it
recognizes in the prompt, and like a hasty model it reads the first number after "total", so a subtotal
written first fools it. Two people labelled answers: alice 30 (`shop-01`…`shop-30`), bob 12 of the same.

Every command below ran as shown; the output is what it printed (run ids made fixed, long output cut
where marked `…`).

## 1. Record the run with the current prompt

```bash
cp -r examples/calibration /tmp/calibration && cd /tmp/calibration
python3 judge.py --port 8765 &          # the stand-in judge
export EVALSTORE_JUDGE_BASE_URL=http://127.0.0.1:8765/v1 EVALSTORE_JUDGE_MODEL=stand-in
run_id() {{ python3 -c 'import json,sys; print(json.load(sys.stdin)["run_id"])'; }}
{set_run}
```

{runs_summary}

The current prompt passes every answer, mistakes included.

## 2. Label answers

`evalstore label RUN --next` shows each answer as the graders saw it (files converted to text) and asks
pass, fail, skip or quit; each label is recorded at once, and running it again continues with the tests
you have not labelled. The run's verdicts stay hidden (`--blind`, the default) so they do not sway you;
`--show-verdict` shows them. Here carol labels one answer and quits:

{next_demo}

alice and bob labelled in a spreadsheet; their labels are in `labels.csv` (columns `test_id, verdict,
by, note`):

{imported}

`evalstore labels $RUN` lists them (`--all` with the ones a newer label replaced). Labels belong to
the agent's answers (the recorded run), so they apply to every regrade of it.

The same can be done in a browser: `evalstore view --label-as carol` adds a form to each test page
(pass, fail or skip, about the whole answer or one grader, with a note) that records carol's label as
`evalstore label` does. The page is blind too: the run's verdicts and other people's labels appear only
once carol has labelled the answer, or asks to see them; "next unlabelled test" goes on from there.

## 3. Regrade with two prompt variants

A replay never calls the agent: it regrades the recorded answers with the swapped prompt.

```bash
{set_regions}
{set_arith}
```

## 4. Which prompt agrees with the people?

{agreement}

On the {n} labelled tests the people agree on (an even split between alice and bob is left out), the
current prompt's accuracy is {acc_cur}, with a TNR of {tnr_cur}: it never fails a wrong answer, and
its pass rate cannot be corrected ("no better than chance"). The regions variant reaches
{acc_reg}. The arithmetic variant reaches {acc_ari}, kappa {kappa_ari}; its TPR of {tpr_ari} is the
subtotal it misreads ({fn_ari} right answer failed). The people themselves ({people}) agree with
Krippendorff's alpha {alpha}: the ceiling a judge can be expected to reach.

`corrected` is the pass rate the agent probably has, given how this judge errs (Rogan–Gladen): the
arithmetic variant passes {raw_ari} of all 40 answers; corrected for its measured TPR and TNR,
{corr_ari}.

Is the difference between the two variants more than noise? `compare` answers with an exact McNemar
test on the labelled tests where only one of them is right (the viewer's compare page,
`/compare/A/B`, shows both tables, agreement per grader and this test, under the run statistics):

{pair}

## 5. All variants at once

`compare BASE V1 V2 ...` compares each variant with the base, Holm-adjusting the p-values over the
variants, with standard errors clustered by district (`--cluster-by category`) and the smallest
difference these tests could detect at 80% power:

{many}

**Ship `quality.arithmetic.md`.** It agrees with the labels far more than the current prompt and the
regions variant, and the difference is more than noise. Its remaining error (a subtotal before the
total) is worth a sentence in the prompt, and a regrade and `evalstore agreement` show whether it helped.

See [usage.md](usage.md#human-labels-and-judge-agreement) for every option.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Do not write; exit 1 if the page differs.")
    args = parser.parse_args()
    text = generate()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(), text.splitlines(), "docs/calibration.md", "generated", lineterm=""
            )
            sys.stdout.write("\n".join(diff) + "\n")
            raise SystemExit(1)
        print("docs/calibration.md is current")
        return
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
