"""Distil gpuplan's own GPU recordings (docs/measurements/*.json) into the package's validation data.

The raw recordings stay under docs/measurements/ (they hold the whole run: every step's time, the estimate of the
day, the command). This script copies the measured figures of each run, with the exact gpuplan job that describes
it, into ``src/gpuplan/data/validation/measured_gpu.json``, one record per run, in the folder's record schema
(data/validation/README.md) plus a ``gpuplan`` block with the catalog ids (these are our own runs, so nothing has to
be guessed from a GPU's name). ``gpuplan validate`` and the tests read that file.

Nothing is typed in by hand: every number comes from the raw files, the driver from session_h200.json.

    python scripts/distill_measurements.py          # rewrite measured_gpu.json
    python scripts/distill_measurements.py --check  # exit 1 if the bundled file is not what the raw files give
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RAW = REPO / "docs" / "measurements"
OUT = REPO / "src" / "gpuplan" / "data" / "validation" / "measured_gpu.json"

#: One lease's recordings are one source for leave-one-source-out (plan/validate.py ``source_key``).
CAMPAIGN = "gpuplan H200 recordings 2026-11-27"
TRAINING = "training_memory_h200.json"
INFERENCE = ("inference_compiled_h200.json", "inference_h200.json")
SESSION = "session_h200.json"

#: The job fields of a training row that describe the run to ``gpuplan train`` (the rest are planner defaults).
TRAIN_JOB_FIELDS = (
    "micro_batch",
    "seq_len",
    "precision",
    "recipe",
    "optimizer",
    "method",
    "lora_rank",
    "lora_targets",
    "quant",
    "recompute",
    "flash_attention",
    "dropout",
    "stack",
)

#: What the recording scripts' engine labels mean as a gpuplan ``serve --engine`` (None: no profile describes it).
ENGINES: dict[str, tuple[str | None, str]] = {
    "torch-compile": (
        "hf",
        "transformers with a StaticCache, decode step under torch.compile(mode='reduce-overhead'): serve --engine hf",
    ),
    "hf-cuda-graph": (
        None,
        "decode replayed from a CUDA graph of transformers' eager kernels (no kernel fusion): no engine profile "
        "describes it; the prefill (TTFT) and the memory peak are the same eager forward as the torch-compile rows",
    ),
    "hf-eager": (None, "eager transformers decode: no engine profile describes it"),
}


def _value(metric: str, value: Any, unit: str, note: str = "", confidence: str = "exact-from-source") -> dict:
    out = {"metric": metric, "value": value, "unit": unit, "confidence": confidence}
    if note:
        out["note"] = note
    return out


def _source(raw: dict, session: dict, name: str, location: str) -> dict:
    torch = raw.get("versions", {}).get("torch", "unknown torch")
    gpu = str(raw.get("gpu", "GPU")).replace("NVIDIA ", "")
    return {
        "title": f"gpuplan measurement, docs/measurements/{name} ({raw['date']}, {gpu}, "
        f"driver {session.get('driver', 'unknown')}, torch {torch})",
        "location": location,
        "path": f"docs/measurements/{name}",
        "campaign": CAMPAIGN,
    }


def training_records(raw: dict, session: dict) -> list[dict]:
    """One record per single-GPU training run: median step time and peak allocator memory."""
    out = []
    for row in raw["rows"]:
        m, job = row["measured"], row["job"]
        model = row.get("model", raw["model"])
        tokens = job["micro_batch"] * job["seq_len"]
        values = []
        if "median_step_s" in m:
            values.append(
                _value(
                    "median_step_s",
                    m["median_step_s"],
                    "s",
                    f"median of {m.get('steps')} timed steps after {m.get('warmup_steps')} warm-up steps",
                )
            )
        values.append(_value("max_memory_allocated_bytes", m["max_memory_allocated_bytes"], "bytes"))
        values.append(_value("max_memory_reserved_bytes", m["max_memory_reserved_bytes"], "bytes"))
        out.append(
            {
                "id": f"gpuplan-h200-train-{row['case']}",
                "record_type": "training_run",
                "title": f"{model}, {row['case']}, one {raw['gpu']} (gpuplan measurement)",
                "model": {"name": model, "seq_len": job["seq_len"]},
                "hardware": {"gpu": raw["gpu"], "count": 1},
                "parallelism": {"dp": 1, "tp": 1, "pp": 1, "recompute": job["recompute"]},
                "precision": job["precision"],
                "batch": {"micro_batch_seqs": job["micro_batch"], "global_batch_seqs": job["micro_batch"]},
                "tokens": {"per_step": tokens},
                "framework": {
                    "name": "PyTorch eager + Hugging Face transformers (random weights)",
                    "versions": raw.get("versions", {}),
                },
                "values": values,
                "source": _source(raw, session, TRAINING, f"rows[case={row['case']}]"),
                "gpuplan": {
                    "model": model,
                    "gpu": raw["gpu_id"],
                    "layout": {"gpus": 1, "tp": 1, "pp": 1},
                    "job": {k: job[k] for k in TRAIN_JOB_FIELDS if k in job},
                },
                "reproduction": raw["command"],
                "caveats": "single GPU, no communication; max_memory_* are PyTorch's caching-allocator peaks "
                "(the CUDA context lives outside them)",
            }
        )
    return out


def inference_records(raw: dict, session: dict, name: str) -> list[dict]:
    """One record per decoding run: TTFT, the decode step time(s) measured, peak allocator memory."""
    out = []
    for row in raw["rows"]:
        m = row["measured"]
        engine, meaning = ENGINES.get(row["engine"], (None, f"engine label '{row['engine']}' not known"))
        steps = m["decode_steps"]
        values = [_value("ttft_s", m["ttft_s"], "s", "one prefill forward over the prompt, after a warm-up")]
        for key, note in (
            ("tpot_eager_s", "median eager decode step"),
            ("tpot_graph_s", "median decode step replayed from a CUDA graph of the eager kernels"),
            ("tpot_compiled_s", "median decode step under torch.compile(mode='reduce-overhead')"),
        ):
            if key in m:
                values.append(_value(key, m[key], "s", note))
        values.append(_value("max_memory_allocated_bytes", m["max_memory_allocated_bytes"], "bytes"))
        values.append(_value("max_memory_reserved_bytes", m["max_memory_reserved_bytes"], "bytes"))
        rid = f"gpuplan-h200-serve-{row['engine']}-{row['model']}-b{row['batch']}-p{row['prompt_tokens']}"
        out.append(
            {
                "id": rid,
                "record_type": "inference_run",
                "title": f"{row['model']}, batch {row['batch']}, prompt {row['prompt_tokens']}, {row['engine']}, "
                f"one {raw['gpu']} (gpuplan measurement)",
                "model": {"name": row["model"]},
                "hardware": {"gpu": raw["gpu"], "count": 1},
                "setup": {
                    "weights": "bf16",
                    "kv_cache_dtype": "bf16",
                    "tp": 1,
                    "batch": row["batch"],
                    "input_tokens": row["prompt_tokens"],
                    "output_tokens": steps,
                    # scripts/measure_inference.py: max_len = prompt + 3 x steps + 16 (eager, graph and compiled
                    # steps each write their own positions); a static cache is attended in full
                    "static_cache_tokens": row["prompt_tokens"] + 3 * steps + 16,
                },
                "engine": {"name": row["engine"], "meaning": meaning, "versions": raw.get("versions", {})},
                "values": values,
                "source": _source(
                    raw,
                    session,
                    name,
                    f"rows[model={row['model']}, batch={row['batch']}, prompt={row['prompt_tokens']}]",
                ),
                "gpuplan": {
                    "model": row["model"],
                    "gpu": raw["gpu_id"],
                    "layout": {"tp": 1, "pp": 1, "replicas": 1},
                    "job": {
                        "engine": engine,
                        "weights": "bf16",
                        "kv_cache": "bf16",
                        "batch": row["batch"],
                        "prompt_tokens": row["prompt_tokens"],
                        "output_tokens": 3 * steps + 16,
                    },
                },
                "reproduction": raw["command"],
                "caveats": "random weights, greedy decoding; the prefill is eager in every row",
            }
        )
    return out


def distill() -> dict:
    session = json.loads((RAW / SESSION).read_text(encoding="utf-8"))
    records = training_records(json.loads((RAW / TRAINING).read_text(encoding="utf-8")), session)
    for name in INFERENCE:
        records += inference_records(json.loads((RAW / name).read_text(encoding="utf-8")), session, name)
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        raise SystemExit("error: duplicate record ids in the distilled recordings")
    return {
        "schema_version": 1,
        "category": "measured",
        "description": "gpuplan's own measurements on real GPUs, distilled from docs/measurements/ by "
        "scripts/distill_measurements.py: single-GPU training runs (median step time, allocator peaks) and "
        "decoding runs (TTFT, TPOT, allocator peaks), each with the exact gpuplan job (the `gpuplan` block)",
        "confidence_levels": {"exact-from-source": "the figure as the recording script wrote it"},
        "generated_by": "scripts/distill_measurements.py",
        "count": len(records),
        "records": records,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the bundled file instead of writing it")
    args = ap.parse_args()
    text = json.dumps(distill(), indent=2) + "\n"
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print("measured_gpu.json is current" if same else "measured_gpu.json differs: rerun the script")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
