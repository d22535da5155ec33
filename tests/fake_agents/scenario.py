"""What the fake coding agents (fake_copilot.py, fake_pi.py) do with a prompt: a pure function of the
question and of the skills in the working folder, so AgentV and evalstore, asking the same, get the same.

- a question naming a skill's last word (`acme-deploy` -> "deploy") and asking to roll back: the skill's
  file is read;
- one naming it otherwise: the skill is used (an agent without a skill tool reads the file instead);
- one asking for code: the first skill's file is read (a wrong trigger), then `answer.py` is written;
- anything else: `date` is run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Step:
    kind: str
    """``skill``, ``read``, ``write`` or ``bash``."""
    args: dict
    result: str


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    answer: str = ""
    seed: int = 0


def question_of(prompt: str) -> str:
    return prompt.split("[[ ## user_query ## ]]")[-1].strip()


def skills(folder: Path, roots: tuple[str, ...]) -> list[tuple[str, Path, str]]:
    """(name, SKILL.md, its path from the folder) of every skill under the given roots, in order."""
    found = []
    for root in roots:
        base = folder / root
        if base.is_dir():
            found += [(p.parent.name, p, f"{root}/{p.parent.name}/SKILL.md") for p in sorted(base.glob("*/SKILL.md"))]
    return found


def heading(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return path.parent.name


def plan(prompt: str, folder: Path, roots: tuple[str, ...], has_skill_tool: bool) -> Plan:
    question = question_of(prompt)
    lowered = question.lower()
    seed = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8], 16)
    found = skills(folder, roots)
    named = next((s for s in found if s[0].split("-")[-1] in lowered), None)
    out = Plan(seed=seed)
    if named and (("roll back" in lowered or "rollback" in lowered) or not has_skill_tool):
        out.steps.append(Step("read", {"path": named[2]}, named[1].read_text(encoding="utf-8")))
        out.answer = f"Per {named[0]}: {heading(named[1])}"
    elif named:
        out.steps.append(Step("skill", {"skill": named[0]}, f"Launching skill: {named[0]}"))
        out.answer = f"Per {named[0]}: {heading(named[1])}"
    elif any(word in lowered for word in ("function", "write", "code")) and found:
        _name, path, shown = found[0]
        source = "def parse(lines):\n    return [l for l in lines if 'error' in l]\n"
        out.steps.append(Step("read", {"path": shown}, path.read_text(encoding="utf-8")))
        out.steps.append(Step("write", {"path": "answer.py", "content": source}, "File created successfully"))
        out.answer = "Wrote answer.py with a parse function."
    else:
        out.steps.append(Step("bash", {"command": "date"}, "Sat Nov 28 10:00:00 UTC 2026"))
        out.answer = f"I cannot know that reliably (answer {seed % 1000})."
    return out


def carry_out(step: Step, folder: Path) -> None:
    """What a step changes on disk."""
    if step.kind == "write":
        (folder / step.args["path"]).write_text(step.args["content"], encoding="utf-8")
