"""`cachedoctor.inuse`: a cache is in use when a process has a file open, its working
directory or a memory map below it. Tested with real processes (children running
sys.executable, which signal readiness and are always killed), plus the psutil seam with a fake
process iterator that behaves as psutil documents."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from cachedoctor import inuse
from cachedoctor.errors import EXIT_BAD_INPUT, RefusedError
from cachedoctor.inuse import UseReport, check_not_in_use, find_uses, psutil_source
from tests.conftest import IS_LINUX, IS_MACOS, IS_WINDOWS

# Real processes are observed through /proc (Linux) or psutil (macOS). On Windows psutil's
# open_files is documented as unreliable and test folders are drive paths: fake source only.
real_processes = pytest.mark.skipif(IS_WINDOWS, reason="real-process tests need Linux or macOS")
needs_linux = pytest.mark.skipif(not IS_LINUX, reason="reads /proc")
needs_memory_maps = pytest.mark.skipif(
    IS_WINDOWS or IS_MACOS, reason="psutil has no memory_maps on macOS"
)

READY = "ready"


class Children:
    """Child processes of this test: started, waited for until they say they are ready, and
    always killed (and reaped) at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, code: str, *, cwd: Path | None = None, exit_after: bool = False,
              program: str | None = None) -> subprocess.Popen[str]:
        tail = "" if exit_after else "import time\nwhile True: time.sleep(60)\n"
        script = f"{code}\nprint({READY!r}, flush=True)\n{tail}"
        proc = subprocess.Popen(
            [program or sys.executable, "-c", script],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        readable, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().strip() if readable else ""
        if line != READY:
            proc.kill()
            raise AssertionError(f"child {proc.pid} did not get ready: {line!r}")
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            if proc.stdout:
                proc.stdout.close()


@pytest.fixture
def children() -> Iterator[Children]:
    kids = Children()
    try:
        yield kids
    finally:
        kids.kill_all()


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "blob.bin").write_bytes(b"x" * 8192)
    return folder


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _uses_of(report: UseReport, pid: int) -> list[inuse.Use]:
    return [u for u in report.uses if u.pid == pid]


