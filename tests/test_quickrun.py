"""The hot commands run without typer (`cli.quickrun`) against typer's own run, the oracle: on
every line built from each hot command's parameters — flags, `--no-` forms, options with values
given both ways and repeated, arguments, `--profiles-dir`, in any order — the quick run calls the
command's body with exactly the values typer passes, after the same global step; what it does
not read for sure is left to typer. For real runs, each line prints the same on both paths, and
a run after the first imports no typer."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cachedoctor.cli import quickrun
from cachedoctor.cli import spec as specs

Call = list[tuple[Any, ...]]


@pytest.fixture
def spec() -> specs.Spec:
    """The spec of the whole CLI, kept as the first typer run of each hot command keeps it."""
    from cachedoctor.cli.app import build_command

    command = build_command(None)
    for word in quickrun.HOT_WORDS:
        quickrun.remember(command, [word], specs.stamp())
    return specs.derive(command)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Call:
    """What reaches the global step and the bodies, whichever path called them, and whether
    the run prints an envelope."""
    seen: Call = []
    for path, target in quickrun.HOT.items():
        module, _, name = target.partition(":")

        def body(_path: str = path, **values: Any) -> int:
            from cachedoctor.cli import output  # and what the envelope will say

            seen.append(("body", _path, values, output.SESSION.command, output.SESSION.json))
            return 0

        monkeypatch.setattr(f"{module}.{name}", body)
    monkeypatch.setattr("cachedoctor.cli.common.start_command",
                        lambda name, dirs: seen.append(("start", name, list(dirs))))
    return seen


def by_typer(args: list[str], calls: Call) -> tuple[int, Call]:
    from cachedoctor.cli.app import run

    calls.clear()
    code = run(list(args))
    return code, list(calls)


def quickly(args: list[str], calls: Call) -> tuple[int, Call] | None:
    calls.clear()
    code = quickrun.attempt(list(args))
    return None if code is None else (code, list(calls))


def pieces(entry: specs.Entry) -> tuple[list[str], list[list[str]]]:
    """Words a line of a command needs (its required argument), and words for each of its other
    parameters, each a valid piece of a line."""
    options, arguments, _subs, _completers, params = entry
    needed: list[str] = []
    out: list[list[str]] = []
    for option, (name, takes_value, primary) in sorted(options.items()):
        if not takes_value:
            out.append([option])
            continue
        if not primary:
            continue
        kind = params[name][0]
        value = {"path": "some/dir/", "int": "3"}.get(kind, "ai")
        out += [[option, value], [f"{option}={value}"], [option, value, option, "7"]]
        if kind == "int":
            out += [[option, " 12 "], [option, "+5"], [option, "1_000"]]  # what int() takes
        else:
            out += [[option, "-looks-like-an-option"], [option, "--json"],
                    [option, "first", option, "second"]]
            if option.startswith("--"):
                out.append([f"{option}="])
    for _name, nargs in arguments:
        if nargs == 1:
            needed.append("ollama")
        else:
            out += [["ollama"], ["ollama", "hf"], ["-"], [""]]
    return needed, out


def lines(spec: specs.Spec) -> Iterator[list[str]]:
    rng = random.Random(14)
    leads = [[], ["--profiles-dir", "/p1"], ["--profiles-dir=/p1", "--profiles-dir", "/p2"]]
    for path in sorted(quickrun.HOT):
        words = path.split()
        needed, available = pieces(spec[path])
        for lead in leads:
            yield [*lead, *words, *needed]
            for piece in available:
                yield [*lead, *words, *needed, *piece]
                yield [*lead, *words, *piece, *needed]
        for _ in range(150):
            chosen = rng.sample(available, rng.randint(1, min(5, len(available))))
            rest = [*needed, *(w for piece in chosen for w in piece)]
            at = rng.randint(0, len(chosen)) if needed else 0  # the argument among the options
            flat = [w for piece in chosen[:at] for w in piece] + needed + [
                w for piece in chosen[at:] for w in piece] if needed else rest
            # the command's words first, then its options and arguments in any order
            yield [*rng.choice(leads), *words, *flat]


def test_every_hot_line_calls_the_body_with_typers_values(spec: specs.Spec,
                                                          calls: Call) -> None:
    seen = 0
    for args in lines(spec):
        expected = by_typer(args, calls)
        assert expected[1], args  # the line is valid: typer reached the body
        assert quickly(args, calls) == expected, args
        seen += 1
    assert seen > 500


@pytest.mark.parametrize("args", [
    ["scan", "--help"], ["scan", "-h"], ["--help", "scan"], ["scan", "--"], ["scan", "--", "x"],
    ["scan", "--bogus"], ["scan", "--json=yes"], ["scan", "-xy"], ["scan", "--path"],
    ["--version", "scan"], ["-V", "scan"], ["--show-completion", "scan"],
    ["--profiles-dir"], ["profiles"], ["profiles", "show", "ollama"], ["profiles", "lst"],
    ["profiles", "list", "extra"], ["doctor", "--workspace"], ["scn"], [],
    ["ls"], ["ls", "ollama", "hf"], ["ls", "ollama", "--limit", "0"], ["ls", "ollama", "--limit", "x"],
    ["ls", "ollama", "--limit", "1.5"], ["ls", "ollama", "--limit"], ["move", "ollama", "/d"],
])
def test_what_it_cannot_read_for_sure_is_left_to_typer(spec: specs.Spec, calls: Call,
                                                       args: list[str]) -> None:
    assert quickly(args, calls) is None


@pytest.mark.skipif(not hasattr(os, "setreuid") or os.geteuid() != 0,
                    reason="needs root, to run as another user for whom a folder is shut")
def test_a_workspace_click_refuses_is_left_to_typer(spec: specs.Spec) -> None:
    """click's Path is `readable`: a folder that exists but cannot be read is a usage error,
    which typer reports; the quick run leaves that line to it."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        top.chmod(0o755)
        (top / "shut").mkdir(mode=0)
        # click and the quick run ask os.access, which answers for the real user: 65534 here,
        # while the effective root still reads the interpreter's files
        code = ("import os, sys\nos.setreuid(65534, 0)\nfrom cachedoctor.cli import quickrun\n"
                "from cachedoctor.cli.app import run\n"
                f"print(quickrun._convert('path', {str(top / 'shut')!r}), "
                f"quickrun._convert('path', {str(top)!r}))\n"
                f"print(run(['doctor', '--workspace', {str(top / 'shut')!r}]))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, cwd=top)
        assert out.stdout.split() == ["None", str(top), "2"], out.stderr
        assert "is not readable" in out.stderr
    finally:
        shutil.rmtree(top)


def test_a_stale_or_missing_spec_is_left_to_typer(spec: specs.Spec, calls: Call) -> None:
    import marshal

    assert quickly(["scan"], calls) is not None
    path = quickrun.spec_path()
    code, kept = marshal.loads(path.read_bytes())
    path.write_bytes(marshal.dumps(((*code[:-1], "another typer"), kept)))
    assert quickly(["scan"], calls) is None
    path.write_bytes(marshal.dumps((code, {"scan": "not a spec"})))
    assert quickly(["scan"], calls) is None
    path.write_bytes(b"\x00garbage")
    assert quickly(["scan"], calls) is None
    path.unlink()
    assert quickly(["scan"], calls) is None


# ------------------------------------------------------------------------------ real runs

_MODULES = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules))))\n"
            "sys.argv = ['cachedoctor', *sys.argv[1:]]\nfrom cachedoctor.cli import main\nmain()\n")


