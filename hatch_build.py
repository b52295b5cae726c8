"""Build hook: compile cachedoctor/fs/_native.c, the measuring walk's per-entry loop, on Linux.

cachedoctor is a Python program; this one loop is C because in Python every entry costs
objects du never makes (docs/performance.md, "scan"). The C is optional: where it cannot be
built (no compiler, no Python headers, another OS) the wheel is pure Python with a warning and
the walk uses its Python loop, which counts the same. setuptools compiles it because it knows
each platform's compiler and flags; hatchling stays the build backend.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "cachedoctor.fs._native"
SOURCE = "cachedoctor/fs/_native.c"


class NativeWalkHook(BuildHookInterface[BuilderConfig]):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or not sys.platform.startswith("linux"):
            return
        root = Path(self.root)
        if version == "editable":  # an earlier build must not outlive a failed one
            for stale in (root / "cachedoctor" / "fs").glob("_native.*.so"):
                stale.unlink()
        self._scratch = tempfile.mkdtemp(prefix="cachedoctor-native-")
        try:
            built = _compile(root, Path(self._scratch))
        except Exception as exc:  # no compiler or headers: a pure wheel, which works as well
            self.app.display_warning(
                f"cachedoctor: {SOURCE} was not compiled ({exc}); the scan uses its Python loop")
            return
        target = f"cachedoctor/fs/{built.name}"
        if version == "editable":  # the source tree is what an editable install imports
            placed = root / f"{target}.tmp"
            shutil.copyfile(built, placed)
            os.replace(placed, root / target)  # a new file: a running scan keeps its mapping
        else:
            build_data["force_include"][str(built)] = target
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _compile(root: Path, scratch: Path) -> Path:
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    extension = Extension(MODULE, [str(root / SOURCE)])
    command = build_ext(Distribution({"name": "cachedoctor", "ext_modules": [extension]}))
    command.build_lib = str(scratch / "lib")
    command.build_temp = str(scratch / "temp")
    command.ensure_finalized()
    command.run()
    return Path(command.get_ext_fullpath(MODULE))
