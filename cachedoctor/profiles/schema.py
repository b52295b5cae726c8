"""The JSON Schema of the profile format (`cachedoctor profiles schema`), from the model.

msgspec writes the schema of the types; this adds what the validator accepts beyond them
(`cachedoctor.profiles.validation`): the one-item shorthand of a list, a mapping given as its
only field's list, and settings told apart by their key rather than by an internal tag.
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

import msgspec

from cachedoctor.profiles.validation import fields_of, is_struct, unwrap


def profile_schema() -> dict[str, Any]:
    from cachedoctor.profiles.model import SETTING_TAG, Profile

    (_, ), defs = msgspec.json.schema_components([Profile], ref_template="#/$defs/{name}")
    for struct in _structs(Profile):
        properties = defs[struct.__name__].get("properties", {})
        for name, annotation in fields_of(struct).items():
            if name in properties:
                _widen(properties, name, _extras(annotation), defs)
            for member in _told_by_key(annotation):  # a setting's kind is the key it has
                required = defs[member.__name__].setdefault("required", [])
                if str(member.__struct_config__.tag) not in required:
                    required.append(str(member.__struct_config__.tag))
    _drop_property(defs, SETTING_TAG)
    schema = defs.pop("Profile")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            **schema, "title": "cachedoctor profile", "$defs": defs}


def _widen(properties: dict[str, Any], name: str, extra: dict[str, Any], defs: dict[str, Any]) -> None:
    prop = properties[name]
    kept = {k: prop.pop(k) for k in ("description", "default") if k in prop}
    if extra.get("one_or_many"):
        listed = next((s for s in [prop, *prop.get("anyOf", [])] if s.get("type") == "array"), None)
        if listed is not None:
            listed_copy = dict(listed)
            options = [o for o in prop.get("anyOf", [prop]) if o is not listed]
            prop = {"anyOf": [listed_copy, listed_copy["items"], *options]}
    if "shorthand" in extra:
        refs = [o["$ref"] for o in prop.get("anyOf", [prop]) if "$ref" in o]
        if refs:
            target = defs[refs[0].rsplit("/", 1)[-1]]["properties"][extra["shorthand"]]
            prop = {"anyOf": [*prop.get("anyOf", [prop]), {k: v for k, v in target.items()
                                                          if k not in ("description", "default")}]}
    properties[name] = {**kept, **prop}


def _drop_property(node: Any, name: str) -> None:
    """Remove the internal tag `name` from every object schema and discriminator."""
    if isinstance(node, dict):
        node.get("properties", {}).pop(name, None)
        if name in node.get("required", []):
            node["required"] = [r for r in node["required"] if r != name]
        if node.get("discriminator", {}).get("propertyName") == name:
            del node["discriminator"]
        for value in node.values():
            _drop_property(value, name)
    elif isinstance(node, list):
        for value in node:
            _drop_property(value, name)


def _extras(annotation: Any) -> dict[str, Any]:
    """The validator's annotations of a field, also under `| None`."""
    kind, extra = unwrap(annotation)
    if get_origin(kind) in (Union, types.UnionType):
        for option in get_args(kind):
            extra = {**unwrap(option)[1], **extra}
    return extra


def _told_by_key(annotation: Any) -> list[type[Any]]:
    """The members of a union marked `by_key` in `annotation` (through lists and `| None`)."""
    kind, extra = unwrap(annotation)
    if "by_key" in extra:
        return [unwrap(a)[0] for a in get_args(kind) if is_struct(unwrap(a)[0])]
    return [m for arg in get_args(kind) for m in _told_by_key(arg)]


def _structs(root: type[Any]) -> list[type[Any]]:
    """Every struct type reachable from `root`'s fields."""
    seen: dict[type[Any], None] = {}

    def visit(annotation: Any) -> None:
        kind = unwrap(annotation)[0]
        if is_struct(kind) and kind not in seen:
            seen[kind] = None
            for sub in fields_of(kind).values():
                visit(sub)
        for arg in get_args(kind):
            visit(arg)

    visit(root)
    return list(seen)
