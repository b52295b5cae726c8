"""The seams are registries: every name a profile or an option can carry has one registered
strategy, and no `if name == "..."` chain picks one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cachedoctor.profiles.base import PathsPerOs
from cachedoctor.profiles.loader import load_profiles
from cachedoctor.profiles.model import Location
from cachedoctor.profiles.schema import profile_schema
from cachedoctor.relocate.methods import ENTRIES, METHODS, NAMES, RelocationMethod, method_of
from tests.conftest import run_cli

PACKAGE = Path(__file__).resolve().parent.parent / "cachedoctor"


def _sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))]


def test_every_relocation_method_of_the_profile_format_has_a_strategy() -> None:
    schema = profile_schema()
    tags = {d["properties"]["method"]["enum"][0] for name, d in schema["$defs"].items()
            if name.endswith("Relocation")}
    assert tags == set(NAMES) == set(METHODS)
    for name, strategy in METHODS.items():
        assert isinstance(strategy, RelocationMethod) and strategy.name == name
        assert strategy.entry.__struct_config__.tag == name
    assert {e.__name__ for e in ENTRIES} == {f"{n.capitalize()}Relocation" for n in NAMES}


def test_every_method_a_shipped_profile_names_is_registered() -> None:
    used = {r.method for lp in load_profiles().profiles.values() for loc in lp.profile.locations
            for r in loc.relocate}
    assert used and used <= set(METHODS)
    for name in used:
        assert method_of(name) is METHODS[name]


def test_the_method_option_names_the_registered_methods() -> None:
    proc = run_cli("move", "pip", "/tmp/nowhere", "--method", "carrier-pigeon", "--dry-run")
    assert proc.returncode == 2
    assert ", ".join(NAMES) in proc.stderr


def test_an_unknown_method_in_a_journal_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="unknown relocation method 'teleport'"):
        method_of("teleport")


def test_the_fallback_method_is_offered_unless_the_profile_forbids_it() -> None:
    from cachedoctor.host import Host
    from cachedoctor.relocate.plan import relocation_methods

    host = Host(os="linux")
    paths = PathsPerOs(linux=["~/.cache/x"])
    free = Location(id="cache", kind="cache", paths=paths, safe_to_delete=True)
    assert [r.method for r in relocation_methods(free, host)] == [
        n for n, m in METHODS.items() if m.fallback]
    locked = Location(id="cache", kind="cache", paths=paths, safe_to_delete=True,
                      link_forbidden="the tool resolves links")
    assert relocation_methods(locked, host) == []


def test_no_method_name_chain_is_left() -> None:
    names = "|".join(NAMES)
    chain = re.compile(rf"""method\s*(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)\s*\w*method""")
    found = [f"{p.relative_to(PACKAGE)}:{n}" for p, text in _sources()
             for n, line in enumerate(text.splitlines(), 1) if chain.search(line)]
    assert found == []


def test_every_backend_the_cli_accepts_is_registered() -> None:
    from cachedoctor import schedule
    from cachedoctor.cli.schedule import BackendOption

    option = BackendOption.__metadata__[0]
    named = set(re.findall(r"[a-z]+", option.help.replace(" or ", ", "))) - {"auto"}
    assert named == set(schedule.BACKENDS) == set(schedule.REGISTRY)
    for name, backend in schedule.REGISTRY.items():
        assert backend.name == name and backend.preference
    proc = run_cli("schedule", "install", "--backend", "at", "--dry-run")
    assert proc.returncode == 2 and ", ".join(schedule.BACKENDS) in proc.stderr


def test_auto_picks_from_the_registry_in_each_systems_order() -> None:
    from cachedoctor.host import Host
    from cachedoctor.schedule import backends_for

    assert backends_for(Host(os="linux")) == ("systemd", "cron")
    assert backends_for(Host(os="wsl")) == ("schtasks", "systemd", "cron")
    assert backends_for(Host(os="macos")) == ("launchd", "cron")
    assert backends_for(Host(os="windows")) == ("schtasks",)


def test_no_backend_name_chain_is_left() -> None:
    from cachedoctor import schedule

    names = "|".join(schedule.BACKENDS)
    chain = re.compile(rf"""(backend|name)\s*(==|!=)\s*["']({names})["']""")
    found = [f"{p.relative_to(PACKAGE)}:{n}" for p, text in _sources()
             for n, line in enumerate(text.splitlines(), 1) if chain.search(line)]
    assert found == []
