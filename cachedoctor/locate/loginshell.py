"""The environment a new session really gets, asked of the user's login shell.

Reading start-up files cannot know what a shell does with them (`if`s, functions, files it
sources, what /etc/profile.d adds), so the login shell itself (`login_shell`: the passwd
entry, or `$SHELL`; one of `shellenv.SHELLS`) is run the way a new terminal runs it, `SHELL -l -i -c`,
and prints its environment between two random markers (what start-up files echo around
them is ignored). It starts from what a login starts with (HOME, USER, LOGNAME, SHELL, PATH,
TERM=dumb, LANG, and on Linux /etc/environment and environment.d), never from this
process's variables; stdin is /dev/null, it has no terminal (a new session: nothing can
take the caller's terminal over) and `TIMEOUT` seconds, after which its whole process group
is killed. Editors do the same to learn a login environment (VS Code's "resolving shell
environment").

The answer is kept in cachedoctor's state folder under a key made of the shell, its
starting environment and the size, time and inode of every start-up file the shell reads
(the files `shellenv` reads, the files they source, the system-wide ones), so asking again
costs a few `stat`s until one of them changes. Variables whose names look like credentials
(`shellenv.is_secret`) are never kept. `CACHEDOCTOR_NO_SHELL=1` turns this off: the start-up
files are then only read (`shellenv`), as they also are when the shell cannot be run.
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from cachedoctor import statefile as sf
from cachedoctor.errors import OperationFailed
from cachedoctor.host import Host, current_os_name
from cachedoctor.locate import shellenv
from cachedoctor.locate.files import FileView
from cachedoctor.locate.world import EnvValue

try:  # hashlib's own BLAKE2, without the OpenSSL start-up `import hashlib` costs (3 ms a run)
    from _blake2 import blake2b
except ImportError:  # an interpreter without CPython's module
    from hashlib import blake2b

DISABLE_ENV = "CACHEDOCTOR_NO_SHELL"
TIMEOUT = 3.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # systemd's
CACHE_NAME = "login-env.json"
_CACHE_VERSION = 1
_MAX_OUTPUT = 4 << 20
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "A__z"})  # the shell's own (A__z: ksh93)
# Prints os.environb NUL-separated between the markers (argv[1]); -I -S: no site, no PYTHON*.
_PROBE = ("import os,sys;m=sys.argv[1].encode();sys.stdout.buffer.write(m+b'\\0'+b'\\0'.join("
          "k+b'='+v for k,v in os.environb.items())+b'\\0'+m)")
_memo: dict[str, dict[str, str]] = {}


class Asked(msgspec.Struct, frozen=True):
    """What the login shell said: its environment, or why there is none."""

    shell: str  # the shell's path
    env: dict[str, str] | None
    problem: str | None = None
    cached: bool = False
    seconds: float = 0.0


def login_shell(host: Host) -> str | None:
    """The shell a new login of this user starts: the passwd entry of the user whose home this
    is (cron and systemd put SHELL=/bin/sh in a job's environment, and `chsh` takes effect
    at the next login, not in $SHELL), else `$SHELL`, else this user's passwd entry."""
    entry = passwd_entry() if host.os == current_os_name() else None
    if entry is not None and entry[0] and os.path.normpath(entry[1]) == os.path.normpath(host.home):
        return entry[0]
    return host.getenv("SHELL") or (entry[0] if entry is not None and entry[0] else None)


def passwd_entry() -> tuple[str, str] | None:
    """(shell, home) of this process's user."""
    if sys.platform == "win32":
        return None
    import pwd

    try:
        found = pwd.getpwuid(os.getuid())
    except KeyError:
        return None
    return found.pw_shell, found.pw_dir


def shell_name(path: str | None) -> str | None:
    """The `shellenv.SHELLS` name of a shell path (`/usr/bin/zsh` -> zsh), None if unknown."""
    if not path:
        return None
    name = os.path.basename(path).lstrip("-")
    return name if name in shellenv.SHELLS else None


