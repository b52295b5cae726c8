"""The terminal rules (cachedoctor/cli/render.py) for every table the CLI prints, at 60, 80 and
120 columns, with a long home folder: no character of a path is dropped (paths are written
with `~` for home and fold), sizes are whole, piped output carries no trailing padding, the
biggest item comes first. Once more through a real terminal (tmux)."""

from __future__ import annotations

import io
import itertools
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from cachedoctor.cli.render import Column, number_column, path_column, print_table
from cachedoctor.sizes import format_size
from tests.conftest import result_of, run_cli
from tests.layouts import make_repo

WIDTHS = (60, 80, 120)


@pytest.fixture
def long_home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose path alone is longer than half an 80-column terminal, holding real caches:
    a Hugging Face hub (the biggest), pip's and npm's."""
    home = isolated_home / "home" / "ann-with-a-rather-long-user-name" / "and-a-deep" / "folder"
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_STATE_HOME", ".local/state"),
                     ("XDG_CACHE_HOME", ".cache"), ("XDG_DATA_HOME", ".local/share")):
        monkeypatch.setenv(var, str(home / sub))
    make_repo(home / ".cache" / "huggingface" / "hub", "openai-community/gpt2-with-a-long-name",
              {"a" * 40: {"model.safetensors": os.urandom(3_000_000)}}, {"main": "a" * 40})
    (home / ".cache" / "pip" / "http").mkdir(parents=True)
    (home / ".cache" / "pip" / "http" / "x").write_bytes(os.urandom(200_000))
    (home / ".npm" / "_cacache").mkdir(parents=True)
    (home / ".npm" / "_cacache" / "y").write_bytes(os.urandom(50_000))
    return home


def run_at(width: int, *args: str) -> str:
    os.environ["COLUMNS"] = str(width)
    try:
        proc = run_cli(*args)
    finally:
        del os.environ["COLUMNS"]
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


def short(path: str) -> str:
    home = os.environ["HOME"]
    return "~" + path[len(home):] if path.startswith(home + "/") else path


def check_rules(out: str, width: int, paths: list[str], sizes: list[str]) -> None:
    lines = out.splitlines()
    assert all(line == line.rstrip() for line in lines), [ln for ln in lines if ln != ln.rstrip()]
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    joined = re.sub(r"\s+", "", out)  # a folded path continues on the next line(s)
    for path in paths:
        assert short(path) in joined, (short(path), out)
    for text in sizes:
        assert re.search(rf"(^|\s){re.escape(text)}(\s|$)", out, re.M), (text, out)


def scan_truth() -> tuple[list[str], list[str]]:
    entries = result_of(run_cli("scan", "--json"))["entries"]
    assert [e["tool"] for e in entries][:1] == ["huggingface"]
    return [e["path"] for e in entries], [format_size(e["bytes"]) for e in entries]


@pytest.mark.parametrize("width", WIDTHS)
def test_scan_keeps_every_path_and_size(long_home: Path, width: int) -> None:
    paths, sizes = scan_truth()
    out = run_at(width, "scan")
    check_rules(out, width, paths, sizes)
    assert "~/" in out and str(long_home) not in out
    assert out.index("huggingface") < out.index("pip")  # biggest first


@pytest.mark.parametrize("width", WIDTHS)
def test_a_quota_does_not_push_the_path_out(long_home: Path, width: int) -> None:
    assert run_cli("quota", "huggingface", "10G", "--yes").returncode == 0
    paths, sizes = scan_truth()
    check_rules(run_at(width, "scan"), width, paths, sizes)
    quotas = result_of(run_cli("quota", "list", "--json"))["quotas"]
    out = run_at(width, "quota", "list")
    check_rules(out, width, [p for q in quotas for p in q["paths"]],
                [format_size(q["used_bytes"]) for q in quotas] + ["9.3 GiB"])


@pytest.mark.parametrize("width", WIDTHS)
def test_ls_where_clean_and_sweep_keep_paths_whole(long_home: Path, width: int) -> None:
    hub = str(long_home / ".cache" / "huggingface" / "hub")
    units = result_of(run_cli("ls", "huggingface", "--json"))
    out = run_at(width, "ls", "huggingface")
    check_rules(out, width, [hub], [])
    rows = out.splitlines()
    first = next(i for i, line in enumerate(rows) if line.startswith("model/"))
    folded = "".join(re.split(r"\s{2,}", line)[0] for line in rows[first:] if line and line[0] != " ")
    assert folded.startswith("model/openai-community/gpt2-with-a-long-name"), (units, out)
    assert "2.9 MiB" in out
    check_rules(run_at(width, "where", "huggingface", "pip"), width,
                [hub, str(long_home / ".cache" / "pip")], [])
    out = run_at(width, "clean", "pip", "npm", "--dry-run")
    check_rules(out, width, [str(long_home / ".cache" / "pip"), str(long_home / ".npm")], [])
    assert out.index("pip") < out.index("npm")  # biggest first
    project = long_home / "src" / "a-project-with-a-long-name"
    (project / "node_modules" / "dep").mkdir(parents=True)
    (project / "package.json").write_text("{}")
    (project / "node_modules" / "dep" / "index.js").write_bytes(os.urandom(20_000))
    check_rules(run_at(width, "sweep", str(project), "--dry-run"), width,
                [str(project / "node_modules")], [])


@pytest.mark.parametrize("width", WIDTHS)
def test_history_env_profiles_and_doctor_fit(long_home: Path, width: int) -> None:
    value = str(long_home / "elsewhere" / "hf-cache-on-another-disk")
    assert run_cli("env", "set", "HF_HOME", value, "--yes").returncode == 0
    check_rules(run_at(width, "env", "list"), width, [value], [])
    check_rules(run_at(width, "history"), width, [], [])
    check_rules(run_at(width, "profiles", "list"), width, [], [])
    check_rules(run_at(width, "doctor"), width, [], [])


@pytest.mark.parametrize("width", (30, 60, 80))
def test_print_table_never_cuts_a_path_or_a_number(width: int) -> None:
    path = "/srv/" + "/".join(f"folder-{i}" for i in range(12))
    columns = [Column("tool"), number_column("size"), Column("", "bar", drop=1), path_column()]
    stream = io.StringIO()
    console = Console(file=stream, width=width, color_system=None)
    print_table(console, columns, [["sentence-transformers", "123.4 GiB", "█" * 20, path],
                                   None, ["pip", "1.0 KiB", "·" * 20, "/x"]])
    out = stream.getvalue()
    assert all(len(line.rstrip()) <= width for line in out.splitlines()), out
    assert path in re.sub(r"\s+", "", out) and "123.4 GiB" in out and "sentence-transformers" in out


@pytest.mark.parametrize("width", range(4, 17))
def test_records_never_wrap_a_size_or_a_count(width: int) -> None:
    """Too narrow for a table (one record per block): `size: 88.0 KiB` that does not fit puts
    the size on a line of its own, whole, even wider than the terminal."""
    columns = [Column("tool"), number_column("size"), number_column("files"), path_column()]
    stream = io.StringIO()
    console = Console(file=stream, width=width, color_system=None)
    print_table(console, columns, [["pip", "88.0 KiB", "12,345", "/srv/a/b"]])
    out = stream.getvalue()
    lines = [line.strip() for line in out.splitlines()]
    for header, value in (("size", "88.0 KiB"), ("files", "12,345")):
        assert f"{header}: {value}" in lines or value in lines, lines  # whole, on one line
        assert f"{header}:" in re.sub(r"\s+", "", out)  # a header folds as text may


def test_scan_in_a_real_80_column_terminal(long_home: Path, tmp_path: Path) -> None:
    """tmux gives the CLI a real terminal (stdout is a tty, its width is asked of the tty)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it)")
    paths, sizes = scan_truth()
    socket, done = tmp_path / "tmux.sock", tmp_path / "done"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    command = (f"env -u COLUMNS -u LINES {sys.executable} -m cachedoctor scan; "
               f"touch {done}; sleep 60")
    tmux = ["tmux", "-S", str(socket), "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "40", command],
                   env={**env, "TERM": "xterm-256color"}, check=True, timeout=30)
    try:
        deadline = time.monotonic() + 120
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.exists(), "cachedoctor scan did not finish in the terminal"
        screen = subprocess.run([*tmux, "capture-pane", "-p", "-J"], capture_output=True,
                                text=True, check=True, env=env).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, env=env, check=False)
    check_rules("\n".join(line.rstrip() for line in screen.splitlines()), 80, paths, sizes)
    assert screen.index("huggingface") < screen.index("pip")


