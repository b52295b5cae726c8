"""The Tab answered without typer (`cli.quickcomplete`) against typer's own answer, the oracle:
for every command that completes a tool or a location, in bash, zsh, fish and PowerShell,
after flags, options with values, `--profiles-dir` and tools already given. Lines outside what
it reads for sure are left to typer (None), and a warm Tab imports no typer at all."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from cachedoctor.cli import quickcomplete

SHELLS = ("bash", "zsh", "fish", "powershell")


def request(shell: str, words: list[str], incomplete: str,
            action: str = "get-args") -> dict[str, str]:
    """The environment the shell's completion script gives `cachedoctor` for this line."""
    line = " ".join(["cachedoctor", *words, incomplete])
    env = {"_CACHEDOCTOR_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        env.update(COMP_WORDS=line, COMP_CWORD=str(len(words) + 1))
    else:
        env["_TYPER_COMPLETE_ARGS"] = line
        if shell == "powershell":
            env["_TYPER_COMPLETE_WORD_TO_COMPLETE"] = incomplete
        if shell == "fish":
            env["_TYPER_COMPLETE_FISH_ACTION"] = action
    return env


def printed(answered: tuple[str | None, int] | None) -> tuple[str, int] | None:
    """What `cachedoctor` writes and its exit code, from `quickcomplete.answer`."""
    if answered is None:
        return None
    text, code = answered
    return ("" if text is None else text + "\n"), code


def typer_answer(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                 env: dict[str, str]) -> tuple[str, int]:
    from cachedoctor.cli.app import run

    with monkeypatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            run([])
    return capsys.readouterr().out, int(done.value.code or 0)


@pytest.fixture
def spec() -> quickcomplete.Spec:
    from cachedoctor.cli.app import build_command
    from cachedoctor.cli.spec import stamp

    quickcomplete.write_spec(build_command(None), stamp())
    found = quickcomplete.read_spec()
    assert found is not None
    return found


def lines(spec: quickcomplete.Spec) -> Iterator[tuple[list[str], str]]:
    """(words before the cursor, the word being typed) for every tool and location slot."""
    for path, (options, arguments, _subs, completers, _params) in sorted(spec.items()):
        flag = next((o for o, (_, value, main) in options.items() if not value and main
                     and o.startswith("--") and o != "--help"), None)
        valued = next((o for o, (name, value, main) in options.items() if value and main
                       and completers.get(name) is None), None)
        before = [[], ["--profiles-dir", "/nowhere"]]
        after = [[], *([[flag]] if flag else []), *([[valued, "x"]] if valued else []),
                 *([[f"{valued}=x"]] if valued else [])]
        words = path.split()
        tools = [name for name, _ in arguments if completers.get(name) == "tools"]
        if tools:
            for lead in before:
                for extra in after:
                    for typed in ("", "OL", "hf", "zz"):  # none, a prefix, an alias, nothing
                        yield [*lead, *words, *extra], typed
            if dict(arguments)[tools[0]] == -1:
                yield [*words, "ollama"], ""
                yield [*words, "ollama", *after[-1]], "hu"
        if any(kind == "locations" for kind in completers.values()):
            for tool in ("ollama", "hf", "nothing-such"):
                for typed in ("", "m", "U"):
                    yield [*words, tool, "--location"], typed
                    yield [*words, *after[-1], tool, "--location"], typed
                yield [*words, "-", tool, "--location"], ""  # "-" is a word, not an option
            yield [*words, "--location"], ""


def test_every_tool_and_location_answer_is_typers(
        spec: quickcomplete.Spec, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    seen = 0
    every = (*((s, "get-args") for s in SHELLS), ("fish", "is-args"), ("fish", ""))
    for index, (words, typed) in enumerate(lines(spec)):
        for shell, action in every if index % 4 == 0 else every[index % 4:index % 4 + 1]:
            env = request(shell, words, typed, action)
            quick = printed(quickcomplete.answer({**os.environ, **env}))
            assert quick is not None, (shell, words, typed)
            assert quick == typer_answer(monkeypatch, capsys, env), (shell, action, words, typed)
            seen += 1
    assert seen > 400


@pytest.mark.parametrize(("words", "typed"), [
    ([], "sc"),  # a command name: typer lists them with their help
    (["scan"], "--j"),  # an option name
    (["scan"], "-"),
    (["scan", "--"], "hu"),
    (["quota", "ollama"], ""),  # the `quota TOOL SIZE` shorthand: typer resolves it
    (["scan", "--bogus"], "hu"),
    (["move", "ollama"], ""),  # DEST: a path, no completer
    (["move", "ollama", "/d"], ""),  # past the arguments
    (["scan", "--path"], ""),  # another option's value
    (["ls"], "--location=m"),
    (["env"], ""),  # a group's subcommands
])
def test_what_it_cannot_read_for_sure_is_left_to_typer(
        spec: quickcomplete.Spec, words: list[str], typed: str) -> None:
    for shell in SHELLS:
        assert quickcomplete.answer({**os.environ, **request(shell, words, typed)}) is None


def test_no_spec_or_an_old_one_is_left_to_typer(spec: quickcomplete.Spec) -> None:
    env = {**os.environ, **request("bash", ["scan"], "ol")}
    assert quickcomplete.answer(env) == ("ollama", 0)
    assert quickcomplete.answer({**env, "COMP_CWORD": "-1"}) is None
    path = quickcomplete.spec_path()
    import marshal

    stamp, found = marshal.loads(path.read_bytes())
    path.write_bytes(marshal.dumps(((*stamp[:-1], "another typer"), found)))
    assert quickcomplete.answer(env) is None
    for foreign in ({"format": 9}, (1, 2, 3, 4, 10**100), "text"):  # another install's format
        path.write_bytes(marshal.dumps((foreign, found)))
        assert quickcomplete.answer(env) is None and not quickcomplete.spec_is_current()
    path.write_bytes(b"\x00garbage")
    assert quickcomplete.answer(env) is None
    path.unlink()
    assert quickcomplete.answer(env) is None
    assert quickcomplete.answer({**env, "_CACHEDOCTOR_COMPLETE": "source_bash"}) is None


def test_the_first_tab_writes_the_spec_and_the_next_imports_no_typer() -> None:
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('\\n' + ' '.join(sorted(sys.modules))))\n"
            "sys.argv = ['cachedoctor']\nfrom cachedoctor.cli import main\nmain()\n")
    env = {**os.environ, **request("bash", ["move"], "oll")}

    def tab() -> set[str]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=120)
        assert out.returncode == 0 and out.stdout == "ollama\n", out.stderr
        return set(out.stderr.splitlines()[-1].split())

    assert not quickcomplete.spec_path().exists()
    assert "typer" in tab()  # typer answers, and the spec is written for the next Tab
    assert quickcomplete.spec_path().exists()
    warm = tab()
    assert "typer" not in warm and "msgspec" not in warm and "yaml" not in warm


@pytest.mark.skipif(sys.platform == "win32", reason="closes a descriptor before exec (POSIX)")
def test_a_tab_with_stdout_closed_says_nothing_and_succeeds(spec: quickcomplete.Spec) -> None:
    out = subprocess.run([sys.executable, "-m", "cachedoctor"], capture_output=False,
                         stderr=subprocess.PIPE, text=True, timeout=120,
                         env={**os.environ, **request("bash", ["scan"], "ol")},
                         preexec_fn=lambda: os.close(1))
    assert out.returncode == 0 and out.stderr == ""
