"""Tree copy, verification and removal for relocation: the tree layer's functions (`cachedoctor.fs`)
under the names the relocation code has always used."""

from __future__ import annotations

from cachedoctor.fs.copy import CopyOptions, CopyResult, ProgressCallback, copy_tree, make_durable
from cachedoctor.fs.survey import LookFor, Survey, survey
from cachedoctor.fs.verify import VerifyOptions, file_digest, same_content, verify_tree
from cachedoctor.safedelete import remove_tree

__all__ = [
    "CopyOptions",
    "CopyResult",
    "LookFor",
    "ProgressCallback",
    "Survey",
    "VerifyOptions",
    "copy_tree",
    "file_digest",
    "make_durable",
    "remove_tree",
    "same_content",
    "survey",
    "verify_tree",
]