ALPHABET = ["a", "Z", "/", "-", " ", "é", "漢", "█", "·", "\n", "~", "\x1b", "\t", "\u2028",
            "\u0301", "\u200b", "\u200d", "\xa0", "\u3000", "\u0301 ", "\r", "\x85", "\ud800"]
HEADERS = ["id", "size", "", "a long header", "漢字", "[b]x", ":smile:", "a\nb"]


def random_table(rng: random.Random, alphabet: list[str] = ALPHABET
                 ) -> tuple[list[Column], list[list[str] | None]]:
    """Columns of every kind and rows of cells holding wide, combining, zero-width and control
    characters, newlines, tabs and line separators (of `alphabet`), with sections between."""
    kinds = ["text", "number", "path", "prose", "bar"]
    columns = [Column(rng.choice(HEADERS), rng.choice(kinds),  # type: ignore[arg-type]
                      rng.choice([0, 0, 1, 2])) for _ in range(rng.randint(1, 5))]
    rows: list[list[str] | None] = []
    for _ in range(rng.randint(0, 6)):
        rows.append(None if rng.random() < 0.15 else
                    ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
                     for _ in columns])
    return columns, rows


def test_a_pipe_gets_exactly_what_rich_prints_there(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """print_table(None, ...) into a pipe writes the table itself (no rich console, no rich
    table); rich, printing the same table through stdout_console's pipe stream, is the oracle."""
    from cachedoctor.cli import render
    from cachedoctor.cli.common import TrimmedLines, _console

    monkeypatch.delenv("COLUMNS", raising=False)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    rng = random.Random(14)
    for _ in range(300):
        columns, rows = random_table(rng)
        oracle = io.StringIO()
        with monkeypatch.context() as patch:  # rich's own table, not the layout of print_table
            patch.setattr(render, "_rich_widths", lambda *args, **kwargs: None)
            print_table(_console(highlight=False, soft_wrap=False, width=4096,
                                 file=TrimmedLines(oracle)), columns, rows)
        capsys.readouterr()
        print_table(None, columns, rows)
        assert capsys.readouterr().out == oracle.getvalue(), (columns, rows)


def test_a_table_laid_out_here_is_what_rich_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table that fits the console, whole or with its paths, prose (and ids) folded, is laid
    out by print_table itself (rich's table takes about 50 µs a cell); rich's own table, on the
    same console, is the oracle, byte for byte: at a colour terminal (the header's style),
    without colour, and into a pipe stream, over widths from 8 to 100 columns."""
    from cachedoctor.cli import render
    from cachedoctor.cli.common import TrimmedLines, _console, printable

    laid_out: list[bool] = []  # whether each table laid out here had a cell to wrap
    real = render._print_laid_out

    def counted(console: Console, columns: list[Column], shown: list[int],
                rows: list[list[str] | None], cells: list[int], *, fold_text: bool) -> None:
        laid_out.append(any(cells[k] < max((len(line) for r in rows if r is not None
                                            for line in r[i].split("\n")), default=0)
                            for k, i in enumerate(shown)))
        real(console, columns, shown, rows, cells, fold_text=fold_text)

    def rich_only(*args: object, **kwargs: object) -> None:
        return None

    rng = random.Random(15)
    words = [c for c in ALPHABET if c not in ("\t", "\u2028")] + ["a"] * 8
    for n in range(600):
        columns, rows = random_table(rng, ALPHABET if rng.random() < 0.2 else words)
        if n % 2:  # long cells: paths and prose to fold
            rows = [None if row is None else [cell * rng.randint(1, 6) for cell in row]
                    for row in rows]
        rows = [None if row is None else  # a path folds at its separators and spaces, not
                [re.sub("[\\s\u200d/\\\\]", "", printable(cell)) if c.kind == "path" else cell
                 for c, cell in zip(columns, row, strict=True)] for row in rows]  # as rich: below
        width = rng.randint(8, 100)
        for kind in ("colour", "plain", "pipe"):
            out = {}
            for name in ("mine", "rich"):
                stream = io.StringIO()
                options = dict(highlight=False, soft_wrap=False, width=width)
                console = (_console(**options, file=stream, force_terminal=True,
                                    color_system="truecolor") if kind == "colour" else
                           _console(**options, file=stream, force_terminal=True,
                                    color_system=None) if kind == "plain" else
                           _console(**options, file=TrimmedLines(stream)))
                with monkeypatch.context() as patch:
                    patch.setattr(render, "_print_laid_out", counted)
                    if name == "rich":
                        patch.setattr(render, "_rich_widths", rich_only)
                    print_table(console, columns, rows)
                out[name] = stream.getvalue()
            assert out["mine"] == out["rich"], (kind, width, columns, rows)
    assert len(laid_out) > 750 and sum(laid_out) > 300, (len(laid_out), sum(laid_out))


def test_a_lone_surrogate_is_shown_as_an_escape() -> None:
    """A Windows file name may hold a lone surrogate (NTFS names are UTF-16 units); POSIX's
    undecodable bytes arrive as U+DC80..U+DCFF. Both are shown, neither raises."""
    from cachedoctor.cli.common import printable

    assert printable("a\ud800b\udfffc") == "a\\ud800b\\udfffc"
    assert printable("x\udcffy\udc80") == "x\\xffy\\x80"
    assert printable("e\x1b[31m\u200b") == "e\\x1b[31m\u200b"


@pytest.mark.parametrize("width", (10, 13, 17, 21, 22, 23, 30, 45))
def test_a_path_folds_without_losing_a_space(width: int) -> None:
    """rich folds a cell at its words and drops the space at the fold (`Application Support`
    read as `Application` over `Support`); a path folds by characters, and a space that would
    end a line, unseen, starts the next one."""
    from cachedoctor.cli.common import _console
    from cachedoctor.cli.render import cell_width

    for path, colour in itertools.product(
            ("/Users/a b/Library/Application Support/Code/Cached Data/x  y",
             "/srv/Library/Cafe\u0301\xa0/data/cache"),  # a fold by characters, then NBSP
            (None, "truecolor")):
        stream = io.StringIO()
        console = _console(file=stream, width=width, force_terminal=True, color_system=colour,
                           highlight=False, soft_wrap=False)
        print_table(console, [path_column()], [[path]])
        lines = re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue()).splitlines()  # the header's bold
        assert all(cell_width(line) <= width for line in lines), lines
        shown = "".join(line.rstrip(" ") for line in lines)  # a table, or records (< 16 columns)
        assert shown in ("path" + path, "  path: " + path), lines


def test_fold_path_keeps_every_character_and_every_space_in_sight() -> None:
    """Over random paths of spaces, wide, combining and joining characters: the lines give the
    path back, each fits (a lone character wider than the column aside; rich measures a
    joiner one way when it chops and another when it pads), and none but a line of spaces
    only ends with a space, where a terminal would not show it."""
    from cachedoctor.cli.common import printable
    from cachedoctor.cli.render import cell_width, fold_path

    assert fold_path("中", 1) == ["中"] and fold_path("", 3) == [""]
    rng = random.Random(16)
    parts = ["a", "Z", "/", " ", "  ", "é", "e\u0301", "漢", "\u200d", "👨\u200d👩", "\xa0", "-"]
    for _ in range(3000):
        path = printable("".join(rng.choice(parts) for _ in range(rng.randint(0, 40))))
        width = rng.randint(1, 30)
        lines = fold_path(path, width)
        assert "".join(lines) == path, (path, width, lines)
        for k, line in enumerate(lines):
            if "\u200d" not in line:  # rich's cell_len and chop_cells disagree on joiners
                assert cell_width(line) <= width or len(line.rstrip("\u0301")) <= 1, \
                    (path, width, lines)
            if k < len(lines) - 1 and line.strip(" "):
                assert not line.endswith(" "), (path, width, lines)


def test_an_ascii_cell_wraps_as_rich_wraps_it() -> None:
    """`wrap_ascii`, the fold of a prose or id cell of printable ASCII, against rich's own
    `Text.wrap` (left, fold): words longer than a line, runs of spaces at either end, a cell
    of spaces only, every width from 1 to 30 (the wide-table test above meets it only where
    its random cells happen to be ASCII)."""
    from rich.text import Text

    from cachedoctor.cli.render import wrap_ascii

    console = Console(width=200)
    rng = random.Random(16)
    alphabet = ["a"] * 6 + [" "] * 3 + ["Z", "/", "-", "~", ",", "@"]
    cells = ["", " ", "   ", "a", "a b", " a", "a ", "model/org01/model-00151", "main, v1",
             "detached: 1 revision; broken: 2 dangling links"]
    cells += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
              for _ in range(4000)]
    for cell in cells:
        for width in range(1, 31):
            rich = [line.plain for line in Text(cell).wrap(console, width, justify="left",
                                                          overflow="fold")]
            assert wrap_ascii(cell, width) == rich, (cell, width)


def test_a_name_holding_an_emoji_code_is_shown_as_it_is() -> None:
    """rich replaces `:cd:` with a disc even with markup off: a cache folder named so would be
    shown as another name at a terminal (and as itself in a pipe). Every console the commands
    print through (`_console`) shows it as it is, in plain text and in markup alike."""
    from cachedoctor.cli.common import _console

    stream = io.StringIO()
    console = _console(file=stream, force_terminal=True, width=80, highlight=False)
    console.print("/tmp/:cd:/x :smile:", markup=False, highlight=False)
    console.print("[bold]/tmp/:cd:/y[/bold]")
    shown = stream.getvalue()
    assert shown.count(":cd:") == 2 and ":smile:" in shown and "\U0001f4bf" not in shown
