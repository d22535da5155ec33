"""A code grader's reuse key: the digest of the JSON of everything its process is given."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from evalstore.replay.grading.graders.process_cache import KEY_VERSION, cache_environment, process_cache_key


def _reference(*, argv, script_sha256, stdin, tmp_path, cwd, env, side_files=None) -> str:  # type: ignore[no-untyped-def]
    """The key as the module docstring defines it, written out in full (as it was computed before its
    environment part was kept per grader): the key of every recorded execution depends on these bytes."""
    if tmp_path:
        stdin = stdin.replace(json.dumps(tmp_path, ensure_ascii=False)[1:-1].encode("utf-8"), b"$TMP")
    material = {
        "key": KEY_VERSION,
        "argv": list(argv),
        "script_sha256": script_sha256,
        "stdin_sha256": hashlib.sha256(stdin).hexdigest(),
        "side_files": list(side_files or []),
        "cwd": os.path.abspath(cwd) if cwd else os.getcwd(),
        "env": sorted(cache_environment(env).items()),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


CASES = [
    {"argv": ["python3", "g.py"], "script_sha256": "a" * 64, "stdin": b"{}", "tmp_path": None, "cwd": "/w", "env": {}},
    {
        "argv": ["python3", "g é.py", 'q"uote'],
        "script_sha256": None,
        "stdin": b'{"output": "x", "path": "/tmp/evalstore-grader-1/f.txt"}',
        "tmp_path": "/tmp/evalstore-grader-1",
        "cwd": None,
        "env": {"PATH": "/bin", "OPENAI_API_KEY": "sk-1", "SHLVL": "2", "LANG": "fr_FR.UTF-8", "Z": "é\\n\t"},
        "side_files": ["b" * 64],
    },
    {
        "argv": [],
        "script_sha256": "c" * 64,
        "stdin": b"",
        "tmp_path": None,
        "cwd": "rel/dir",
        "env": {"B": "1", "A": "2"},
    },
]


@pytest.mark.parametrize("case", CASES)
def test_the_key_is_the_digest_of_the_materials_json(case: dict) -> None:
    assert process_cache_key(**case) == _reference(**case)
    assert process_cache_key(**case) == _reference(**case)  # kept per grader: the same again


def test_the_environment_and_the_stdin_each_change_the_key() -> None:
    base = dict(CASES[0])
    keys = {
        process_cache_key(**base),
        process_cache_key(**{**base, "env": {"A": "1"}}),
        process_cache_key(**{**base, "env": {"A": "2"}}),
        process_cache_key(**{**base, "stdin": b"{ }"}),
        process_cache_key(**{**base, "argv": ["python3", "h.py"]}),
    }
    assert len(keys) == 5
