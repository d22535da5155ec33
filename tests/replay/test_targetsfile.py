"""Loading AgentV's ``.agentv/targets.yaml``: references stay unresolved until call time."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalstore.replay.errors import TargetsFileError
from evalstore.replay.targetsfile.loader import (
    explicit_targets_file,
    find_targets_file,
    interpolate,
    is_reference,
    load_targets_file,
    references,
)
from evalstore.replay.targetsfile.redaction import REDACTED

AGENTV_TARGETS = """\
# Targets as AgentV users write them
targets:
  - name: default
    provider: pi-coding-agent
    model: z-ai/glm-4.7
    api_key: ${{ OPENROUTER_API_KEY }}
    grader_target: gemini-flash

  - name: codex
    provider: codex
    judge_target: openai
    token: literal-token-value

  - name: gemini-flash
    provider: gemini
    model: gemini-3-flash-preview
    api_key: ${{GOOGLE_GENERATIVE_AI_API_KEY}}

  - name: openai
    provider: openai
    endpoint: ${{ OPENAI_ENDPOINT }}
    api_key: ${{ OPENAI_API_KEY }}
    model: ${{ OPENAI_MODEL }}
    temperature: 0
"""


def write(tmp_path: Path, text: str, name: str = "targets.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_loads_targets_with_grader_target_and_its_judge_target_alias(tmp_path: Path):
    loaded = load_targets_file(write(tmp_path, AGENTV_TARGETS))
    assert list(loaded.targets) == ["default", "codex", "gemini-flash", "openai"]
    assert loaded.grader_target_for("default") == "gemini-flash"
    assert loaded.grader_target_for("codex") == "openai"
    assert loaded.grader_target_for("openai") is None and loaded.grader_target_for(None) is None
    openai = loaded.get("openai")
    assert openai.provider == "openai"
    assert openai.fields == {
        "endpoint": "${{ OPENAI_ENDPOINT }}",
        "api_key": "${{ OPENAI_API_KEY }}",
        "model": "${{ OPENAI_MODEL }}",
        "temperature": 0,
    }
    assert openai.source.endswith("targets.yaml:19")


def test_redacted_keeps_references_and_hides_literal_secrets(tmp_path: Path):
    loaded = load_targets_file(write(tmp_path, AGENTV_TARGETS))
    assert loaded.get("default").redacted() == {
        "name": "default",
        "provider": "pi-coding-agent",
        "grader_target": "gemini-flash",
        "model": "z-ai/glm-4.7",
        "api_key": "${{ OPENROUTER_API_KEY }}",
    }
    assert loaded.get("codex").redacted()["token"] == REDACTED


def test_interpolation_resolves_only_when_asked():
    config = {"base_url": "${{ HOST }}/v1", "nested": ["${{HOST}}", 3], "plain": "x"}
    assert references(config) == ["HOST", "HOST"]
    assert interpolate(config, {"HOST": "http://h"}, where="t") == {
        "base_url": "http://h/v1",
        "nested": ["http://h", 3],
        "plain": "x",
    }
    assert config["base_url"] == "${{ HOST }}/v1"
    with pytest.raises(TargetsFileError, match=r"^t.base_url: environment variable HOST is not set"):
        interpolate(config, {}, where="t")
    assert is_reference(" ${{ KEY }} ") and not is_reference("prefix ${{ KEY }}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("targets: {}\n", r"targets.yaml:1: expected a mapping with a 'targets:' list"),
        ("targets:\n  - provider: openai\n", r"targets.yaml:2: targets\[0\]: field 'name' is required"),
        (
            "targets:\n  - name: a\n    provider: openai\n  - name: b\n",
            r"targets.yaml:4: target 'b': field 'provider' is required",
        ),
        (
            "targets:\n  - name: a\n    provider: openai\n  - name: a\n    provider: azure\n",
            r"targets.yaml:4: target 'a' is defined twice",
        ),
        (
            "targets:\n  - name: a\n    use_target: [b]\n",
            r"targets.yaml:2: target 'a': field 'use_target' must be a target name",
        ),
        ("targets:\n  - name: [unclosed\n", r"targets.yaml:\d+: not valid YAML"),
    ],
)
def test_bad_files_name_file_line_and_field(tmp_path: Path, text: str, message: str):
    with pytest.raises(TargetsFileError, match=message):
        load_targets_file(write(tmp_path, text))


def test_unknown_target_lists_the_known_ones(tmp_path: Path):
    loaded = load_targets_file(write(tmp_path, AGENTV_TARGETS))
    with pytest.raises(
        TargetsFileError, match=r"no target named 'nope' \(targets defined: codex, default, gemini-flash, openai\)"
    ):
        loaded.get("nope")


def test_missing_file_is_a_domain_error(tmp_path: Path):
    with pytest.raises(TargetsFileError, match="cannot read targets file"):
        load_targets_file(tmp_path / "absent.yaml")


def test_find_targets_file_walks_up_from_the_eval(tmp_path: Path):
    evals = tmp_path / "evals" / "deep"
    evals.mkdir(parents=True)
    eval_file = evals / "suite.eval.yaml"
    eval_file.write_text("tests: []\n", encoding="utf-8")
    assert find_targets_file(eval_file) is None
    (tmp_path / ".agentv").mkdir()
    write(tmp_path / ".agentv", AGENTV_TARGETS)
    assert find_targets_file(eval_file) == (tmp_path / ".agentv" / "targets.yaml").resolve()


CHAINS = """\
targets:
  - name: default
    use_target: ${{ AGENT_TARGET }}
  - name: llm
    use_target: ${{ LLM_TARGET }}
  - name: grader
    use_target: ${{ GRADER_TARGET }}
  - name: agent
    provider: cli
    command: run {PROMPT}
    grader_target: grader
  - name: literal
    use_target: openai
  - name: openai
    provider: ${{ OPENAI_PROVIDER }}
    model: m
  - name: loop-a
    use_target: loop-b
  - name: loop-b
    use_target: loop-a
