"""A systemd service's environment, read as systemd reads it: unit files, drop-ins and
environment files below a sandbox system root, checked against systemd itself where it can
run offline (`systemd --test` dumps the units it loaded; the environment.d generator parses
environment files with the same code as EnvironmentFile=)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachedoctor.locate.files import LiveFiles
from cachedoctor.locate.services import env_file_assignments, unit_environment

SYSTEMD = "/usr/lib/systemd/systemd"
GENERATOR = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"
ORACLE_DIRS = ("etc/systemd/system", "run/systemd/system", "usr/lib/systemd/system")


@pytest.fixture
def root() -> Iterator[Path]:
    """A system root systemd (run as nobody when we are root) can read: not below pytest's
    private temp folder."""
    path = Path(tempfile.mkdtemp(prefix="cd-sysroot-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def systemd_says(root: Path, units: list[str]) -> dict[str, dict[str, str]]:
    """unit -> Environment= as `systemd --test --system` loads it from the root's unit folders."""
    if not Path(SYSTEMD).exists():
        pytest.skip("needs systemd (apt install systemd)")
    for target in ("default", "sysinit", "basic"):
        write(root, f"usr/lib/systemd/system/{target}.target", "[Unit]\nDescription=x\n")
    write(root, "usr/lib/systemd/system/all.target", "[Unit]\nWants=" + " ".join(units) + "\n")
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.chmod(os.path.join(dirpath, name), 0o755)
    env = {"HOME": "/root", "PATH": "/usr/bin:/bin",
           "SYSTEMD_UNIT_PATH": ":".join(str(root / d) for d in ORACLE_DIRS)}
    argv = [SYSTEMD, "--test", "--system", "--unit=all.target", "--no-pager"]
    if os.geteuid() == 0:  # "Don't run test mode as root."
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv to run systemd --test as nobody")
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60).stdout
    found: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in out.splitlines():
        if line.startswith("\t-> Unit "):
            name = line[len("\t-> Unit "):].rstrip(":")
            current = found.setdefault(name, {}) if name in units else None
        elif current is not None and line.startswith("\t\tEnvironment: "):
            key, _, value = line[len("\t\tEnvironment: "):].partition("=")
            current[key] = value
    if not found:
        pytest.skip(f"systemd --test did not run here: {out[-300:]}")
    return found


UNITS = {
    "quoting.service": (
        '[Service]\nExecStart=/bin/true\n'
        'Environment="A=b c" D=%h F=%% E=\\x41x G=\\101 H=\'s q\' I="x"y\n'
        'Environment=U=a"b c"d V=e\'f\' W="q\\"uo" XQ=\'a\\x41\' Y=\\x25h ZQ=\\u00e9\\s\\t|\n'
        'Environment=J=1 K=a\\ b L=3\n'            # a bad escape drops the rest of the line
        'Environment="M=one\\\n# a comment inside\n  two" N=x\\\\\n'
        'Environment=O=%Z P=%u:%U:%t:%S:%C:%L:%E:%T:%V:%n:%N:%p:%i\n'
        'Environment=BAD%=1 2X=1 Q\n'
        '  Environment=R=indented\nenvironment=S=lower\n[Install]\nEnvironment=T=install\n'
        '[Service]\nEnvironment="AA=x" "\n'
    ),
    "reset.service": "[Service]\nExecStart=/bin/true\nEnvironment=A=1 B=2\nEnvironment=\nEnvironment=C=3\n",
    "a-b-c.service": "[Service]\nExecStart=/bin/true\nEnvironment=BASE=1 X=unit\n",
    "tmpl@one.service": None,  # from the template
}
DROPINS = {
    # one file name, several folders: the unit's own folders (folder by folder, the unit's
    # name before its dash prefixes), then the type's service.d
    "usr/lib/systemd/system/a-b-c.service.d/50-x.conf": "X=usr-own",
    "etc/systemd/system/service.d/50-x.conf": "X=etc-type",
    "etc/systemd/system/a-.service.d/60-y.conf": "Y=etc-prefix",
    "run/systemd/system/a-b-c.service.d/60-y.conf": "Y=run-own",
    "etc/systemd/system/a-b-c.service.d/10-p.conf": "P=etc-own",
    "etc/systemd/system/a-b-.service.d/10-p.conf": "P=etc-prefix",
    "usr/lib/systemd/system/service.d/05-t.conf": "T=usr-type T2=usr-type",
    "etc/systemd/system/a-b-c.service.d/06-t.conf": "T=etc-own-06",
    "etc/systemd/system/service.d/99-late.conf": "Z=type-late",
    "usr/lib/systemd/system/tmpl@one.service.d/10.conf": "Q=usr-instance",
    "etc/systemd/system/tmpl@.service.d/10.conf": "Q=etc-template",
    "etc/systemd/system/tmpl@one.service.d/20.conf": "R=etc-instance",
    "usr/lib/systemd/system/tmpl@.service.d/20.conf": "R=usr-template",
}