def session_of(host: Host) -> shellenv.Session:
    """The session a new login of this user starts (for `shellenv.load`)."""
    config_home = host.getenv("XDG_CONFIG_HOME") or ""
    if not config_home.startswith("/"):
        config_home = f"{host.home}/.config"
    shell = login_shell(host)
    user = host.getenv("USER") or host.getenv("LOGNAME") or _user_name()
    base = {"HOME": host.home, "USER": user, "LOGNAME": user, "PATH": DEFAULT_PATH,
            "TERM": "dumb", "SHELL": shell or ""}
    lang = host.getenv("LANG")
    if lang:
        base["LANG"] = lang
    return shellenv.Session(shell_name(shell), host.home, config_home, host.os,
                            {k: v for k, v in base.items() if v})


def _someone_elses(home: str) -> bool:
    """A home folder of another user (`sudo cachedoctor` with HOME kept): running its
    start-up files would run that user's code as this one."""
    try:
        return os.stat(home).st_uid != os.geteuid()
    except (OSError, AttributeError):
        return False


def _user_name() -> str:
    if sys.platform == "win32":
        return ""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return ""


def new_session(host: Host, files: FileView) -> tuple[dict[str, EnvValue], list[str]]:
    """name -> value and origin of what a new session's environment has beyond the login
    basics, and the problems met (the shell could not be run)."""
    session = session_of(host)
    startup = shellenv.load(session, files)
    problems: list[str] = []
    asked: Asked | None = None
    if (host.getenv(DISABLE_ENV) or "0") != "0":
        pass  # reading the files only, as asked
    elif session.shell is None:
        shell = login_shell(host)
        if shell and os.path.basename(shell).lstrip("-") not in ("nologin", "false"):
            problems.append(f"your login shell {shell} is not one cachedoctor runs ("
                            f"{', '.join(sorted(shellenv.SHELLS))}); the start-up files were "
                            "read instead")
    elif _someone_elses(host.home):
        problems.append(f"{host.home} belongs to another user: their start-up files are read, "
                        "not run (as this user)")
    else:
        asked = ask(login_shell(host) or "", startup)
        if asked.env is None:
            problems.append(f"could not run your login shell: {asked.problem}; the start-up "
                            "files were read instead")
    if asked is None or asked.env is None:
        return ({name: EnvValue(item.value, item.origin, item.managed)
                 for name, item in startup.final().items() if item.value is not None},
                problems)
    label = f"your login shell ({session.shell} -l)"
    table: dict[str, EnvValue] = {}
    for name, value in asked.env.items():
        found = shellenv.origin_of(name, value, startup)
        if name in _SHELL_OWN or (found is None and session.start_env.get(name) == value):
            continue  # what the login started with, not what the start-up files set
        table[name] = (EnvValue(value, found.origin, found.managed) if found is not None
                       else EnvValue(value, label))
    return table, problems


def ask(shell: str, startup: shellenv.StartUp, *, timeout: float | None = None) -> Asked:
    """The login shell's environment (from the cache while its files are unchanged)."""
    env = dict(startup.session_env)
    key = _key(shell, env, startup.watched)
    if key in _memo:
        return Asked(shell, dict(_memo[key]), cached=True)
    cached = _read_cache(key)
    if cached is not None:
        _memo[key] = cached
        return Asked(shell, dict(cached), cached=True)
    began = time.monotonic()
    found, problem = run(shell, env, timeout=timeout)
    took = time.monotonic() - began
    if found is None:
        return Asked(shell, None, problem, seconds=took)
    kept = {k: v for k, v in found.items() if not shellenv.is_secret(k)}
    _memo[key] = kept
    _write_cache(key, shell, kept)
    return Asked(shell, dict(kept), seconds=took)


