"""Load an AgentV eval file into :class:`evalstore.replay.evalfile.specs.EvalSuite`.

Follows AgentV v4 (agentv-formats.md §5.4-5.6, §7.1) and reads the Promptfoo-shaped v5-next bundles
(``assert``, ``vars``, ``metric``; §7.2) well enough to grade them. Problems are reported the same way
everywhere: an invalid file raises one :class:`EvalFileError` (``FILE:LINE: field `x`: what to do``);
anything that is merely unknown or ignored becomes a line in ``EvalSuite.warnings``.

Every file the eval names is found through the search roots (``evalstore.replay.evalfile.search_roots``) and listed in
``EvalSuite.referenced_files`` as ``(role, absolute path, reference as written)`` with role one of
``tests``, ``prompt``, ``grader_script``, ``converter``, ``input_file``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.replay.content import Message
from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.cases import raw_tests
from evalstore.replay.evalfile.conversation import CONVERSATION_KEYS, conversation_fields
from evalstore.replay.evalfile.converters import parse_converters
from evalstore.replay.evalfile.dependencies import dependencies
from evalstore.replay.evalfile.fields import (
    ParseContext,
    expect_mapping,
    opt_bool,
    opt_number,
    opt_str,
    req_str,
    str_list,
    warn_unknown,
)
from evalstore.replay.evalfile.graders import (
    DEPRECATED_TYPES,
    AnyGrader,
    assign_names,
    implicit_grader,
    parse_assertions,
)
from evalstore.replay.evalfile.input import expected_files, input_file, parse_input, with_files
from evalstore.replay.evalfile.interpolation import env_references, with_env, with_vars
from evalstore.replay.evalfile.metadata import merge_metadata, suite_metadata
from evalstore.replay.evalfile.rubrics import parse_rubric_items
from evalstore.replay.evalfile.search_roots import (
    DiskResolver,
    FileResolver,
    SnapshotResolver,
    absolute,
    build_search_roots,
    find_project_root,
)
from evalstore.replay.evalfile.source import Where, load_yaml
from evalstore.replay.evalfile.specs import EvalSuite, EvalTest, LlmGraderSpec, TrialsSpec, WorkspaceEnv
from evalstore.replay.evalfile.workspace import (
    WorkspaceLayer,
    external_workspace,
    merge_layers,
    workspace_layer,
    workspace_spec,
)
from evalstore.replay.jstext import js_string
from evalstore.replay.targetsfile.loader import is_targets_document
from evalstore.replay.targetsfile.redaction import looks_secret

DEFAULT_THRESHOLD = 0.8
"""AgentV's pass mark when none is given (its ``DEFAULT_THRESHOLD``): the eval's, and ``agentv eval``'s
for each result when its command line gives no ``--threshold`` (``pass_marks``)."""
AGENTV_SUITE_NAME = re.compile(r"[a-z0-9-]{1,64}")
"""The suite names AgentV 4.42 takes (its MetadataSchema: ``/^[a-z0-9-]+$/``, at most 64 characters)."""
SUITE_KEYS = (
    # AgentV v4 (eval-schema.json)
    "name", "description", "category", "version", "author", "tags", "license", "requires", "input",
    "input_files", "tests", "eval_cases", "evalcases", "target", "execution", "assertions", "assert",
    "preprocessors", "workspace", "metadata", "governance",
    # v5-next generated bundles
    "prompts", "providers", "default_test",
)  # fmt: skip
TEST_KEYS = (
    "id", "description", "criteria", "expected_outcome", "input", "input_files", "expected_output",
    "assertions", "assert", "rubrics", "metadata", "execution", "workspace", "conversation_id", "vars",
    "options", "depends_on", "on_dependency_failure", *CONVERSATION_KEYS,
)  # fmt: skip
EXECUTION_KEYS = (
    "target", "targets", "threshold", "skip_defaults", "cache", "cache_path", "trials", "budget_usd", "total_budget_usd",
    "fail_on_error", "workers", "agent_timeout_ms", "budgetUsd", "failOnError",
)  # fmt: skip
WORKSPACE_KEYS = ("env", "template", "hooks", "repos", "isolation", "mode", "path", "docker", "snapshot")
ENV_KEYS = ("required_commands", "required_python_modules")
DEFAULT_TEST_KEYS = ("threshold", "options", "assert", "assertions", "vars")
V5_BUNDLE_KEYS = ("prompts", "providers", "default_test")
"""What makes an eval file a Promptfoo-shaped v5-next bundle (``ParseContext.v5_bundle``)."""
# v5-next bundles always carry this prompt; it means "send the input as is".
PASSTHROUGH_PROMPTS = (["{{ input }}"], ["{{input}}"])
EVAL_SUFFIXES = (".eval.yaml", ".eval.yml", ".yaml", ".yml")


def load_eval(
    path: str | Path,
    *,
    project_root: Path | None = None,
    file_resolver: FileResolver | None = None,
    env: Mapping[str, str] | None = None,
    run_tests: Callable[[], Sequence[dict[str, Any]]] | None = None,
) -> EvalSuite:
    """Parse the eval file at ``path``; see :func:`load_eval_text`."""
    eval_path = absolute(path)
    resolver = file_resolver or DiskResolver()
    try:
        data = resolver.read_bytes(eval_path)
    except OSError as exc:
        problem = f"cannot read the eval file ({exc}); check the path"
        raise EvalFileError(str(eval_path), None, None, problem) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalFileError(str(eval_path), None, None, "not UTF-8 text; save the eval file as UTF-8") from exc
    return load_eval_text(
        text, eval_path, project_root=project_root, file_resolver=resolver, env=env, run_tests=run_tests
    )


def load_eval_text(
    text: str,
    path: Path,
    *,
    project_root: Path | None = None,
    file_resolver: FileResolver | None = None,
    search_roots: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    run_tests: Callable[[], Sequence[dict[str, Any]]] | None = None,
) -> EvalSuite:
    """Parse eval YAML ``text`` as if it were the file at ``path``.

    ``run_tests``: gives a stored run's own tests as raw test objects (``id``, ``input``, ``expected_output``,
    ``metadata``), the suite's tests when the file has no ``tests`` (a replay's eval of suite-level
    assertions only: ``EvalSuite.tests_from_run``). A file with tests of its own ignores them.

    Search roots derive from ``path`` (and ``project_root``) unless given. ``file_resolver`` decides
    which referenced files exist and supplies their bytes: a ``SnapshotResolver`` replays a stored
    eval snapshot without the files on disk. ``${{ VAR }}`` is filled from ``env`` (default: this
    process's environment), as AgentV fills it.
    """
    eval_path = absolute(path)
    roots = search_roots if search_roots is not None else build_search_roots(eval_path, project_root)
    ctx = ParseContext(eval_path, roots, file_resolver or DiskResolver(), env=os.environ if env is None else env)
    data, lines = load_yaml(text, str(eval_path), ctx.warnings)
    root = Where(str(eval_path), lines)
    if data is None:
        raise root.error("the eval file is empty; add `tests`")
    if is_targets_document(data):  # said before its `${{ API_KEY }}` is refused as an eval's secret
        raise root.error(
            "a targets file (a top-level `targets:` list of providers), not an eval file: pass it as "
            "`--targets FILE` with an eval file (`evalstore validate FILE` checks it as a targets file)"
        )
    _refuse_secret_references(data, root)
    doc = expect_mapping(with_env(data, ctx.env), root, "a mapping with `tests`")
    warn_unknown(ctx, doc, SUITE_KEYS, root)
    ctx.v5_bundle = any(key in doc for key in V5_BUNDLE_KEYS)
    suite = _SuiteParser(ctx, doc, root, run_tests).parse()
    if not isinstance(ctx.resolver, SnapshotResolver):  # a stored snapshot was warned about when it was taken
        suite.warnings.extend(_outside_project(suite, project_root or find_project_root(eval_path.parent)))
    return suite


def _refuse_deprecated_evaluator(obj: dict[str, Any], where: Where, owner: str) -> None:
    """A suite's or test's ``evaluator: code-judge`` (or ``llm-judge``): AgentV 4.42.4 throws reading it
    (``coerceEvaluator``), and the eval file does not load; refused alike, in its words."""
    raw = obj.get("evaluator")
    if isinstance(raw, str) and raw.replace("_", "-") in DEPRECATED_TYPES:
        meant = DEPRECATED_TYPES[raw.replace("_", "-")]
        raise where.key("evaluator").error(
            f"Unsupported grader '{raw}' in {owner}. Use '{meant}' instead. (AgentV 4.42.4 does not load the eval file)"
        )


def _refuse_secret_references(data: Any, root: Where) -> None:
    """A ``${{ NAME }}`` whose name looks secret (``OPENAI_API_KEY``): AgentV fills it in, but what the eval
    says is stored with the run (test inputs, criteria, grader commands), so the secret would be too."""
    for path, name in env_references(data):
        if looks_secret(name):
            at = root
            for part in path:
                at = at.index(part) if isinstance(part, int) else at.key(part)
            raise at.error(
                f"`${{{{ {name} }}}}` looks like a secret, and what an eval file says is stored with each run; "
                "keep secrets in the targets file (its `${{ NAME }}` references are resolved only when called)"
            )


def _outside_project(suite: EvalSuite, project_root: Path | None) -> list[str]:
    """One warning per referenced file outside the project root: its bytes go into the store with the
    run's snapshot, which the user may not expect of a file elsewhere on the machine."""
    if project_root is None:
        return []
    root = absolute(project_root)
    out: list[str] = []
    for _, path, _ in suite.referenced_files:
        if not absolute(path).is_relative_to(root):
            message = (
                f"{suite.path}: references {path}, outside the project root {root}; "
                "its bytes are stored with the run's eval snapshot"
            )
            if message not in out:
                out.append(message)
    return out


@dataclass
class _Execution:
    threshold: float | None = None
    target: str | None = None
    skip_defaults: bool | None = None
    trials: TrialsSpec | None = None
    workers: int | None = None
    targets: list[str] | None = None
    budget_usd: float | None = None
    fail_on_error: bool | None = None


TRIAL_STRATEGIES = ("pass_at_k", "mean", "confidence_interval")


def _trials(raw: Any, where: Where, ctx: ParseContext) -> TrialsSpec | None:
    """``execution.trials`` as AgentV reads it (``extractTrialsConfig``): a ``count`` of 1 is no trials; a
    count that is not a whole number above 0 drops the trials, a bad strategy is ``pass_at_k`` and a bad
    cost limit none, each said as AgentV says it."""
    if not isinstance(raw, dict) or raw.get("count") is None:
        return None
    warn_unknown(ctx, raw, ("count", "strategy", "cost_limit_usd", "costLimitUsd"), where)
    count = raw["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        ctx.warn(
            where.key("count"),
            f"{count!r} is not a whole number above 0; AgentV runs each test once, and so does evalstore",
        )
        return None
    if count == 1:
        return None
    strategy = raw.get("strategy")
    if strategy is not None and strategy not in TRIAL_STRATEGIES:
        ctx.warn(
            where.key("strategy"), f"`{strategy}` is not one of {', '.join(TRIAL_STRATEGIES)}; pass_at_k, as AgentV"
        )
        strategy = None
    key = "cost_limit_usd" if "cost_limit_usd" in raw else "costLimitUsd"
    limit = raw.get(key)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        ctx.warn(where.key(key), f"{limit!r} is not a cost above 0; no cost limit, as AgentV")
        limit = None
    return TrialsSpec(count=count, strategy=strategy or "pass_at_k", cost_limit_usd=limit)


def _execution(raw: Any, where: Where, ctx: ParseContext, *, suite: bool = False) -> _Execution:
    if raw is None:
        return _Execution()
    obj = expect_mapping(raw, where, "an object {target, threshold, skip_defaults}")
    warn_unknown(ctx, obj, EXECUTION_KEYS, where)
    execution = _Execution(
        threshold=_threshold(obj, where, ctx),
        target=opt_str(obj, "target", where),
        skip_defaults=opt_bool(obj, "skip_defaults", where),
        trials=_trials(obj.get("trials"), where.key("trials"), ctx),
        workers=_workers(obj.get("workers"), where.key("workers"), ctx),
        targets=_targets(obj.get("targets")),
        # Suite-wide settings (AgentV reads them of the suite only).
        budget_usd=_budget(obj, where, ctx) if suite else None,
        fail_on_error=_fail_on_error(obj, where, ctx) if suite else None,
    )
    if suite:
        _cache(obj, where, ctx, execution.trials)
    return execution


def _threshold(obj: dict[str, Any], where: Where, ctx: ParseContext) -> float | None:
    """``execution.threshold`` as AgentV reads it (``extractThreshold``): anything but a number in 0..1 (a
    string, an unset ``${{ VAR }}``, which is empty) is warned about in AgentV's words and the default
    pass mark used. (AgentV drops a test's own invalid threshold without a word; evalstore says it.)"""
    raw = obj.get("threshold")
    if raw is None:
        return None
    if not isinstance(raw, bool) and isinstance(raw, (int, float)) and 0 <= raw <= 1:  # NaN is not in 0..1
        return float(raw)
    ctx.warn(
        where.key("threshold"),
        f"Invalid execution.threshold: {js_string(raw)}. Must be a number between 0 and 1. Ignoring.",
    )
    return None


def _cache(obj: dict[str, Any], where: Where, ctx: ParseContext, trials: TrialsSpec | None) -> None:
    """``execution.cache`` (``extractCacheConfig``): AgentV's response cache of the *agent's* answers
    (run-eval.ts ``ResponseCache``, ``.agentv/cache`` or ``cache_path``), keyed by provider, target, test
    and prompt (orchestrator.ts ``createCacheKey``), off with trials (and for a target with a temperature
    above 0). ``evalstore run`` always asks the agent; said where that differs."""
    raw = obj.get("cache")
    if raw is None:
        return
    if not isinstance(raw, bool):
        ctx.warn(where.key("cache"), f"invalid execution.cache: {raw!r}; it must be a boolean, and AgentV ignores it")
        return
    if raw and (trials is None or trials.count <= 1):
        ctx.warn(
            where.key("cache"),
            "execution.cache: AgentV answers a test from its cache of the agent's earlier answers (.agentv/cache); "
            "evalstore run asks the agent every time (a run is a new observation): to grade recorded answers "
            "again without the agent, use `evalstore replay RUN`",
        )


def _targets(raw: Any) -> list[str] | None:
    """``execution.targets`` as AgentV reads it (``extractTargetRefsFromSuite``): names, written as strings
    or as objects with a ``name``; anything else is passed over; none at all is no list."""
    if not isinstance(raw, list):
        return None
    names = [
        name.strip()
        for item in raw
        if isinstance(name := item.get("name") if isinstance(item, dict) else item, str) and name.strip()
    ]
    return names or None


def _budget(obj: dict[str, Any], where: Where, ctx: ParseContext) -> float | None:
    """``execution.budget_usd`` (``extractBudgetUsd``): a cost above 0; the old name is refused as AgentV
    refuses it."""
    if "total_budget_usd" in obj or "totalBudgetUsd" in obj:
        raise where.key("total_budget_usd").error(
            "execution.total_budget_usd has been renamed to execution.budget_usd. Update your eval YAML."
        )
    raw = obj.get("budget_usd", obj.get("budgetUsd"))
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw <= 0:
        ctx.warn(where.key("budget_usd"), f"{raw!r} is not a cost above 0; no budget, as AgentV")
        return None
    return float(raw)


def _fail_on_error(obj: dict[str, Any], where: Where, ctx: ParseContext) -> bool | None:
    raw = obj.get("fail_on_error", obj.get("failOnError"))
    if raw is None or isinstance(raw, bool):
        return raw
    ctx.warn(where.key("fail_on_error"), f"{raw!r} is not true or false; ignored, as AgentV ignores it")
    return None


def _workers(raw: Any, where: Where, ctx: ParseContext) -> int | None:
    """``execution.workers``: how many tests run at once, a whole number 1..50 (AgentV's
    ``extractWorkersFromSuite``; any other value it ignores)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 50:
        ctx.warn(where, f"{raw!r} is not a whole number from 1 to 50; AgentV ignores it, and so does evalstore")
        return None
    return raw


def _workspace_source(raw: Any, where: Where, ctx: ParseContext) -> tuple[Any, Where, Path]:
    """A ``workspace`` as the object it means, where that is written, and the folder its paths start from:
    ``workspace: FILE`` is read (AgentV's external workspace file), an object is itself."""
    if isinstance(raw, str):
        return external_workspace(raw, where, ctx)
    return raw, where, ctx.eval_dir


def _workspace_env(raw: Any, where: Where, ctx: ParseContext) -> WorkspaceEnv:
    if raw is None:
        return WorkspaceEnv()
    obj = expect_mapping(raw, where, "an object")
    warn_unknown(ctx, obj, WORKSPACE_KEYS, where)
    if obj.get("env") is None:
        return WorkspaceEnv()
    at = where.key("env")
    env = expect_mapping(obj["env"], at, "an object {required_commands, required_python_modules}")
    warn_unknown(ctx, env, ENV_KEYS, at)
    lists = {key: str_list(env[key], at.key(key)) for key in ENV_KEYS if env.get(key) is not None}
    return WorkspaceEnv(**lists)


def _union_env(envs: list[WorkspaceEnv]) -> WorkspaceEnv:
    commands: list[str] = []
    modules: list[str] = []
    for env in envs:
        commands += [c for c in env.required_commands if c not in commands]
        modules += [m for m in env.required_python_modules if m not in modules]
    return WorkspaceEnv(required_commands=commands, required_python_modules=modules)


def _assertions_key(obj: dict[str, Any], where: Where) -> str | None:
    """``assertions``, or its Promptfoo/legacy alias ``assert``; both at once is ambiguous."""
    present = [key for key in ("assertions", "assert") if obj.get(key) is not None]
    if len(present) > 1:
        raise where.key("assert").error("both `assertions` and `assert` given; keep one")
    return present[0] if present else None


RENDERED_FIELDS = ("criteria", "expected_outcome", "input", "input_files", "expected_output")


def _rendered(obj: dict[str, Any], vars_: dict[str, Any]) -> dict[str, Any]:
    """A test with its vars filled in where AgentV fills them (``interpolateRawEvalCase``): its criteria,
    input, input files, expected output, and each turn's input and expected output."""
    if not vars_:
        return obj
    out = {key: with_vars(obj[key], vars_) if key in RENDERED_FIELDS else obj[key] for key in obj}
    if isinstance(obj.get("turns"), list):
        out["turns"] = [
            {**turn, **{k: with_vars(turn[k], vars_) for k in ("input", "expected_output") if k in turn}}
            if isinstance(turn, dict)
            else turn
            for turn in obj["turns"]
        ]
    return out


def default_suite_name(path: Path) -> str:
    base = path.name
    for suffix in EVAL_SUFFIXES:
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or base
    return base


class _SuiteParser:
    def __init__(
        self,
        ctx: ParseContext,
        doc: dict[str, Any],
        root: Where,
        run_tests: Callable[[], Sequence[dict[str, Any]]] | None = None,
    ) -> None:
        self.ctx, self.doc, self.root = ctx, doc, root
        category = doc.get("category")
        self.category = category if isinstance(category, str) else derive_category(ctx.eval_path)
        self.run_tests = run_tests
        self.tests_from_run = False

    def parse(self) -> EvalSuite:
        ctx, doc, root = self.ctx, self.doc, self.root
        _refuse_deprecated_evaluator(doc, root, "global")
        execution = _execution(doc.get("execution"), root.key("execution"), ctx, suite=True)
        default_test = self._default_test()
        self.skip_defaults = bool(execution.skip_defaults)
        metadata = expect_mapping(doc.get("metadata") or {}, root.key("metadata"))
        self.metadata = suite_metadata(metadata, doc.get("governance"))
        self.converters = parse_converters(doc.get("preprocessors"), root.key("preprocessors"), ctx)
        self.graders = self._suite_graders(default_test)
        self._check_prompts()
        raw_ws, ws_where, ws_base = _workspace_source(doc.get("workspace"), root.key("workspace"), ctx)
        envs = [_workspace_env(raw_ws, ws_where, ctx)]
        self.workspace = workspace_layer(raw_ws, ws_where, ctx, ws_base)
        workspace = workspace_spec(self.workspace, ws_where, ctx)

        tests: list[EvalTest] = []
        seen: set[str] = set()  # a set, not a scan of the tests so far: a suite of 100,000 tests loads in seconds
        for where, raw in self._raw_tests():
            test, env = self._test(raw, where)
            if test.id in seen:
                raise where.key("id").error(f"duplicate test id `{test.id}`; ids must be unique in a suite")
            seen.add(test.id)
            tests.append(test)
            envs.append(env)
        if not tests and not self.tests_from_run:  # a regrade's file of suite-level graders: the run's tests
            ctx.warn(root.key("tests"), "the suite has no tests")

        threshold = execution.threshold
        if threshold is None:
            threshold = opt_number(default_test, "threshold", root.key("default_test"), low=0.0, high=1.0)
        name = opt_str(doc, "name", root)
        if name is not None and not AGENTV_SUITE_NAME.fullmatch(name):
            ctx.warn(
                root.key("name"),
                f"AgentV refuses the suite name {name!r} (it takes 1 to 64 lowercase letters, digits and -): "
                "rename it to run this suite under AgentV too",
            )
        return EvalSuite(
            path=str(ctx.eval_path),
            name=name or default_suite_name(ctx.eval_path),
            description=opt_str(doc, "description", root),
            metadata=self.metadata,
            tags=self._tags(name),
            threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
            target=execution.target or opt_str(doc, "target", root),
            preprocessors=self.converters,
            workspace_env=_union_env(envs),
            workspace=workspace,
            tests=tests,
            trials=execution.trials,
            workers=execution.workers,
            tests_from_run=self.tests_from_run,
            targets=execution.targets,
            budget_usd=execution.budget_usd,
            fail_on_error=bool(execution.fail_on_error),
            search_roots=ctx.search_roots,
            referenced_files=ctx.referenced_files,
            warnings=ctx.warnings,
        )

    def _default_test(self) -> dict[str, Any]:
        raw = self.doc.get("default_test")
        if raw is None:
            return {}
        where = self.root.key("default_test")
        obj = expect_mapping(raw, where)
        warn_unknown(self.ctx, obj, DEFAULT_TEST_KEYS, where)
        for ignored in ("options", "vars"):
            if ignored in obj:
                self.ctx.warn(where.key(ignored), f"`default_test.{ignored}` is not applied by evalstore")
        return obj

    def _suite_graders(self, default_test: dict[str, Any]) -> list[AnyGrader]:
        key = _assertions_key(self.doc, self.root)
        where, holder = self.root, self.doc
        if key is None:
            where, holder = self.root.key("default_test"), default_test
            key = _assertions_key(default_test, where)
            if key is None:
                return []
        return parse_assertions(holder[key], where.key(key), self.ctx, self.converters)

    def _check_prompts(self) -> None:
        prompts = self.doc.get("prompts")
        if prompts is not None and prompts not in PASSTHROUGH_PROMPTS:
            self.ctx.warn(self.root.key("prompts"), "only the pass-through prompt `{{ input }}` is applied")

    def _raw_tests(self) -> list[tuple[Where, Any]]:
        key = next((k for k in ("tests", "eval_cases", "evalcases") if k in self.doc), None)
        if key is None and self.run_tests is not None:  # a replay's eval of suite-level assertions only
            self.tests_from_run = True
            where = self.root.key("tests")
            return [(where.index(i), dict(t)) for i, t in enumerate(self.run_tests())]
        if key is None:
            raise self.root.error(
                "`tests` is required: a list of tests or a path to a .yaml/.jsonl file (a file of suite-level "
                "`assertions` and no tests regrades a stored run's own tests: evalstore replay RUN --eval FILE)"
            )
        where = self.root.key(key)
        if key != "tests":
            self.ctx.warn(where, f"`{key}` is deprecated; rename it to `tests`")
        return raw_tests(self.ctx, self.doc[key], where)

    def _tags(self, name: str | None) -> list[str]:
        """``tags:`` as AgentV's ``parseMetadata`` reads them: a list of strings, and only in a file with a
        ``name`` (without one it reads no metadata, so ``--tag`` skips the file)."""
        tags = self.doc.get("tags")
        if tags is None:
            return []
        if name is None:  # not worth a warning on every load: `run --tag` says it when it skips the file
            return []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            self.ctx.warn(self.root.key("tags"), "AgentV refuses the file: `tags` is a list of strings; ignored here")
            return []
        return list(tags)

    def _test(self, raw: Any, where: Where) -> tuple[EvalTest, WorkspaceEnv]:
        try:
            return self._read_test(raw, where)
        finally:
            self.ctx.test_id = None

    def _read_test(self, raw: Any, where: Where) -> tuple[EvalTest, WorkspaceEnv]:
        ctx = self.ctx
        obj = expect_mapping(raw, where, "a test object with `id` and `input`")
        warn_unknown(ctx, obj, TEST_KEYS, where)
        test_id = req_str(obj, "id", where, "give every test a unique `id`")
        ctx.test_id = test_id  # named by the warnings of its graders, as AgentV names it
        _refuse_deprecated_evaluator(obj, where, test_id)
        execution = _execution(obj.get("execution"), where.key("execution"), ctx)
        if execution.trials is not None:
            ctx.warn(
                where.key("execution").key("trials"), "AgentV reads trials from the suite's execution only; ignored"
            )
        skip = self.skip_defaults if execution.skip_defaults is None else execution.skip_defaults
        vars_ = expect_mapping(obj.get("vars") or {}, where.key("vars"))
        if "options" in obj:
            ctx.warn(where.key("options"), "test `options` (transform, provider) are not applied by evalstore")
        obj = _rendered(obj, vars_)

        criteria = opt_str(obj, "criteria", where)
        if criteria is None and obj.get("expected_outcome") is not None:
            ctx.warn(where.key("expected_outcome"), "deprecated; rename it to `criteria`")
            criteria = opt_str(obj, "expected_outcome", where)
        expected = obj["expected_output"] if "expected_output" in obj else vars_.get("expected_output")
        expected = expected_files(expected, where.key("expected_output"), ctx)
        messages, files = self._input(obj, vars_, skip, where)
        if not skip:
            messages = [*self._suite_input(vars_), *messages]
        if not messages:
            raise where.error("`input` is required: a string, a list of messages, or an object")

        key = _assertions_key(obj, where)
        graders = parse_assertions(obj[key], where.key(key), ctx, self.converters) if key else []
        if obj.get("rubrics") is not None:
            graders.insert(0, self._rubrics_sugar(obj["rubrics"], where.key("rubrics")))
        conversation = conversation_fields(obj, where, ctx, self.converters)
        if not (criteria or expected is not None or key or obj.get("rubrics") is not None or conversation):
            # A misspelled key is only warned of, and a refused file's warnings are not shown: named here.
            unknown = [f"`{k}`" for k in obj if str(k) not in TEST_KEYS]
            hint = f" ({', '.join(unknown)}: not a test key; misspelled?)" if unknown else ""
            # AgentV's rule: the test's own fields decide; suite-level assertions alone do not (it skips the test).
            if self.graders and not skip:
                raise where.error(
                    "nothing to grade: suite-level `assertions` apply only to a test with its own `criteria`, "
                    "`expected_output` or `assertions` (AgentV skips a test with none of them); add one, "
                    f"e.g. `assertions: []` to grade it with the suite's alone{hint}"
                )
            raise where.error(f"nothing to grade: add `criteria`, `expected_output` or `assertions`{hint}")
        if not skip:
            graders += self.graders
            for at, words in ctx.suite_skips:  # AgentV says it of each test the suite's graders are added to
                ctx.warn(at, words(test_id))
        if not graders and not conversation:  # a conversation's turns are graded, and its own graders only if any
            graders = [implicit_grader(self.converters)]

        test_meta = expect_mapping(obj.get("metadata") or {}, where.key("metadata"))
        test = EvalTest(
            id=test_id,
            input=messages,
            input_files=files,
            expected_output=expected,
            criteria=criteria,
            metadata=merge_metadata(self.metadata, test_meta),
            graders=assign_names(graders),
            threshold=execution.threshold,
            target=execution.target,
            targets=execution.targets,
            conversation_id=obj["conversation_id"] if isinstance(obj.get("conversation_id"), str) else None,
            category=self.category,
            **conversation,
            **dependencies(obj, where, ctx),
        )
        raw_ws, ws_where, ws_base = _workspace_source(obj.get("workspace"), where.key("workspace"), ctx)
        own = workspace_layer(raw_ws, ws_where, ctx, ws_base)
        if own != WorkspaceLayer():
            # AgentV merges a test's workspace into the suite's (yaml-parser.ts `mergeWorkspaceConfigs`).
            test = test.model_copy(
                update={"workspace": workspace_spec(merge_layers(self.workspace, own), ws_where, ctx)}
            )
        return test, _workspace_env(raw_ws, ws_where, ctx)

    def _input(
        self, obj: dict[str, Any], vars_: dict[str, Any], skip: bool, where: Where
    ) -> tuple[list[Message], list[str]]:
        """The test's own messages and its input files (AgentV's ``resolveInputMessages``): the test's
        ``input_files``, else the suite's (unless ``skip_defaults``), make one user message of file
        segments followed by the ``input`` text; they need a string ``input``."""
        ctx = self.ctx
        if "input_files" in obj and obj["input_files"] is not None:
            raw_files, at = obj["input_files"], where.key("input_files")
        elif not skip and self.doc.get("input_files") is not None:
            raw_files, at = with_vars(self.doc["input_files"], vars_), self.root.key("input_files")
        else:
            if "input" in obj:
                return parse_input(obj["input"], where.key("input"), ctx), []
            return parse_input(vars_.get("input"), where.key("vars").key("input"), ctx), []
        text = obj.get("input", vars_.get("input"))
        if not isinstance(text, str):
            raise where.key("input").error(
                "`input_files` needs `input` to be a string (AgentV skips a test whose input is messages with "
                "input_files); put the files into the messages as `{type: file, value: PATH}` segments"
            )
        named = [ref for ref in raw_files if isinstance(ref, str)] if isinstance(raw_files, list) else []
        if not named:
            raise at.error("expected a list of file paths (AgentV skips a test whose input_files names none)")
        written = [ref for ref in raw_files if isinstance(ref, str)]
        files = [input_file(ref, at.index(i), ctx) for i, ref in enumerate(raw_files) if isinstance(ref, str)]
        return with_files([Message(role="user", content=text)], files, written), files

    def _suite_input(self, vars_: dict[str, Any]) -> list[Message]:
        """The suite's ``input``, with this test's vars filled in."""
        raw = self.doc.get("input")
        if raw is None:
            return []
        return parse_input(with_vars(raw, vars_), self.root.key("input"), self.ctx)

    def _rubrics_sugar(self, raw: Any, where: Where) -> LlmGraderSpec:
        self.ctx.warn(where, "test-level `rubrics` is deprecated; use `assertions: [{type: rubrics, criteria: []}]`")
        return LlmGraderSpec(
            name="rubrics",
            declared_type="rubrics",
            rubrics=parse_rubric_items(raw, where, self.ctx),
            preprocessors=self.converters,
        )


DEFAULT_CATEGORY = "Uncategorized"


def derive_category(eval_path: str | Path) -> str:
    """AgentV's ``deriveCategory`` of the eval file's path relative to the current directory (as ``agentv
    eval`` names it): its folders, ``evals`` left out, joined by ``/``; ``Uncategorized`` when none."""
    try:
        relative = os.path.relpath(eval_path)
    except ValueError:  # another drive (Windows): AgentV's relative path is then the absolute one
        relative = str(eval_path)
    folders = [d for d in re.split(r"[/\\]", relative)[:-1] if d != "evals"]
    return "/".join(folders) if folders else DEFAULT_CATEGORY
