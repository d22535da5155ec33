"""What the secret canary tests share (``test_e2e_secrets.py``, ``test_e2e_secrets_environment.py``): a
project of an eval file and the targets file above it, the judge's target, one ``evalstore run`` of it,
and every byte a store holds."""

from __future__ import annotations

import sqlite3
import subprocess
import textwrap
from pathlib import Path

from e2e_helpers import evalstore
from judge_server import JudgeServer

from evalstore.store import EventStore, make_engine


def judge_target(server: JudgeServer, key_env: str) -> str:
    """The targets file's entry for the scripted judge, whose key is the variable ``key_env``."""
    return textwrap.dedent(f"""\
          - name: judge
            provider: openai-compatible
            base_url: {server.base_url}
            model: judge-model
            api_key: ${{{{ {key_env} }}}}
        """)


def write_project(root: Path, targets: str, eval_yaml: str) -> Path:
    """``root/.agentv/targets.yaml`` (``targets:`` then the entries given) and ``root/suite.eval.yaml``."""
    (root / ".agentv").mkdir(parents=True, exist_ok=True)
    (root / ".agentv" / "targets.yaml").write_text("targets:\n" + textwrap.indent(targets, "  "), encoding="utf-8")
    eval_file = root / "suite.eval.yaml"
    eval_file.write_text(eval_yaml, encoding="utf-8")
    return eval_file


def run_suite(
    db_file: Path, eval_file: Path, target: str, workdir: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``evalstore run EVAL --target TARGET --json`` from the folder above ``workdir``."""
    return evalstore(
        f"sqlite:///{db_file}",
        "run",
        str(eval_file),
        "--target",
        target,
        "--json",
        "--workdir",
        str(workdir),
        cwd=db_file.parent,
        env=env,
    )


def raw_store_bytes(db_file: Path) -> dict[str, bytes]:
    """The database file and its WAL as they lie on disk, and every blob decoded."""
    out = {p.name: p.read_bytes() for p in db_file.parent.glob(db_file.name + "*")}
    store = EventStore(make_engine(f"sqlite:///{db_file}"))
    with sqlite3.connect(db_file) as conn:
        digests = [row[0] for row in conn.execute("SELECT sha256 FROM blobs")]
    out.update({f"blob {digest}": store.get_blob(digest) for digest in digests})
    out["events"] = b"\n".join(e.payload_json.encode("utf-8") for e in store.read_all())
    store.close()
    return out