def test_environment_lines_and_drop_ins_read_as_systemd_loads_them(root: Path,
                                                                   monkeypatch) -> None:
    for name, text in UNITS.items():
        if text is not None:
            write(root, f"usr/lib/systemd/system/{name}", text)
    write(root, "usr/lib/systemd/system/tmpl@.service",
          "[Service]\nExecStart=/bin/true\nEnvironment=M=template-main I=%i\n")
    for rel, assignment in DROPINS.items():
        write(root, rel, f"[Service]\nEnvironment={assignment}\n")
    expected = systemd_says(root, list(UNITS))
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    for unit in UNITS:
        env = unit_environment(unit, LiveFiles())
        assert {k: v for k, (v, _) in env.values.items()} == expected[unit], unit
    quoting = unit_environment("quoting.service", LiveFiles())
    assert quoting.values["A"] == ("b c", "/usr/lib/systemd/system/quoting.service:3")
    assert any("unknown specifier %Z" in p for p in quoting.problems)
    assert any("K=a\\ b" in p or "unknown escape" in p for p in quoting.problems)


ENV_FILE = (
    "# comment\n; other comment\nA=plain\nB = spaced  \nC=\"dq \\\" \\\\ \\a x\"\n"
    "D='sq \\n x'\nE=cont\\\nnued\nnoeq\nF=  lead and trail  \nG=a#b\nH=\"multi\nline\"\n"
    "export I=1\n1BAD=x\nJ=un\\quoted\\\\\nK=in'ner\"quotes\nL='a'\"b\"c\nM=\r\nN=crlf\r\n"
    "O=x # not a comment\n   P=indented\n"
)


def test_environment_files_read_as_systemd_parses_them(tmp_path: Path) -> None:
    got = {name: value for name, value, _ in env_file_assignments(ENV_FILE)}
    if not Path(GENERATOR).exists():
        pytest.skip("needs systemd's environment.d generator")
    write(tmp_path, "environment.d/50-test.conf", ENV_FILE)
    lines = subprocess.run([GENERATOR], capture_output=True, text=True, timeout=60, check=True,
                           env={"XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}).stdout
    said: dict[str, str] = {}
    for line in lines.splitlines():  # shell-quoted KEY=VALUE lines (a line break as \n)
        name = line.split("=", 1)[0]
        if name in "ABCDEFGHIJKLMNOP" and name != "H":
            said[name] = subprocess.run(["sh", "-c", f'{line}; printf %s "${name}"'],
                                        capture_output=True, text=True).stdout
    assert 'H="multi\\nline"' in lines and got.pop("H") == "multi\nline"
    # the generator drops an empty value (environment.d unsets it), EnvironmentFile= keeps it
    assert got.pop("M") == "" and "M" not in said
    assert got == said and "I" not in got


def test_environment_files_win_and_everything_else_systemd_does(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "usr/lib/systemd/system/demo.service",
          "[Service]\nEnvironment=A=1 B=2 K=keep\nEnvironmentFile=-/etc/default/demo\n"
          "EnvironmentFile=-/etc/default/absent\nEnvironmentFile=/etc/demo.d/*.env\n"
          "UnsetEnvironment=K=other U\n")
    write(root, "etc/default/demo", "# comment\nB='from file'\nU=gone\n")
    write(root, "etc/demo.d/1.env", "C=one\n")
    write(root, "etc/demo.d/2.env", "C=two\n")
    write(root, "etc/systemd/system/demo.service.d/override.conf",
          "[Service]\nEnvironment=A=%h/x\nEnvironment=H=%H\nEnvironmentFile=%E/default/demo-%i\n")
    env = unit_environment("demo.service", LiveFiles(root=str(root)))
    assert {k: v for k, (v, _) in env.values.items()} == {
        "A": "/root/x", "B": "from file", "K": "keep", "C": "two", "H": "%H"}
    assert env.values["B"][1] == "/etc/default/demo:2"
    assert env.values["A"][1] == "/etc/systemd/system/demo.service.d/override.conf:2"
    assert any("%H is left" in p for p in env.problems)
    assert any("/etc/default/demo- does not exist" in p for p in env.problems)
    # masked (linked to /dev/null) or empty: systemd will not start it
    masked = root / "etc/systemd/system/demo.service"
    masked.symlink_to("/dev/null")
    assert unit_environment("demo.service", LiveFiles(root=str(root))).file is None
    assert unit_environment("absent.service", LiveFiles(root=str(root))).file is None