def real_run(args: list[str]) -> tuple[int, str, str, bool]:
    """(exit code, stdout, stderr, whether typer was imported) of a real run."""
    out = subprocess.run([sys.executable, "-c", _MODULES, *args], capture_output=True,
                         text=True, timeout=300, env=os.environ.copy())
    err, _, modules = out.stderr.rpartition("\nMODULES ")
    return out.returncode, steady(out.stdout), err, "typer" in modules.split()


def steady(stdout: str) -> Any:
    """The output without what other programs change between two runs: how full the drives
    are (the JSON's `free_bytes` and `used_bytes`, the rows of the drive table) and which
    processes run (`running`, `processes`; `name (pid)` in a table, whose spacing follows)."""
    import json
    import re

    def without(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: without(v) for k, v in value.items()
                    if k not in ("free_bytes", "used_bytes", "running", "processes")}
        return [without(v) for v in value] if isinstance(value, list) else value

    try:
        return without(json.loads(stdout))
    except ValueError:
        lines, kept, in_drives = stdout.splitlines(), [], False
        for line in lines:
            in_drives = line.startswith("drive ") or (in_drives and line != "")
            if not in_drives or line.startswith("drive "):
                line = re.sub(r"[\w.-]+ \(\d+\)(?:, [\w.-]+ \(\d+\))*", "-", line)
                kept.append(re.sub(r" {2,}", "  ", line))
        return kept


