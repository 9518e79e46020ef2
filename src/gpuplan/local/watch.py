"""``gpuplan local watch``: sample the host, a job's process tree and the GPUs while the job runs, into a JSONL
trace (docs/watch.md describes every field).

The job is either a command started here as a child (``-- CMD ARGS``; it runs in its own process group, and
SIGINT / SIGTERM sent to watch are forwarded to that group, so Ctrl-C reaches it once) or a running process
(``--pid N``; never signalled, watched until it ends).

The GPUs are read through NVML behind ``WatchGpuBackend`` (``NvmlWatchBackend`` is the real one; tests pass
fakes). A field that cannot be measured is left out of the sample, never written as 0. Sampling sleeps on an
event between samples (no polling loop); the trace is flushed after every line, so a crash keeps what was seen.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, Protocol

from ..errors import InputError
from ..units import KiB
from .detect import GpuReading, PynvmlBackend, match_catalog
from .nvml_counters import OK, Ecc, Gpm, NvlinkCounters, XidEvents
from .progress import LineSplitter, Progress
from .sampler import REASONS, decode_reasons, reasons_reader

#: Version of the trace format (the header's ``schema_version``); docs/watch.md.
TRACE_SCHEMA_VERSION = 1
#: The shortest sampling interval: below it psutil's and NVML's own counters (NVML utilization is averaged
#: over 1/6 s to 1 s, NVML API reference, nvmlDeviceGetUtilizationRates) stop meaning anything.
MIN_INTERVAL_S = 0.05
#: The counters beyond the basic ones, per GPU in the header's ``counters`` ("ok" or why not).
COUNTERS = ("gpm", "nvlink", "xid", "ecc")


class WatchGpuBackend(Protocol):
    """The GPU seam of watch: detect's backend (header: readings, driver) plus one sample per GPU. A backend
    may also offer ``counters() -> {index: {"gpm": "ok" | why, ...}}`` and ``close()``."""

    def available(self) -> tuple[bool, str]: ...
    def driver_version(self) -> str | None: ...
    def readings(self) -> list[GpuReading]: ...
    def sample(self) -> list[dict[str, Any]]: ...


class NvmlWatchBackend(PynvmlBackend):
    """NVML through nvidia-ml-py: ``sample()`` reads each GPU's live counters; a query the GPU does not answer
    leaves its field out. GPM, NVLink, XID and ECC readers (nvml_counters.py) are set up on first use."""

    def __init__(self) -> None:
        super().__init__()
        self._handles: list[Any] | None = None
        self._static: dict[int, dict[str, Any]] = {}
        self._readers: dict[int, tuple[Gpm, NvlinkCounters, Ecc]] | None = None
        self._xid: XidEvents | None = None

    def _devices(self) -> list[Any]:
        if self._handles is None:
            nv = self._nvml
            count = self._q(nv.nvmlDeviceGetCount) or 0
            self._handles = [self._q(nv.nvmlDeviceGetHandleByIndex, i) for i in range(count)]
        return self._handles

    def _setup(self) -> dict[int, tuple[Gpm, NvlinkCounters, Ecc]]:
        if self._readers is None:
            nv = self._nvml
            handles = {i: h for i, h in enumerate(self._devices()) if h is not None}
            self._readers = {i: (Gpm(nv, h), NvlinkCounters(nv, h), Ecc(nv, h)) for i, h in handles.items()}
            self._xid = XidEvents(nv, handles)
        return self._readers

    def counters(self) -> dict[int, dict[str, str]]:
        """Per GPU: whether GPM, NVLink, XID and ECC can be read ("ok"), or why not (the header records it)."""
        if self._nvml is None:
            return {}
        readers = self._setup()
        assert self._xid is not None
        out = {}
        for i, (gpm, nvlink, ecc) in readers.items():
            link = nvlink.status
            if gpm.status == OK and link != OK:
                link = f"{link} (GPM's NVLink metrics are tried too)"
            out[i] = {"gpm": gpm.status, "nvlink": link, "xid": self._xid.status.get(i, "no handle"), "ecc": ecc.status}
        return out

    def sample(self) -> list[dict[str, Any]]:
        nv, q = self._nvml, self._q
        if nv is None:
            return []
        readers = self._setup()
        xids = self._xid.drain() if self._xid is not None else {}
        reasons_fn = reasons_reader(nv)
        out = []
        for i, h in enumerate(self._devices()):
            if h is None:
                continue
            if i not in self._static:  # limits that do not move while a job runs: read once
                self._static[i] = {
                    "sm_clock_max_mhz": q(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
                    "pcie_gen_max": q(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    "pcie_width_max": q(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
                }
                default = q(nv.nvmlDeviceGetPowerManagementDefaultLimit, h)  # milliwatts
                if default:  # what diagnose tells a lowered power cap from the GPU at its own TDP by
                    self._static[i]["power_limit_default_w"] = default / 1000
            util = q(nv.nvmlDeviceGetUtilizationRates, h)
            mem = q(nv.nvmlDeviceGetMemoryInfo, h)
            power = q(nv.nvmlDeviceGetPowerUsage, h)  # milliwatts
            limit = q(nv.nvmlDeviceGetEnforcedPowerLimit, h)  # milliwatts
            mask = q(reasons_fn, h) if reasons_fn is not None else None
            rx = q(nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_RX_BYTES)
            tx = q(nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_TX_BYTES)
            g = {
                "index": i,
                "util_percent": int(util.gpu) if util is not None else None,
                "mem_used_bytes": int(mem.used) if mem is not None else None,
                "mem_total_bytes": int(mem.total) if mem is not None else None,
                "power_w": power / 1000 if power is not None else None,
                "power_limit_w": limit / 1000 if limit else None,
                "sm_clock_mhz": q(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                "temp_c": q(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                "throttle_mask": mask,
                "throttle_reasons": decode_reasons(mask) if mask is not None else None,
                "pcie_rx_bytes_per_s": rx * KiB if rx is not None else None,
                "pcie_tx_bytes_per_s": tx * KiB if tx is not None else None,
                "pcie_gen": q(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "pcie_width": q(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                **self._static[i],
            }
            if i in readers:
                gpm, nvlink, ecc = readers[i]
                activity = gpm.read()
                link = nvlink.read()  # read even when GPM has NVLink: keeps its counters primed
                g |= link | activity  # GPM's NVLink figures, where present, win
                g |= ecc.read()
            if i in xids:
                g["xid_errors"] = xids[i]
            out.append({k: v for k, v in g.items() if v is not None})
        return out

    def close(self) -> None:
        for gpm, _, _ in (self._readers or {}).values():
            gpm.close()
        if self._xid is not None:
            self._xid.close()


def _rate(now: float, before: float | None, dt: float) -> float | None:
    if before is None or dt <= 0 or now < before:  # a counter that went back (a process left): unknown
        return None
    return (now - before) / dt


class HostSampler:
    """The whole machine through psutil: CPU, iowait, memory, swap, disk and network rates."""

    def __init__(self) -> None:
        import psutil

        self._ps = psutil
        psutil.cpu_percent(None)  # the first call primes the counters
        psutil.cpu_times_percent(None)
        self._prev = self._counters()
        self._t = time.monotonic()

    def _counters(self) -> dict[str, float | None]:
        ps = self._ps
        disk = _safe(ps.disk_io_counters)
        net = _safe(ps.net_io_counters)
        swap = _safe(ps.swap_memory)
        return {
            "disk_read": disk.read_bytes if disk else None,
            "disk_write": disk.write_bytes if disk else None,
            "net_rx": net.bytes_recv if net else None,
            "net_tx": net.bytes_sent if net else None,
            "swap_in": swap.sin if swap else None,
            "swap_out": swap.sout if swap else None,
        }

    def sample(self) -> dict[str, Any]:
        ps = self._ps
        now, counters = time.monotonic(), self._counters()
        dt = now - self._t
        times = ps.cpu_times_percent(None)
        vm = ps.virtual_memory()
        swap = _safe(ps.swap_memory)
        h: dict[str, Any] = {
            "cpu_percent": ps.cpu_percent(None),
            "iowait_percent": getattr(times, "iowait", None),  # Linux only
            "mem_used_bytes": vm.total - vm.available,
            "mem_total_bytes": vm.total,
            "swap_used_bytes": swap.used if swap else None,
        }
        for key, name in (
            ("disk_read", "disk_read_bytes_per_s"),
            ("disk_write", "disk_write_bytes_per_s"),
            ("net_rx", "net_rx_bytes_per_s"),
            ("net_tx", "net_tx_bytes_per_s"),
            ("swap_in", "swap_in_bytes_per_s"),
            ("swap_out", "swap_out_bytes_per_s"),
        ):
            v, before = counters[key], self._prev[key]
            h[name] = _rate(v, before, dt) if v is not None else None
        self._prev, self._t = counters, now
        return {k: v for k, v in h.items() if v is not None}


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # no disks, no /proc/vmstat, a container without the counters
        return None


class TreeSampler:
    """A process and all its descendants: CPU (summed, and the busiest thread), RSS, I/O rates, count."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._ps = psutil
        self.root = psutil.Process(pid)
        self.root.cpu_percent(None)  # the first call primes the counter
        self._procs: dict[int, Any] = {}
        self._io: dict[int, tuple[int, int]] = {}
        self._threads: dict[tuple[int, int], float] = {}
        self._t = time.monotonic()

    def sample(self) -> dict[str, Any] | None:
        """None once the root process is gone."""
        ps = self._ps
        try:
            if self.root.status() == ps.STATUS_ZOMBIE:  # ended, not yet reaped by its parent
                return None
            found = [self.root, *self.root.children(recursive=True)]
        except (ps.NoSuchProcess, ps.ZombieProcess):
            return None
        now = time.monotonic()
        dt, self._t = now - self._t, now
        procs = {}
        for p in found:  # keep the same Process objects: cpu_percent(None) measures since their last call
            procs[p.pid] = self._procs.get(p.pid, p)
        procs[self.root.pid] = self.root
        self._procs = procs
        cpu = 0.0
        rss = 0
        read = write = 0.0
        io_known = True
        threads: dict[tuple[int, int], float] = {}
        max_thread: float | None = None
        io: dict[int, tuple[int, int]] = {}
        busy: list[tuple[float, int, Any]] = []
        for pid, p in procs.items():
            try:
                with p.oneshot():
                    share_of_process = p.cpu_percent(None)
                    busy.append((share_of_process, pid, p))
                    cpu += share_of_process
                    rss += p.memory_info().rss
                    try:
                        c = p.io_counters()
                        io[pid] = (c.read_bytes, c.write_bytes)
                        if pid in self._io and dt > 0:
                            read += max(0, c.read_bytes - self._io[pid][0]) / dt
                            write += max(0, c.write_bytes - self._io[pid][1]) / dt
                    except (ps.AccessDenied, AttributeError, NotImplementedError):
                        io_known = False
            except (ps.NoSuchProcess, ps.ZombieProcess):
                continue
            except ps.AccessDenied:
                io_known = False
        # The busiest thread. A thread's share of the interval is at most its process's, so the processes are
        # read busiest first and the rest skipped once none can hold a busier thread than the one found: most
        # of a job's threads are not read at all (reading them was most of watch's CPU time). A process read
        # after being skipped has no previous reading: its threads count from the next sample on.
        for share_of_process, pid, p in sorted(busy, key=lambda b: -b[0]):
            if max_thread is not None and share_of_process <= max_thread:
                break
            try:
                listed = p.threads()
            except (ps.NoSuchProcess, ps.ZombieProcess, ps.AccessDenied):
                continue
            for t in listed:
                total = t.user_time + t.system_time
                threads[(pid, t.id)] = total
                before = self._threads.get((pid, t.id))
                if before is not None and dt > 0:
                    share = max(0.0, total - before) / dt * 100
                    max_thread = share if max_thread is None else max(max_thread, share)
        had_io = bool(self._io)
        self._threads, self._io = threads, io
        s: dict[str, Any] = {"cpu_percent": round(cpu, 1), "rss_bytes": rss, "num_procs": len(procs)}
        if max_thread is not None:
            s["max_thread_cpu_percent"] = round(max_thread, 1)
        if io_known and had_io:
            s["read_bytes_per_s"], s["write_bytes_per_s"] = read, write
        return s


