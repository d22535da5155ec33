"""A test's ``assertions`` (or Promptfoo-style ``assert``) turned into grader specs.

AgentV 4.42.4's semantics (``yaml-parser.ts`` ``parseGraderList``): a type is read with ``_`` as ``-`` and
otherwise as written (``Contains`` is not ``contains``); the deprecated ``code-judge`` and ``llm-judge`` are
skipped with AgentV's warning; a type its registry does not hold (``contians``, ``script``) is a grader
that scores 0 when it runs, as AgentV's registry throws (``UnknownTypeSpec``), warned about at every load.
A v5-next generated bundle (Promptfoo-shaped: ``prompts``, ``providers``, ``default_test``) keeps that
AgentV's ``llm-rubric`` and ``script``, and skips the types of a later AgentV it grades and evalstore cannot.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalstore.replay.evalfile.converters import merge_converters, parse_converters
from evalstore.replay.evalfile.fields import (
    ParseContext,
    expect_list,
    expect_mapping,
    opt_bool,
    opt_number,
    opt_str,
    warn_unknown,
)
from evalstore.replay.evalfile.rubrics import parse_rubric_items
from evalstore.replay.evalfile.source import Where
from evalstore.replay.evalfile.specs import (
    DETERMINISTIC_TYPES,
    AggregatorSpec,
    AssertionSpec,
    CodeGraderSpec,
    CompositeSpec,
    ConverterSpec,
    LlmGraderSpec,
    RubricItem,
    UnknownTypeSpec,
)
from evalstore.replay.evalfile.templates import expand_includes
from evalstore.replay.evalfile.trace_graders import TYPES as TRACE_GRADER_TYPES
from evalstore.replay.evalfile.trace_graders import TraceGrader, parse_trace_grader
from evalstore.replay.jstext import JsRegexError, js_regex, js_slice, js_trim

AnyGrader = LlmGraderSpec | CodeGraderSpec | AssertionSpec | TraceGrader | CompositeSpec | UnknownTypeSpec

COMMON_KEYS = ("name", "metric", "type", "weight", "required", "min_score", "negate", "id")
LLM_KEYS = (*COMMON_KEYS, "prompt", "rubrics", "criteria", "value", "target", "preprocessors", "config")
LLM_GRADER_KEYS = (*LLM_KEYS, "model", "max_steps", "maxSteps", "temperature")
"""What AgentV's llm-grader reads; its other keys go to the grader's ``config`` (``grader-parser.ts``)."""
CODE_KEYS = (*COMMON_KEYS, "command", "script", "cwd", "timeout", "config", "preprocessors", "target", "cache", "warm")
DEFAULT_TARGET_MAX_CALLS = 50
DETERMINISTIC_KEYS = (*COMMON_KEYS, "value", "flags", "preprocessors")

RUBRIC_TYPES = ("rubrics", "rubric")
LLM_TYPES = ("llm-grader", *RUBRIC_TYPES)
CODE_TYPES = ("code-grader",)
V5_TYPES = {"llm-rubric": "llm-grader", "script": "code-grader"}
"""The v5-next bundles' names for an LLM and a code grader, which that AgentV graded (read so only in such a
bundle: to AgentV 4.42.4 they are unknown types)."""
DEPRECATED_TYPES = {"llm-judge": "llm-grader", "code-judge": "code-grader"}
"""AgentV 4.42.4's ``isDeprecatedJudgeType``: such a grader is skipped with a warning, never graded."""
LATER_TYPES = ("agent-rubric", "assert-set")
"""Types of a later AgentV (HEAD's): in a v5-next bundle, skipped with a warning (that AgentV graded them, and
evalstore cannot); in any other eval file unknown types, as AgentV 4.42.4 has them."""
AGENTV_KINDS = (
    "code-grader",
    "llm-grader",
    "rubric",
    "rubrics",
    "composite",
    "inline-assert",
    *TRACE_GRADER_TYPES,
    *DETERMINISTIC_TYPES,
)
"""AgentV 4.42's ``GRADER_KIND_VALUES``: the types its parser reads (any other is a custom type), and what a
composite member's ``type`` must be, as written."""
REGISTERED_TYPES = (
    "llm-grader",
    "code-grader",
    "composite",
    "tool-trajectory",
    "field-accuracy",
    "latency",
    "cost",
    "token-usage",
    "execution-metrics",
    "skill-trigger",
    "contains",
    "contains-any",
    "contains-all",
    "icontains",
    "icontains-any",
    "icontains-all",
    "starts-with",
    "ends-with",
    "regex",
    "is-json",
    "equals",
    "inline-assert",
)
"""AgentV 4.42.4's built-in grader registry (``createBuiltinRegistry``), in its order: what a type is looked
up in when the grader runs (its parser makes ``rubrics`` an ``llm-grader`` first; a conversation's turn
hands its assertions over as written), before the custom assertions it discovers (``registered_types``)."""
TYPE_HINTS = {
    **V5_TYPES,
    **DEPRECATED_TYPES,
    "rubrics": "llm-grader",
    "rubric": "llm-grader",
    "agent-rubric": "llm-grader",
}
"""The type to suggest for a name AgentV 4.42.4's registry does not hold (a turn's ``rubrics`` included)."""
LIST_VALUE_TYPES = ("contains-any", "contains-all", "icontains-any", "icontains-all")

