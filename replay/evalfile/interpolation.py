"""AgentV's two kinds of placeholder in eval files (``packages/core/src/evaluation/interpolation.ts``, 4.42.4).

- ``${{ NAME }}``: an environment variable, filled in every string of the eval file, of a tests file and
  of an external workspace file when they are read (``interpolateEnv``). An unset variable is the empty
  string. A value that is the reference alone takes the variable's type: ``true``/``false`` become
  booleans, a plain decimal number a number.
- ``{{ name }}``, ``{{ a.b }}``: a test's ``vars`` (``interpolateTemplateVars``), filled in its
  ``criteria``, ``input``, ``input_files``, ``expected_output``, its turns' ``input`` and
  ``expected_output``, and the suite's ``input`` and ``input_files`` as that test gets them. A name the
  vars do not hold stays as written (other template syntaxes survive); a value that is the placeholder
  alone takes the variable's value as it is (a list stays a list); inside text, a value that is not a
  string is written as ``JSON.stringify`` writes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from evalstore.replay.jsontext import stringify

ENV_VARIABLE = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_WHOLE_ENV = re.compile(r"^\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
_PLAIN_NUMBER = re.compile(r"^-?(?:0|[1-9]\d*)(?:\.\d+)?$")
TEMPLATE_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
_WHOLE_TEMPLATE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}$")


def env_references(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Each ``${{ NAME }}`` used in a value, with the path of the string holding it, in order."""
    if isinstance(value, str):
        for name in ENV_VARIABLE.findall(value):
            yield path, name
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from env_references(item, (*path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from env_references(item, (*path, str(key)))


def with_env(value: Any, env: Mapping[str, str]) -> Any:
    """``interpolateEnv``: every ``${{ NAME }}`` in every string filled from ``env``."""
    if isinstance(value, str):
        whole = _WHOLE_ENV.match(value)
        if whole:
            return _coerced(env.get(whole.group(1), ""))
        if "${{" not in value:
            return value
        return ENV_VARIABLE.sub(lambda m: env.get(m.group(1), ""), value)
    if isinstance(value, list):
        return [with_env(item, env) for item in value]
    if isinstance(value, dict):
        return {key: with_env(item, env) for key, item in value.items()}
    return value


def _coerced(text: str) -> Any:
    if text == "true":
        return True
    if text == "false":
        return False
    if _PLAIN_NUMBER.match(text):
        number = float(text)
        return int(number) if number.is_integer() else number
    return text


def with_vars(value: Any, vars_: Mapping[str, Any] | None) -> Any:
    """``interpolateTemplateVars``: ``{{ name }}`` and ``{{ a.b }}`` filled from a test's vars."""
    if not vars_:
        return value
    if isinstance(value, str):
        whole = _WHOLE_TEMPLATE.match(value)
        if whole:
            found = _lookup(vars_, whole.group(1))
            return value if found is _MISSING else found
        return TEMPLATE_VARIABLE.sub(lambda m: _inline(vars_, m), value)
    if isinstance(value, list):
        return [with_vars(item, vars_) for item in value]
    if isinstance(value, dict):
        return {key: with_vars(item, vars_) for key, item in value.items()}
    return value


_MISSING = object()


def _lookup(vars_: Mapping[str, Any], expression: str) -> Any:
    current: Any = vars_
    for segment in expression.split("."):
        if not isinstance(current, dict) or segment not in current:
            return _MISSING
        current = current[segment]
    return current


def _inline(vars_: Mapping[str, Any], match: re.Match[str]) -> str:
    found = _lookup(vars_, match.group(1))
    if found is _MISSING:
        return match.group(0)
    return found if isinstance(found, str) else stringify(found).decode("utf-8")
