"""Event payloads built as :func:`~evalstore.store.events.encode` makes them, without building the model.

An import builds a dozen events a result, from values its reader already checked and typed: validating
each into a pydantic model and dumping it back took twice as long as building the dict, about a sixth of
building a result (bench/import.py). For values of the plain types validation keeps as they are (a
``str`` for a ``str`` field, a ``dict`` for ``dict[str, Any]``, an ``int`` for a ``float`` field, which
validation makes a ``float``), :func:`plain_payload` gives the same dict directly: defaults left out,
as ``exclude_defaults`` does. Anything else (another type, a value a ``Literal`` does not allow, a field the class does not have, a
required field missing) raises :class:`NotPlain`, and the caller builds the model, which converts the
value or says what is wrong with it. tests/replay/test_import_plain_payloads.py holds the two to the same
stored bytes.

Values of ``Any`` and ``dict[str, Any]`` fields are taken to be JSON values (as a reader's JSON parser
gives them). Validation converts a non-finite float in them to ``null``, where canonical JSON refuses
it: a caller encodes the payload with :func:`~evalstore.store.codec.canonical_json` and, if that
raises, builds the model.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from evalstore.store.events import DomainEvent


class NotPlain(Exception):
    """A value :func:`plain_payload` cannot tell validation would keep as it is."""


_Check = Callable[[Any], Any]
"""A field's value as validation keeps it; raises :class:`NotPlain` when that is not known."""
_REQUIRED = object()


@dataclass(frozen=True)
class _Spec:
    fields: dict[str, tuple[type | None, _Check, bool, Any]]
    """Per field: the type validation keeps as it is (None: ask ``check``), the check, whether None is
    allowed, and the default (``_REQUIRED``: none)."""
    required: frozenset[str]


_SPECS: dict[type[DomainEvent], _Spec] = {}


def plain_payload(cls: type[DomainEvent], values: dict[str, Any]) -> dict[str, Any]:
    """``encode(cls(**values))`` for plain values (see the module); raises :class:`NotPlain` otherwise.
    A nested model's field (``source``, ``assertions``) takes its value encoded already (a dict, a list
    of dicts, as ``encode`` writes it): it is used as it is."""
    spec = _SPECS.get(cls) or _spec(cls)
    if not spec.required.issubset(values):
        raise NotPlain("a required field is missing")
    fields = spec.fields
    payload: dict[str, Any] = {}
    for name, value in values.items():
        found = fields.get(name)
        if found is None:
            raise NotPlain(name)
        exact, check, nullable, default = found
        if value is None:
            if not nullable:
                raise NotPlain(name)
        elif type(value) is not exact:
            value = check(value)
        if default is _REQUIRED or value != default:
            payload[name] = value
    return payload


def _spec(cls: type[DomainEvent]) -> _Spec:
    hints = typing.get_type_hints(cls)
    fields: dict[str, tuple[type | None, _Check, bool, Any]] = {}
    for name, info in cls.model_fields.items():
        annotation = hints[name]
        nullable = annotation is Any
        if get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation):
            options = [a for a in get_args(annotation) if a is not type(None)]
            nullable = len(options) == 1
            annotation = options[0] if nullable else annotation
        exact, check = _kind(annotation)
        default = _REQUIRED if info.is_required() else info.get_default(call_default_factory=True)
        fields[name] = (exact, check, nullable, default)
    spec = _SPECS[cls] = _Spec(fields, frozenset(n for n, info in cls.model_fields.items() if info.is_required()))
    return spec


def _kind(annotation: Any) -> tuple[type | None, _Check]:
    """The type of the values validation keeps as they are (None: every value is checked), and the check
    of the others: it gives the value as validation would, or raises :class:`NotPlain`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in (str, bool, int):
        return annotation, _never
    if annotation is float:
        return float, _int_as_float
    if annotation is Any:  # a JSON value (see the module)
        return None, _json
    if origin is Literal:
        allowed = frozenset(args)

        def literal(value: Any) -> Any:
            if type(value) is str and value in allowed:
                return value
            raise NotPlain(value)

        return None, literal
    if origin is dict and args == (str, Any):
        return dict, _never
    if origin is dict and args == (str, str):

        def strings(value: Any) -> Any:
            if type(value) is dict and all(type(k) is str and type(v) is str for k, v in value.items()):
                return value
            raise NotPlain(value)

        return None, strings
    if origin is list and len(args) == 1 and (args[0] is str or get_origin(args[0]) is dict):
        kind = str if args[0] is str else dict

        def items(value: Any) -> Any:
            if type(value) is list and all(type(v) is kind for v in value):
                return value
            raise NotPlain(value)

        return None, items
    if origin is list and len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return list, _never  # encoded already (see plain_payload)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return dict, _never  # encoded already
    return None, _never  # bool | float and the like: validation decides


def _int_as_float(value: Any) -> Any:
    """An int for a float field: validation makes it a float (1 is stored as 1.0)."""
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise NotPlain(value) from None
    raise NotPlain(value)


def _json(value: Any) -> Any:
    return value


def _never(value: Any) -> Any:
    raise NotPlain(value)