"""


def test_a_grader_target_another_file_defines_loads_and_fails_only_when_resolved(tmp_path: Path):
    """AgentV reads one targets file and resolves a grader target by name when a grader needs a judge."""
    loaded = load_targets_file(write(tmp_path, "targets:\n  - name: a\n    provider: cli\n    grader_target: grader\n"))
    assert loaded.get("a").grader_target == "grader"
    assert loaded.delegate("grader", {}) is None


def test_use_target_chains_follow_the_environment_as_agentv_eval_does(tmp_path: Path):
    loaded = load_targets_file(write(tmp_path, CHAINS))
    env = {"LLM_TARGET": "literal", "OPENAI_PROVIDER": "openai", "AGENT_TARGET": "agent"}
    assert loaded.select("llm", env).name == "openai"
    assert loaded.select("llm", env).provider == "openai"
    assert loaded.select("default", env).name == "agent"
    assert loaded.select("agent", env).grader_target == "grader"
    assert loaded.delegate("llm", env).name == "openai"  # type: ignore[union-attr]
    # An unset variable ends the chain where it stands: an entry with no provider, named in the error.
    with pytest.raises(TargetsFileError, match=r"target 'grader'.*GRADER_TARGET is not set"):
        loaded.select("grader", env)
    with pytest.raises(TargetsFileError, match=r"target 'grader'.*GRADER_TARGET is not set"):
        loaded.delegate("grader", env)
    with pytest.raises(TargetsFileError, match=r"names 'nope', which is not defined"):
        loaded.select("llm", {**env, "LLM_TARGET": "nope"})
    with pytest.raises(TargetsFileError, match=r"OPENAI_PROVIDER \(its provider\) is not set"):
        loaded.select("literal", {})
    with pytest.raises(TargetsFileError, match=r"circular use_target: loop-a -> loop-b -> loop-a"):
        loaded.delegate("loop-a", env)
    # ``agentv eval`` follows at most five steps from the target it picks, and uses where it stopped.
    with pytest.raises(TargetsFileError, match=r"target 'loop-\w'.*it has no provider"):
        loaded.select("loop-a", env)


def test_discovery_stops_at_the_repository_root_and_then_tries_the_working_directory(tmp_path: Path):
    """``discoverTargetsFile``: from the eval file's folder up to the repository root of the working
    directory; in each folder targets.yaml, targets.yml, .agentv/targets.yaml, .agentv/targets.yml."""
    outside, repo = tmp_path / "outside", tmp_path / "outside" / "repo"
    evals = repo / "examples" / "one" / "evals"
    evals.mkdir(parents=True)
    (repo / ".git").mkdir()
    eval_file = evals / "suite.eval.yaml"
    eval_file.write_text("tests: []\n", encoding="utf-8")
    (outside / ".agentv").mkdir()
    write(outside / ".agentv", AGENTV_TARGETS)
    assert find_targets_file(eval_file, cwd=repo) is None  # above the repository root: not looked at
    assert find_targets_file(eval_file, cwd=outside) == outside / ".agentv" / "targets.yaml"  # no repository
    (repo / ".agentv").mkdir()
    write(repo / ".agentv", AGENTV_TARGETS, "targets.yml")
    assert find_targets_file(eval_file, cwd=repo) == repo / ".agentv" / "targets.yml"
    write(repo / "examples" / "one", AGENTV_TARGETS)  # a bare targets.yaml nearer the eval wins
    assert find_targets_file(eval_file, cwd=repo) == repo / "examples" / "one" / "targets.yaml"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".agentv").mkdir(parents=True)
    write(elsewhere / ".agentv", AGENTV_TARGETS)
    (repo / "examples" / "one" / "targets.yaml").unlink()
    (repo / ".agentv" / "targets.yml").unlink()
    (elsewhere / ".git").mkdir()
    assert find_targets_file(eval_file, cwd=elsewhere) == outside / ".agentv" / "targets.yaml"
    assert explicit_targets_file(elsewhere) == elsewhere / ".agentv" / "targets.yaml"
    with pytest.raises(TargetsFileError, match="no targets file there"):
        explicit_targets_file(outside / "repo")


def test_an_optional_field_whose_variable_is_unset_is_absent_as_in_agentv(tmp_path: Path):
    """AgentV reads some fields with ``optionalEnv`` (an openai target's endpoint, an azure target's
    version, a cli target's cwd): an unset or empty variable there leaves the field out; elsewhere it stays
    a reference, and resolving it fails."""
    loaded = load_targets_file(
        write(
            tmp_path,
            "targets:\n"
            "  - name: o\n    provider: openai\n    endpoint: ${{ T_ENDPOINT }}\n    api_key: ${{ T_KEY }}\n"
            "    model: m\n"
            "  - name: a\n    provider: azure\n    endpoint: e\n    version: ${{ T_VERSION }}\n    model: d\n"
            "  - name: c\n    provider: cli\n    command: run\n    cwd: ${{ T_CWD }}\n"
            "    healthcheck:\n      command: check\n      cwd: ${{ T_CWD }}\n",
        )
    )
    env = {"T_VERSION": "  "}
    assert loaded.select("o", env).fields == {"api_key": "${{ T_KEY }}", "model": "m"}
    assert loaded.select("o", {"T_ENDPOINT": "http://x"}).fields["endpoint"] == "${{ T_ENDPOINT }}"
    assert "version" not in loaded.select("a", env).fields
    assert loaded.delegate("c", env).fields == {"command": "run", "healthcheck": {"command": "check"}}  # type: ignore[union-attr]


def test_every_provider_agentv_knows_is_one_evalstore_runs_or_refuses():
    """``AGENTV_PROVIDERS`` (targets.ts's cases) against the registry's table: what evalstore refuses is
    AgentV's, and so is what it runs, but for its own spellings of a Chat Completions endpoint (which AgentV
    4.42.4 would take for a custom provider) and for ``azure-openai`` (AgentV's alias of ``azure``)."""
    from evalstore.replay.targets.registry import REFUSED, runners
    from evalstore.replay.targetsfile.loader import AGENTV_PROVIDERS

    assert set(REFUSED) <= AGENTV_PROVIDERS
    assert set(runners()) - AGENTV_PROVIDERS == {"openai-compatible", "openai_compatible"}
    assert AGENTV_PROVIDERS - set(runners()) - set(REFUSED) == {"azure-openai"}


@pytest.mark.parametrize(
    ("provider", "expected"),
    [("cli", True), (" CLI ", True), ("file-writer", True), ("claude-cli", False), ("openai", False), ("pi", False)],
)
def test_which_providers_run_in_the_eval_files_folder(provider: str, expected: bool):
    from evalstore.replay.targetsfile.loader import runs_in_eval_folder

    assert runs_in_eval_folder(provider) is expected


def test_a_targets_working_folder_is_the_one_agentv_gives_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """AgentV 4.42.4 (targets.ts ``normalizeCliTargetInput``): a cli target's relative cwd is the eval file's
    folder's, and that folder when it has none (an unset ``${{ VAR }}`` is none); its other agents resolve a
    relative cwd from where AgentV runs, and have no default."""
    from evalstore.replay.agentv.file_access import target_folder

    evals = tmp_path / "project" / "evals"
    for folder in (evals / "scratch", tmp_path / "abs", tmp_path / "here" / "work", evals / "from-env"):
        folder.mkdir(parents=True)
    eval_file = evals / "suite.eval.yaml"
    eval_file.write_text("tests: []\n")
    targets = load_targets_file(
        write(
            tmp_path,
            "targets:\n"
            "  - {name: bare, provider: cli, command: run}\n"
            "  - {name: rel, provider: cli, command: run, cwd: scratch}\n"
            f"  - {{name: abs, provider: cli, command: run, cwd: {tmp_path / 'abs'}}}\n"
            "  - {name: unset, provider: cli, command: run, cwd: '${{ T_UNSET_CWD }}'}\n"
            "  - {name: env, provider: cli, command: run, cwd: '${{ T_CWD }}'}\n"
            "  - {name: inside, provider: cli, command: run, cwd: 'x/${{ T_CWD }}'}\n"
            "  - {name: custom, provider: my-provider, command: run}\n"
            "  - {name: claude, provider: claude-cli}\n"
            "  - {name: claude-rel, provider: claude-cli, cwd: work}\n"
            "  - {name: alias, use_target: bare}\n"
            "  - {name: missing, provider: cli, command: run, cwd: nowhere}\n",
        )
    )
    monkeypatch.chdir(tmp_path / "here")
    monkeypatch.delenv("T_UNSET_CWD", raising=False)
    monkeypatch.setenv("T_CWD", str(evals / "from-env"))

    def folder(name: str, **trust: bool):  # type: ignore[no-untyped-def]
        flags = {"trusted": True, "vouchable": True, "eval_trusted": True, **trust}
        found = target_folder(targets, name, eval_file, **flags)
        return None if found is None else (found.path, found.granted, found.default)

    assert folder("bare") == (evals, True, True)
    assert folder("rel") == (evals / "scratch", True, False)
    assert folder("abs") == (tmp_path / "abs", True, False)
    assert folder("unset") == (evals, True, True)
    assert folder("env") == (evals / "from-env", True, False)
    assert folder("inside") is None  # AgentV passes it on as written: no such folder
    assert folder("custom") == (evals, True, True)
    assert folder("claude") is None
    assert folder("claude-rel") == (tmp_path / "here" / "work", False, False)  # AgentV's cwd is not known
    assert folder("alias") == (evals, True, True)
    assert folder("missing") is None
    # From the results' own eval file (data): where to look, granted by --eval on that file.
    found = target_folder(targets, "bare", eval_file, trusted=False, vouchable=True, eval_trusted=False)
    assert found is not None and (found.granted, found.vouch) == (False, eval_file)
    found = target_folder(targets, "rel", eval_file, trusted=False, vouchable=False, eval_trusted=True)
    assert found is not None and (found.granted, found.vouch) == (False, None)  # AgentV's copy of the targets