PROMPT_VARIABLE = re.compile(r"\{\{\s*(output|expected_output)\s*\}\}")
# Arguments that name a script file: a missing one is an error, not a runtime surprise.
SCRIPT_SUFFIXES = frozenset(
    [
        ".py",
        ".ts",
        ".mts",
        ".js",
        ".mjs",
        ".cjs",
        ".sh",
        ".bash",
        ".zsh",
        ".rb",
        ".pl",
        ".php",
        ".lua",
        ".r",
        ".jl",
        ".ps1",
        ".tsx",
        ".jsx",
    ]
)
SHELLS = ("sh", "bash", "zsh", "dash")
SHELL_COMMAND_FLAGS = ("-c", "-lc", "-ec", "-ic")
SHELL_METACHARACTERS = ";|&$`<>()"
# AgentV writes `undefined` into generated bundles for unset fields (agentv-formats.md §7.2).
JS_UNDEFINED = "undefined"


def parse_assertions(raw: Any, where: Where, ctx: ParseContext, converters: list[ConverterSpec]) -> list[AnyGrader]:
    """Graders in written order; bare strings become one rubrics grader at the first string's place."""
    items = expect_list(raw, where, "a list of assertions")
    graders: list[AnyGrader | None] = []
    bare: list[str] = []
    bare_slot: int | None = None
    for at, item in expand_includes(items, where, ctx):
        if isinstance(item, str):
            if not item.strip():
                ctx.warn(at, "empty assertion skipped")
                continue
            if bare_slot is None:
                bare_slot = len(graders)
                graders.append(None)
            bare.append(js_trim(item))  # AgentV trims each one
            continue
        grader = parse_grader(item, at, ctx, converters)
        if grader is not None:
            graders.append(grader)
    if bare_slot is not None:
        graders[bare_slot] = LlmGraderSpec(
            name="rubrics",
            declared_type="rubrics",
            rubrics=[RubricItem(id=f"rubric-{n}", outcome=text) for n, text in enumerate(bare, start=1)],
            weight=float(len(bare)),
            preprocessors=converters,
        )
    return [g for g in graders if g is not None]


def implicit_grader(converters: list[ConverterSpec]) -> LlmGraderSpec:
    """What a test without assertions is graded by: the default llm-grader on its criteria."""
    return LlmGraderSpec(name="llm-grader", declared_type="implicit", preprocessors=converters)


def unique_names(names: list[str]) -> list[str]:
    """Names unique within a test: repeats get -2, -3, ... in order."""
    taken: set[str] = set()
    out: list[str] = []
    for base in names:
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        out.append(name)
    return out


def assign_names(graders: list[AnyGrader]) -> list[AnyGrader]:
    """Graders renamed by :func:`unique_names`."""
    names = unique_names([g.name for g in graders])
    return [g if name == g.name else g.model_copy(update={"name": name}) for g, name in zip(graders, names)]


