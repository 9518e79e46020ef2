"""`gpuplan local bench disk` in a folder that others can write to: it never follows a planted symlink, writes
only inside a private folder of its own that it removes, checks free space first, and cleans up after any
failure or signal. Runs on a CPU-only machine; the read-only and full filesystems are real tmpfs mounts where
this process may mount them (root in a container), and simulated with monkeypatched os calls everywhere."""

from __future__ import annotations

import errno
import itertools
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from gpuplan.local import bench
from gpuplan.units import format_bytes
from test_cli import one_line_error

MiB = 2**20
pytestmark = pytest.mark.skipif(os.name != "posix", reason="the disk benchmark is POSIX-only")


def snapshot(folder: Path) -> dict:
    """Everything about ``folder`` a run could change: each entry's type, mode, owner, size, mtime, content or
    link target (without following links)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        entry = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_size, st.st_mtime_ns)
        if p.is_symlink():
            entry += (os.readlink(p),)
        elif p.is_file():
            entry += (p.read_bytes(),)
        out[str(p.relative_to(folder))] = entry
    return out


def fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}") if Path("/proc/self/fd").is_dir() else ""


def handlers() -> dict:
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


@pytest.fixture
def shared(tmp_path):
    """A 'shared folder' with a file someone cares about next to it."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "someone-elses.txt").write_text("keep me\n")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious data\n")
    return folder, victim


def _mount_tmpfs(where: Path, options: str) -> bool:
    if os.geteuid() != 0 or not Path("/proc/mounts").exists():
        return False
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    return r.returncode == 0


@pytest.fixture
def tmpfs(tmp_path):
    """mount(options) -> a fresh tmpfs folder, unmounted afterwards; skips where this process cannot mount."""
    mounted = []

    def mount(options: str) -> Path:
        where = tmp_path / f"mnt{len(mounted)}"
        if not _mount_tmpfs(where, options):
            pytest.skip("can't mount a tmpfs here (not root, or no CAP_SYS_ADMIN): the simulated tests cover it")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


# ------------------------------------------------------------------------------------------ symlinks


def test_planted_symlinks_are_never_followed(shared, run, monkeypatch):
    folder, victim = shared
    before_victim = victim.read_bytes(), victim.stat().st_mtime_ns
    victim_dir = victim.parent / "victim-dir"
    victim_dir.mkdir()
    # every name the old code used (this process's pid: the CLI runs in-process), names the new code's files
    # get, and random names of the private folder's shape
    planted = [f".gpuplan-bench-{os.getpid()}-{i}" for i in range(16)] + [f"data-{i}" for i in range(4)]
    planted += [f"{bench.DISK_DIR_PREFIX}{n}" for n in ("abcdefgh", "zzzz0000", "_tmp1234")]
    for name in planted:
        (folder / name).symlink_to(victim)
    # and make mkdtemp's first random pick collide with a planted symlink to a folder: it must move on
    taken = f"{bench.DISK_DIR_PREFIX}collide0"
    (folder / taken).symlink_to(victim_dir, target_is_directory=True)
    real_names = tempfile._get_candidate_names()
    names = itertools.chain(["collide0"], real_names)
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    before, victim_dir_mtime = snapshot(folder), victim_dir.stat().st_mtime_ns

    code, _out, err = run(
        "local", "bench", "disk", "--path", str(folder), "--file-size", "4MiB", "--writers", "4", "--json"
    )
    assert code == 0, err
    assert next(names) != "collide0"  # mkdtemp did try the taken name first
    assert (victim.read_bytes(), victim.stat().st_mtime_ns) == before_victim
    assert victim_dir.stat().st_mtime_ns == victim_dir_mtime  # nothing was ever created in it, even briefly
    assert snapshot(folder) == before  # every symlink still there, pointing where it did, nothing added


