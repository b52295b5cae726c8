"""The unit types, by the name profiles give them (`units: - type: NAME`)."""

from __future__ import annotations

from cachedoctor.cacheunits.base import UnitType
from cachedoctor.cacheunits.contentaddressed import ContentAddressed
from cachedoctor.cacheunits.entries import DirectoryEntries
from cachedoctor.cacheunits.hfhub import HfHub
from cachedoctor.cacheunits.ollama import OllamaModels
from cachedoctor.cacheunits.superseded import Superseded
from cachedoctor.cacheunits.toolonly import ToolOnly

UNIT_TYPES: dict[str, UnitType] = {
    "hf-hub": HfHub(),
    "ollama-models": OllamaModels(),
    "directory-entries": DirectoryEntries(),
    "content-addressed": ContentAddressed(),
    "tool-only": ToolOnly(),
    "superseded": Superseded(),
}


def unit_type(name: str) -> UnitType:
    return UNIT_TYPES[name]
