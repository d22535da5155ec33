"""Event payloads built as :func:`~evalstore.store.events.encode` makes them, without building the model.

An import builds a dozen events a result, from values its reader already checked and typed: validating
each into a pydantic model and dumping it back was a fifth of building a result (bench/import.py). For
values of the plain types validation keeps as they are (a ``str`` for a ``str`` field, a ``dict`` for
``dict[str, Any]``, an ``int`` for a ``float`` field, which validation makes a ``float``),
:func:`plain_payload` gives the same dict directly: defaults left out, as ``exclude_defaults`` does.
Anything else (another type, a value a ``Literal`` does not allow, a field the class does not have, a
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
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from evalstore.store.events import DomainEvent


class NotPlain(Exception):
    """A value :func:`plain_payload` cannot tell validation would keep as it is."""


_Check = Callable[[Any], Any]
"""A field's value as validation keeps it; raises :class:`NotPlain` when that is not known."""
_REQUIRED = object()
_SPECS: dict[type[DomainEvent], dict[str, tuple[_Check, Any]]] = {}


def plain_payload(cls: type[DomainEvent], values: dict[str, Any]) -> dict[str, Any]:
    """``encode(cls(**values))`` for plain values (see the module); raises :class:`NotPlain` otherwise.
    A nested model's field (``source``, ``assertions``) takes its value encoded already (a dict, a list
    of dicts, as ``encode`` writes it): it is used as it is."""
    spec = _SPECS.get(cls) or _spec(cls)
    payload: dict[str, Any] = {}
    for name, value in values.items():
        found = spec.get(name)
        if found is None:
            raise NotPlain(name)
        check, default = found
        value = check(value)
        if default is _REQUIRED or value != default:
            payload[name] = value
    if len(payload) < len(spec) and any(d is _REQUIRED and n not in values for n, (_, d) in spec.items()):
        raise NotPlain("a required field is missing")
    return payload


def _spec(cls: type[DomainEvent]) -> dict[str, tuple[_Check, Any]]:
    hints = typing.get_type_hints(cls)
    spec = {
        name: (
            _check_of(hints[name]),
            _REQUIRED if info.is_required() else info.get_default(call_default_factory=True),
        )
        for name, info in cls.model_fields.items()
    }
    _SPECS[cls] = spec
    return spec


def _check_of(annotation: Any) -> _Check:  # noqa: C901 (one case per kind of annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) != len(args) - 1 or len(options) != 1:
            return _never  # bool | float and the like: validation decides
        inner = _check_of(options[0])

        def optional(value: Any) -> Any:
            return None if value is None else inner(value)

        return optional
    if annotation is str:
        return _exactly(str)
    if annotation is bool:
        return _exactly(bool)
    if annotation is int:
        return _exactly(int)
    if annotation is float:
        return _float
    if origin is Literal:
        allowed = frozenset(args)

        def literal(value: Any) -> Any:
            if type(value) is str and value in allowed:
                return value
            raise NotPlain(value)

        return literal
    if annotation is Any:
        return _json
    if origin is dict and args == (str, Any):
        return _exactly(dict)
    if origin is dict and args == (str, str):

        def strings(value: Any) -> Any:
            if type(value) is dict and all(type(k) is str and type(v) is str for k, v in value.items()):
                return value
            raise NotPlain(value)

        return strings
    if origin is list and len(args) == 1:
        (item,) = args
        if item is str or get_origin(item) is dict:
            kind = str if item is str else dict

            def items(value: Any) -> Any:
                if type(value) is list and all(type(v) is kind for v in value):
                    return value
                raise NotPlain(value)

            return items
        if isinstance(item, type) and issubclass(item, BaseModel):
            return _exactly(list)  # encoded already (see plain_payload)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _exactly(dict)  # encoded already
    return _never


def _exactly(kind: type) -> _Check:
    def check(value: Any) -> Any:
        if type(value) is kind:
            return value
        raise NotPlain(value)

    return check


def _float(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return value
    if kind is int:  # validation makes it a float: 1 is stored as 1.0
        try:
            return float(value)
        except OverflowError:
            raise NotPlain(value) from None
    raise NotPlain(value)


def _json(value: Any) -> Any:
    return value


def _never(value: Any) -> Any:
    raise NotPlain(value)
