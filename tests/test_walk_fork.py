"""fs.walk.fork_worker: a signal between a worker's fork and its registration never leaves
the worker running (every forked walk forks through it: measure, the deleter, sweep's finder)."""

from __future__ import annotations

import os
import time

import pytest

from cachedoctor.fs.walk import fork_worker
from tests.conftest import IS_LINUX

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="forked workers exist on Linux only")


def test_an_interrupt_before_registration_kills_and_reaps_the_worker() -> None:
    def work() -> int:  # pragma: no cover - in the child: would run for a minute
        time.sleep(60)
        return 0

    forked: list[int] = []

    def register(pid: int) -> None:
        forked.append(pid)
        raise KeyboardInterrupt  # what a Ctrl-C taken by another thread looks like here

    with pytest.raises(KeyboardInterrupt):
        fork_worker(work, register)
    with pytest.raises(ChildProcessError):  # killed and reaped: not even a zombie is left
        os.waitpid(forked[0], os.WNOHANG)


def test_a_registered_worker_runs_and_exits_with_its_code() -> None:
    pids: list[int] = []
    pid = fork_worker(lambda: 7, pids.append)
    assert pids == [pid]
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