def parse_grader(
    item: Any, where: Where, ctx: ParseContext, converters: list[ConverterSpec], *, as_written: bool = False
) -> AnyGrader | None:
    """One assertion as AgentV 4.42.4's parser reads it; ``as_written``: a conversation turn's, which AgentV
    hands to its grader registry as written (no ``_`` read as ``-``, no ``rubrics``, no deprecation skip)."""
    obj = expect_mapping(item, where, "an assertion (a string or an object with `type`)")
    written = obj.get("type")
    if not isinstance(written, str) and not as_written:
        # AgentV 4.42.4 skips an entry with no type, or one that is no string, with a warning and runs the
        # rest (grader-parser.ts), so a run of the file exists: the file is loaded as AgentV loaded it, and
        # the warning says which key was meant.
        typo = difflib.get_close_matches("type", [str(k) for k in obj], n=1, cutoff=0.5)
        meant = f" (`{typo[0]}`: did you mean `type`?)" if typo and typo[0] != "type" else ""
        skip_as_agentv(ctx, where, lambda test: f"Skipping evaluator with invalid type in '{test}'{meant}")
        return None
    if not isinstance(written, str) or not written.strip():
        raise where.error("`type` is required; e.g. llm-grader, rubrics, code-grader, contains")
    if as_written:
        if written not in registered_types(ctx):
            return _unknown(obj, written, where, ctx, turn=True)
        kind = written
    else:
        kind = written.replace("_", "-")  # AgentV's normalizeGraderType; the case stays as written
        if kind in DEPRECATED_TYPES:
            name = obj.get("name")
            shown = name if isinstance(name, str) else "<unnamed>"
            skip_as_agentv(
                ctx,
                where.key("type"),
                lambda test: (
                    f"Skipping evaluator '{shown}' in '{test}': '{written}' is deprecated. "
                    f"Use '{DEPRECATED_TYPES[kind]}' instead"
                ),
            )
            return None
    v5 = V5_TYPES.get(kind) if ctx.v5_bundle else None  # the bundle's own name kept: it names the grader
    if kind in LLM_TYPES or v5 == "llm-grader":
        if kind != "llm-grader":
            warn_unknown(ctx, obj, LLM_KEYS, where)
        return _llm_grader(obj, kind, where, ctx, converters)
    if kind in CODE_TYPES or v5 == "code-grader":
        return _code_grader(obj, kind, where, ctx, converters)
    if kind in DETERMINISTIC_TYPES:
        warn_unknown(ctx, obj, DETERMINISTIC_KEYS, where)
        assertion = _deterministic(obj, kind, where, ctx)
        converters = _own_converters(obj, where, ctx, converters)
        return assertion.model_copy(update={"preprocessors": converters}) if assertion and converters else assertion
    if kind in TRACE_GRADER_TYPES:
        return parse_trace_grader(obj, kind, _common(obj, kind, where, ctx), where, ctx)
    if kind == "composite":
        return _composite(obj, where, ctx)
    if kind == "inline-assert":
        # AgentV's inline-assert wraps a function of a TypeScript eval (evaluate() or *.eval.ts); a YAML
        # suite has none, and AgentV fails the grader with this reason when it runs.
        raise where.key("type").error(
            "`inline-assert` wraps a TypeScript function of a *.eval.ts suite or evaluate() (AgentV: "
            '"No inline assert function found on config"); a YAML suite cannot name one'
        )
    if ctx.v5_bundle and kind in LATER_TYPES:
        ctx.warn(where.key("type"), f"grader type `{written}` is not supported by evalstore; assertion skipped")
        return None
    custom = discovered_types(ctx).get(kind)
    if custom is not None:
        return _custom(obj, kind, custom, where, ctx)
    return _unknown(obj, kind, where, ctx)


def skip_as_agentv(ctx: ParseContext, where: Where, words: Callable[[str], str]) -> None:
    """AgentV's warning for a grader it skips, which names the test (``words(test_id)``): said now for a
    test's grader, and by each test that gets the suite's graders for a suite-level one, as AgentV says it."""
    if ctx.test_id is None:
        ctx.suite_skips.append((where, words))
    else:
        ctx.warn(where, words(ctx.test_id))


def _unknown(obj: dict[str, Any], kind: str, where: Where, ctx: ParseContext, *, turn: bool = False) -> UnknownTypeSpec:
    """A type AgentV 4.42.4's registry does not hold: its parser keeps the entry as a custom type (named by
    its ``name``, else the type; its other keys its config), and the grader scores 0 when it runs. Warned
    about at every load, naming the test and grader, and the type meant or AgentV's types."""
    fields = _common(obj, kind, where, ctx)
    if not (opt_str(obj, "name", where) or opt_str(obj, "metric", where)):
        fields["name"] = kind
    spec = UnknownTypeSpec(written_type=kind, registered=registered_types(ctx), **fields)
    owner = f"test `{ctx.test_id}`" if ctx.test_id is not None else "every test (a suite-level assertion)"
    looked_up = "a turn's assertion is looked up as written, and " if turn else ""
    ctx.warn(
        where.key("type"),
        f"{looked_up}AgentV 4.42.4 has no grader type `{kind}`{_meant(kind, ctx)}: grader `{spec.name}` of {owner} "
        'scores 0 and fails when it runs ("Unknown grader type"), counted in the score, in AgentV and here',
    )
    return spec


def _meant(kind: str, ctx: ParseContext) -> str:
    """`` (did you mean `X`?)`` for the type ``kind`` most likely meant, else AgentV's types listed."""
    choices = [*registered_types(ctx), "rubrics"]
    hint = TYPE_HINTS.get(kind) or next((c for c in choices if c.lower() == kind.lower().replace("_", "-")), None)
    if hint is None:
        close = difflib.get_close_matches(kind, choices, n=1, cutoff=0.6)
        hint = close[0] if close else None
    if hint is not None:
        return f" (did you mean `{hint}`?)"
    return f" (its types: {', '.join(registered_types(ctx))})"


CUSTOM_SUFFIXES = (".ts", ".js", ".mts", ".mjs")
CUSTOM_RUNTIME = ("bun", "run")
"""How AgentV 4.42 runs a discovered custom assertion (``registry/assertion-discovery.ts``): ``bun run FILE``,
whatever the file's suffix."""