def test_a_symlink_inside_the_private_folder_is_refused(tmp_path, monkeypatch):
    """Even in its own folder a file is created with O_EXCL | O_NOFOLLOW: a name taken by a symlink (planted
    here by patching mkdtemp, as nobody else can write there) is an error, not a write through the link."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    folder = tmp_path / "shared"
    folder.mkdir()
    real = tempfile.mkdtemp

    def mkdtemp_with_a_trap(*a, **k):
        d = real(*a, **k)
        os.symlink(victim, os.path.join(d, "data-0"))
        return d

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp_with_a_trap)
    with pytest.raises(bench.DiskBenchError, match="File exists"):
        bench.bench_disk(folder, writers=2, file_bytes=MiB)
    assert victim.read_bytes() == b"precious\n"
    # the planted link is not the run's to remove, so its folder stays (with only that link in it)
    (left,) = folder.iterdir()
    assert [p.name for p in left.iterdir()] == ["data-0"] and (left / "data-0").is_symlink()


# ------------------------------------------------------------------------------------------ private folder


def test_files_only_in_a_fresh_private_folder(shared, monkeypatch):
    folder, _ = shared
    before = snapshot(folder)
    calls = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *, dir_fd=None):
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if dir_fd is not None and str(path).startswith("data-"):
            st = os.fstat(dir_fd)
            calls.append(
                {
                    "name": path,
                    "flags": flags,
                    "mode": mode,
                    "dir": fd_path(dir_fd),
                    "dir_mode": stat.S_IMODE(st.st_mode),
                    "file_mode": stat.S_IMODE(os.fstat(fd).st_mode),
                }
            )
        return fd

    monkeypatch.setattr(os, "open", spy)
    w, r = bench.bench_disk(folder, writers=3, file_bytes=2 * MiB)
    assert w.detail["bytes"] == 6 * MiB and w.value > 0 and r.value > 0
    writes = [c for c in calls if c["flags"] & os.O_CREAT]
    reads = [c for c in calls if not c["flags"] & os.O_CREAT]
    assert sorted(c["name"] for c in writes) == ["data-0", "data-1", "data-2"]
    assert len(reads) >= 3
    dirs = {c["dir"] for c in calls}
    assert len(dirs) == 1
    (private,) = dirs
    private = Path(private)
    assert private.parent == folder.resolve() and private.name.startswith(bench.DISK_DIR_PREFIX)
    assert not private.exists()  # removed afterwards
    for c in writes:
        need = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        assert c["flags"] & need == need and c["mode"] == 0o600 and c["file_mode"] & 0o077 == 0
        assert c["dir_mode"] == 0o700
    for c in reads:
        assert c["flags"] & os.O_NOFOLLOW and not c["flags"] & (os.O_WRONLY | os.O_RDWR)
    assert snapshot(folder) == before  # --path exactly as it was


def test_signal_handlers_are_restored(tmp_path):
    before = handlers()
    bench.bench_disk(tmp_path, writers=1, file_bytes=MiB)
    assert handlers() == before
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["missing", "file", "fifo", "dangling-link"])
def test_path_must_be_an_existing_folder(tmp_path, run, kind):
    p = tmp_path / "p"
    if kind == "file":
        p.write_text("x")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "dangling-link":
        p.symlink_to(tmp_path / "nowhere")
    line = one_line_error(*run("local", "bench", "disk", "--path", str(p), "--file-size", "1MiB"))
    assert "not a directory" in line and str(p) in line
    with pytest.raises(bench.GpuplanError, match="not a directory"):
        bench.bench_disk(p, writers=1, file_bytes=MiB)


# ------------------------------------------------------------------------------------------ free space


def _fake_statvfs(frsize: int, blocks: int, avail: int):
    return lambda path: os.statvfs_result((frsize, frsize, blocks, avail, avail, 1000, 1000, 1000, 0, 255))


def test_free_space_refusal_gives_the_numbers(tmp_path, run, monkeypatch):
    # a 100 GiB filesystem with 12 GiB free: 4 x 1 GiB would leave 8 GiB, under 10 %
    monkeypatch.setattr(os, "statvfs", _fake_statvfs(4096, 100 * 2**30 // 4096, 12 * 2**30 // 4096))
    before = snapshot(tmp_path)
    line = one_line_error(*run("local", "bench", "disk", "--path", str(tmp_path), "--file-size", "1GiB"))
    for figure in ("4 GiB", "4 x 1 GiB", "12 GiB free", "of 100 GiB", "10%"):
        assert figure in line, line
    assert "--file-size (to 512MiB or less with 4 writers)" in line and "--writers" in line
    assert snapshot(tmp_path) == before  # refused before writing anything
    # the same through the library; 3 writers of 512 MiB would leave 10.5 GiB: allowed
    with pytest.raises(bench.GpuplanError, match="needs 4 GiB"):
        bench.bench_disk(tmp_path, writers=4, file_bytes=2**30)
    assert bench.check_disk(tmp_path, writers=3, file_bytes=512 * MiB) == 512 * MiB


def test_free_space_refusal_on_the_real_filesystem(tmp_path, run):
    fs = os.statvfs(tmp_path)
    too_big = fs.f_bavail * fs.f_frsize  # one file as large as all the free space
    line = one_line_error(
        *run("local", "bench", "disk", "--path", str(tmp_path), "--writers", "1", "--file-size", str(too_big))
    )
    assert "free of " + format_bytes(fs.f_blocks * fs.f_frsize, binary=True) in line
    assert "--file-size" in line and not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------ failures


def _fail_writes_after(monkeypatch, blocks: int, error: BaseException):
    """os.write raises ``error`` once ``blocks`` blocks have gone to the benchmark's files (other writes pass)."""
    real_write = os.write
    count = [0]

    def write(fd, data):
        if bench.DISK_DIR_PREFIX in fd_path(fd):
            count[0] += 1
            if count[0] > blocks:
                raise error
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    return count


