"""Caches have structure: the units of a location (a Hugging Face repo, an Ollama model, one
folder of a directory of entries...), what each is made of, and in which order it goes.

`survey(root, specs)` lists a location once and returns its units with du-exact sizes, sharing
and "last used"; `choose` picks whole units for an age or size rule; each type's `removal`
gives the deleter's steps in the tool's own order. Nothing here deletes or prints.
"""

from cachedoctor.cacheunits.base import Garbage, Revision, Step, Unit, UnitType
from cachedoctor.cacheunits.clock import Clock, clock_for, usage_clock
from cachedoctor.cacheunits.evict import Candidate, Choice, candidates, choose
from cachedoctor.cacheunits.registry import UNIT_TYPES, unit_type
from cachedoctor.cacheunits.survey import Survey, survey
from cachedoctor.cacheunits.tree import Entry, Tree, allocated, list_tree

__all__ = [
    "UNIT_TYPES",
    "Candidate",
    "Choice",
    "Clock",
    "Entry",
    "Garbage",
    "Revision",
    "Step",
    "Survey",
    "Tree",
    "Unit",
    "UnitType",
    "allocated",
    "candidates",
    "choose",
    "clock_for",
    "list_tree",
    "survey",
    "unit_type",
    "usage_clock",
]