def discovered_types(ctx: ParseContext) -> dict[str, Path]:
    """The custom assertions AgentV 4.42.4 registers for this eval file, by type, in its order: the files
    ``.agentv/assertions/*.{ts,js,mts,mjs}`` in the eval file's folder and each parent (nearest first; the
    filesystem root is not searched), then ``.agentv/graders/`` and ``.agentv/judges/`` folder by folder
    the same way (``discoverAssertions``, ``discoverGraders``); a type registered already (a built-in one,
    or a nearer file) is not registered again. Files in a folder are taken in name order (AgentV's
    fast-glob, in the order the folder lists them); hidden ones are not (fast-glob's default)."""
    if ctx.custom_types is None:
        levels = [d for d in (ctx.eval_dir, *ctx.eval_dir.parents) if d != Path(d.anchor)]
        folders = [level / ".agentv" / "assertions" for level in levels]
        folders += [level / ".agentv" / kind for level in levels for kind in ("graders", "judges")]
        found: dict[str, Path] = {}
        for folder in folders:
            try:
                names = sorted(entry.name for entry in os.scandir(folder) if entry.is_file())
            except OSError:
                continue
            for name in names:
                stem, suffix = os.path.splitext(name)
                if suffix in CUSTOM_SUFFIXES and not name.startswith(".") and stem not in REGISTERED_TYPES:
                    found.setdefault(stem, folder / name)
        ctx.custom_types = found
    return ctx.custom_types


def registered_types(ctx: ParseContext) -> list[str]:
    """Every type AgentV 4.42.4's registry holds for this eval file: its built-in ones, then the custom
    assertions it discovers (the list its "Unknown grader type" error gives)."""
    return [*REGISTERED_TYPES, *discovered_types(ctx)]


def _custom(obj: dict[str, Any], kind: str, script: Path, where: Where, ctx: ParseContext) -> CodeGraderSpec:
    """A custom assertion: a code grader AgentV runs as ``bun run SCRIPT`` in its own working folder, with
    no ``config`` (the discovered grader's factory passes none) and its default timeout."""
    fields = _common(obj, kind, where, ctx)
    if not (opt_str(obj, "name", where) or opt_str(obj, "metric", where)):
        fields["name"] = kind
    ctx.reference("grader_script", script, f".agentv/{script.parent.name}/{script.name}")
    return CodeGraderSpec(
        command=[*CUSTOM_RUNTIME, str(script)],
        script=str(script),
        cwd=os.getcwd(),
        custom_type=kind,
        **fields,
    )


def _composite(obj: dict[str, Any], where: Where, ctx: ParseContext) -> CompositeSpec | None:
    """AgentV's composite: named members of known types (parsed as assertions of their own, without the
    suite's preprocessors) and an aggregator; skipped with AgentV's warning when either is unusable."""
    common = _common(obj, "composite", where, ctx)
    name = common["name"]

    def skip(reason: str) -> None:
        ctx.warn(where, f"composite grader `{name}` skipped, as AgentV skips it: {reason}")

    key = next((k for k in ("assertions", "assert", "evaluators") if obj.get(k) is not None), "assertions")
    raw_members = obj.get(key)
    if not isinstance(raw_members, list):
        skip("missing assertions (or evaluators) array")
        return None
    aggregator = _aggregator(obj.get("aggregator"), where.key("aggregator"), ctx, skip, name)
    if aggregator is None:
        return None
    members: list[Any] = []
    for at, raw in expand_includes(raw_members, where.key(key), ctx):
        member_type = raw.get("type") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or member_type not in AGENTV_KINDS:
            ctx.warn(
                at, f"member of composite `{name}` skipped, as AgentV skips it: it needs a `name` and a known `type`"
            )
            continue
        member = parse_grader(raw, at, ctx, [])
        if member is not None:
            members.append(member)
    if not members:
        skip("no valid member evaluators")
        return None
    return CompositeSpec(assertions=assign_names(members), aggregator=aggregator, **common)