def _wait_for_state(pid: int, state: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if IS_LINUX:
                stat = Path(f"/proc/{pid}/stat").read_text()
                if stat[stat.rfind(")") + 2] == state:
                    return
            elif psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except (OSError, psutil.Error):
            pass
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never reached state {state}")


# --- real processes -----------------------------------------------------------------------


@real_processes
def test_a_process_holding_a_file_open_inside_is_found(children: Children, cache: Path) -> None:
    blob = cache / "sub" / "blob.bin"
    holder = children.start(f"f = open({str(blob)!r}, 'rb')")
    report = find_uses([cache])
    uses = _uses_of(report, holder.pid)
    assert [(u.what, u.path, u.folder) for u in uses] == [("open file", _real(blob), _real(cache))]
    assert uses[0].name.startswith("python")
    assert report.in_use and holder.pid in report.pids


@real_processes
def test_another_cachedoctor_process_is_not_a_use(children: Children, cache: Path,
                                                  tmp_path: Path) -> None:
    """A second cachedoctor reading or cleaning the same cache is kept apart by the cache's
    lock, not by this check (two cleans of one cache must not refuse each other)."""
    blob = cache / "sub" / "blob.bin"
    program = tmp_path / "cachedoctor"
    program.symlink_to(sys.executable)
    other = children.start(f"f = open({str(blob)!r}, 'rb')", program=str(program))
    module = children.start(f"import sys; sys.argv[:] = ['-m', 'cachedoctor']; f = open({str(blob)!r})")
    report = find_uses([cache])
    assert other.pid not in report.pids
    assert module.pid in report.pids  # only the real command line counts, not what it claims


@real_processes
def test_a_process_whose_working_directory_is_inside_is_found(
    children: Children, cache: Path
) -> None:
    holder = children.start("pass", cwd=cache / "sub")
    uses = _uses_of(find_uses([cache]), holder.pid)
    assert [(u.what, u.path) for u in uses] == [("working directory", _real(cache / "sub"))]


@real_processes
@needs_memory_maps
def test_a_process_with_a_memory_map_of_a_file_inside_is_found(
    children: Children, cache: Path
) -> None:
    # mmap through libc and close the descriptor: only the mapping is left (Python's own mmap
    # keeps a duplicate descriptor open, which would be found as an open file anyway).
    blob = cache / "sub" / "blob.bin"
    holder = children.start(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.mmap.restype = ctypes.c_void_p\n"
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,"
        " ctypes.c_int, ctypes.c_long]\n"
        f"fd = os.open({str(blob)!r}, os.O_RDONLY)\n"
        "addr = libc.mmap(None, 8192, 1, 1, fd, 0)\n"  # PROT_READ, MAP_SHARED
        "assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()\n"
        "os.close(fd)\n"
    )
    uses = _uses_of(find_uses([cache]), holder.pid)
    assert [(u.what, u.path) for u in uses] == [("memory map", _real(blob))]


@real_processes
def test_a_file_in_a_sibling_folder_sharing_the_name_prefix_is_not_a_use(
    children: Children, tmp_path: Path, cache: Path
) -> None:
    sibling = tmp_path / "cache2"  # "/…/cache2" starts with "/…/cache" as a string
    sibling.mkdir()
    (sibling / "f").write_text("x")
    holder = children.start(f"f = open({str(sibling / 'f')!r})", cwd=sibling)
    assert _uses_of(find_uses([cache]), holder.pid) == []
    assert _uses_of(find_uses([sibling]), holder.pid) != []  # the child is really holding it


@real_processes
def test_an_unrelated_python_process_is_not_a_use(
    children: Children, tmp_path: Path, cache: Path
) -> None:
    other = children.start("import json, mmap", cwd=tmp_path)
    report = find_uses([cache])
    assert _uses_of(report, other.pid) == []
    assert report.uses == ()


@real_processes
def test_a_zombie_child_is_not_a_use(children: Children, cache: Path) -> None:
    blob = cache / "sub" / "blob.bin"
    zombie = children.start(f"f = open({str(blob)!r})", cwd=cache, exit_after=True)
    _wait_for_state(zombie.pid, "Z")  # exited, not reaped (nobody called wait yet)
    report = find_uses([cache])
    assert _uses_of(report, zombie.pid) == []
    assert zombie.poll() is not None  # reaped only now


@real_processes
def test_this_process_holding_a_file_open_is_not_a_use(cache: Path) -> None:
    with open(cache / "sub" / "blob.bin", "rb"):
        report = find_uses([cache])
    assert _uses_of(report, os.getpid()) == []


@real_processes
def test_a_forked_worker_of_this_process_is_not_a_use(cache: Path) -> None:
    # A fork without exec (like the walker's workers) is this process; a child that ran
    # another program (every `children.start`) is found, as the other tests show.
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(reader)
            os.chdir(cache)
            fd = os.open(cache / "sub" / "blob.bin", os.O_RDONLY)
            os.write(writer, b"1")
            time.sleep(60)
            os.close(fd)
        finally:
            os._exit(0)
    try:
        os.close(writer)
        assert os.read(reader, 1) == b"1"
        assert _uses_of(find_uses([cache]), pid) == []
    finally:
        os.close(reader)
        os.kill(pid, 9)
        os.waitpid(pid, 0)


@real_processes
def test_a_folder_given_as_a_symlink_to_the_real_folder_still_matches(
    children: Children, tmp_path: Path, cache: Path
) -> None:
    link = tmp_path / "relocated"  # a relocated cache: the old path links to the new place
    link.symlink_to(cache, target_is_directory=True)
    blob = cache / "sub" / "blob.bin"
    holder = children.start(f"f = open({str(link / 'sub' / 'blob.bin')!r})", cwd=link)
    uses = _uses_of(find_uses([link]), holder.pid)
    assert {(u.what, u.path, u.folder) for u in uses} == {
        ("open file", _real(blob), _real(cache)),
        ("working directory", _real(cache), _real(cache)),
    }


@real_processes
def test_the_folder_itself_and_every_folder_of_one_scan(
    children: Children, tmp_path: Path, cache: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    in_cache = children.start("pass", cwd=cache)  # the folder itself, not below it
    in_other = children.start("pass", cwd=other)
    report = find_uses([cache, other, tmp_path / "missing"])
    assert [u.folder for u in _uses_of(report, in_cache.pid)] == [_real(cache)]
    assert [u.folder for u in _uses_of(report, in_other.pid)] == [_real(other)]
    # Nested folders: the innermost one is named.
    nested = find_uses([tmp_path, cache])
    assert [u.folder for u in _uses_of(nested, in_cache.pid)] == [_real(cache)]
    assert [u.folder for u in _uses_of(nested, in_other.pid)] == [_real(tmp_path)]


@needs_linux
def test_a_deleted_file_still_held_is_a_use_marked_deleted(
    children: Children, cache: Path
) -> None:
    doomed = cache / "sub" / "doomed"
    doomed.write_text("x")
    holder = children.start(f"import os\nf = open({str(doomed)!r})\nos.unlink(f.name)")
    uses = _uses_of(find_uses([cache]), holder.pid)
    assert [(u.path, u.deleted) for u in uses] == [(_real(doomed), True)]
    assert "(deleted)" in uses[0].describe()


@needs_linux
def test_a_process_that_exits_mid_scan_does_not_crash_it(
    children: Children, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = cache / "sub" / "blob.bin"
    code = f"f = open({str(blob)!r})"
    reaped = children.start(code, cwd=cache)
    unreaped = children.start(code, cwd=cache)
    real_read_stat = inuse._read_stat

    def read_stat_then_kill(proc: str, pid: int) -> Any:
        view = real_read_stat(proc, pid)  # seen alive ...
        if pid == reaped.pid:
            reaped.kill()  # ... then gone before its files are read
            reaped.wait()
        elif pid == unreaped.pid:
            unreaped.kill()  # ... or a zombie by then
            _wait_for_state(pid, "Z")
        return view

    monkeypatch.setattr(inuse, "_read_stat", read_stat_then_kill)
    report = find_uses([cache])
    assert _uses_of(report, reaped.pid) == [] and _uses_of(report, unreaped.pid) == []


@needs_linux
def test_processes_starting_and_exiting_during_scans_do_not_crash_them(
    cache: Path, tmp_path: Path
) -> None:
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            subprocess.run(["/bin/sh", "-c", "exit 0"], cwd=cache, check=False)

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(30):
            find_uses([cache, tmp_path])
    finally:
        stop.set()
        for thread in threads:
            thread.join()


@needs_linux
def test_unreadable_parts_are_counted_and_what_could_be_read_still_found(
    children: Children, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = cache / "sub" / "blob.bin"
    holder = children.start(f"f = open({str(blob)!r})", cwd=cache)
    denied = f"/proc/{holder.pid}/cwd"
    real_readlink = os.readlink
    before = _own_not_inspected(find_uses([cache]))  # some may be unreadable even to root

    def readlink(path: Any, *, dir_fd: int | None = None) -> str:
        if path == denied:
            raise PermissionError(13, "Permission denied", path)
        return str(real_readlink(path, dir_fd=dir_fd))

    monkeypatch.setattr(os, "readlink", readlink)
    report = find_uses([cache])
    assert [u.what for u in _uses_of(report, holder.pid)] == ["open file"]
    assert _own_not_inspected(report) == before + 1


def _own_not_inspected(report: UseReport) -> int:
    for note in report.not_inspected:
        if note.endswith("of your own processes could not be fully inspected"):
            return 1 if note.startswith("1 of") else int(note.split()[0])
    return 0


# --- the psutil seam, with a fake process iterator ----------------------------------------

popenfile = namedtuple("popenfile", ["path", "fd"])
pmmap_grouped = namedtuple("pmmap_grouped", ["path", "rss"])


class FakeProcess:
    """Behaves as psutil documents `Process`: methods raise AccessDenied or NoSuchProcess."""

    def __init__(self, pid: int, name: str, *, ppid: int = 1, user: str | None = "me",
                 status: str = psutil.STATUS_SLEEPING, cwd: Any = "", files: Any = (),
                 maps: Any = (), cmdline: tuple[str, ...] = ("tool",),
                 has_maps: bool = True, exe: str = "") -> None:
        self.pid = pid
        self._attrs = {"pid": pid, "ppid": ppid, "name": name, "status": status,
                       "username": user}
        self._cwd, self._files, self._maps = cwd, files, maps
        self._cmdline, self._exe = cmdline, exe
        if has_maps:
            self.memory_maps = self._memory_maps  # psutil has none on macOS

    def _result(self, value: Any) -> Any:
        if isinstance(value, type) and issubclass(value, psutil.Error):
            raise value(self.pid)
        return value

    def cwd(self) -> str:
        return str(self._result(self._cwd))

    def open_files(self) -> list[Any]:
        return [popenfile(p, 3) for p in self._result(self._files)]

    def _memory_maps(self) -> list[Any]:
        return [pmmap_grouped(p, 4096) for p in self._result(self._maps)]

    def exe(self) -> str:
        return str(self._exe)

    def cmdline(self) -> list[str]:
        return list(self._cmdline)


def fake_process_iter(processes: list[FakeProcess]) -> Any:
    """psutil.process_iter(attrs): each Process gets `.info` with the attrs asked for; an
    attribute that raises AccessDenied is None (ad_value), NoSuchProcess ones are skipped."""

    def process_iter(attrs: list[str]) -> Iterator[FakeProcess]:
        for proc in processes:
            proc.info = {a: proc._attrs[a] for a in attrs}  # type: ignore[attr-defined]
            yield proc

    return process_iter


def test_the_psutil_seam_finds_uses_and_counts_what_it_could_not_inspect(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    c = _real(cache)
    me = os.getpid()
    mine = ("python", "-m", "cachedoctor")
    processes = [
        FakeProcess(me, "python", files=[f"{c}/mine"], cmdline=mine),
        FakeProcess(me + 100001, "python", ppid=me, files=[f"{c}/w"], cmdline=mine),  # fork
        FakeProcess(me + 100002, "pip", ppid=me, files=[f"{c}/pip.lock"], cmdline=("pip",)),
        FakeProcess(201, "bash", cwd=f"{c}/sub", files=psutil.AccessDenied),
        FakeProcess(202, "java", maps=["[heap]", f"{c}/lib.so", "/usr/lib/x.so"], cwd="/"),
        FakeProcess(203, "Google Chrome", has_maps=False, exe=f"{c}/chrome/Google Chrome"),
        FakeProcess(204, "zombie", status=psutil.STATUS_ZOMBIE, files=[f"{c}/z"]),
        FakeProcess(205, "gone", cwd=f"{c}", files=psutil.NoSuchProcess),
        FakeProcess(206, "zombie-mac", cwd=psutil.ZombieProcess, files=[f"{c}/zz"]),
        FakeProcess(207, "sibling", cwd=f"{c}2", files=[f"{c}2/f", f"{c}x"]),
        FakeProcess(301, "sshd", user="root", cwd=psutil.AccessDenied,
                    files=psutil.AccessDenied, maps=psutil.AccessDenied),
        FakeProcess(302, "System", user=None, cwd=psutil.AccessDenied, files=psutil.AccessDenied,
                    maps=psutil.AccessDenied),
        FakeProcess(303, "editor", cwd="", files=[], maps=psutil.AccessDenied),
    ]
    source = psutil_source(fake_process_iter(processes), username="me")
    report = find_uses([cache], source=source)
    assert [(u.pid, u.name, u.what, u.path) for u in report.uses] == [
        (201, "bash", "working directory", f"{c}/sub"),
        (202, "java", "memory map", f"{c}/lib.so"),
        (203, "Google Chrome", "memory map", f"{c}/chrome/Google Chrome"),
        (me + 100002, "pip", "open file", f"{c}/pip.lock"),
    ]
    assert report.not_inspected == (
        "2 processes of other users could not be inspected",
        "2 of your own processes could not be fully inspected",  # bash (files), editor (maps)
    )


def test_the_psutil_seam_is_used_by_default_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert inuse.default_source().__qualname__.startswith("psutil_source")
    monkeypatch.setattr(sys, "platform", "linux")
    assert inuse.default_source().__qualname__.startswith("proc_source") or not IS_LINUX


def test_paths_are_compared_component_wise_and_case_blind_where_the_os_is() -> None:
    exact = inuse._Folders(["/a/b", "/"], fold_case=False)
    assert exact.folder_of("/a/b") == "/a/b" and exact.folder_of("/a/b/c") == "/a/b"
    assert exact.folder_of("/a/bc") == "/" and exact.folder_of("/A/B/c") == "/"
    only_b = inuse._Folders(["/a/b"], fold_case=False)
    assert only_b.folder_of("/a/bc") is None and only_b.folder_of("/a") is None
    folded = inuse._Folders(["/Users/Me/Library/Caches/pip"], fold_case=True)
    assert folded.folder_of("/users/me/library/caches/PIP/http") == (
        "/Users/Me/Library/Caches/pip"
    )


def test_mapped_paths_are_read_from_the_maps_text() -> None:
    maps = (
        b"55d0-55d1 r--p 00000000 fd:01 123     /usr/bin/python3.11\n"
        b"7f00-7f01 r--s 00000000 fd:01 456     /c/a file with spaces (deleted)\n"
        b"7f01-7f02 r--s 00000000 fd:01 457     /c/new\\012line\n"
        b"7f02-7f03 rw-p 00000000 00:00 0       [heap]\n"
        b"7f03-7f04 rw-p 00000000 00:00 0 \n"
    )
    assert inuse._mapped_paths(maps) == {
        "/usr/bin/python3.11", "/c/a file with spaces (deleted)", "/c/new\nline",
    }


# --- check_not_in_use ---------------------------------------------------------------------


@real_processes
def test_check_not_in_use_refuses_warns_or_says_nothing(
    children: Children, cache: Path, tmp_path: Path
) -> None:
    free = tmp_path / "free"
    free.mkdir()
    assert check_not_in_use([free], force=False, what="the pip cache") is None
    assert check_not_in_use([free], force=True, what="the pip cache") is None
    blob = cache / "sub" / "blob.bin"
    holder = children.start(f"f = open({str(blob)!r})")
    with pytest.raises(RefusedError) as refused:
        check_not_in_use([cache], force=False, what="the pip cache")
    error = refused.value
    assert error.exit_code == EXIT_BAD_INPUT == 2
    assert error.message.startswith("the pip cache is in use by 1 process: python")
    assert f"(pid {holder.pid}): open file {_real(blob)}" in error.message
    assert error.hint == "close it, or pass --force"
    warning = check_not_in_use([cache], force=True, what="the pip cache")
    assert warning is not None and f"pid {holder.pid}" in warning and "--force" in warning


def test_the_refusal_names_a_few_processes_and_counts_the_rest() -> None:
    uses = tuple(
        inuse.Use(pid, "python3", "open file", f"/c/f{n}", "/c")
        for pid in (10, 11, 12, 13, 14) for n in (1, 2)
    )
    text = UseReport(uses).describe()
    assert text == (
        "python3 (pid 10): open file /c/f1 and 1 more; python3 (pid 11): open file /c/f1 and 1 "
        "more; python3 (pid 12): open file /c/f1 and 1 more; and 2 more processes"
    )


# --- the name hint (cachedoctor.processes) ------------------------------------------------


@real_processes
def test_the_name_hint_skips_this_process_and_zombies_but_not_other_processes(
    children: Children, tmp_path: Path
) -> None:
    from cachedoctor.host import Host
    from cachedoctor.processes import forget_snapshot, running_processes
    from cachedoctor.profiles.loader import parse_profile

    name = psutil.Process().name()  # this interpreter's name, e.g. "python3.11"
    profile = parse_profile(
        "id: demo\nname: Demo\ndescription: d\n"
        f"processes: {{linux: [{name!r}], macos: [{name!r}]}}\n"
        "locations:\n  - id: cache\n    kind: cache\n    safe_to_delete: true\n"
        f"    paths: {{linux: '{tmp_path}', macos: '{tmp_path}'}}\n",
        "demo.yaml",
    )
    host = Host.current()
    zombie = children.start("pass", exit_after=True)
    _wait_for_state(zombie.pid, "Z")
    forget_snapshot()
    try:
        found = {p.pid for p in running_processes(profile, host)}
        assert os.getpid() not in found and zombie.pid not in found
        other = children.start("pass")
        forget_snapshot()
        assert other.pid in {p.pid for p in running_processes(profile, host)}
        fork = os.fork()  # a forked worker of this process, same name
        if fork == 0:  # pragma: no cover - the child
            time.sleep(60)
            os._exit(0)
        try:
            forget_snapshot()
            assert fork not in {p.pid for p in running_processes(profile, host)}
        finally:
            os.kill(fork, 9)
            os.waitpid(fork, 0)
    finally:
        forget_snapshot()


@real_processes
def test_cachedoctor_run_by_its_console_script_is_not_a_use(children: Children, cache: Path,
                                                            tmp_path: Path) -> None:
    """`python3 .../bin/cachedoctor scan` (how a console script shows in the process table)."""
    blob = cache / "sub" / "blob.bin"
    script = tmp_path / "bin" / "cachedoctor"
    script.parent.mkdir()
    script.write_text(f"f = open({str(blob)!r}, 'rb')\nprint({READY!r}, flush=True)\n"
                      "import time\nwhile True: time.sleep(60)\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True)
    children.procs.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == READY
    assert proc.pid not in find_uses([cache]).pids
    other = children.start(f"f = open({str(blob)!r}, 'rb')")  # a python that is not it
    assert other.pid in find_uses([cache]).pids


MOUNTINFO = """\
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 22 8:1 /home/ann/.cache/pip /srv/bind rw - ext4 /dev/sda1 rw
31 22 8:1 /home/ann /mnt/home\\040copy rw - ext4 /dev/sda1 rw
32 22 8:1 /home/ann/.cache/pip/http /inner rw - ext4 /dev/sda1 rw
33 22 0:41 /home/ann/.cache/pip /other-fs rw - btrfs /dev/sdb rw
"""


def test_bind_mounts_of_a_folder_above_or_inside_are_aliases() -> None:
    from cachedoctor.drives import aliases_in

    assert aliases_in("/home/ann/.cache/pip", MOUNTINFO) == [
        "/inner", "/mnt/home copy/.cache/pip", "/srv/bind"]
    assert aliases_in("/home/ann/.cache/npm", MOUNTINFO) == ["/mnt/home copy/.cache/npm"]
    assert aliases_in("/srv/bind/http", MOUNTINFO) == [
        "/home/ann/.cache/pip/http", "/inner", "/mnt/home copy/.cache/pip/http"]


@real_processes
def test_a_process_using_the_cache_through_a_bind_mount_is_found(children: Children,
                                                                 cache: Path, tmp_path: Path) -> None:
    from tests.conftest import mount_skip_reason

    reason = mount_skip_reason()
    if reason:
        pytest.skip(reason)
    bind = tmp_path / "bind"
    bind.mkdir()
    subprocess.run(["mount", "--bind", str(cache), str(bind)], check=True)
    try:
        holder = children.start(f"f = open({str(bind / 'sub' / 'blob.bin')!r}, 'rb')")
        report = find_uses([cache])
        assert holder.pid in report.pids
        assert [u.folder for u in _uses_of(report, holder.pid)] == [_real(cache)]
    finally:
        children.kill_all()
        subprocess.run(["umount", str(bind)], check=False)


@real_processes
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_the_proc_process_table_is_psutil_s(tmp_path: Path) -> None:
    """The Linux reader of /proc against psutil (the oracle), with a process whose name is cut
    at 15 characters in /proc/<pid>/stat and one whose name holds a parenthesis and a space."""
    from cachedoctor.processes import _proc_table, _psutil_table

    long_name = tmp_path / "a-very-long-interpreter-name"
    odd_name = tmp_path / "odd) name"
    started = []
    for link in (long_name, odd_name):
        link.symlink_to(sys.executable)
        started.append(subprocess.Popen([str(link), "-c", "import time; time.sleep(60)"]))
    try:
        time.sleep(0.3)
        before, ours, after = _psutil_table(), _proc_table(), _psutil_table()
        assert ours is not None
        mine = {row.pid: row for row in ours}
        # A process may start, end or rename itself (a kernel worker's name carries its current
        # work queue) while the tables are read: compare the ones psutil saw the same on both sides.
        oracle = {row.pid: row for row in before}
        steady = {row.pid for row in after if oracle.get(row.pid) == row}
        common = set(mine) & steady
        assert len(common) > 3 and {proc.pid for proc in started} <= common
        assert [mine[p] for p in sorted(common)] == [oracle[p] for p in sorted(common)]
        assert mine[started[0].pid].name == "a-very-long-interpreter-name"
        assert mine[started[1].pid].name == "odd) name"
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_a_command_line_rewritten_with_spaces_gives_the_name_as_psutil_does(tmp_path: Path) -> None:
    from cachedoctor.processes import _proc_table

    for pid, comm, cmdline in ((7, "a-long-daemon-n", b"/usr/bin/a-long-daemon-name: worker 3"),
                               (8, "short", b"short\0-x\0"), (9, "other-program-n", b"/bin/sh\0")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_bytes(f"{pid} ({comm}) S 1 {pid} 0".encode())
        (tmp_path / str(pid) / "cmdline").write_bytes(cmdline)
    (tmp_path / "self").mkdir()
    rows = {row.pid: row.name for row in _proc_table(str(tmp_path)) or ()}
    assert rows == {7: "a-long-daemon-name:", 8: "short", 9: "other-program-n"}