def run(shell: str, env: dict[str, str], *, timeout: float | None = None
        ) -> tuple[dict[str, str] | None, str | None]:
    """Run `shell -l -i -c` in a new session from `env`; (its environment, None) or
    (None, why not)."""
    timeout = TIMEOUT if timeout is None else timeout
    name = shell_name(shell)
    if name is None:
        return None, f"{shell} is not a shell cachedoctor knows"
    if not sys.executable:
        return None, "no Python interpreter to print the environment with"
    import secrets  # these (and shlex below) only when the shell is asked, not for a cached answer
    import subprocess
    import tempfile

    marker = secrets.token_hex(16)
    if shellenv.SHELLS[name].syntax == "fish":
        from cachedoctor.envvars.posix import fish_quote

        command = f"exec {fish_quote(sys.executable)} -I -S -c {fish_quote(_PROBE)} {marker}"
    else:
        import shlex

        command = f"exec {shlex.quote(sys.executable)} -I -S -c {shlex.quote(_PROBE)} {marker}"
    home = env.get("HOME", "/")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([shell, "-l", "-i", "-c", command], stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, env=env, start_new_session=True,
                                    cwd=home if os.path.isdir(home) else "/")
        except (OSError, ValueError) as exc:
            return None, f"{shell}: {getattr(exc, 'strerror', None) or exc}"
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, f"{name} -l gave no answer within {timeout:g} s"
        _signal_group(proc.pid, signal.SIGHUP)  # what its start-up files left running
        out.seek(0)
        data = out.read(_MAX_OUTPUT)
        err.seek(0)
        detail = err.read(_MAX_OUTPUT).decode("utf-8", "replace").strip().splitlines()
    found = _between(data, marker.encode())
    if found is None:
        why = f"{name} -l ended (status {proc.returncode}) without printing its environment"
        return None, why + (f": {detail[-1][:200]}" if detail else "")
    return found, None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _between(data: bytes, marker: bytes) -> dict[str, str] | None:
    start = data.rfind(marker + b"\0")
    end = data.rfind(b"\0" + marker)
    if start < 0 or end < start:
        return None
    env: dict[str, str] = {}
    body = data[start + len(marker) + 1:end]
    for item in body.split(b"\0") if body else []:
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


# --------------------------------------------------------------------------- cache


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _key(shell: str, env: dict[str, str], watched: list[str]) -> str:
    import json  # only where the login shell's environment is read (not CACHEDOCTOR_NO_SHELL)

    paths: list[str] = []
    for pattern in watched:
        paths += sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
    state = [_CACHE_VERSION, shell, _stat(shell), sorted(env.items()),
             [(path, _stat(path)) for path in dict.fromkeys(paths)]]
    return blake2b(json.dumps(state).encode("utf-8", "surrogateescape"), digest_size=32).hexdigest()


def cache_file() -> str:
    from cachedoctor.state import state_dir

    return str(state_dir() / CACHE_NAME)


class _Cached(msgspec.Struct, frozen=True):
    key: str  # what the answer depends on (`_key`)
    shell: str
    env: dict[str, str]


def _parse_cached(doc: dict[str, Any]) -> _Cached:
    return _Cached(sf.field(doc, "key", sf.text), sf.field(doc, "shell", sf.text),
                   sf.field(doc, "env", sf.map_of(sf.text)))


CACHE = sf.JsonKind[_Cached](
    CACHE_NAME, "cache of the login shell's environment", 1, parse=_parse_cached,
    dump=lambda cached: {"key": cached.key, "shell": cached.shell, "env": cached.env},
    migrations=(lambda doc: doc,),  # 0: the same object without "format"
    indent=None,
)


def _read_cache(key: str) -> dict[str, str] | None:
    """The cached answer for `key`; a damaged cache (or one from a newer cachedoctor) is only a
    cache: the shell is asked again and the file rewritten."""
    try:
        cached = CACHE.read(Path(cache_file()))
    except (sf.StateFileDamaged, OSError, OperationFailed):
        return None
    return dict(cached.env) if cached is not None and cached.key == key else None


def _write_cache(key: str, shell: str, env: dict[str, str]) -> None:
    """Best effort: a state folder that cannot be written only means asking again."""
    path = cache_file()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        CACHE.write(Path(path), _Cached(key, shell, env), mode=0o600)
    except (OSError, ValueError):
        pass
