"""Ctrl-C, SIGTERM and SIGHUP stop a run where cachedoctor can say so, never where Python would
swallow or garble the exception.

Python raises KeyboardInterrupt at whichever bytecode runs when a signal is handled. Measured
on 3.11, about one Ctrl-C in 300 during start-up landed where that goes wrong:

* in a weakref callback or finaliser, such as the one importlib runs as each import ends: Python
  prints the exception as "ignored", with a traceback, and the command goes on;
* in `__set_name__` while a module builds a class: 3.11 wraps it in RuntimeError (exit 1, a
  traceback);
* in an exit handler, where a temporary folder is removed or the output flushed: "ignored", and
  the handler's work is skipped.

So the handler looks before it raises. During an import, a signal is held back and a short-lived
thread sends it to the main thread again as soon as the import is over (an import takes
milliseconds); the same inside a function marked `holds_signals` (cachedoctor/holdsignals.py: a
library it calls would swallow the exception); one that reached a finaliser anyway
(`sys.unraisablehook`) is sent again the same way. Once the command has ended and the process is
exiting, its result stands: a signal only interrupts the flush of the output (a full pipe can
block it), where the exit handler catches it (one held back from the command is raised as the
command ends).
A second signal while the first is held back joins it, unless the first has waited over a second
(an import or exit handler that hangs): then it is obeyed at once, so a user who insists is
never ignored. A signal the parent process set to be ignored (`nohup`, a background job) stays
ignored.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from types import CodeType, FrameType

from cachedoctor.holdsignals import HOLDING

_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
_IMPORT_SYSTEM = frozenset({"_frozen_importlib", "_frozen_importlib_external",
                            "importlib._bootstrap", "importlib._bootstrap_external",
                            "cachedoctor.cli.deferred"})  # (a deferred module's first read)
_RESEND_EVERY = 0.001  # seconds between two looks at the main thread
_INSISTED_AFTER = 1.0  # seconds a signal is held back before another one is obeyed at once


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: handled exactly like Ctrl-C (a move in its copy phase rolls back)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.main_thread = 0
        self.held: list[int] = []  # the signal held back: a new list per hold (its thread's token)
        self.held_since = 0.0  # (time.monotonic)
        self.exiting: CodeType | None = None  # once the command has ended: what a signal may stop
        self.earlier_hook: Callable[[sys.UnraisableHookArgs], object] = sys.__unraisablehook__


_STATE = _State()


def install() -> None:
    """Handle the stop signals as described above. Called from the main thread."""
    _STATE.main_thread = _thread.get_ident()
    for name in _STOP_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _on_signal)
    if sys.unraisablehook is not _on_unraisable:  # (installed once per process)
        _STATE.earlier_hook = sys.unraisablehook
        sys.unraisablehook = _on_unraisable


def exiting(interruptible: Callable[..., object]) -> None:
    """The command has ended: from now on a signal interrupts only `interruptible` (the flush).
    One still held back from the command (it came during an import near its end, and the
    command ended before it was sent again: about 1 Ctrl-C in 100 at random moments of
    `profiles list`) is raised here, as it would have been without the hold."""
    held, _STATE.held = _STATE.held, []  # (its thread sends nothing)
    _STATE.exiting = interruptible.__code__
    if held:
        raise _interruption(held[0])


def _interruption(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _STATE.held:
        if time.monotonic() - _STATE.held_since < _INSISTED_AFTER:
            return  # joins the one held back
        _STATE.held = []  # its thread, if any, sends nothing
        if _STATE.exiting is not None:  # a hung thread or exit handler: end now, unflushed
            os._exit(128 + signum)
        raise _interruption(signum)
    if _STATE.exiting is not None:
        exiting = _STATE.exiting
        if any(f.f_code is exiting for f in _stack(frame)):
            raise _interruption(signum)
        _hold(signum, send_again=False)  # the command's result stands
        return
    if _unsafe(frame) and _hold(signum):
        return
    raise _interruption(signum)


def _on_unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """A signal's exception that reached a finaliser anyway: sent again instead of printed."""
    exc = unraisable.exc_value
    if isinstance(exc, KeyboardInterrupt):
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        if _hold(signum, send_again=_STATE.exiting is None):  # (exiting: the result stands)
            return
    _STATE.earlier_hook(unraisable)  # (also a signal no thread could be started to send again)


def _hold(signum: int, send_again: bool = True) -> bool:
    """Hold `signum` back (and start the thread that sends it again): False where no thread
    can be started (3.12+ refuses one at interpreter shutdown), for the caller to act now."""
    if _STATE.held:
        return True
    held = [signum]
    _STATE.held, _STATE.held_since = held, time.monotonic()  # before the thread looks
    if send_again:
        try:
            _thread.start_new_thread(_send_again_when_safe, (signum, held))
        except RuntimeError:
            _STATE.held = []
            return False
    return True


def _send_again_when_safe(signum: int, held: list[int]) -> None:
    """In a thread of its own: once the main thread is out of the import, finaliser or
    `holds_signals` function, send it the held signal again (a real signal where the OS has
    `pthread_kill`, so a blocking call returns at once). `held` is this hold's own list: once
    it is no longer the state's, the signal was obeyed otherwise and this thread ends."""
    while _STATE.held is held:
        time.sleep(_RESEND_EVERY)
        frame = sys._current_frames().get(_STATE.main_thread)
        if frame is None:  # the main thread has ended
            return
        if not _unsafe(frame):
            break
    if _STATE.held is not held:  # obeyed already, by a second signal
        return
    _STATE.held = []
    send = getattr(signal, "pthread_kill", None)
    if send is not None:
        send(_STATE.main_thread, signum)
    else:
        _thread.interrupt_main(signal.Signals(signum))


def _unsafe(frame: FrameType | None) -> bool:
    """Whether an exception raised here could be lost or garbled: the import system is on the
    stack (a module is being imported, or an import finished), or this module's own hook, or a
    function marked `holds_signals`."""
    hook = _on_unraisable.__code__
    return any(f.f_code in HOLDING or f.f_code is hook
               or f.f_globals.get("__name__") in _IMPORT_SYSTEM for f in _stack(frame))


def _stack(frame: FrameType | None) -> Iterator[FrameType]:
    """`frame` and every frame that called it."""
    while frame is not None:
        yield frame
        frame = frame.f_back


