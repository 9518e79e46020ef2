"""local watch under faults and real CPU-side load (issue #19's test list): a full disk for --out, a GPU that
fails or disappears mid-run, a loader-bound job (worker processes busy), an I/O-bound reader over a real file."""

from __future__ import annotations

import io
import json
import os
import sys
from itertools import pairwise

import pytest

import gpuplan
from gpuplan.errors import InputError
from gpuplan.local.diagnose import diagnose
from gpuplan.local.watch import watch

PY = sys.executable


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


class FullAfter(io.StringIO):
    """A trace file whose disk fills after ``n`` lines: later writes fail with ENOSPC, as on a full disk."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def write(self, s: str) -> int:
        if self.left <= 0:
            raise OSError(28, "No space left on device")
        self.left -= 1
        return super().write(s)


def test_a_full_disk_stops_sampling_and_leaves_the_job_to_finish(tmp_path):
    flag = tmp_path / "done"
    job = [PY, "-c", f"import time, pathlib; time.sleep(0.6); pathlib.Path({str(flag)!r}).write_text('ok')"]
    out = FullAfter(3)  # the header and two samples
    with pytest.raises(InputError) as e:
        watch(out, "run.jsonl", command=job, interval_s=0.05, forward_signals=False)
    msg = str(e.value)
    assert "No space left on device" in msg and "after 2 samples" in msg and "exit code 0" in msg
    assert flag.read_text() == "ok"  # the job was never stopped
    recs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["record"] for r in recs] == ["header", "sample", "sample"]  # what was written still reads


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_dev_full_through_the_api_is_one_error():
    with pytest.raises(InputError, match="No space left on device"):
        gpuplan.local_watch([PY, "-c", "import time; time.sleep(0.2)"], interval="50ms", out="/dev/full")


class FlakyGpus:
    """Two GPUs, then GPU 1 falls off the bus, then NVML fails outright, then it answers again."""

    def __init__(self) -> None:
        self.calls = 0

    def available(self):
        return True, ""

    def driver_version(self):
        return "550.54.15"

    def readings(self):
        return []

    def sample(self):
        self.calls += 1
        if self.calls in (5, 6):
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        gpus = [{"index": 0, "util_percent": 95}, {"index": 1, "util_percent": 94}]
        return gpus if self.calls <= 2 else gpus[:1]


def test_a_gpu_that_disappears_or_fails_mid_run_never_stops_the_watch(tmp_path):
    out = tmp_path / "run.jsonl"
    r = gpuplan.local_watch(
        [PY, "-c", "import time; time.sleep(0.6)"], interval="50ms", out=out, gpu_backend=FlakyGpus()
    )
    recs = _lines(out)
    samples = [s for s in recs if s["record"] == "sample"]
    assert r.exit_code == 0 and recs[-1]["record"] == "summary" and len(samples) >= 8
    assert [len(s["gpus"]) for s in samples[:4]] == [2, 2, 1, 1]
    assert all("gpus" not in s and "NVML_ERROR_GPU_IS_LOST" in s["gpu_error"] for s in samples[4:6])
    assert all(len(s["gpus"]) == 1 for s in samples[6:])
    assert r.result.gpus == 2 and diagnose(recs).samples == len(samples)


def _job_samples(tmp_path, code, interval="100ms"):
    out = tmp_path / "run.jsonl"
    r = gpuplan.local_watch([PY, "-c", code], interval=interval, out=out)
    assert r.exit_code == 0
    return [s for s in _lines(out) if s["record"] == "sample" and "proc" in s]


def test_a_loader_bound_job_shows_its_busy_worker_processes(tmp_path):
    code = (
        "import multiprocessing as mp, time\n"
        "def spin(s):\n"
        "    end = time.time() + s\n"
        "    while time.time() < end: pass\n"
        "if __name__ == '__main__':\n"
        "    ps = [mp.Process(target=spin, args=(1.5,)) for _ in range(2)]\n"
        "    [p.start() for p in ps]; [p.join() for p in ps]\n"
    )
    samples = _job_samples(tmp_path, code)
    assert max(s["proc"]["num_procs"] for s in samples) == 3  # the job and its two workers
    # two spinning workers on a shared 2-core machine: well above one idle process's ~0 %
    assert max(s["proc"]["cpu_percent"] for s in samples) >= 60


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="needs posix_fadvise to drop the page cache")
def test_an_io_bound_reader_over_a_real_file_shows_its_read_rate(tmp_path):
    data = tmp_path / "shard.bin"
    with open(data, "wb") as f:
        f.write(os.urandom(32 << 20))
        f.flush()
        os.fsync(f.fileno())
    code = (
        "import os, time\n"
        f"fd = os.open({str(data)!r}, os.O_RDONLY)\n"
        "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # from the disk, not the page cache\n"
        "time.sleep(0.3)\n"
        "while os.read(fd, 1 << 20): time.sleep(0.01)\n"
        "time.sleep(0.4)  # alive at the next sample, so its counters are read once more\n"
    )
    samples = _job_samples(tmp_path, code)
    rates = [(s["t_s"], s["proc"].get("read_bytes_per_s")) for s in samples]
    if all(r is None for _, r in rates):
        pytest.skip("the process's I/O counters are not readable here")
    read = sum(r * (t - t0) for (t0, _), (t, r) in pairwise(rates) if r is not None)
    if read == 0:
        pytest.skip("the file system served the reads without block I/O (tmpfs or a cache fadvise cannot drop)")
    assert 16 << 20 <= read <= 64 << 20  # ~32 MiB read, integrated over the samples' intervals