def _aggregator(raw: Any, where: Where, ctx: ParseContext, skip: Any, name: str) -> AggregatorSpec | None:
    if not isinstance(raw, dict):
        skip("missing aggregator")
        return None
    written = raw.get("type")
    kind = written if written in ("weighted_average", "threshold") else str(written).replace("_", "-")
    if kind in DEPRECATED_TYPES:
        skip_as_agentv(
            ctx,
            where.key("type"),
            lambda test: (
                f"Skipping composite evaluator '{name}' in '{test}': aggregator type '{written}' is "
                f"deprecated. Use '{DEPRECATED_TYPES[kind]}' instead"
            ),
        )
        return None
    if kind == "weighted_average":
        weights: dict[Any, Any] = raw["weights"] if isinstance(raw.get("weights"), dict) else {}
        numbers = {
            str(k): float(v) for k, v in weights.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        return AggregatorSpec(type="weighted_average", weights=numbers or None)
    if kind == "threshold":
        threshold = raw.get("threshold")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            skip("threshold must be a number between 0.0 and 1.0")
            return None
        return AggregatorSpec(type="threshold", threshold=float(threshold))
    if kind == "code-grader":
        path = raw.get("path")
        if not isinstance(path, str) or not path:
            skip("code-grader aggregator missing path")
            return None
        # A shell command run in the eval file's folder, as AgentV runs it.
        script, ref = _shell_script(path, where.key("path"), ctx)
        if script is not None:
            ctx.reference("grader_script", script, ref)
        return AggregatorSpec(type="code-grader", path=path, cwd=str(ctx.eval_dir))
    if kind == "llm-grader":
        prompt = raw.get("prompt")
        if isinstance(prompt, str) and prompt.startswith("file://"):
            # AgentV 4.42.4 refuses the eval when the file is not found, then keeps the reference's path as
            # the prompt and never reads the file: its judge is sent the path. So is evalstore's, so that a
            # replay of AgentV's run asks what AgentV asked; said at every load.
            path = prompt[len("file://") :]
            found = ctx.resolve(path, where.key("prompt"), "aggregator prompt file")
            ctx.reference("prompt", found, prompt)
            ctx.warn(
                where.key("prompt"),
                f"composite `{name}`: its LLM aggregator's judge is sent the text `{path}`, not the file's "
                "contents, as AgentV 4.42.4 sends it (it checks that the file exists and sends its path as the "
                "prompt); write the prompt inline (`prompt: |`) for the judge to read it",
            )
            return AggregatorSpec(type="llm-grader", prompt=path or None, prompt_file=str(found))
        return AggregatorSpec(type="llm-grader", prompt=prompt if isinstance(prompt, str) and prompt else None)
    skip(f"invalid aggregator type `{written}`")
    return None


def _common(obj: dict[str, Any], kind: str, where: Where, ctx: ParseContext) -> dict[str, Any]:
    name = opt_str(obj, "name", where) or opt_str(obj, "metric", where) or kind
    fields: dict[str, Any] = {"name": name}
    weight = opt_number(obj, "weight", where, low=0.0)
    if weight is not None:
        fields["weight"] = weight
    required = obj.get("required")
    if required is not None:
        if isinstance(required, bool):
            fields["required"] = required
        else:
            # v4 accepts a number as the required score (deprecated); it must be a valid score.
            fields["required"] = opt_number(obj, "required", where, low=0.0, high=1.0, low_open=True)
            ctx.warn(
                where.key("required"),
                f"`required: {required}` is deprecated; use `required: true` and `min_score: {required}` (as AgentV says)",
            )
    min_score = opt_number(obj, "min_score", where, low=0.0, high=1.0)
    if min_score is not None:
        fields["min_score"] = min_score
    negate = opt_bool(obj, "negate", where)
    if negate is not None:
        fields["negate"] = negate
    assertion_id = obj.get("id")
    if assertion_id is not None:
        if isinstance(assertion_id, bool) or not isinstance(assertion_id, (str, int, float)):
            raise where.key("id").error("expected a string naming the assertion")
        fields["id"] = str(assertion_id)
    return fields


def _config(obj: dict[str, Any], where: Where) -> dict[str, Any] | None:
    if obj.get("config") is None:
        return None
    return dict(expect_mapping(obj["config"], where.key("config")))


def _effective_converters(
    obj: dict[str, Any], where: Where, ctx: ParseContext, suite: list[ConverterSpec]
) -> list[ConverterSpec]:
    own = parse_converters(obj.get("preprocessors"), where.key("preprocessors"), ctx)
    return merge_converters(suite, own)


def _own_converters(
    obj: dict[str, Any], where: Where, ctx: ParseContext, suite: list[ConverterSpec]
) -> list[ConverterSpec]:
    """A code or deterministic grader's converters: none (it reads AgentV's text answer, as there), or,
    when it declares ``preprocessors:`` of its own (an evalstore extension), the suite's merged with them."""
    own = parse_converters(obj.get("preprocessors"), where.key("preprocessors"), ctx)
    return merge_converters(suite, own) if own else []


def _warn_string_rubrics(items: list[Any], where: Where, ctx: ParseContext) -> None:
    """A string item under ``rubrics:`` is graded here and skipped by AgentV 4.42.4 (``parseRubricItems``:
    "Skipping invalid rubric entry ... (expected object)"; strings are read only under ``type: rubrics`` +
    ``criteria:``): a replay of AgentV's run moves its score. Said by ``validate``, item by item."""
    for i, item in enumerate(items):
        if isinstance(item, str) and item.strip():
            ctx.warn(
                where.index(i),
                f"a string rubric item is graded here as `rubric-{i + 1}`, and skipped by AgentV 4.42.4 "
                '("Skipping invalid rubric entry"); write `{outcome: ...}` to be graded alike by both',
            )


def _llm_grader(
    obj: dict[str, Any], kind: str, where: Where, ctx: ParseContext, converters: list[ConverterSpec]
) -> LlmGraderSpec:
    fields = _common(obj, kind, where, ctx)
    key: str | None = None
    if kind in RUBRIC_TYPES:
        key = next((k for k in ("criteria", "rubrics") if k in obj), None)
        if key is None:
            raise where.error(f"`type: {kind}` needs `criteria`: a list of rubric items")
        if kind == "rubric":
            ctx.warn(where.key("type"), "`type: rubric` is deprecated; use `type: rubrics` with `criteria`")
        fields["rubrics"] = parse_rubric_items(obj[key], where.key(key), ctx)
    elif kind == "llm-rubric":
        key = next((k for k in ("rubrics", "value") if k in obj), None)
        if key is not None:
            fields["rubrics"] = parse_rubric_items(obj[key], where.key(key), ctx)
    elif "rubrics" in obj:
        fields["rubrics"] = parse_rubric_items(obj["rubrics"], where.key("rubrics"), ctx)
    if isinstance(obj.get("rubrics"), list) and key != "criteria":
        _warn_string_rubrics(obj["rubrics"], where.key("rubrics"), ctx)
    fields.update(_prompt(obj, where, ctx))
    target = opt_str(obj, "target", where)
    config = _config(obj, where)
    if kind == "llm-grader":
        fields.update(_agent_settings(obj, where, ctx))
        # AgentV passes the keys it does not read to the grader's config (its own `config:` wins).
        extra = {str(k): v for k, v in obj.items() if k not in LLM_GRADER_KEYS or k == "id"}
        config = {**extra, **(config or {})} or None
        if obj.get("model") is not None:
            ctx.warn(
                where.key("model"),
                "`model` is read by AgentV 4.42.4 and then not used, so it is not used here either; set the "
                "model on the judge's target",
            )
    return LlmGraderSpec(
        declared_type=kind,
        target=target,
        config=config,
        preprocessors=_effective_converters(obj, where, ctx, converters),
        **fields,
    )


def _agent_settings(obj: dict[str, Any], where: Where, ctx: ParseContext) -> dict[str, Any]:
    """``temperature`` (0..2) and ``max_steps`` (an integer 1..50, or ``maxSteps``) as AgentV reads them; a
    value outside those is dropped by AgentV, and said here."""
    out: dict[str, Any] = {}
    key = "max_steps" if "max_steps" in obj else "maxSteps"
    steps = obj.get(key)
    if steps is not None:
        if isinstance(steps, int) and not isinstance(steps, bool) and 1 <= steps <= 50:
            out["max_steps"] = steps
        else:
            ctx.warn(
                where.key(key),
                f"{steps!r} is not a whole number from 1 to 50; AgentV ignores it, and so does evalstore",
            )
    temperature = obj.get("temperature")
    if temperature is not None:
        if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and 0 <= temperature <= 2:
            out["temperature"] = float(temperature)
        else:
            ctx.warn(
                where.key("temperature"),
                f"{temperature!r} is not a number from 0 to 2; AgentV ignores it, and so does evalstore",
            )
    return out


def _prompt(obj: dict[str, Any], where: Where, ctx: ParseContext) -> dict[str, Any]:
    prompt = obj.get("prompt")
    at = where.key("prompt")
    if prompt is None:
        return {}
    if isinstance(prompt, dict):
        return _prompt_script(prompt, at, ctx)
    if not isinstance(prompt, str):
        raise at.error("expected inline prompt text or file://path.md")
    if prompt.strip() == JS_UNDEFINED:
        ctx.warn(at, "`undefined` (an AgentV export artefact) read as no prompt")
        return {}
    if not prompt.startswith("file://"):
        return {"prompt": prompt}
    path = ctx.resolve(prompt, at, "prompt file")
    if not PROMPT_VARIABLE.search(ctx.read_text(path, at)):
        raise at.error(
            f"prompt file `{path}` contains neither {{{{output}}}} nor {{{{expected_output}}}}; "
            "add one so the judge sees the answer"
        )
    ctx.reference("prompt", path, prompt)
    return {"prompt_file": str(path), "prompt_ref": prompt}


def _prompt_script(prompt: dict[str, Any], at: Where, ctx: ParseContext) -> dict[str, Any]:
    """``prompt: {command: [...], config}``, AgentV's executable prompt template: the script (the command's
    last element) found through the search roots, or the file refused with AgentV's reason."""
    warn_unknown(ctx, prompt, ("command", "script", "config"), at)
    key = "script" if "script" in prompt and "command" not in prompt else "command"
    if key == "script":
        ctx.warn(at.key("script"), "`prompt.script` is deprecated; use `prompt.command`")
    argv = prompt.get(key)
    if not isinstance(argv, list) or not argv:
        raise at.key(key).error("`prompt.command` must be an argv list, the script last: [bun, run, grader.ts]")
    for i, part in enumerate(argv):
        if not isinstance(part, str) or not part.strip():
            raise at.key(key).index(i).error("argv elements must be non-empty strings")
    found = ctx.find(argv[-1])
    if found is None:
        shown = argv[-1].lstrip("/\\") or argv[-1]
        raise at.key(key).error(
            f"prompt command file not found: {shown} (searched {', '.join(ctx.search_roots)}); "
            "AgentV skips the test for it: fix the path"
        )
    ctx.reference("grader_script", found, argv[-1])
    config = prompt.get("config")
    return {
        "prompt_command": [*argv[:-1], str(found)],
        "prompt_config": dict(config) if isinstance(config, dict) else None,
    }


def _code_grader(
    obj: dict[str, Any], kind: str, where: Where, ctx: ParseContext, converters: list[ConverterSpec]
) -> CodeGraderSpec:
    fields = _common(obj, kind, where, ctx)
    key = "script" if "script" in obj and "command" not in obj else "command"
    if key == "script":
        ctx.warn(where.key("script"), "`script` is deprecated; use `command`")
    raw = obj.get(key)
    at = where.key(key) if key in obj else where
    if isinstance(raw, str) and raw.strip():
        command = ["sh", "-c", raw]
        script, script_ref = _shell_script(raw, at, ctx)
    elif isinstance(raw, list) and raw:
        for i, part in enumerate(raw):
            if not isinstance(part, str) or not part:
                raise at.index(i).error("argv elements must be non-empty strings")
        command = list(raw)
        if _is_shell_argv(command):
            script, script_ref = _shell_script(command[2], at.index(2), ctx)
        else:
            command, script, script_ref = _argv_script(command, at, ctx)
    else:
        raise at.error(f'`{key}` is required: an argv list such as ["python3", "check.py"] or a shell command string')
    if script is not None:
        ctx.reference("grader_script", script, script_ref)
    # AgentV passes the keys it does not read (an assertion `id` among them) to the grader in `config`,
    # which its own `config:` entries override.
    extra = {str(k): v for k, v in obj.items() if k not in CODE_KEYS or k == "id"}
    config = {**extra, **(_config(obj, where) or {})}
    timeout = opt_number(obj, "timeout", where, low=0.0, low_open=True)
    if timeout is not None:
        fields["timeout"] = timeout
    fields.update(_target_access(obj.get("target"), where.key("target")))
    cache = opt_bool(obj, "cache", where)
    if cache is not None:
        fields["cache"] = cache
    warm = opt_bool(obj, "warm", where)
    if warm is not None:
        fields["warm"] = warm
    return CodeGraderSpec(
        command=command,
        script=str(script) if script is not None else None,
        cwd=_cwd(obj, where, ctx),
        config=config or None,
        preprocessors=_own_converters(obj, where, ctx, converters),
        **fields,
    )


def _target_access(raw: Any, where: Where) -> dict[str, Any]:
    """``target: {max_calls: N, name?}`` (``true`` or a name: the default of 50 calls)."""
    if raw is None or raw is False:
        return {}
    if raw is True:
        return {"target_max_calls": DEFAULT_TARGET_MAX_CALLS}
    if isinstance(raw, str) and raw.strip():
        return {"target_max_calls": DEFAULT_TARGET_MAX_CALLS, "target": raw}
    obj = expect_mapping(raw, where, "an object {max_calls, name}")
    max_calls = opt_number(obj, "max_calls", where, low=1)
    if max_calls is not None and max_calls != int(max_calls):
        raise where.key("max_calls").error("must be a whole number")
    return {
        "target_max_calls": int(max_calls) if max_calls is not None else DEFAULT_TARGET_MAX_CALLS,
        "target": opt_str(obj, "name", where),
    }


def _argv_script(argv: list[str], at: Where, ctx: ParseContext) -> tuple[list[str], Path | None, str | None]:
    """The script an argv runs: the first argument after the interpreter (or a path-like argv[0])
    that resolves through the search roots; that element becomes its absolute path."""
    named: tuple[int, str] | None = None
    for i, token in enumerate(argv):
        if not _may_be_script(token, first=i == 0):
            continue
        found = ctx.find(token)
        if found is not None:
            resolved = list(argv)
            resolved[i] = str(found)
            return resolved, found, token
        if named is None and _names_script(token, first=i == 0):
            named = (i, token)
    if named is not None:
        # A warning, not an error: suites are often read (imported, inspected) where their grader
        # scripts are not installed; the grader then fails with an execution error when it runs.
        ctx.warn(
            at.index(named[0]),
            f"grader script `{named[1]}` not found in the search roots ({', '.join(ctx.search_roots)}); "
            "this grader will fail when it runs",
        )
    return argv, None, None


def _shell_script(command: str, at: Where, ctx: ParseContext) -> tuple[Path | None, str | None]:
    """The script a shell command string runs, for digests; the string itself is left as written."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None, None
    named: str | None = None
    for i, token in enumerate(tokens):
        if not _may_be_script(token, first=i == 0):
            continue
        found = ctx.find(token)
        if found is not None:
            return found, token
        if named is None and _names_script(token, first=i == 0):
            named = token
    if named is not None:
        problem = f"grader script `{named}` not found in the search roots ({', '.join(ctx.search_roots)})"
        # A compound command may cd elsewhere or build the path at run time: say so, don't refuse.
        if any(ch in command for ch in SHELL_METACHARACTERS) or "cd" in tokens:
            ctx.warn(at, f"{problem}; its digest cannot be recorded")
        else:
            ctx.warn(at, f"{problem}; this grader will fail when it runs")
    return None, None


def _is_shell_argv(argv: list[str]) -> bool:
    return len(argv) >= 3 and os.path.basename(argv[0]) in SHELLS and argv[1] in SHELL_COMMAND_FLAGS


def _may_be_script(token: str, first: bool) -> bool:
    if token.startswith("-") or not token.strip() or any(c.isspace() for c in token):
        return False
    if not first:
        return True
    # argv[0] is an interpreter found on PATH, unless written as a relative path or a script name
    # (an absolute /usr/bin/python3 is the interpreter, not the script).
    is_path = "/" in token or os.sep in token
    return is_path and (not os.path.isabs(token) or _has_script_suffix(token))


def _names_script(token: str, first: bool) -> bool:
    return _has_script_suffix(token) or (first and _may_be_script(token, first))


def _has_script_suffix(token: str) -> bool:
    return os.path.splitext(token)[1].lower() in SCRIPT_SUFFIXES


def _cwd(obj: dict[str, Any], where: Where, ctx: ParseContext) -> str:
    written = opt_str(obj, "cwd", where)
    if written is None:
        return str(ctx.eval_dir)
    for root in [""] if os.path.isabs(written) else ctx.search_roots:
        candidate = os.path.normpath(os.path.join(root, written))
        if os.path.isdir(candidate):
            return candidate
    ctx.warn(where.key("cwd"), f"directory `{written}` not found in the search roots; using {ctx.eval_dir}")
    return str(ctx.eval_dir)


def default_name(kind: str, value: Any) -> str:
    """AgentV 4.42's name for a deterministic assertion without ``name:``: the type and its string value
    (``contains-Paris``), the number of values of a list (``contains-any-2``), a regex's first 30
    characters; the bare type when the value is not a string (or list, for the list types)."""
    if kind in LIST_VALUE_TYPES:
        return f"{kind}-{len(value)}" if isinstance(value, list) else kind
    if kind == "is-json" or not isinstance(value, str) or not value:
        return kind
    return f"{kind}-{js_slice(value, 30)}" if kind == "regex" else f"{kind}-{value}"


def _deterministic(obj: dict[str, Any], kind: str, where: Where, ctx: ParseContext) -> AssertionSpec | None:
    """The assertion, or None where AgentV 4.42 skips it with a warning: a value that is not a non-empty
    string (or, for the list types, a list holding none; its other items are dropped)."""
    fields = _common(obj, kind, where, ctx)
    value: Any = obj.get("value")
    if not (opt_str(obj, "name", where) or opt_str(obj, "metric", where)):
        fields["name"] = default_name(kind, value)
    at = where.key("value") if "value" in obj else where
    if kind in LIST_VALUE_TYPES:
        strings = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
        if not strings:
            ctx.warn(at, f"`type: {kind}` needs `value`, a list of strings; assertion skipped (as AgentV does)")
            return None
        value = strings
    elif kind != "is-json" and not (isinstance(value, str) and value):
        ctx.warn(at, f"`type: {kind}` needs `value`, a non-empty string; assertion skipped (as AgentV does)")
        return None
    flags = obj.get("flags")
    flags = flags if isinstance(flags, str) and kind == "regex" else None  # AgentV reads a regex's string flags only
    if kind == "regex":
        try:
            js_regex(value, flags or "")
        except JsRegexError as exc:
            # AgentV fails such a grader when it runs (score 0) and grades the rest of the suite.
            ctx.warn(where.key("value"), f"{exc}; the assertion will score 0 and fail, as AgentV's does")
    return AssertionSpec(type=kind, value=value, flags=flags, **fields)  # type: ignore[arg-type]
