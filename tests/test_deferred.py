"""The program defers the modules a library imports but a hot command does not use
(cli.deferred): each script runs in a process of its own, since the deferral is for the whole
process, and reads what `sys.modules` holds before and after a module is used."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX

PRELUDE = """\
import json, sys
from cachedoctor.cli import deferred

def state(name):
    module = sys.modules.get(name)
    if module is None:
        return "absent"
    return "deferred" if type(module) is deferred.DeferredModule else "loaded"
"""


def run(tmp_path: Path, body: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}:{os.getcwd()}", **env})


def test_msgspec_s_codecs_load_on_first_use_and_work_as_before(tmp_path: Path) -> None:
    done = run(tmp_path, """\
        deferred.install()
        import msgspec
        before = {name: state(name) for name in sorted(deferred.DEFERRED) if name.startswith("msgspec")}
        encoded = msgspec.json.encode({"a": [1, 2]})  # the first attribute read loads it
        from msgspec.yaml import decode  # a from-import of a still deferred one loads it too
        import msgspec.toml
        print(json.dumps({"before": before, "json": state("msgspec.json"),
                          "yaml": state("msgspec.yaml"), "toml": state("msgspec.toml"),
                          "inspect": state("msgspec.inspect"),
                          "round trip": msgspec.json.decode(encoded), "core": state("msgspec._core"),
                          "same": msgspec.json is sys.modules["msgspec.json"]}))
    """)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert set(seen["before"].values()) == {"deferred"}
    # `import msgspec.toml` reads the module's spec, which loads it: what the import promises
    assert (seen["json"], seen["yaml"], seen["toml"], seen["inspect"]) == (
        "loaded", "loaded", "loaded", "deferred")
    assert seen["round trip"] == {"a": [1, 2]}
    assert seen["core"] == "loaded" and seen["same"] is True


def test_only_the_named_modules_are_deferred_and_a_caller_that_embeds_us_defers_none(
        tmp_path: Path) -> None:
    done = run(tmp_path, """\
        import msgspec  # before install: the embedding caller's imports are untouched
        first = state("msgspec.json")
        deferred.install()
        deferred.install()  # once per process
        import textwrap, ipaddress
        print(json.dumps([first, state("textwrap"), state("ipaddress"),
                          sys.meta_path.count(deferred.DeferringFinder)]))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["loaded", "loaded", "deferred", 1]


def test_a_missing_module_fails_where_it_is_imported_as_before(tmp_path: Path) -> None:
    done = run(tmp_path, """\
        deferred.DEFERRED = frozenset({"no_such_module_here"})
        deferred.install()
        try:
            import no_such_module_here
        except ModuleNotFoundError as exc:
            print("not found:", exc.name)
    """)
    assert (done.stdout, done.returncode) == ("not found: no_such_module_here\n", 0), done.stderr


def test_an_error_in_a_deferred_module_surfaces_at_first_use(tmp_path: Path) -> None:
    (tmp_path / "breaks.py").write_text("raise ValueError('broken on load')\n")
    done = run(tmp_path, """\
        deferred.DEFERRED = frozenset({"breaks"})
        deferred.install()
        import breaks
        print("imported")
        try:
            breaks.anything
        except ValueError as exc:
            print("at first use:", exc)
    """)
    assert (done.stdout, done.returncode) == ("imported\nat first use: broken on load\n", 0), done.stderr


