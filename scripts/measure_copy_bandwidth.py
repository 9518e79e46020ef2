"""Device-to-device copy bandwidth on a GPU by buffer size, timed with CUDA events (issue #20: why ``gpuplan
local bench memory`` reads below the 4.3 TB/s this workplace saw on an H200 with an 8.6 GB copy).

    python scripts/measure_copy_bandwidth.py --out docs/measurements/copy_bandwidth_h200.json

Bytes moved count read plus write (2 x the buffer), as ``local bench memory`` and the datasheet comparison
do. Each size: 3 warm-up copies, then the best and median of 20.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-gib", default="0.25,0.5,1,2,4,8")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU here: run this on a GPU machine")

    rows = []
    for gib in map(float, args.sizes_gib.split(",")):
        n = int(gib * 2**30)
        src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        times = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        rows.append(
            {
                "buffer_bytes": n,
                "best_bytes_per_s": 2 * n / min(times),
                "median_bytes_per_s": 2 * n / statistics.median(times),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        del src, dst
        torch.cuda.empty_cache()
    record = {
        "kind": "measurement.copy_bandwidth",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "gpu": torch.cuda.get_device_name(0),
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda},
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
