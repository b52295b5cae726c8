"""Tool and location ids as people type them: any case, aliases, and a suggestion for a typo
(an unknown name is a clear error, exit 2)."""

from __future__ import annotations

import pytest

from cachedoctor.errors import UserInputError
from cachedoctor.names import closest
from cachedoctor.profiles.loader import load_profiles
from tests.conftest import envelope_of, run_cli


@pytest.fixture(scope="module")
def profiles():  # type: ignore[no-untyped-def]
    return load_profiles([])


@pytest.mark.parametrize(("typed", "meant"), [
    ("huggingface", "huggingface"), ("HuggingFace", "huggingface"), ("HF", "huggingface"),
    ("hf", "huggingface"), ("code", "vscode"), ("VSCode", "vscode"), ("pytorch", "torch"),
    ("brew", "homebrew"), ("pip3", "pip"),
])
def test_ids_in_any_case_and_aliases_name_their_profile(profiles, typed: str, meant: str) -> None:  # type: ignore[no-untyped-def]
    assert profiles.get(typed).id == meant


@pytest.mark.parametrize(("typed", "meant"), [
    ("hugginface", "huggingface"), ("hugingface", "huggingface"), ("vscod", "vscode"),
    ("olama", "ollama"), ("Pipp", "pip"), ("homebrw", "homebrew"),
])
def test_a_typo_is_answered_with_the_profile_meant(profiles, typed: str, meant: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserInputError) as caught:
        profiles.get(typed)
    assert caught.value.message == f"unknown tool {typed!r}; did you mean {meant!r}?"


def test_nothing_close_suggests_nothing(profiles) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserInputError) as caught:
        profiles.get("zzzzqqq")
    assert caught.value.message == "unknown tool 'zzzzqqq'" and "profiles list" in str(caught.value)
    assert closest("zzzzqqq", ["huggingface"]) is None


def test_every_alias_is_unique_and_no_alias_is_another_profiles_id(profiles) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, str] = {}
    for tool_id, loaded in profiles.profiles.items():
        for alias in loaded.profile.aliases:
            assert alias not in profiles.profiles, (tool_id, alias)
            assert seen.setdefault(alias, tool_id) == tool_id, (alias, seen[alias], tool_id)


def test_the_cli_says_did_you_mean_and_exits_2() -> None:
    proc = run_cli("where", "hugginface")
    assert proc.returncode == 2
    assert "unknown tool 'hugginface'; did you mean 'huggingface'?" in proc.stderr
    assert "Traceback" not in proc.stderr
    doc = envelope_of(run_cli("scan", "hugginface", "--json").stdout)
    assert doc["errors"][0]["message"] == "unknown tool 'hugginface'; did you mean 'huggingface'?"
    ok = run_cli("where", "HF", "--json")
    assert ok.returncode in (0, 1), ok.stderr
    assert {row["tool"] for row in envelope_of(ok.stdout)["result"]["locations"]} == {"huggingface"}


def test_location_ids_any_case_and_a_suggestion(profiles) -> None:  # type: ignore[no-untyped-def]
    hf = profiles.get("hf")
    assert hf.require_location("HUB").id == "hub"
    with pytest.raises(UserInputError) as caught:
        hf.require_location("hubb")
    assert caught.value.message.startswith("huggingface has no location 'hubb'; did you mean 'hub'?")
    proc = run_cli("move", "huggingface", "/tmp/x", "--location", "hubb", "--dry-run")
    assert proc.returncode == 2 and "did you mean 'hub'?" in proc.stderr
    listed = run_cli("ls", "hf", "--location", "Hub", "--json")
    assert listed.returncode in (0, 2), listed.stderr
    assert "has no location" not in listed.stderr
