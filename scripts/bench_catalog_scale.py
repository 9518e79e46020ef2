"""Time gpuplan's commands on very large catalogs (100,000 accelerators, offers or models by default).

Generates the catalogs in a temporary folder, then runs each command in a fresh process (so start-up,
parsing and validation are all counted) and prints its wall time, with the target beside it: once with
the catalog cache off (cold: parse and validate) and the median of ``-r`` runs with it on (warm; the
cache lives in a private temporary $XDG_CACHE_HOME, filled by the first run):

    python scripts/bench_catalog_scale.py            # 100,000 entries per catalog
    python scripts/bench_catalog_scale.py -n 20000   # smaller
    python scripts/bench_catalog_scale.py --config-dir   # plant the files in $GPUPLAN_CONFIG_DIR instead

Targets (2-core machine): list commands under 2 s, ``train ... --rank`` and ``serve ... --rank`` under 5 s.
Each line also shows the 1-minute load average when the command ran (other work on the machine slows it).
``--only TEXT`` runs the commands whose label contains TEXT.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The bundled GPUs the generated offers name (and ``serve --rank`` compares).
OFFER_GPUS = ["h100-sxm-80gb", "a100-sxm-80gb", "b200", "l4"]
SERVE_GPUS = ",".join(OFFER_GPUS)


def accelerators(n: int) -> dict:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"scale-gpu-{i}",
                "name": f"Scale GPU {i}",
                "vendor": "other",
                "architecture": "Scale",
                "form_factor": "PCIe",
                "year": 2020 + i % 6,
                "aliases": [f"sg{i}", "scale-any"],
                "memory_bytes": 16_000_000_000 + (i % 64) * 1_000_000_000,
                "memory_type": "HBM3",
                "memory_bandwidth_bytes_per_s": 1e12 + i * 1e6,
                "tdp_w": 300 + i % 400,
                "pcie_gen": 5,
                "peak_flops_per_s": {"bf16": 1e14 + i * 1e9, "fp8": 2e14 + i * 1e9},
                "interconnect": {"kind": "NVLink 4", "bandwidth_bytes_per_s": 450e9},
                "sources": {"default": {"title": "generated", "url": "https://example.com", "date": "2026-01"}},
            }
        )
    return {"schema_version": 1, "accelerator": rows}


def offers(n: int, gpus: list[str]) -> dict:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"scale-offer-{i}",
                "provider": f"prov{i % 50}",
                "instance": f"inst-{i}",
                "region": "r1",
                "gpu": gpus[i % len(gpus)],
                "gpu_count": 8,
                "usd_per_hour": 10 + (i % 997) / 10,
                "pricing": "on-demand",
                "price_date": "2026-01",
                "source": {"title": "generated", "url": "https://example.com", "date": "2026-01"},
            }
        )
    return {"schema_version": 1, "offer": rows}


def models(n: int) -> dict:
    cfg = {
        "model_type": "llama",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
    }
    return {
        "schema_version": 1,
        "models": [
            {
                "id": f"scale-model-{i}",
                "name": f"Scale model {i}",
                "family": f"fam{i % 20}",
                "aliases": [f"sm{i}"],
                "config": dict(cfg, hidden_size=256 + 64 * (i % 8)),
            }
            for i in range(n)
        ],
    }


def write_catalogs(folder: Path, n: int) -> dict[str, Path]:
    files = {
        "accelerators": folder / "accelerators.json",
        "offers": folder / "offers.json",
        "models": folder / "models.json",
    }
    files["accelerators"].write_text(json.dumps(accelerators(n)))
    files["offers"].write_text(json.dumps(offers(n, OFFER_GPUS)))
    files["models"].write_text(json.dumps(models(n)))
    return files


def timed(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "gpuplan", *args], env=env, capture_output=True, text=True)
    return time.perf_counter() - start, p.returncode, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=100_000, help="entries per catalog [100000]")
    ap.add_argument("-r", "--repeat", type=int, default=3, help="warm runs per command (median) [3]")
    ap.add_argument("--config-dir", action="store_true", help="plant the catalogs in the config folder, not --catalog")
    ap.add_argument("--only", default="", help="only the commands whose label contains this text")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuplan-scale-") as tmp:
        root = Path(tmp)
        conf = root / "config"
        conf.mkdir()
        t0 = time.perf_counter()
        files = write_catalogs(root if not a.config_dir else conf, a.n)
        if a.config_dir:
            (conf / "models").mkdir()
            files["models"].rename(conf / "models" / "scale.json")
        print(
            f"generated {a.n:,} accelerators, offers and models in {time.perf_counter() - t0:.1f} s "
            f"({'config dir' if a.config_dir else '--catalog'})"
        )
        env = {
            **os.environ,
            "GPUPLAN_CONFIG_DIR": str(conf),
            "HF_HUB_OFFLINE": "1",
            "XDG_CACHE_HOME": str(root / "cache"),
        }
        env.pop("GPUPLAN_NO_CACHE", None)
        print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")

        def cat(*names: str) -> list[str]:
            return [] if a.config_dir else [x for n in names for x in ("--catalog", str(files[n]))]

        cases = [
            ("gpus list", cat("accelerators") + ["gpus", "list"], 2.0),
            ("gpus list --json", cat("accelerators") + ["gpus", "list", "--json"], 2.0),
            ("gpus show", cat("accelerators") + ["gpus", "show", "sg99"], 2.0),
            ("offers list", cat("offers") + ["offers", "list"], 2.0),
            ("offers list --json", cat("offers") + ["offers", "list", "--json"], 2.0),
            ("offers list (+gpus)", cat("accelerators", "offers") + ["offers", "list"], 2.0),
            ("model list", cat("models") + ["model", "list"], 2.0),
            ("model list --json", cat("models") + ["model", "list", "--json"], 2.0),
            ("model show", cat("models") + ["model", "show", "sm7"], 2.0),
            (
                "train --rank",
                cat("offers")
                + ["train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--tokens", "1T", "--rank"],
                5.0,
            ),
            (
                "train --rank --json",
                cat("offers")
                + ["train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--tokens", "1T", "--rank"]
                + ["--json"],
                5.0,
            ),
            (
                "train --rank (all)",
                cat("accelerators", "offers", "models")
                + ["train", "sm3", "--gpu", "h100", "--gpus", "8", "--tokens", "1T", "--rank"],
                5.0,
            ),
            ("serve --rank", cat("offers") + ["serve", "llama-3.1-8b", "--gpu", SERVE_GPUS, "--rank"], 5.0),
            (
                "serve --rank (all)",
                cat("accelerators", "offers", "models") + ["serve", "sm3", "--gpu", SERVE_GPUS, "--rank"],
                5.0,
            ),
            ("unknown gpu", cat("accelerators") + ["gpus", "show", "scale-gpu-x"], 2.0),
        ]
        worst = 0.0
        print(f"{'':5}{'command':<22} {'cold':>8} {'warm (median of ' + str(a.repeat) + ')':>20}  target  load")
        for label, args, target in cases:
            if a.only not in label:
                continue
            cold, code, last = timed(args, {**env, "GPUPLAN_NO_CACHE": "1"})
            timed(args, env)  # fills the cache
            warm_runs = [timed(args, env) for _ in range(max(1, a.repeat))]
            warm = statistics.median(t for t, _, _ in warm_runs)
            worst = max(worst, warm / target)
            flag = "ok  " if warm < target else "SLOW"
            load = os.getloadavg()[0]
            print(
                f"{flag} {label:<22} {cold:6.2f} s {warm:18.2f} s  {target:g} s     {load:4.2f}  exit {code}"
                + (f"  [{last[:100]}]" if code not in (0, 3) else "")
            )
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
