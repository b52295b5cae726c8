"""Read-only XML settings (Maven `settings.xml` `<localRepository>`): the text of the element at
a path of element names, matched by local name so the document's namespace does not matter.

Parsed with the standard library's expat, which refuses entity-expansion bombs (Python docs,
"XML vulnerabilities"); a document over `MAX_BYTES` is refused before parsing."""

from __future__ import annotations

from typing import Any

from cachedoctor.configedit.common import ConfigSyntaxError
from cachedoctor.configedit.formats import Format, KeyPath

MAX_BYTES = 8 << 20


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def get_value(text: str, path: KeyPath, section: str | None = None) -> Any:
    import xml.etree.ElementTree as ET

    if len(text) > MAX_BYTES:
        raise ConfigSyntaxError(f"larger than {MAX_BYTES >> 20} MiB", 1, 1)
    try:
        root = ET.fromstring(text.lstrip("\ufeff"))
    except ET.ParseError as exc:
        line, column = exc.position
        raise ConfigSyntaxError(str(exc).split(":")[0], line, column + 1) from None
    if not path or _local(root.tag) != path[0]:
        raise KeyError(".".join(path))
    node = root
    for name in path[1:]:
        found = next((child for child in node if _local(child.tag) == name), None)
        if found is None:
            raise KeyError(".".join(path))
        node = found
    return (node.text or "").strip()


FORMATS = {"xml": Format("xml", get_value)}