@pytest.fixture
def machine(isolated_home: Path) -> dict[str, Path]:
    """A home with a few caches, and an extra profile folder holding a broken profile."""
    from tests.conftest import user_cache_root

    cache = user_cache_root(isolated_home)
    for folder, size in (("pip/http", 5000), ("huggingface/hub/models--a--b/blobs", 70000),
                         ("npm-not-this", 10)):
        (cache / folder).mkdir(parents=True)
        (cache / folder / "f").write_bytes(b"x" * size)
    (isolated_home / ".npm" / "_cacache").mkdir(parents=True)
    extra = isolated_home / "extra-profiles"
    extra.mkdir()
    (extra / "broken.yaml").write_text("id: broken\nname: [unclosed\n")
    return {"home": isolated_home, "cache": cache, "extra": extra}


def test_each_hot_line_prints_the_same_as_typer_and_imports_no_typer(
        machine: dict[str, Path]) -> None:
    extra, cache = str(machine["extra"]), machine["cache"]
    for args in (["scan"], ["scan", "--json"], ["scan", "pip", "huggingface", "--json"],
                 ["scan", "--path", str(cache / "pip"), "-x"], ["scan", "nothing-such"],
                 ["scan", "--category", "bogus", "--json"], ["scan", "--no-unclaimed"],
                 ["doctor"], ["doctor", "--json"], ["doctor", "pip", "--workspace", str(cache)],
                 ["profiles", "list"], ["profiles", "list", "--json", "--category", "ai"],
                 ["--profiles-dir", extra, "profiles", "list"],
                 ["--profiles-dir", extra, "scan", "--json"],
                 ["scan", "--category", "--json"],  # `--json` the value: not asked for
                 ["--profiles-dir", "--json", "doctor", "pip"],
                 ["ls", "pip"], ["ls", "huggingface", "--json", "--limit", "1"],
                 ["ls", "pip", "--sort", "bogus"]):
        quickrun.spec_path().unlink(missing_ok=True)
        *typer_run, typer_imported = real_run(args)
        *quick_run, quick_imported = real_run(args)
        assert typer_imported and not quick_imported, args
        assert quick_run == typer_run, args


@pytest.mark.skipif(sys.platform == "win32", reason="a pipe closed before the run (POSIX)")
def test_a_reader_gone_ends_both_paths_alike(machine: dict[str, Path]) -> None:
    """`| head` that has read enough: no traceback, typer's exit code 1, on either path."""
    results = []
    for _ in range(2):  # the first run writes the spec, the second runs without typer
        read, write = os.pipe()
        os.close(read)
        try:
            out = subprocess.run([sys.executable, "-c", _MODULES, "profiles", "list"],
                                 stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
        finally:
            os.close(write)
        err, _, modules = out.stderr.rpartition("\nMODULES ")
        results.append((out.returncode, err, "typer" in modules.split()))
    assert results == [(1, "", True), (1, "", False)]


def test_a_state_folder_it_cannot_look_into_costs_only_speed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "exists", refused)
    assert not specs.can_write(quickrun.spec_path())
    assert quickrun.spec_to_keep(["scan"]) is None


def test_a_typer_whose_file_cannot_be_told_keeps_no_spec(machine: dict[str, Path],
                                                         tmp_path: Path) -> None:
    """typer imported from a zip: its file has no size or time to stamp a spec with, so every
    run is typer's, and none fails."""
    import shutil

    import typer

    archive = shutil.make_archive(str(tmp_path / "typer"), "zip",
                                  Path(typer.__file__).parent.parent, "typer")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [archive, str(Path(__file__).resolve().parents[1])])}
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _MODULES, "profiles", "list"],
                             capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0 and "ollama" in out.stdout, out.stderr
        assert "typer" in out.stderr.rpartition("\nMODULES ")[2].split()
    assert not quickrun.spec_path().exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_spec_that_is_no_file_of_its_own_is_not_read(machine: dict[str, Path]) -> None:
    """A FIFO or a link to /dev/zero where the spec should be: neither blocks nor floods the
    run, which goes to typer (that writes a real spec in its place)."""
    path = quickrun.spec_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for make in (os.mkfifo, lambda p: os.symlink("/dev/zero", p)):
        path.unlink(missing_ok=True)
        make(path)
        code, stdout, _err, imported = real_run(["profiles", "list"])
        assert code == 0 and imported and stdout
    assert path.is_file() and not path.is_symlink()


def test_only_a_regular_file_of_this_users_own_is_opened(tmp_path: Path) -> None:
    from cachedoctor.fsutil import open_own

    mine = tmp_path / "mine"
    mine.write_bytes(b"spec")
    opened = open_own(mine)
    assert opened is not None
    with opened:
        assert opened.read() == b"spec"
    mine.chmod(0o666)
    assert open_own(mine) is None  # others could have written it
    mine.chmod(0o600)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        assert open_own(tmp_path / "fifo") is None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(mine, 65534, 65534)
        assert open_own(mine) is None
    with pytest.raises(FileNotFoundError):
        open_own(tmp_path / "missing")
