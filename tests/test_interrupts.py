"""Ctrl-C, SIGTERM and SIGHUP land where cachedoctor can say so (cli.interrupts): each script
sends a real signal to its own process at the exact spot where Python's own handling swallows or
garbles it, with and without cachedoctor's handling installed, so each test shows both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="sends real POSIX signals")

PRELUDE = """\
import os, signal, sys, time
from cachedoctor.cli import interrupts
if sys.argv[1] == "installed":
    interrupts.install()

def wait_for_the_signal():
    for _ in range(1000):
        time.sleep(0.001)
    print("never interrupted")
"""

# A module whose class body sends Ctrl-C from __set_name__, in the middle of its import: 3.11
# wraps the exception in RuntimeError, 3.12 passes it on with the import half done.
SLOW_MODULE = """\
import os, signal, time

class Sends:
    def __set_name__(self, owner, name):
        for _ in range(int(os.environ.get("PRESSES", "1"))):
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.02)

class Built:
    field = Sends()

done = True
"""


def run_script(tmp_path: Path, body: str, mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": f"{tmp_path}:{os.getcwd()}",
                                                         **env},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


# The interrupt may land anywhere after the import: whether the import was whole is read from
# sys.modules (a failed import leaves no module there).
IMPORT = """\
try:
    import slowmod
    wait_for_the_signal()
except KeyboardInterrupt:
    print("interrupted, the import whole:", getattr(sys.modules.get("slowmod"), "done", False))
except BaseException as exc:
    print("broken:", type(exc).__name__)
"""


def test_ctrl_c_during_an_import_is_raised_once_the_import_is_whole(tmp_path: Path) -> None:
    done = run_script(tmp_path, IMPORT, "installed")
    assert (done.stdout, done.stderr, done.returncode) == (
        "interrupted, the import whole: True\n", "", 0)
    plain = run_script(tmp_path, IMPORT, "plain")  # Python's own handling breaks the import
    assert plain.stdout in ("broken: RuntimeError\n", "interrupted, the import whole: False\n")


def test_without_pthread_kill_as_on_windows_the_held_ctrl_c_is_simulated_instead(
        tmp_path: Path) -> None:
    """Windows has no `signal.pthread_kill` ("Availability: Unix", Python docs); the held
    signal is then re-sent by `_thread.interrupt_main(signum)`, which "simulates the effect of
    the signal arriving in the main thread" (Python docs, 3.10+): the same import, that way."""
    body = "del signal.pthread_kill\n" + IMPORT
    done = run_script(tmp_path, body, "installed")
    assert (done.stdout, done.stderr) == ("interrupted, the import whole: True\n", "")


def test_ctrl_c_twice_during_an_import_interrupts_once_after_it(tmp_path: Path) -> None:
    body = IMPORT + "time.sleep(0.1)\nprint('not interrupted again')\n"
    done = run_script(tmp_path, body, "installed", PRESSES="2")
    assert (done.stdout, done.stderr) == (
        "interrupted, the import whole: True\nnot interrupted again\n", "")


HANGING_IMPORT = """\
import threading
start = time.monotonic()
open("hangs.py", "w").write(
    "import os, signal, threading, time\\n"
    "os.kill(os.getpid(), signal.SIGINT)\\n"
    "threading.Timer(float(os.environ['AGAIN_AFTER']), os.kill, (os.getpid(), signal.SIGINT)).start()\\n"
    "time.sleep(30)\\n")
try:
    import hangs
    print("imported")
except KeyboardInterrupt:
    print("interrupted", time.monotonic() - start < 10)
"""


def test_ctrl_c_again_after_a_second_of_a_hanging_import_is_obeyed_at_once(tmp_path: Path) -> None:
    done = run_script(tmp_path, HANGING_IMPORT, "installed", AGAIN_AFTER="1.2")
    assert (done.stdout, done.stderr) == ("interrupted True\n", "")


FINALISER = """\
class Finalised:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        self.after = True

finalised = []
try:
    thing = Finalised()
    del thing
    finalised.append(True)  # (the signal may come back before or after this line)
    wait_for_the_signal()
except KeyboardInterrupt:
    print("interrupted")
"""


def test_ctrl_c_that_reaches_a_finaliser_is_sent_again_not_printed_and_lost(tmp_path: Path) -> None:
    done = run_script(tmp_path, FINALISER, "installed")
    assert (done.stdout, done.stderr) == ("interrupted\n", "")
    plain = run_script(tmp_path, FINALISER, "plain")
    assert "Exception ignored" in plain.stderr and "never interrupted" in plain.stdout