@pytest.mark.parametrize("error", [RuntimeError("injected"), OSError(errno.EIO, "Input/output error")])
def test_an_exception_mid_write_leaves_no_files(shared, monkeypatch, error):
    folder, _ = shared
    before, before_handlers = snapshot(folder), handlers()
    count = _fail_writes_after(monkeypatch, 3, error)
    expected = RuntimeError if isinstance(error, RuntimeError) else bench.DiskBenchError  # a bug stays a bug
    with pytest.raises(expected) as info:
        bench.bench_disk(folder, writers=2, file_bytes=24 * MiB)
    assert count[0] > 3
    if expected is bench.DiskBenchError:
        assert "I/O error" in str(info.value)
    assert snapshot(folder) == before and handlers() == before_handlers


def test_an_exception_in_the_read_phase_leaves_no_files(shared, monkeypatch):
    folder, _ = shared
    before = snapshot(folder)
    monkeypatch.setattr(bench, "_read_direct", lambda *a: (_ for _ in ()).throw(ValueError("injected")))
    with pytest.raises(ValueError):
        bench.bench_disk(folder, writers=2, file_bytes=MiB)
    assert snapshot(folder) == before


def test_enospc_mid_write_is_one_line(shared, run, monkeypatch):
    folder, _ = shared
    before = snapshot(folder)
    _fail_writes_after(monkeypatch, 1, OSError(errno.ENOSPC, "No space left on device"))
    line = one_line_error(*run("local", "bench", "disk", "--path", str(folder), "--file-size", "16MiB"))
    assert "filesystem is full" in line and "--file-size" in line
    assert snapshot(folder) == before


