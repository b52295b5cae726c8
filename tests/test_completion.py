"""Shell completion, run through the shells themselves: bash calls the function the script from
`--show-completion` defines, fish answers `complete -C`, zsh loads the script into its completion
system; the answers are commands, options, tool ids (TOOL) and the named tool's location ids
(`--location`). Installing writes into the (test's) home only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NO_DETECTION = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}  # typer: name the shell


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`cachedoctor` on PATH, as the shells' scripts call it by name."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "cachedoctor"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cachedoctor "$@"\n')
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return program


def sh(argv: list[str], **env: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def bash_complete(*words: str) -> list[str]:
    """What bash offers for the line `words` (the last one being typed), through the function
    the shown script defines, in a non-interactive bash."""
    line = " ".join(f"'{w}'" for w in words)
    script = ("source <(cachedoctor --show-completion bash)\n"
              f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
              "_cachedoctor_completion cachedoctor\n"
              "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    return sh(["bash", "--norc", "--noprofile", "-c", script], **NO_DETECTION).split()


def test_bash_completes_commands_options_tools_and_locations(on_path: Path) -> None:
    assert {"scan", "schedule"} <= set(bash_complete("cachedoctor", "sc"))
    assert "--one-file-system" in bash_complete("cachedoctor", "scan", "--")
    assert bash_complete("cachedoctor", "move", "hugg") == ["huggingface"]
    assert "pip" not in bash_complete("cachedoctor", "scan", "pip", "p")  # given already
    assert {"pnpm", "poetry"} <= set(bash_complete("cachedoctor", "scan", "pip", "p"))
    assert bash_complete("cachedoctor", "move", "huggingface", "/x", "--location", "") == [
        "hub", "xet", "assets", "datasets"]
    assert bash_complete("cachedoctor", "ls", "HF", "--location", "d") == ["datasets"]
    assert "models" in bash_complete("cachedoctor", "quota", "ollama", "--location", "")


def test_bash_detects_the_shell_it_runs_in(on_path: Path) -> None:
    out = sh(["bash", "--norc", "--noprofile", "-c", "cachedoctor --show-completion; true"])
    assert "_cachedoctor_completion()" in out and "complete -o default -F" in out


def test_fish_answers_with_the_tools_and_locations(on_path: Path) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (.ci/run installs it)")

    def fish(line: str) -> list[str]:
        script = f"cachedoctor --show-completion fish | source; complete -C '{line}'"
        out = sh(["fish", "--no-config", "-c", script], **NO_DETECTION)
        return [row.split("\t")[0] for row in out.splitlines()]

    assert "huggingface" in fish("cachedoctor move hugg")
    assert {"hub", "xet"} <= set(fish("cachedoctor ls huggingface --location "))
    assert "scan" in fish("cachedoctor sc")


def test_zsh_loads_the_script_and_answers_by_its_protocol(on_path: Path) -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (.ci/run installs it)")
    script = ("autoload -Uz compinit && compinit -u -D\n"
              "source <(cachedoctor --show-completion zsh)\n"
              "print -r -- $_comps[cachedoctor]\n")
    assert sh(["zsh", "-f", "-c", script], **NO_DETECTION).strip() == "_cachedoctor_completion"
    # what the function runs at each Tab: typer's zsh protocol
    out = sh(["cachedoctor"], _CACHEDOCTOR_COMPLETE="complete_zsh",
             _TYPER_COMPLETE_ARGS="cachedoctor move huggingface /x --location ")
    assert all(f'"{loc}"' in out for loc in ("hub", "xet", "assets", "datasets")), out
    out = sh(["cachedoctor"], _CACHEDOCTOR_COMPLETE="complete_zsh",
             _TYPER_COMPLETE_ARGS="cachedoctor tune oll")
    assert '"ollama"' in out, out


def test_powershell_completes_tools() -> None:
    pwsh = shutil.which("pwsh")
    if pwsh is None:
        pytest.skip("PowerShell (pwsh) is not installed here; its protocol is typer's, as for the others")
    out = sh([sys.executable, "-m", "cachedoctor"], _CACHEDOCTOR_COMPLETE="complete_powershell",
             _TYPER_COMPLETE_ARGS="cachedoctor move hugg", _TYPER_COMPLETE_WORD_TO_COMPLETE="hugg")
    assert "huggingface" in out


@pytest.mark.parametrize(("shell", "written"), [
    ("bash", [".bashrc", ".bash_completions/cachedoctor.sh"]),
    ("zsh", [".zshrc", ".zfunc/_cachedoctor"]),
    ("fish", [".config/fish/completions/cachedoctor.fish"]),
])
def test_install_completion_writes_into_home_only(isolated_home: Path, tmp_path: Path,
                                                  shell: str, written: list[str]) -> None:
    before = {p for p in tmp_path.rglob("*")}
    out = sh([sys.executable, "-m", "cachedoctor", "--install-completion", shell], **NO_DETECTION)
    assert f"{shell} completion installed in {isolated_home}" in out
    made = sorted(str(p.relative_to(isolated_home)) for p in isolated_home.rglob("*") if p.is_file())
    assert made == sorted(written)
    assert {p for p in tmp_path.rglob("*")} == before  # nothing beside the home


def test_completing_imports_nothing_that_draws_nor_the_model_nor_other_commands(on_path: Path) -> None:
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('\\n' + ' '.join(sorted(sys.modules))))\n"
            "sys.argv = ['cachedoctor']\nfrom cachedoctor.cli import main\nmain()\n")

    def imported(line: str, answer: list[str]) -> set[str]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "_CACHEDOCTOR_COMPLETE": "complete_bash",
                                               "COMP_WORDS": line, "COMP_CWORD": "2"})
        assert out.stdout.split() == answer, out.stderr
        return set(out.stderr.splitlines()[-1].split())

    tool = ("cachedoctor move hugg", ["huggingface"])
    cold, warm = imported(*tool), imported(*tool)  # the first run writes the index and the spec
    option = imported("cachedoctor move --verif", ["--verify"])  # typer's part: option names
    for modules in (cold, warm, option):
        assert not any(name == "rich" or name.startswith("rich.") for name in modules)
    assert "msgspec" in cold and "msgspec" not in warm and "yaml" not in warm
    assert not {"pickle", "_pickle"} & warm  # the index's names part is marshal's
    assert "typer" not in warm and not any(m.startswith("cachedoctor.cli.") and m not in (
        "cachedoctor.cli.completion", "cachedoctor.cli.quickcomplete", "cachedoctor.cli.spec")
        for m in warm)
    assert "msgspec" not in option  # and typer builds only the command the line names
    assert {"cachedoctor.cli.move", "cachedoctor.cli.scan"} & option == {"cachedoctor.cli.move"}


def test_completion_names_come_from_the_index_and_follow_every_change(tmp_path: Path) -> None:
    from cachedoctor.profiles.loader import load_names, load_profiles, names_of
    from tests.test_profile_index import aged
    from tests.test_profiles_loader import GOOD, write

    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD))
    full = {i: names_of(lp.profile) for i, lp in load_profiles([extra]).profiles.items()}
    assert load_names([extra]) == full and "demo" in full
    aged(write(extra, "demo.yaml", GOOD.replace("id: demo", "id: demx", 1)), 30)  # same size
    assert "demx" in load_names([extra]) and "demo" not in load_names([extra])
    write(extra, "demo.yaml", "id: [")  # invalid, and fresh: not recorded, loaded every time
    assert "demx" not in load_names([extra]) and "pip" in load_names([extra])