def test_a_signal_the_parent_ignores_stays_ignored(tmp_path: Path) -> None:
    """`nohup cachedoctor move ...`: closing the terminal must not stop the move."""
    body = """\
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    interrupts.install()
    print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN,
          signal.getsignal(signal.SIGTERM) is interrupts._on_signal)
    """
    assert run_script(tmp_path, body, "plain").stdout == "True True\n"


END = """\
from cachedoctor import cli
import atexit, threading

def fake_main():
    interrupts.install()
    def exit_handler():  # registered after run_program's: runs before _end_process
        os.kill(os.getpid(), signal.SIGINT)
        if "AGAIN_AFTER" in os.environ:  # the handler hangs; the user presses Ctrl-C again
            time.sleep(30)
        time.sleep(0.02)
        print("exit handler done")
    atexit.register(exit_handler)
    if "AGAIN_AFTER" in os.environ:  # started now: 3.12 starts no thread at shutdown
        threading.Thread(target=lambda: (time.sleep(float(os.environ["AGAIN_AFTER"])),
                                         os.kill(os.getpid(), signal.SIGINT)), daemon=True).start()
    print("command done")
    interrupts.exiting(interruptible=cli._flush_output)
    sys.exit(3)

cli.main = fake_main
cli.run_program()
"""


def test_once_the_command_has_ended_its_result_stands_and_a_second_signal_ends_it_now(
        tmp_path: Path) -> None:
    once = run_script(tmp_path, END, "plain")
    assert (once.stdout, once.stderr, once.returncode) == ("command done\nexit handler done\n", "", 3)
    again = run_script(tmp_path, END, "plain", AGAIN_AFTER="1.4")
    assert (again.returncode, again.stderr) == (128 + signal.SIGINT, "")


SWALLOWED = """\
import typing
from typing import Annotated
import msgspec
from cachedoctor.holdsignals import holds_signals
from cachedoctor.profiles.validation import _convert_leaf

plain_hash = typing._AnnotatedAlias.__hash__
def hash_with_ctrl_c(self):  # Ctrl-C while msgspec hashes the annotation it converts to
    os.kill(os.getpid(), signal.SIGINT)
    return plain_hash(self)
typing._AnnotatedAlias.__hash__ = hash_with_ctrl_c
converted = []

@holds_signals  # (so the signal cannot come back between the conversion and its record)
def convert():
    converted.append(_convert_leaf("5", Annotated[int, msgspec.Meta(ge=0)], (), []))

try:
    convert()
    wait_for_the_signal()
except KeyboardInterrupt:
    print("interrupted after converting", converted)
"""


def test_ctrl_c_that_a_library_would_swallow_is_held_until_the_function_returns(
        tmp_path: Path) -> None:
    """msgspec.convert discards an exception raised while it hashes a typing annotation: in a
    `holds_signals` function (profile validation's) the signal waits for the function."""
    done = run_script(tmp_path, SWALLOWED, "installed")
    assert (done.stdout, done.stderr) == ("interrupted after converting [5]\n", "")
    plain = run_script(tmp_path, SWALLOWED, "plain")
    assert "never interrupted" in plain.stdout  # lost


LATE_IMPORT = """\
open("late.py", "w").write("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\n")
try:
    try:
        import late  # the command's last import: Ctrl-C held back, and the command ends now
    finally:
        interrupts.exiting(interruptible=wait_for_the_signal)
    print("ended as if never interrupted")
except KeyboardInterrupt:
    print("interrupted", "late" in sys.modules)
"""


def test_ctrl_c_held_back_when_the_command_ends_is_raised_then_not_dropped(tmp_path: Path) -> None:
    done = run_script(tmp_path, LATE_IMPORT, "installed")
    assert (done.stdout, done.stderr) == ("interrupted True\n", "")


def test_ctrl_c_in_a_finaliser_when_no_thread_can_start_is_reported_not_swallowed(
        tmp_path: Path) -> None:
    """3.12+ starts no thread at interpreter shutdown (nor does any Python when resources run
    out): the finaliser's interruption then goes to the earlier hook, as it did before."""
    body = "import _thread\n" \
           "def refuse(*args): raise RuntimeError(\"can't start new thread\")\n" \
           "_thread.start_new_thread = refuse\n" + FINALISER
    done = run_script(tmp_path, body, "installed")
    assert "Exception ignored" in done.stderr and "KeyboardInterrupt" in done.stderr
