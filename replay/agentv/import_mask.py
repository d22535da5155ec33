"""What an import masks: the secrets an AgentV run's results may echo, stored as ``run`` stores them.

``evalstore run`` keeps a target's secrets out of the store by masking what the target says
(``targets.base.exchange_masks``). An import reads what AgentV wrote, where a target, a judge's prompt or
a grader may have echoed a key in plain text; every result passes through the same mask before anything
is hashed (:func:`masked`, called where each source item is built, ``import_check._piece``): the values
of evalstore's own secret-looking variables and the secret references of the run's targets file, each
shown as its ``${{ NAME }}`` reference. A secret evalstore does not know (its variable unset here) cannot
be masked: :func:`import_mask` names such variables, for a warning.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from evalstore.replay.agentv.records import ImportedFile, ImportedTest, ImportedVerdict, SkippedLine
from evalstore.replay.errors import ReplayError
from evalstore.replay.targetsfile.loader import interpolate, load_targets_file, run_targets_file
from evalstore.replay.targetsfile.redaction import SecretMask, environment_mask, secret_references, target_mask

_KEPT = frozenset({"source", "files", "verdicts"})
"""Fields of a result not masked as JSON-like values: a place, and records masked field by field."""


def import_mask(eval_file: str | None, targets_path: str | Path | None) -> tuple[SecretMask, list[str]]:
    """The mask of one import and its warnings: evalstore's environment's secrets, and those of every
    target of the run's targets file (``targets_path``, else the one found for ``eval_file``:
    ``run_targets_file``, as a replay finds its judges) as the agent's answer is masked in ``run``
    (secret-looking references only: a plain ``${{ MODEL }}`` would rewrite every transcript naming the
    model). A warning for each secret-looking variable the file refers to that is not set here."""
    mask = environment_mask()
    path = run_targets_file(eval_file, targets_path)
    if path is None or not path.is_file():
        return mask, []
    try:
        targets = load_targets_file(path)
    except ReplayError:  # a bundled copy that does not load: the replay that needs it says why
        return mask, []
    unset: dict[str, str] = {}
    for name, entry in targets.targets.items():
        try:
            resolved = interpolate(entry.fields, os.environ, where=name)
        except ReplayError:  # a variable unset: no URL password of it to mask
            resolved = None
        mask |= target_mask(entry.fields, resolved, secrets_only=True)
        for variable in secret_references(entry.fields):
            if not os.environ.get(variable):
                unset.setdefault(variable, name)
    notes = [
        f"{variable} (referenced by target {target!r} in {path}) is not set: if the results hold its value, "
        f"it is stored as they hold it; set {variable} before importing to store it as ${{{{ {variable} }}}}"
        for variable, target in unset.items()
    ]
    return mask, notes


def masked(item: ImportedTest | SkippedLine, mask: SecretMask) -> ImportedTest | SkippedLine:
    """``item`` with every string it holds masked (none copied when ``mask`` is empty). The files it names
    are masked as they are read (``import_events._read_file``)."""
    if not mask:
        return item
    if isinstance(item, SkippedLine):
        return replace(item, reason=mask.text(item.reason))
    if not _may_hold(item, mask):
        return item
    values = {f.name: mask.value(getattr(item, f.name)) for f in fields(item) if f.name not in _KEPT}
    return replace(
        item,
        **values,
        files=[_masked_file(f, mask) for f in item.files],
        verdicts=[_masked_verdict(v, mask) for v in item.verdicts],
    )


def _may_hold(item: ImportedTest, mask: SecretMask) -> bool:
    """Whether any string of ``item`` may hold a secret: one pass of the C JSON encoder over the whole result
    and a search of its text, where masking walks every string in Python (with any ``*_API_KEY`` set, as
    for most users, that walk over every result made an import three times slower). A string holding a
    JSON escape of its own (``\\u``, ``\\/``) may hide a secret only :meth:`SecretMask.text` decodes: it is
    walked."""
    return _may_hold_text(
        json.dumps([getattr(item, f.name) for f in fields(item)], ensure_ascii=False, default=_plain), mask
    )


def _may_hold_text(text: str, mask: SecretMask) -> bool:
    return mask.holds_text(text) or "\\\\u" in text or "\\\\/" in text


def masked_value(value: Any, mask: SecretMask) -> Any:
    """A JSON-like record (an Inspect sample) with every string masked, or itself when none may hold a
    secret (:func:`_may_hold`'s one pass of the encoder)."""
    if not mask or not _may_hold_text(json.dumps(value, ensure_ascii=False, default=_plain), mask):
        return value
    return mask.value(value)


def _plain(value: object) -> object:
    # A record's own fields, not asdict's deep copy of them: the encoder goes down into them itself.
    return vars(value) if hasattr(value, "__dict__") else str(value)


def _masked_file(f: ImportedFile, mask: SecretMask) -> ImportedFile:
    return replace(f, path=mask.text(f.path), refused=None if f.refused is None else mask.text(f.refused))


def _masked_verdict(v: ImportedVerdict, mask: SecretMask) -> ImportedVerdict:
    return replace(v, **{f.name: mask.value(getattr(v, f.name)) for f in fields(v)})