@dataclass(frozen=True)
class WatchResult:
    """What one watch saw: where the trace went, how many samples, how the job ended."""

    out: str
    samples: int
    duration_s: float
    mode: str  # "command" or "pid"
    pid: int
    exit_code: int | None  # the job's exit status (command mode); None in --pid mode
    signal: str | None  # the signal that ended the job (command mode), e.g. "SIGKILL"
    gpus: int

    @property
    def watch_exit_code(self) -> int:
        """What watch exits with: the job's code; 128 + N when a signal N ended it (the shell's convention)."""
        if self.exit_code is None:
            return 0
        return self.exit_code if self.exit_code >= 0 else 128 - self.exit_code


def header(
    *,
    mode: str,
    pid: int,
    command: Sequence[str] | None,
    interval_s: float,
    gpu: WatchGpuBackend | None,
    accelerators: Any,
    progress: Progress | None = None,
) -> dict[str, Any]:
    import psutil

    from .. import __version__

    gpus, status, driver = [], "no NVML backend", None
    if gpu is not None:
        ok, why = gpu.available()
        status = "ok" if ok else why
        if ok:
            driver = gpu.driver_version()
            counters_fn = getattr(gpu, "counters", None)
            counters = counters_fn() if counters_fn is not None else {}
            for r in gpu.readings():
                cid, reason = match_catalog(r, accelerators) if accelerators is not None else (None, "no catalog")
                entry: dict[str, Any] = {
                    "index": r.index,
                    "name": r.name,
                    "uuid": r.uuid,
                    "pci_bus_id": r.pci_bus_id,
                    "pci_device_id": r.pci_device_id,
                    "memory_total_bytes": r.memory_total_bytes,
                    "catalog_id": cid,
                    "catalog_match": reason,
                    "counters": counters.get(r.index, dict.fromkeys(COUNTERS, "not offered by this GPU backend")),
                }
                link = _catalog_nvlink(cid, accelerators)
                if link is not None:
                    entry["nvlink_bytes_per_s_max"] = link  # per direction, the catalog's figure
                gpus.append(entry)
    rec: dict[str, Any] = {
        "record": "header",
        "schema_version": TRACE_SCHEMA_VERSION,
        "kind": "local.watch",
        "gpuplan_version": __version__,
        "started_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "interval_s": interval_s,
        "mode": mode,
        "pid": pid,
        "command": list(command) if command is not None else None,
        "host": {
            "hostname": socket.gethostname(),
            "os": f"{platform.system()} {platform.release()}",
            "cpu_count_logical": psutil.cpu_count(logical=True),
            "cpu_count_physical": psutil.cpu_count(logical=False),
            "mem_total_bytes": psutil.virtual_memory().total,
        },
        "gpu_status": status,
        "driver_version": driver,
        "gpus": gpus,
        "throttle_reason_bits": {f"0x{bit:x}": name for bit, name in REASONS.items()},
    }
    if progress is not None:
        rec["train_progress"] = progress.header()
    return rec