def test_a_real_full_filesystem_is_one_line(tmpfs, run, monkeypatch):
    small = tmpfs("size=8m")
    # let the free-space check pass, so the kernel's own ENOSPC is what stops it
    monkeypatch.setattr(os, "statvfs", _fake_statvfs(4096, 2**30 // 4096, 2**29 // 4096))
    line = one_line_error(
        *run("local", "bench", "disk", "--path", str(small), "--file-size", "16MiB", "--writers", "2")
    )
    assert "filesystem is full" in line
    assert not list(small.iterdir())


@pytest.mark.parametrize("code,words", [(errno.EROFS, "read-only filesystem"), (errno.EACCES, "permission denied")])
def test_unwritable_folder_is_one_line_simulated(shared, run, monkeypatch, code, words):
    folder, _ = shared
    before = snapshot(folder)

    def mkdir(path, mode=0o777, *, dir_fd=None):
        raise OSError(code, os.strerror(code), path)

    monkeypatch.setattr(os, "mkdir", mkdir)  # what tempfile.mkdtemp calls
    line = one_line_error(*run("local", "bench", "disk", "--path", str(folder), "--file-size", "1MiB"))
    assert words in line and str(folder) in line
    assert snapshot(folder) == before


def test_a_real_read_only_filesystem_is_one_line(tmpfs, run):
    ro = tmpfs("ro,size=64m")
    line = one_line_error(*run("local", "bench", "disk", "--path", str(ro), "--file-size", "1MiB"))
    assert "read-only filesystem" in line


# ------------------------------------------------------------------------------------------ signals


def test_sigint_mid_write_stops_and_cleans_up(shared, monkeypatch):
    """Ctrl-C while the writers are busy (sent from a writer thread, as a terminal would send it to the
    process): the handler runs while they write, each writer stops within one block of it, the files go, the
    handlers come back. Counted in blocks, not seconds, so that a loaded machine changes nothing: the writer
    that sends the signal waits until the handler (in the main thread) has set the stop flag, and every block
    that starts once it is set is counted; a writer may have passed its check just before, so at most one
    block per writer."""
    folder, _ = shared
    before, before_handlers = snapshot(folder), handlers()
    real_write = os.write
    writers, blocks = 2, 2 * 512 * MiB // bench._DISK_CHUNK  # 128 blocks if it did not stop
    flags: list[bench._StopFlag] = []

    class StopFlag(bench._StopFlag):
        def __init__(self) -> None:
            super().__init__()
            flags.append(self)

    count, after_stop, handled = [0], [0], []

    def write(fd, data):
        if bench.DISK_DIR_PREFIX in fd_path(fd):
            count[0] += 1
            after_stop[0] += flags[0].is_set()
            if count[0] == 2:
                os.kill(os.getpid(), signal.SIGINT)
                deadline = time.monotonic() + 120  # generous: the handler's promptness is not what is timed
                while not flags[0].is_set() and time.monotonic() < deadline:
                    time.sleep(0.001)
                handled.append(flags[0].is_set())
        return real_write(fd, data)

    monkeypatch.setattr(bench, "_StopFlag", StopFlag)
    monkeypatch.setattr(os, "write", write)
    with pytest.raises(bench.BenchInterrupted, match="SIGINT"):
        bench.bench_disk(folder, writers=writers, file_bytes=512 * MiB)
    assert len(flags) == 1 and flags[0].signum == signal.SIGINT
    assert handled == [True]  # the handler ran while a writer was still inside a write
    assert after_stop[0] <= writers  # each writer stopped within one block of the stop flag
    assert count[0] < blocks
    assert snapshot(folder) == before and handlers() == before_handlers


_SLOW_RUN = textwrap.dedent("""
    import os, sys, time
    real_write = os.write
    def slow_write(fd, data):  # 8 MiB blocks, 0.2 s each: a disk slow enough to be caught mid-write
        time.sleep(0.2)
        return real_write(fd, data)
    os.write = slow_write
    from gpuplan.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def test_sigterm_during_the_write_phase_exits_promptly_and_leaves_nothing(shared):
    folder, _ = shared
    before = snapshot(folder)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _SLOW_RUN,
            "local",
            "bench",
            "disk",
            "--path",
            str(folder),
            "--file-size",
            "64MiB",
            "--writers",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:  # wait for the first written block
            if any(f.stat().st_size > 0 for f in folder.glob(f"{bench.DISK_DIR_PREFIX}*/*")):
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()
        files = list(folder.glob(f"{bench.DISK_DIR_PREFIX}*/*"))
        assert files and any(f.stat().st_size < 64 * MiB for f in files)  # mid-write
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < 5, took
    line = one_line_error(proc.returncode, out, err)
    assert "stopped by SIGTERM" in line
    assert snapshot(folder) == before


def test_an_ignored_signal_stays_ignored(tmp_path, monkeypatch):
    """nohup and background jobs start with SIGINT or SIGHUP ignored: the benchmark leaves that alone."""
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        seen = []
        real_write = os.write

        def write(fd, data):
            if bench.DISK_DIR_PREFIX in fd_path(fd):
                seen.append((signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)))
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", write)
        bench.bench_disk(tmp_path, writers=1, file_bytes=MiB)
        assert seen and all(hup is signal.SIG_IGN and callable(term) for hup, term in seen)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)
