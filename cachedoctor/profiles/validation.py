"""Plain data (a parsed profile) into the profile structs, with every problem found.

msgspec checks types, constraints and unknown keys, and stops at the first problem. This walks
the model's types bottom-up and checks every field of a mapping on its own (then builds the
struct from what passed), so every problem is reported, each at its own field and line: one in a
location hides nothing of another, nor of the same location. On the way it applies what the
format allows beyond plain types, as the field annotations say (`cachedoctor.profiles.base`):
one value for a one-item list, a list for a mapping's main field (`ask: [conda, info]`), a union
told apart by the key an item has, and each struct's `_check`. It runs when a file is validated, never on a warm
start (the profile index keeps the structs).
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import msgspec

from cachedoctor.errors import CachedoctorError
from cachedoctor.holdsignals import holds_signals
from cachedoctor.profiles.base import FieldProblem

T = TypeVar("T")
DataPath = tuple[str | int, ...]


class Problem(msgspec.Struct, frozen=True):
    """What is wrong (`message`) with the value at `at` (the line to show), reported as
    `field` (`at` itself, or a key missing or unknown below it)."""

    at: DataPath
    field: DataPath
    message: str


class _Failed:
    """A value that did not convert; its problems are recorded."""


_FAILED = _Failed()


def validate(data: Any, target: type[T]) -> tuple[T | None, list[Problem]]:
    """`data` as a `target` struct, or None and every problem found."""
    problems: list[Problem] = []
    value = _convert(data, target, (), problems)
    if problems or isinstance(value, _Failed):
        return None, problems
    return value, []


def _convert(value: Any, annotation: Any, path: DataPath, problems: list[Problem]) -> Any:
    kind, extra = unwrap(annotation)
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        options = [a for a in get_args(kind) if a is not type(None)]
        if value is None and len(options) < len(get_args(kind)):
            return None
        if len(options) == 1:
            return _convert(value, options[0], path, problems)
        structs = [a for a in options if is_struct(unwrap(a)[0])]
        if len(structs) > 1:
            return _convert_tagged(value, structs, extra, path, problems)
        return value  # `str | list[str]`: msgspec checks it with its struct
    if origin is list:
        if extra.get("one_or_many") and not isinstance(value, list):
            value = [value]
        if not isinstance(value, list):
            return value
        (item,) = get_args(kind)
        converted = [_convert(v, item, (*path, i), problems) for i, v in enumerate(value)]
        if any(isinstance(v, _Failed) for v in converted):
            return _FAILED
        return converted
    if origin is dict and isinstance(value, dict):  # each value on its own: msgspec's error
        values = get_args(kind)[1]  # path names no key (`$.vars[...]`)
        entries = {k: _convert_leaf(v, values, (*path, k), problems) if isinstance(k, str) else v
                   for k, v in value.items()}
        return _FAILED if any(isinstance(v, _Failed) for v in entries.values()) else entries
    if is_struct(kind):
        if isinstance(value, list) and "shorthand" in extra:
            value = {extra["shorthand"]: value}
        return _convert_struct(value, kind, path, problems)
    return value


def _convert_struct(value: Any, struct: type[Any], path: DataPath, problems: list[Problem]) -> Any:
    """`value` as `struct`. Each field is checked on its own, so every problem of the mapping is
    reported (msgspec stops at its first one); the struct is built from a mapping without any."""
    if not isinstance(value, dict):
        return _convert_leaf(value, struct, path, problems)  # "expected a mapping, got ..."
    hints = fields_of(struct)
    tag_field = struct.__struct_config__.tag_field
    before = len(problems)
    fields: dict[str, Any] = {}
    for key, sub in value.items():
        at = (*path, key)
        if key == tag_field:
            fields[key] = sub  # the struct's own tag: msgspec checks it
        elif not isinstance(key, str):
            problems.append(Problem(at, at, f"a key must be text{_got(key)}"))
        elif key not in hints:
            problems.append(Problem(at, at, _UNKNOWN_FIELD))
        else:
            converted = _convert(sub, hints[key], at, problems)
            if not isinstance(converted, _Failed):
                fields[key] = _convert_leaf(converted, hints[key], at, problems)
    for info in msgspec.structs.fields(struct):
        if info.required and info.encode_name not in value:
            problems.append(Problem(path, (*path, info.encode_name), "required field is missing"))
    if len(problems) > before:
        return _FAILED
    instance = _convert_leaf(fields, struct, path, problems)
    if isinstance(instance, _Failed):
        return instance
    try:
        instance._check()
    except ValueError as exc:
        message = exc.message if isinstance(exc, CachedoctorError) else str(exc)
        at = (*path, exc.field) if isinstance(exc, FieldProblem) else path
        problems.append(Problem(at, at, message))
        return _FAILED
    return instance


@holds_signals  # msgspec.convert swallows an exception raised in a typing annotation's hash
def _convert_leaf(value: Any, annotation: Any, path: DataPath, problems: list[Problem]) -> Any:
    """`value` as msgspec converts it to `annotation` (its structs, if any, already are), or
    _FAILED with msgspec's problem at its path."""
    try:
        return msgspec.convert(value, annotation, strict=False)
    except msgspec.ValidationError as exc:
        problems.append(_from_msgspec(exc, value, annotation, path))
        return _FAILED