def _catalog_nvlink(cid: str | None, accelerators: Any) -> float | None:
    """The catalog's NVLink bandwidth per direction for this GPU model (the reference of "busy" links in
    diagnose), or None without an NVLink entry."""
    if cid is None or accelerators is None:
        return None
    for a in accelerators:
        if a.id == cid:
            link = a.interconnect
            if link is not None and "nvlink" in link.kind.lower():
                return float(link.bandwidth_bytes_per_s)
            return None
    return None


def _write(f: IO[str], record: dict[str, Any]) -> None:
    f.write(json.dumps(record, allow_nan=False) + "\n")
    f.flush()


def watch(
    out: IO[str],
    out_name: str,
    *,
    command: Sequence[str] | None = None,
    pid: int | None = None,
    interval_s: float = 1.0,
    gpu: WatchGpuBackend | None = None,
    accelerators: Any = None,
    forward_signals: bool = True,
    progress: Progress | None = None,
    tee_fds: tuple[int, int] = (1, 2),
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> WatchResult:
    """Run (``command``) or follow (``pid``) a job, writing the trace to ``out``; return how it ended.

    ``forward_signals``: in command mode, SIGINT and SIGTERM received here go to the job's process group (only
    possible from the main thread; elsewhere they are left alone). ``progress``: read the job's stdout and
    stderr through pipes, copied on at once to ``tee_fds`` (watch's own stdout and stderr), for training
    progress (progress.py); command mode only. ``on_record``: called with each record once it is written (the
    --live view); an exception it raises turns it off for the rest of the run, never stops the watch."""
    import psutil

    if (command is None) == (pid is None):
        raise InputError("--pid", "give either a command (after --) or --pid, not both and not neither")
    if progress is not None and command is None:
        raise InputError("--log-regex", "reads the job's output: run the job under watch (-- CMD), not --pid")
    child: subprocess.Popen[bytes] | None = None
    readers: list[threading.Thread] = []
    if command is not None:
        if not command:
            raise InputError("COMMAND", "the command after -- is empty")
        pipes: dict[str, Any] = {}
        if progress is not None:
            env = dict(os.environ)
            env.setdefault("PYTHONUNBUFFERED", "1")  # a Python job's prints arrive as they happen, not per 8 KiB
            pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "env": env}
        try:
            child = subprocess.Popen(list(command), process_group=0, **pipes)
        except OSError as e:
            raise InputError("COMMAND", f"can't run {command[0]!r}: {e.strerror or e}") from None
        if progress is not None:
            for stream, fd in ((child.stdout, tee_fds[0]), (child.stderr, tee_fds[1])):
                t = threading.Thread(target=_tee, args=(stream, fd, progress), daemon=True)
                t.start()
                readers.append(t)
        job_pid = child.pid
    else:
        assert pid is not None
        job_pid = pid
        if pid == os.getpid():
            raise InputError("--pid", "that is gpuplan itself")
    try:
        tree = TreeSampler(job_pid)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        if child is None:
            raise InputError("--pid", f"no process {pid}") from None
        tree = None  # the child was already gone: still write the header and the summary
    except psutil.AccessDenied:
        raise InputError("--pid", f"not allowed to read process {pid}") from None

    ended = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if child is not None:
        assert child is not None
        proc = child

        def forward(signum: int, _frame: Any) -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signum)

        if forward_signals and threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                previous[s] = signal.signal(s, forward)

        def reap() -> None:
            proc.wait()
            ended.set()

        threading.Thread(target=reap, daemon=True).start()

    viewer = [on_record] if on_record is not None else []

    def show(record: dict[str, Any]) -> None:
        if viewer:
            try:
                viewer[0](record)
            except Exception:  # a broken display (closed terminal) must not stop the trace
                viewer.clear()

    t0 = time.monotonic()
    samples = 0
    write_error: OSError | None = None
    try:
        head = header(
            mode="command" if child is not None else "pid",
            pid=job_pid,
            command=command,
            interval_s=interval_s,
            gpu=gpu,
            accelerators=accelerators,
            progress=progress,
        )
        try:
            _write(out, head)
        except OSError as e:
            write_error = e
        show(head)
        host = HostSampler()
        gpu_ok = gpu is not None and gpu.available()[0]
        gpus_seen = 0
        k = 0
        while write_error is None:
            k += 1
            # sleep until the next tick (drift-free); wakes at once when the child ends
            if ended.wait(max(0.0, t0 + k * interval_s - time.monotonic())):
                break
            proc_sample = tree.sample() if tree is not None else None
            if proc_sample is None and child is None:
                break  # --pid: the process is gone
            rec: dict[str, Any] = {"record": "sample", "t_s": round(time.monotonic() - t0, 3), "host": host.sample()}
            if proc_sample is not None:
                rec["proc"] = proc_sample
            if gpu_ok:
                assert gpu is not None
                try:
                    g = gpu.sample()
                except Exception as e:  # a lost GPU must not stop the watch
                    rec["gpu_error"] = f"{type(e).__name__}: {e}"
                else:
                    rec["gpus"] = g
                    gpus_seen = max(gpus_seen, len(g))
            if progress is not None and (train := progress.take()) is not None:
                rec["train"] = train
            try:
                _write(out, rec)
            except OSError as e:  # a full disk: stop sampling, leave the job alone (command mode: wait for it)
                write_error = e
                break
            show(rec)
            samples += 1
    finally:
        if child is not None:
            child.wait()  # a Ctrl-C here has been forwarded; wait for the job to finish its way
        for r in readers:  # the job's last lines; a daemon it left behind may hold the pipe: do not wait long
            r.join(timeout=2)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        close = getattr(gpu, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()
    duration = time.monotonic() - t0
    code = child.returncode if child is not None else None
    sig = signal.Signals(-code).name if code is not None and code < 0 else None
    result = WatchResult(
        out=out_name,
        samples=samples,
        duration_s=round(duration, 3),
        mode="command" if child is not None else "pid",
        pid=job_pid,
        exit_code=code,
        signal=sig,
        gpus=gpus_seen,
    )
    summary: dict[str, Any] = {
        "record": "summary",
        "t_s": round(duration, 3),
        "samples": samples,
        "exit_code": code,
        "signal": sig,
        "ended": "gone" if code is None else ("signal" if sig else "exited"),
    }
    if progress is not None:
        summary["train_lines"] = progress.matches  # lines the --log-regex matched, the whole run
    if write_error is None:
        try:
            _write(out, summary)
        except OSError as e:
            write_error = e
    if write_error is not None:
        how = (
            f"the job ran on to its end ({f'signal {sig}' if sig else f'exit code {code}'})"
            if child is not None
            else "the process was left alone"
        )
        raise InputError(
            "--out",
            f"can't write {out_name} after {samples} samples: {write_error.strerror or write_error}; sampling "
            f"stopped there, {how}",
        )
    show(summary)
    return result


def _tee(stream: IO[bytes] | None, fd: int, progress: Progress) -> None:
    """Copy the job's output on to ``fd`` as it comes (partial lines too: progress bars), and feed its lines to
    ``progress``. When ``fd`` can no longer be written (closed terminal), keep reading: the job must never block
    on a full pipe."""
    if stream is None:
        return
    lines = LineSplitter()
    alive = True
    read = getattr(stream, "read1", stream.read)
    try:
        while chunk := read(1 << 16):
            if alive:
                alive = _write_all(fd, chunk)
            now = time.monotonic()
            for line in lines.feed(chunk):
                progress.feed(line, now)
        for line in lines.flush():
            progress.feed(line, time.monotonic())
    except (OSError, ValueError):  # the pipe closed under us
        pass
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return False
        view = view[n:]
    return True


def find_pid(name: str) -> int:
    """The one running process tree whose process name is ``name`` or whose command line holds it (``--pid-of``;
    under srun the job's PID differs per node): the top of the matching processes, never gpuplan itself or the
    processes that started it. InputError when none or several trees match."""
    import psutil

    if not name.strip():
        raise InputError("--pid-of", "the name is empty")
    me = psutil.Process()
    mine = {me.pid} | {p.pid for p in me.parents()}
    matches: dict[int, int] = {}  # pid -> parent pid
    for p in psutil.process_iter(["pid", "ppid", "name", "cmdline"]):
        info = p.info
        if info["pid"] in mine:
            continue
        cmdline = " ".join(info.get("cmdline") or [])
        if info.get("name") == name or name in cmdline:
            matches[info["pid"]] = info.get("ppid") or 0
    roots = sorted(pid for pid, parent in matches.items() if parent not in matches)
    if not roots:
        raise InputError("--pid-of", f"no running process matches {name!r}")
    if len(roots) > 1:
        listed = ", ".join(str(r) for r in roots[:8]) + (", ..." if len(roots) > 8 else "")
        raise InputError("--pid-of", f"{len(roots)} process trees match {name!r} (PIDs {listed}): give --pid")
    return roots[0]


def expand_out(path: str) -> str:
    """``{host}`` in --out becomes this machine's short host name (one trace per node under srun or torchrun:
    ``--out 'run-{host}.jsonl'``); nothing else in the path is touched."""
    if "{host}" not in path:
        return path
    host = socket.gethostname().split(".")[0] or "localhost"
    return path.replace("{host}", host.replace("/", "_"))


@dataclass(frozen=True)
class WatchReport:
    """``local watch``: where the trace went and how the job ended; ``exit_code`` is the job's (128 + N for a
    signal N; 0 in --pid mode)."""

    result: WatchResult
    kind = "local.watch"
    fits = True

    @property
    def exit_code(self) -> int:
        return self.result.watch_exit_code

    def to_dict(self) -> dict[str, Any]:
        from ..plan.records import envelope

        r = self.result
        return envelope(
            self.kind,
            out=r.out,
            samples=r.samples,
            duration_s=r.duration_s,
            mode=r.mode,
            pid=r.pid,
            job_exit_code=r.exit_code,
            signal=r.signal,
            gpus=r.gpus,
            exit_code=self.exit_code,
        )


def read_trace(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a trace file, and warnings (a cut-off last line, from a watch that was killed, is skipped
    with a warning; any other bad line is an error)."""
    from pathlib import Path

    from ..catalog.schema import read_file_bytes
    from ..errors import GpuplanError

    # the project's one reader of input files: regular files only (never a FIFO or /dev/zero), size-capped
    data = read_file_bytes(Path(path), error=GpuplanError)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise GpuplanError(f"{path}: not UTF-8 text; is this a gpuplan local watch trace?") from None
    records, warnings = [], []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_constant=_no_constant)
        except ValueError:
            if n == len(lines):
                warnings.append(f"{path}:{n}: the last line is cut off (the watch was killed?); skipped")
                continue
            raise GpuplanError(f"{path}:{n}: not a JSON line; is this a gpuplan local watch trace?") from None
        if not isinstance(rec, dict):
            raise GpuplanError(f"{path}:{n}: not a JSON object; is this a gpuplan local watch trace?")
        for g in rec.get("gpus") or () if rec.get("record") == "sample" else ():
            bad = _out_of_range(g) if isinstance(g, dict) else "a GPU entry that is not an object"
            if bad:
                raise GpuplanError(f"{path}:{n}: {bad}; a trace from gpuplan local watch has none")
        records.append(rec)
    if not records or records[0].get("record") != "header" or records[0].get("kind") != "local.watch":
        raise GpuplanError(f"{path}: no local.watch header on the first line; is this a gpuplan local watch trace?")
    version = records[0].get("schema_version")
    if version != TRACE_SCHEMA_VERSION:
        raise GpuplanError(f"{path}: trace schema_version {version!r}; this gpuplan reads {TRACE_SCHEMA_VERSION}")
    return records, warnings


#: GPU sample fields that are fractions (GPM's activity shares) or percentages (NVML utilization)
_FRACTIONS = ("sm_active", "sm_occupancy", "dram_active", "tensor_active", "fp16_active", "fp32_active", "fp64_active")
_PERCENTS = ("util_percent", "mem_util_percent")


def _out_of_range(g: dict[str, Any]) -> str | None:
    """Why a GPU sample's activity field cannot be a reading (a share below 0 or above 1, a percentage outside
    0-100), or None."""
    for keys, top in ((_FRACTIONS, 1.0), (_PERCENTS, 100.0)):
        for k in keys:
            v = g.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not 0 <= v <= top:
                return f"{k} {v} is outside 0-{top:g}"
    return None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number")
