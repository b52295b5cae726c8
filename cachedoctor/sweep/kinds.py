"""What a project build output is: one registry entry per kind, each recognised by markers,
never by its name alone.

A `Kind` names the folder names it can have and one or more `Recipe`s; a folder with one of
those names is that kind when every marker of one recipe holds. Markers look next to the
folder (`Beside`), inside it (`Inside`, `Tag`, `StartsWith`, `OnlyInside`), into a build file
(`Script`, `Depends`, `Declares`), or at the project's .gitignore (`Ignored`). They read through a
`Probe`, which the walk implements over open folder descriptors; tests use a plain one.

Why the markers are what they are (docs/sweep.md has the table and sources):

* a tool's own stamp wins where it has one: a valid CACHEDIR.TAG (Cargo, mypy, pytest, ruff),
  a file the tool writes inside (`pyvenv.cfg`, `.rustc_info.json`, `CMakeCache.txt`, pytest's
  README, mypy's and ruff's .gitignore);
* otherwise the build file that makes the folder must be next to it (`package.json` beside
  `node_modules`, `build.gradle` beside `.gradle`), and for the names people also use for their
  own files (`build`, `dist`, `bin`, `obj`) something inside must show the tool made it, or the
  project's .gitignore must say the folder is generated.

`NOT_SEARCHED` lists the folders the search never looks into (software is installed there,
not built); `NOT_ACTIVITY` the files that never count as a project's activity.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import msgspec

from cachedoctor.cachedirtag import SIGNATURE
from cachedoctor.errors import UserInputError

READ_LIMIT = 256 * 1024  # build files (package.json, pyproject.toml) are read up to this size


class Probe(Protocol):
    """What a marker may look at, for one candidate folder."""

    @property
    def beside(self) -> frozenset[str]:
        """Names of the entries next to the candidate (its parent folder's listing)."""

    def inside(self) -> Sequence[str]:
        """Names of the entries inside the candidate."""

    def read_beside(self, name: str, limit: int = READ_LIMIT) -> bytes | None:
        """The head of a regular file next to the candidate (never through a link)."""

    def read_inside(self, name: str, limit: int = READ_LIMIT) -> bytes | None:
        """The head of a regular file inside the candidate (never through a link)."""

    def ignored(self) -> bool:
        """Whether the project's .gitignore files say the candidate is not tracked."""


def _matches(names: Iterable[str], patterns: Sequence[str]) -> bool:
    plain = {p for p in patterns if not _is_glob(p)}
    globs = [p for p in patterns if _is_glob(p)]
    return any(n in plain or any(fnmatch.fnmatchcase(n, g) for g in globs) for n in names)


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


class Marker(Protocol):
    """One piece of evidence. `what` completes "recognised by ...": "a package.json beside it"."""

    @property
    def what(self) -> str: ...

    def holds(self, probe: Probe) -> bool: ...


class Beside(msgspec.Struct, frozen=True):
    """One of these names (globs allowed) is next to the folder."""

    names: tuple[str, ...]

    @property
    def what(self) -> str:
        return f"{_either(self.names)} beside it"

    def holds(self, probe: Probe) -> bool:
        return _matches(probe.beside, self.names)


class Inside(msgspec.Struct, frozen=True):
    """One of these names (globs allowed) is inside the folder."""

    names: tuple[str, ...]

    @property
    def what(self) -> str:
        return f"{_either(self.names)} inside"

    def holds(self, probe: Probe) -> bool:
        return _matches(probe.inside(), self.names)


class Tag(msgspec.Struct, frozen=True):
    """A valid CACHEDIR.TAG inside (the Cache Directory Tagging Specification)."""

    @property
    def what(self) -> str:
        return "its CACHEDIR.TAG"

    def holds(self, probe: Probe) -> bool:
        head = probe.read_inside("CACHEDIR.TAG", len(SIGNATURE))
        return head is not None and head.startswith(SIGNATURE)


class StartsWith(msgspec.Struct, frozen=True):
    """A file inside begins with the text its tool writes there."""

    name: str
    head: bytes

    @property
    def what(self) -> str:
        return f"the {self.name} its tool writes inside"

    def holds(self, probe: Probe) -> bool:
        found = probe.read_inside(self.name, len(self.head))
        return found is not None and found.startswith(self.head)


class OnlyInside(msgspec.Struct, frozen=True):
    """The folder is not empty and every entry in it matches these globs (`dist` of wheels)."""

    names: tuple[str, ...]
    describe: str

    @property
    def what(self) -> str:
        return f"only {self.describe} inside"

    def holds(self, probe: Probe) -> bool:
        entries = probe.inside()
        return bool(entries) and all(_matches((n,), self.names) for n in entries)


def _package_json(probe: Probe) -> dict[str, object] | None:
    raw = probe.read_beside("package.json")
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        return None  # also a file cut at READ_LIMIT: no evidence, not an error
    return data if isinstance(data, dict) else None


class Script(msgspec.Struct, frozen=True):
    """The package.json beside it has this npm script (`build`)."""

    name: str

    @property
    def what(self) -> str:
        return f"a package.json with a {self.name!r} script beside it"

    def holds(self, probe: Probe) -> bool:
        data = _package_json(probe)
        scripts = data.get("scripts") if data else None
        return isinstance(scripts, dict) and isinstance(scripts.get(self.name), str)


class Depends(msgspec.Struct, frozen=True):
    """The package.json beside it depends on this package (`next`)."""

    package: str

    @property
    def what(self) -> str:
        return f"a package.json depending on {self.package} beside it"

    def holds(self, probe: Probe) -> bool:
        data = _package_json(probe) or {}
        return any(
            isinstance(deps, dict) and self.package in deps
            for deps in (data.get(k) for k in ("dependencies", "devDependencies"))
        )


class Declares(msgspec.Struct, frozen=True):
    """A text build file beside it has a line matching `pattern` (`[tool.tox]` in
    pyproject.toml, `[tox:tox]` in setup.cfg)."""

    name: str
    pattern: str
    describe: str

    @property
    def what(self) -> str:
        return f"a {self.name} {self.describe} beside it"

    def holds(self, probe: Probe) -> bool:
        raw = probe.read_beside(self.name)
        if raw is None:
            return False
        return re.search(self.pattern, raw.decode("utf-8", "replace"), re.MULTILINE) is not None


class Ignored(msgspec.Struct, frozen=True):
    """The project's .gitignore (beside it or above, up to the repository) ignores it."""

    @property
    def what(self) -> str:
        return "the project's .gitignore ignoring it"

    def holds(self, probe: Probe) -> bool:
        return probe.ignored()


class AnyOf(msgspec.Struct, frozen=True):
    """One of several markers."""

    markers: tuple[Marker, ...]

    @property
    def what(self) -> str:
        return " or ".join(m.what for m in self.markers)

    def holds(self, probe: Probe) -> bool:
        return any(m.holds(probe) for m in self.markers)


class Recipe(msgspec.Struct, frozen=True):
    """Every marker must hold."""

    markers: tuple[Marker, ...]

    @property
    def what(self) -> str:
        return " and ".join(m.what for m in self.markers)

    def holds(self, probe: Probe) -> bool:
        return all(m.holds(probe) for m in self.markers)


class Kind(msgspec.Struct, frozen=True):
    """One kind of build output. `only`: file-name globs of what may go (`__pycache__` loses
    its `.pyc` files, anything else stays, and so does the folder then); `not_if_inside`: names
    that show the folder is something else (the Gradle user home is also called `.gradle`)."""

    id: str
    folders: tuple[str, ...]
    recipes: tuple[Recipe, ...]
    made_by: str
    source: str
    only: tuple[str, ...] = ()
    not_if_inside: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    def recognise(self, probe: Probe) -> str | None:
        """What recognised the folder as this kind ("a package.json beside it"), or None."""
        for recipe in self.recipes:
            if recipe.holds(probe):
                if self.not_if_inside and _matches(probe.inside(), self.not_if_inside):
                    return None
                return recipe.what
        return None

    def miss(self) -> str:
        """Why a folder with this name was not taken: what would have recognised it (for a
        kind made several ways, the tools: their markers are in docs/sweep.md)."""
        if len(self.recipes) > 2:
            return f"none of the markers of {self.made_by} (see docs/sweep.md)"
        return "no " + "; nor ".join(r.what for r in self.recipes)


def _either(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _r(*markers: Marker) -> Recipe:
    return Recipe(markers)


PACKAGE_JSON = Beside(("package.json",))
GRADLE_FILES = Beside(("build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"))
PYTHON_BUILD = Beside(("setup.py", "setup.cfg", "pyproject.toml"))
NODE_BUILD = _r(Script("build"), Ignored())
DOTNET_PROJECT = Beside(("*.csproj", "*.fsproj", "*.vbproj"))

KINDS: tuple[Kind, ...] = (
    Kind("node_modules", ("node_modules",), (_r(PACKAGE_JSON),),
         "npm, yarn, pnpm, bun (`npm install`)", "https://docs.npmjs.com/cli/configuring-npm/folders"),
    Kind("target", ("target",), (
        _r(Beside(("Cargo.toml",)), AnyOf((Tag(), Inside((".rustc_info.json",))))),
        _r(Beside(("pom.xml",)), Inside(("maven-status", "maven-archiver", "classes", "test-classes"))),
    ), "Cargo (`cargo build`), Maven (`mvn package`)",
         "https://doc.rust-lang.org/cargo/guide/build-cache.html"),
    Kind("venv", (".venv", "venv", "env"), (_r(Inside(("pyvenv.cfg",))),),
         "python -m venv, virtualenv, uv, poetry (in-project)",
         "https://docs.python.org/3/library/venv.html", aliases=(".venv",)),
    Kind("tox", (".tox",), (
        _r(Beside(("tox.ini", "tox.toml"))),
        _r(Declares("pyproject.toml", r"^\s*(\[tool\.tox\b|legacy_tox_ini\s*=)",
                    "with a [tool.tox] table")),
        _r(Declares("setup.cfg", r"^\s*\[tox:tox\]", "with a [tox:tox] section")),
    ), "tox", "https://tox.wiki/en/latest/config.html"),
    Kind("nox", (".nox",), (_r(Beside(("noxfile.py",))),), "nox",
         "https://nox.thea.codes/en/stable/usage.html"),
    Kind("__pycache__", ("__pycache__",), (_r(Inside(("*.pyc",))),),
         "CPython (PEP 3147 bytecode cache)", "https://peps.python.org/pep-3147/",
         only=("*.pyc", "*.pyc.*"), aliases=("pycache",)),
    Kind("mypy_cache", (".mypy_cache",), (
        _r(AnyOf((Tag(), StartsWith(".gitignore", b"# Automatically created by mypy")))),
    ), "mypy", "https://mypy.readthedocs.io/en/stable/config_file.html#confval-cache_dir"),
    Kind("ruff_cache", (".ruff_cache",), (
        _r(AnyOf((Tag(), StartsWith(".gitignore", b"# Automatically created by ruff")))),
    ), "ruff", "https://docs.astral.sh/ruff/settings/#cache-dir"),
    Kind("pytest_cache", (".pytest_cache",), (
        _r(AnyOf((Tag(), StartsWith("README.md", b"# pytest cache directory #")))),
    ), "pytest (cache plugin)", "https://docs.pytest.org/en/stable/how-to/cache.html"),
    Kind("gradle", (".gradle",), (_r(GRADLE_FILES),), "Gradle (project cache directory)",
         "https://docs.gradle.org/current/userguide/directory_layout.html",
         not_if_inside=("caches", "wrapper", "daemon", "gradle.properties")),
    Kind("build", ("build",), (
        _r(PYTHON_BUILD, Inside(("lib", "lib.*", "bdist.*", "temp.*", "scripts-*"))),
        _r(Beside(("CMakeLists.txt",)), Inside(("CMakeCache.txt",))),
        _r(Beside(("meson.build",)), Inside(("meson-private", "meson-info"))),
        _r(GRADLE_FILES, Inside(("tmp", "classes", "libs", "intermediates", "outputs",
                                 "test-results", "kotlin"))),
        NODE_BUILD,
    ), "setuptools, CMake, Meson, Gradle, a package.json build script",
         "https://docs.gradle.org/current/userguide/directory_layout.html"),
    Kind("dist", ("dist",), (
        _r(PYTHON_BUILD, OnlyInside(("*.whl", "*.tar.gz", "*.zip", "*.egg", ".gitignore"),
                                    "wheels and source archives")),
        NODE_BUILD,
    ), "python -m build, uv build, a package.json build script",
         "https://packaging.python.org/en/latest/tutorials/packaging-projects/"),
    Kind("next", (".next",), (
        _r(Beside(("next.config.*",))), _r(Depends("next")),
    ), "Next.js (`next build`, `next dev`)",
         "https://nextjs.org/docs/app/api-reference/config/next-config-js/distDir",
         aliases=(".next",)),
    Kind("DerivedData", ("DerivedData",), (_r(Beside(("*.xcodeproj", "*.xcworkspace"))),),
         "Xcode (Derived Data location set to Relative, or xcodebuild -derivedDataPath)",
         "https://developer.apple.com/documentation/xcode/build-settings-reference",
         aliases=("deriveddata",)),
    Kind("swiftpm", (".build",), (_r(Beside(("Package.swift",))),), "Swift Package Manager",
         "https://www.swift.org/documentation/package-manager/"),
    Kind("dart_tool", (".dart_tool",), (_r(Beside(("pubspec.yaml",))),), "dart pub, flutter",
         "https://dart.dev/tools/pub/package-layout"),
    Kind("angular", (".angular",), (_r(Beside(("angular.json",))),), "Angular CLI (build cache)",
         "https://angular.dev/cli/cache"),
    Kind("svelte-kit", (".svelte-kit",), (_r(Beside(("svelte.config.*",))),), "SvelteKit",
         "https://svelte.dev/docs/kit/project-structure"),
    Kind("nuxt", (".nuxt", ".output"), (_r(Beside(("nuxt.config.*",))),), "Nuxt",
         "https://nuxt.com/docs/guide/directory-structure/nuxt"),
    Kind("turbo", (".turbo",), (_r(Beside(("turbo.json", "package.json"))),), "Turborepo",
         "https://turborepo.com/docs/crafting-your-repository/caching"),
    Kind("parcel", (".parcel-cache",), (_r(PACKAGE_JSON),), "Parcel",
         "https://parceljs.org/features/development/#caching"),
    Kind("zig", (".zig-cache", "zig-cache", "zig-out"), (_r(Beside(("build.zig",))),), "zig build",
         "https://ziglang.org/learn/build-system/"),
    Kind("mix", ("_build",), (_r(Beside(("mix.exs",))),), "Elixir Mix",
         "https://hexdocs.pm/mix/Mix.Tasks.Compile.html"),
    Kind("stack", (".stack-work",), (_r(Beside(("stack.yaml",))),), "Haskell Stack",
         "https://docs.haskellstack.org/en/stable/topics/stack_work/"),
    Kind("cabal", ("dist-newstyle",), (_r(Beside(("cabal.project", "*.cabal"))),), "Cabal",
         "https://cabal.readthedocs.io/en/stable/nix-local-build.html"),
    Kind("dotnet", ("bin", "obj"), (
        _r(DOTNET_PROJECT, Inside(("Debug", "Release", "project.assets.json"))),
    ), "dotnet build, MSBuild",
         "https://learn.microsoft.com/dotnet/core/tools/dotnet-build"),
)

BY_ID: dict[str, Kind] = {k.id: k for k in KINDS}
BY_FOLDER: dict[str, tuple[Kind, ...]] = {}
for _kind in KINDS:
    for _folder in _kind.folders:
        BY_FOLDER[_folder] = (*BY_FOLDER.get(_folder, ()), _kind)

# Names that make a folder a project of its own: the activity that dates an output is counted
# from there down (a `.git` makes it a repository, which wins; see `cachedoctor.sweep.finder`).
PROJECT_MARKERS: frozenset[str] = frozenset(
    name for kind in KINDS for recipe in kind.recipes for marker in recipe.markers
    if isinstance(marker, Beside) for name in marker.names if not _is_glob(name)
) | {"package.json", "tox.ini", "setup.cfg", "pyproject.toml"}

# Folders never searched (entered) for outputs, with why. Software is installed there, not
# built: a VS Code extension or a global npm package ships its own node_modules next to its
# package.json, and deleting that breaks it. A hidden folder (`.vscode`, `.nvm`, `.cache`,
# `.local`) holds tools and their data; the DIR given on the command line is searched whatever
# its own name.
NOT_SEARCHED: Mapping[str, str] = {
    ".*": "a hidden folder (tools and their data, not projects)",
    "node_modules": "installed packages (no package.json beside it)",
    "*.app": "an application bundle",
    "AppData": "application data (Windows)",
    "Library": "application data (macOS)",
}
_NOT_SEARCHED_PLAIN = frozenset(p for p in NOT_SEARCHED if not _is_glob(p))
_NOT_SEARCHED_SUFFIXES = tuple(p[1:] for p in NOT_SEARCHED if p.startswith("*") and not _is_glob(p[1:]))


def not_searched(name: str) -> bool:
    """Whether a folder of this name is never searched for outputs (see NOT_SEARCHED)."""
    return name[:1] == "." or name in _NOT_SEARCHED_PLAIN or name.endswith(_NOT_SEARCHED_SUFFIXES)


# Files that change without anyone working on the project (file managers write them).
NOT_ACTIVITY: frozenset[str] = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})


def parse_kinds(values: Iterable[str]) -> tuple[Kind, ...] | None:
    """`--kind node_modules,target` (repeatable, commas allowed) as kinds; None for every kind.
    A leading dot and case are ignored (`.venv`, `Target`)."""
    wanted: list[Kind] = []
    for value in values:
        for raw in value.split(","):
            text = raw.strip()
            if not text:
                continue
            kind = _lookup(text)
            if kind is None:
                known = ", ".join(k.id for k in KINDS)
                raise UserInputError(f"unknown output kind {text!r}; known: {known}")
            if kind not in wanted:
                wanted.append(kind)
    return tuple(wanted) or None


def _lookup(text: str) -> Kind | None:
    """The kind named by its id, an alias or a folder name; exact names before dotless ones
    (`.build` is Swift's, `build` the build folder)."""
    folded = text.lower()
    for strip in (False, True):
        for kind in KINDS:
            names = {n.lower() for n in (kind.id, *kind.aliases, *kind.folders)}
            if strip:
                names = {n.lstrip(".") for n in names}
            if (folded.lstrip(".") if strip else folded) in names:
                return kind
    return None
