"""Validation of `--json` output against the shipped schemas (cachedoctor/schemas)."""

from __future__ import annotations

from functools import cache
from typing import Any

from cachedoctor import schemas


@cache
def _registry() -> Any:
    from referencing import Registry, Resource

    return Registry().with_resources(
        (document["$id"], Resource.from_contents(document))
        for document in map(schemas.load, schemas.names()))


@cache
def validator(name: str) -> Any:
    """A checked validator of the schema `name` (built once per test process)."""
    from jsonschema import Draft202012Validator

    schema = schemas.load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=_registry(),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def command_of(document: dict[str, Any]) -> str:
    """`env.set` for `cachedoctor.env.set/1`."""
    return str(document["schema"]).removeprefix("cachedoctor.").rsplit("/", 1)[0]


def check_envelope(document: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError (with the path inside the document) unless `document`
    is a valid envelope whose result matches its command's schema."""
    validator(schemas.ENVELOPE).validate(document)
    if document["result"] is not None:
        command = command_of(document)
        assert command in schemas.command_names(), f"no schema for the result of {command}"
        validator(command).validate(document["result"])