def test_threads_reading_a_deferred_module_at_once_wait_for_one_load(tmp_path: Path) -> None:
    """The standard library's LazyLoader before 3.12.3 let the second thread see an empty
    module (AttributeError in most of 20 runs of this on 3.10 to 3.12.1)."""
    (tmp_path / "slowload.py").write_text(textwrap.dedent("""\
        import time
        LOADS = []
        LOADS.append(1)
        time.sleep(0.05)  # every thread is waiting by now
        def value():
            return len(LOADS)
    """))
    done = run(tmp_path, """\
        import threading
        deferred.DEFERRED = frozenset({"slowload", "msgspec.msgpack"})
        deferred.install()
        import slowload, msgspec
        results, start = [], threading.Barrier(8)
        def read():
            start.wait()
            try:
                results.append((slowload.value(), msgspec.msgpack.decode(msgspec.msgpack.encode([1]))))
            except Exception as exc:
                results.append(repr(exc))
        threads = [threading.Thread(target=read) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps(results))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[1, [1]]] * 8


def test_a_load_that_failed_is_tried_again_by_the_next_import(tmp_path: Path) -> None:
    """As after any failed import; the standard library's LazyLoader kept the half-run module."""
    (tmp_path / "flaky.py").write_text(textwrap.dedent("""\
        import os
        if not os.environ.get("FIXED"):
            raise ValueError("not yet")
        value = 1
    """))
    (tmp_path / "package").mkdir()
    (tmp_path / "package" / "__init__.py").write_text("from . import flaky\n")
    (tmp_path / "package" / "flaky.py").write_text((tmp_path / "flaky.py").read_text())
    done = run(tmp_path, """\
        import os
        deferred.DEFERRED = frozenset({"flaky", "package.flaky"})
        deferred.install()
        import package
        for attempt in range(2):
            try:
                import flaky
                from package import flaky as inner  # the package's name for it: tried again too
                print(attempt, "value", flaky.value, inner.value)
            except ValueError as exc:
                try:
                    package.flaky.value
                except ValueError:
                    pass
                print(attempt, "failed:", exc, "kept:", "flaky" in sys.modules,
                      "package.flaky" in sys.modules, hasattr(package, "flaky"))
            os.environ["FIXED"] = "1"
    """)
    assert (done.stdout, done.returncode) == (
        "0 failed: not yet kept: False False False\n1 value 1 1\n", 0), done.stderr


def test_two_threads_each_loading_a_module_the_other_needs_do_not_wait_for_ever(
        tmp_path: Path) -> None:
    """A circular wait between threads: found by the import system's module locks, which the
    load holds, and answered as for any import (the module as far as it has got). A lock of the
    deferral's own hung here, Ctrl-C included."""
    (tmp_path / "first.py").write_text("import time\ntime.sleep(0.1)\nimport second\n"
                                       "seen = getattr(second, 'value', None)\nvalue = 1\n")
    (tmp_path / "second.py").write_text("import time\ntime.sleep(0.1)\nimport first\n"
                                        "seen = getattr(first, 'value', None)\nvalue = 2\n")
    done = run(tmp_path, """\
        import threading
        deferred.DEFERRED = frozenset({"first", "second"})
        deferred.install()
        import first, second
        start, results = threading.Barrier(2), []
        def read(module):
            start.wait()
            results.append(module.value)
        threads = [threading.Thread(target=read, args=(m,), daemon=True) for m in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        print(json.dumps([sorted(results), [t.is_alive() for t in threads]]))
    """)
    assert (json.loads(done.stdout), done.returncode) == ([[1, 2], [False, False]], 0), done.stderr


def test_writes_before_the_first_read_and_a_reload_load_the_module_first(tmp_path: Path) -> None:
    """An assignment or `del` is not overwritten by the load that follows; a reload runs the
    code at once, as it always does."""
    (tmp_path / "counted.py").write_text("import os\nos.environ['RUNS'] = str(int(os.environ.get('RUNS', 0)) + 1)\n"
                                         "value = 1\ngone = 2\n")
    done = run(tmp_path, """\
        import importlib, os
        deferred.DEFERRED = frozenset({"counted"})
        deferred.install()
        import counted
        counted.value = 10
        del counted.gone
        runs = os.environ["RUNS"]
        importlib.reload(counted)
        print(json.dumps([runs, os.environ["RUNS"], state("counted"), counted.value]))
    """)
    assert (json.loads(done.stdout), done.returncode) == (["1", "2", "loaded", 1], 0), done.stderr


def test_a_deferred_module_names_its_own_loader_and_keeps_its_state(tmp_path: Path) -> None:
    """What linecache, inspect and reload read: the module's real loader and source; and the
    loader's own state in the spec, before and after the load (a frozen module has one from
    3.11, which its loader reads)."""
    done = run(tmp_path, """\
        import inspect
        deferred.DEFERRED = frozenset({*deferred.DEFERRED, "__hello__"})
        deferred.install()
        import msgspec, __hello__
        before = type(object.__getattribute__(sys.modules["__hello__"], "__spec__").loader_state)
        loader = msgspec.json.__loader__
        print(type(loader).__name__, type(msgspec.json.__spec__.loader).__name__,
              "import" in inspect.getsource(msgspec.json), before.__name__,
              type(__hello__.__spec__.loader_state).__name__, __hello__.initialized)
    """)
    state = "NoneType" if sys.version_info < (3, 11) else "SimpleNamespace"
    assert done.returncode == 0, done.stderr  # (3.10's __hello__ prints a greeting as it loads)
    assert done.stdout.endswith(f"SourceFileLoader SourceFileLoader True {state} {state} True\n")


@pytest.mark.skipif(not IS_LINUX, reason="sends a real POSIX signal")
def test_ctrl_c_while_a_deferred_module_loads_is_raised_once_it_is_whole(tmp_path: Path) -> None:
    """The load runs inside an attribute read (importlib.util): the signal is held back there,
    as during any import (cli.interrupts), and the module is complete when it arrives."""
    (tmp_path / "sendsint.py").write_text(textwrap.dedent("""\
        import os, signal, time
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.02)
        done = True
    """))
    done = run(tmp_path, """\
        import time
        from cachedoctor.cli import interrupts
        deferred.DEFERRED = frozenset({"sendsint"})
        deferred.install()
        interrupts.install()
        import sendsint
        try:
            sendsint.done
            for _ in range(1000):
                time.sleep(0.001)
            print("never interrupted")
        except KeyboardInterrupt:
            print("interrupted, the module whole:", sys.modules["sendsint"].__dict__.get("done"))
    """)
    assert (done.stdout, done.stderr, done.returncode) == (
        "interrupted, the module whole: True\n", "", 0)


def test_the_program_defers_them_and_its_commands_still_answer(tmp_path: Path) -> None:
    """`run_program` is the program: a hot command leaves msgspec's unused codecs unloaded, one
    that writes JSON loads the JSON codec and answers, and `--version` loads neither msgspec
    nor the deferring finder."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("XDG_", "CACHEDOCTOR_"))}
    env.update(HOME=str(home), CACHEDOCTOR_NO_SHELL="1", PYTHONPATH=os.getcwd())
    report = tmp_path / "report.py"
    report.write_text(textwrap.dedent("""\
        import atexit, json, os, sys
        from cachedoctor.cli import run_program
        def report():
            states = {name: "deferred" if type(sys.modules.get(name)).__name__ == "DeferredModule"
                      else "loaded" if name in sys.modules else "absent"
                      for name in ("msgspec.inspect", "msgspec.json", "msgspec.msgpack",
                                   "cachedoctor.cli.deferred")}
            os.write(2, ("\\n" + json.dumps(states)).encode())
        atexit.register(report)
        sys.argv[0] = "cachedoctor"
        run_program()
    """))
    for args, json_state in ((["profiles", "list"], "deferred"), (["scan", "--json"], "loaded"),
                             (["--version"], "absent")):  # answered before anything is deferred
        done = subprocess.run([sys.executable, str(report), *args], capture_output=True,
                              text=True, timeout=120, env=env, cwd=tmp_path,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert done.returncode == 0, done.stderr
        others = "absent" if json_state == "absent" else "deferred"
        assert json.loads(done.stderr.splitlines()[-1]) == {
            "msgspec.inspect": others, "msgspec.json": json_state, "msgspec.msgpack": others,
            "cachedoctor.cli.deferred": "absent" if json_state == "absent" else "loaded"}
        if json_state == "loaded":
            envelope = json.loads(done.stdout)
            assert (envelope["schema"], envelope["ok"]) == ("cachedoctor.scan/1", True)