def _convert_tagged(value: Any, structs: list[Any], extra: dict[str, Any], path: DataPath,
                    problems: list[Problem]) -> Any:
    """One of several structs: by the value of their tag field (`method: link`), or for a
    union marked `by_key`, by which of their tags the mapping has as a key (`env:`)."""
    members = {str(s.__struct_config__.tag): s for s in structs}
    tag_field = str(structs[0].__struct_config__.tag_field)
    if not isinstance(value, dict):
        problems.append(Problem(path, path, f"expected a mapping{_got(value)}"))
        return _FAILED
    if "by_key" in extra:
        if tag_field in value:
            problems.append(Problem((*path, tag_field), (*path, tag_field), _UNKNOWN_FIELD))
            return _FAILED
        named = [tag for tag in members if tag in value]
        if len(named) != 1:
            problems.append(Problem(path, path, extra["by_key"]))
            return _FAILED
        return _convert_struct(value, members[named[0]], path, problems)
    tag = value.get(tag_field)
    if tag is None:
        problems.append(Problem(path, path, f"missing the `{tag_field}` field that says which kind "
                                            f"this is (one of {_choices(members)})"))
        return _FAILED
    if not isinstance(tag, str) or tag not in members:
        problems.append(Problem(path, path, f"unknown type {tag!r}; expected one of {_choices(members)}"))
        return _FAILED
    return _convert_struct(value, members[tag], path, problems)


_UNKNOWN_FIELD = "unknown field (check the spelling; see `cachedoctor profiles schema`)"
_AT = re.compile(r"^(?P<message>.*?)(?: - at (?P<key>`key` in )?`\$(?P<path>.*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[([^\]]*)\]")
_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
          "array": "a list", "object": "a mapping", "null": "nothing", "date": "a date",
          "datetime": "a date and time", "time": "a time"}


def _from_msgspec(exc: msgspec.ValidationError, value: Any, annotation: Any,
                  path: DataPath) -> Problem:
    """msgspec's message (`Expected `str`, got `int` - at `$.paths.linux[0]``) as a Problem."""
    match = _AT.match(str(exc))
    assert match is not None  # the pattern matches any text
    message, inner = match["message"], _steps(match["path"] or "")
    at: DataPath = (*path, *inner)
    if match["key"]:  # a key that is no string (`5: x`): the first such key of that mapping
        mapping = _value_at(value, inner)
        key = next((k for k in mapping if not isinstance(k, str)), None) if isinstance(
            mapping, dict) else None
        where = (*at, key) if key is not None else at
        return Problem(where, where, f"a key must be text{_got(key)}")
    got = _value_at(value, inner)
    kind, extra = _annotation_at(annotation, inner)
    if message.startswith("Invalid enum value") and get_origin(kind) is Literal:
        text = f"expected {_choices(dict.fromkeys(map(str, get_args(kind))))}"
    elif "means" in extra and message.startswith(("Expected `str` matching", "Expected `str` of")):
        text = f"expected {extra['means']}"  # the words of a pattern (an id), not the regex
    else:
        text = _plain(message)
    return Problem(at, at, f"{text}{_got(got)}")


def _plain(message: str) -> str:
    """`Expected `array` of length >= 1` -> `expected a list of length >= 1`; an optional
    field's `str | null` is `a string`."""
    text = re.sub(r"`([\w| ]+)`", lambda m: " or ".join(
        _WORDS.get(w, w) for w in m[1].split(" | ") if w != "null") or _WORDS["null"], message)
    text = re.sub(r"^Expected a (list|mapping) of length >= (\d+)$",
                  lambda m: f"expected at least {m[2]} {'item' if m[1] == 'list' else 'entry'}"
                            f"{'' if m[2] == '1' else 's'}", text)
    text = re.sub(r"^Expected a string of length <= (\d+)$", r"expected at most \1 characters", text)
    text = re.sub(r"^Expected a string matching regex (.*)$", r"expected a string matching \1", text)
    return text[:1].lower() + text[1:]


def _got(value: Any) -> str:
    return f" (got {value!r})" if isinstance(value, (str, int, float, bool)) else ""


def _choices(names: dict[str, Any]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _steps(text: str) -> DataPath:
    steps: list[str | int] = []
    for match in _STEP.finditer(text):
        name, index, key = match.groups()
        steps.append(int(index) if index is not None else (name if name is not None else key.strip("'\"")))
    return tuple(steps)


def _value_at(value: Any, steps: DataPath) -> Any:
    for step in steps:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            return None
    return value


def _annotation_at(annotation: Any, steps: DataPath) -> tuple[Any, dict[str, Any]]:
    """The type of the value at `steps` below `annotation` (`| None` left out) and the
    `extra` of its annotations: (None, {}) where the steps lead nowhere."""
    current: Any = annotation
    for step in [*steps, None]:
        kind, extra = unwrap(current)
        options = [a for a in get_args(kind) if a is not type(None)]
        if get_origin(kind) in (Union, types.UnionType) and len(options) == 1:
            inner, more = unwrap(options[0])
            kind, extra = inner, {**extra, **more}
        if step is None:
            return kind, extra
        if is_struct(kind) and isinstance(step, str):
            current = fields_of(kind).get(step)
        elif get_origin(kind) in (list, dict):
            current = get_args(kind)[-1]
        else:
            return None, {}
    return None, {}  # not reached: the last step is None


def unwrap(annotation: Any) -> tuple[Any, dict[str, Any]]:
    """The type under `Annotated[...]` and the `extra` of its msgspec.Meta annotations."""
    extra: dict[str, Any] = {}
    while get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, msgspec.Meta) and meta.extra:
                extra.update(meta.extra)
        annotation = annotation.__origin__
    return annotation, extra


def is_struct(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


_FIELDS: dict[type[Any], dict[str, Any]] = {}


def fields_of(struct: type[Any]) -> dict[str, Any]:
    """{field: annotation} of a struct (resolved once)."""
    hints = _FIELDS.get(struct)
    if hints is None:
        hints = _FIELDS[struct] = get_type_hints(struct, include_extras=True)
    return hints
