"""Measure the kernels behind gpuplan's training step-time terms on this machine's GPU: attention (each PyTorch
SDPA backend, forward and backward, causal and not, long sequences and the chunk shapes of load-balanced ring
attention, head dims 32 to 256), MoE grouped GEMMs at real expert shapes, dense linear layers in bf16 and fp8
tensorwise, the special-function unit's exponential throughput (``sfu``: MUFU.EX2 per SM and clock), and
FlexAttention (``flex``: compiled, causal and a causal sliding window, gpt-oss's shapes and a Llama baseline).

    python scripts/measure_kernels.py --out docs/measurements/kernels_h200.json     # GPU
    python scripts/measure_kernels.py --device cpu --smoke                          # CPU: harness only

Times are CUDA-event medians of ``--reps`` calls after ``--warmup`` calls. FLOPs follow gpuplan's counts:
attention forward 2 x q x kv x heads x (qk_dim + v_dim) (causal: the unmasked half, (q*kv/2 + q/2) for q == kv),
backward 2.5 x forward (FlashAttention-2, Algorithm 2: the scores recomputed beside dV, dP, dQ, dK); a GEMM
2 m n k. Each case records its error string instead of a time when the backend refuses the shape, so one
failure cannot lose the rest: the JSON is rewritten after every case.
"""

# Each closure below is timed at once by timed(), inside the iteration that defines it: binding late is harmless.
# ruff: noqa: B023

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _gpu_facts() -> dict[str, Any]:
    q = "name,driver_version,power.limit,power.max_limit,clocks.max.sm,clocks.sm,temperature.gpu"
    try:
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(zip(q.split(","), (v.strip() for v in line.split(",")), strict=False)) if line else {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU check of the harness)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument(
        "--only",
        default="attention,grouped,linear",
        help="comma list of sections: attention, grouped, linear, hf, power, sfu, flex",
    )
    ap.add_argument(
        "--attention-set",
        choices=["base", "extended", "headdim"],
        default="base",
        help="extended: shorter sequences, batch, head shapes and grouped K/V (the falloff); headdim: causal 4k at "
        "head dims 32 to 256 (4096 channels), each also run for --clock-seconds under NVML clock sampling",
    )
    ap.add_argument("--power-seconds", type=float, default=8.0, help="seconds of sustained load per kernel (power)")
    ap.add_argument(
        "--clock-seconds", type=float, default=1.5, help="seconds of load per headdim case and sfu run (SM clock)"
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device == "cuda"
    scale = 1 / 64 if args.smoke else 1  # sequence lengths and widths shrink for --smoke
    rec: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count if cuda else None,
        "nvidia_smi_before": _gpu_facts() if cuda else {},
        "timing": f"CUDA events, median of {args.reps} after {args.warmup} warm-up calls",
        "attention": [],
        "grouped_gemm": [],
        "linear": [],
    }

    def save() -> None:
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(rec, indent=1) + "\n")

    def timed(fn) -> float:
        for _ in range(args.warmup):
            fn()
        if not cuda:
            ts = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            return statistics.median(ts)
        ts = []
        for _ in range(args.reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3)
        return statistics.median(ts)

    sections = set(args.only.split(","))
    dt = torch.bfloat16

    import threading

    nvml_sample = None  # () -> (power W, SM clock MHz), where NVML answers
    if cuda:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())

            def nvml_sample() -> tuple[float, float]:
                return (
                    pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
                    float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                )
        except Exception as e:
            rec["nvml"] = f"NVML unavailable: {type(e).__name__}: {e}"[:300]

    def sustained(fn, seconds: float) -> dict[str, Any]:
        """Call ``fn`` back to back for ``seconds`` while NVML is sampled every 50 ms: calls, wall seconds, and the
        median power and SM clock after the first third (the clock has settled)."""
        fn()
        if cuda:
            torch.cuda.synchronize()
        samples: list[tuple[float, float]] = []
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set() and nvml_sample is not None:
                samples.append(nvml_sample())
                time.sleep(0.05)

        t = threading.Thread(target=poll)
        calls, t0 = 0, time.perf_counter()
        t.start()
        while time.perf_counter() - t0 < seconds:
            for _ in range(4):
                fn()
            if cuda:
                torch.cuda.synchronize()
            calls += 4
        wall = time.perf_counter() - t0
        stop.set()
        t.join()
        late = samples[len(samples) // 3 :]
        return {
            "calls": calls,
            "seconds": wall,
            "power_w_median": statistics.median(p for p, _ in late) if late else None,
            "sm_clock_mhz_median": statistics.median(c for _, c in late) if late else None,
            "sm_clock_mhz_min": min((c for _, c in late), default=None),
        }

    # ---------------- attention
    if "attention" in sections:
        backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}
        if cuda:
            backends["cudnn"] = SDPBackend.CUDNN_ATTENTION
        else:
            backends = {"math": SDPBackend.MATH}
        H, D = 32, 128  # Llama 3 8B: 32 query heads of 128 (torchtitan repeats the 8 K/V heads up to 32)
        if args.smoke:
            H, D = 4, 32
        # (label, batch, q_len, kv_len, causal[, heads, kv_heads, qk_dim, v_dim]): whole causal sequences, and the
        # chunks a rank holding 32k tokens runs under load-balanced ring attention (cp 4 at 128k and cp 8 at 256k
        # alike): the diagonal step causal over its 32k, the others all of q against half the K/V or half of q
        # against all
        cases: list[tuple[Any, ...]] = [
            ("causal-2k", 16, 2048, 2048, True),
            ("causal-8k", 4, 8192, 8192, True),
            ("causal-32k", 1, 32768, 32768, True),
            ("causal-128k", 1, 131072, 131072, True),
            ("full-8k", 4, 8192, 8192, False),
            ("ring-q32k-kv16k", 1, 32768, 16384, False),
            ("ring-q16k-kv32k", 1, 16384, 32768, False),
        ]
        if args.attention_set == "extended":  # the sequence-length falloff, batch, head shapes, grouped K/V
            cases = [
                ("causal-1k", 32, 1024, 1024, True),
                ("causal-2k", 16, 2048, 2048, True),
                ("causal-2k-b64", 64, 2048, 2048, True),
                ("causal-4k", 8, 4096, 4096, True),
                ("causal-16k", 2, 16384, 16384, True),
                ("full-1k", 32, 1024, 1024, False),
                ("full-2k", 16, 2048, 2048, False),
                ("full-4k", 8, 4096, 4096, False),
                ("causal-4k-h64d64", 8, 4096, 4096, True, 64, 64, 64, 64),
                ("causal-4k-gqa8", 8, 4096, 4096, True, 32, 8, 128, 128),
                ("causal-4k-qk192-v128", 8, 4096, 4096, True, 128, 128, 192, 128),
            ]
        if args.attention_set == "headdim":  # the head dim at a fixed width (heads x dim = 4096 channels)
            dims = (32, 64, 96, 128, 192, 256)
            cases = [(f"causal-4k-d{d}", 8, 4096, 4096, True, 4096 // d, 4096 // d, d, d) for d in dims]
        for case in cases:
            label, b, sq, skv, causal = case[:5]
            heads, kv_heads, dqk, dv = case[5:] if len(case) > 5 else (H, H, D, D)
            if args.smoke:
                heads, kv_heads = max(1, heads // 8), max(1, kv_heads // 8)
                dqk, dv = max(16, dqk // 4), max(16, dv // 4)
            sq, skv = max(64, int(sq * scale)), max(64, int(skv * scale))
            pairs = sq * skv / 2 + sq / 2 if causal else sq * skv
            fwd_flops = 2.0 * b * heads * (dqk + dv) * pairs
            for name, be in backends.items():
                if label == "causal-128k" and name != "flash" and not args.smoke:
                    continue  # one backend at 128k is enough to see the trend (time)
                row: dict[str, Any] = {
                    "case": label,
                    "backend": name,
                    "batch": b,
                    "heads": heads,
                    "kv_heads": kv_heads,
                    "qk_head_dim": dqk,
                    "v_head_dim": dv,
                    "q_len": sq,
                    "kv_len": skv,
                    "causal": causal,
                    "fwd_flops": fwd_flops,
                    "bwd_flops": 2.5 * fwd_flops,
                }
                try:
                    q = torch.randn(b, heads, sq, dqk, device=device, dtype=dt, requires_grad=True)
                    k = torch.randn(b, kv_heads, skv, dqk, device=device, dtype=dt, requires_grad=True)
                    v = torch.randn(b, kv_heads, skv, dv, device=device, dtype=dt, requires_grad=True)
                    gqa = {"enable_gqa": True} if kv_heads != heads else {}
                    with sdpa_kernel([be]):
                        with torch.no_grad():
                            fwd_s = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa))
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                        g = torch.randn_like(out)

                        def both() -> None:
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                            o.backward(g)

                        both_s = timed(both)
                        if args.attention_set == "headdim":  # the SM clock this kernel holds under load
                            row["sustained_fwd_bwd"] = sustained(both, args.clock_seconds)
                    bwd_s = both_s - fwd_s
                    row.update(
                        fwd_s=fwd_s,
                        fwd_bwd_s=both_s,
                        bwd_s=bwd_s,
                        fwd_tflops=fwd_flops / fwd_s / 1e12,
                        bwd_tflops=2.5 * fwd_flops / bwd_s / 1e12 if bwd_s > 0 else None,
                        fwd_bwd_tflops=3.5 * fwd_flops / both_s / 1e12,
                    )
                    del q, k, v, out, g
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                rec["attention"].append(row)
                print(json.dumps({k: row.get(k) for k in ("case", "backend", "fwd_tflops", "bwd_tflops", "error")}))
                save()
                if cuda:
                    torch.cuda.empty_cache()
        # which backend plain SDPA picks for a causal bf16 call (what Hugging Face's sdpa path and torchtitan get)
        if cuda:
            try:
                from torch.profiler import ProfilerActivity, profile

                q = torch.randn(1, H, 4096, D, device=device, dtype=dt, requires_grad=True)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
                    torch.cuda.synchronize()
                names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
                rec["sdpa_default_kernels"] = [
                    n[:160]
                    for n in names
                    if "attn" in n.lower()
                    or "fmha" in n.lower()
                    or "flash" in n.lower()
                    or "cudnn" in n.lower()
                    or "sm90" in n.lower()
                ]
            except Exception as e:
                rec["sdpa_default_kernels"] = f"{type(e).__name__}: {e}"[:300]
            save()

    # ---------------- MoE grouped GEMMs
    if "grouped" in sections and hasattr(torch, "_grouped_mm") and cuda:
        # (model, hidden, expert FFN): gate+up projection h -> 2f, down projection f -> h
        models = [
            ("qwen3-30b-a3b", 2048, 768),
            ("gpt-oss-120b", 2880, 2880),
            ("mixtral-8x7b", 4096, 14336),
            ("deepseek-v3", 7168, 2048),
        ]
        for mname, hdim, ffn in models:
            for experts in (8, 32):
                for rows in (128, 512, 2048, 8192):
                    if experts * rows * max(hdim, 2 * ffn) * 2 > 8e9:
                        continue
                    for proj, kdim, ndim in (("gate_up", hdim, 2 * ffn), ("down", ffn, hdim)):
                        row = {
                            "model": mname,
                            "local_experts": experts,
                            "rows_per_expert": rows,
                            "proj": proj,
                            "k": kdim,
                            "n": ndim,
                        }
                        try:
                            x = torch.randn(experts * rows, kdim, device=device, dtype=dt)
                            w = torch.randn(experts, ndim, kdim, device=device, dtype=dt).transpose(-2, -1)
                            offs = torch.arange(1, experts + 1, device=device, dtype=torch.int32) * rows
                            flops = 2.0 * experts * rows * kdim * ndim
                            s = timed(lambda: torch._grouped_mm(x, w, offs=offs))
                            wd = torch.randn(ndim, kdim, device=device, dtype=dt)
                            dense_s = timed(lambda: x @ wd.t())  # one GEMM with the same rows: the ceiling
                            row.update(
                                grouped_s=s,
                                grouped_tflops=flops / s / 1e12,
                                dense_same_rows_tflops=flops / dense_s / 1e12,
                            )
                            del x, w, wd
                        except Exception as e:
                            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                        rec["grouped_gemm"].append(row)
                        print(json.dumps(row))
                        save()

    # ---------------- dense linears, bf16 and fp8 tensorwise (torchtitan float8's _scaled_mm)
    if "linear" in sections and cuda:
        # Llama 3.1 8B's linears: (name, k, n) as x[m, k] @ W^T[k, n]
        shapes = [("qkv", 4096, 6144), ("o", 4096, 4096), ("gate_up", 4096, 28672), ("down", 14336, 4096)]
        for m in (4096, 32768):
            for name, kdim, ndim in shapes:
                row = {"m": m, "proj": name, "k": kdim, "n": ndim}
                flops = 2.0 * m * kdim * ndim
                try:
                    x = torch.randn(m, kdim, device=device, dtype=dt)
                    w = torch.randn(ndim, kdim, device=device, dtype=dt)
                    row["bf16_tflops"] = flops / timed(lambda: x @ w.t()) / 1e12
                    x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
                    one = torch.ones((), device=device, dtype=torch.float32)
                    row["fp8_tensorwise_tflops"] = (
                        flops
                        / timed(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=dt))
                        / 1e12
                    )
                    del x, w, x8, w8
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                rec["linear"].append(row)
                print(json.dumps(row))
                save()

    # ---------------- which attention kernels a Hugging Face Llama training step runs (its "sdpa" path)
    if "hf" in sections and (cuda or args.smoke):
        try:
            import transformers
            from torch.profiler import ProfilerActivity, profile

            cfg = transformers.LlamaConfig(
                hidden_size=2048,
                intermediate_size=8192,
                num_hidden_layers=2,
                num_attention_heads=32,
                num_key_value_heads=8,
                vocab_size=32000,
                max_position_embeddings=4096,
            )
            rows: dict[str, Any] = {"transformers": transformers.__version__}
            for impl in ("sdpa", "flash_attention_2", "eager"):
                try:
                    cfg._attn_implementation = impl
                    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dt)
                    ids = torch.randint(0, 32000, (2, 2048), device=device)
                    model(input_ids=ids, labels=ids).loss.backward()  # warm-up
                    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
                        model(input_ids=ids, labels=ids).loss.backward()
                        if cuda:
                            torch.cuda.synchronize()
                    names = sorted({e.name for e in prof.events() if e.device_type.name == ("CUDA" if cuda else "CPU")})
                    keys = ("attn", "fmha", "flash", "cudnn", "sdpa", "softmax", "efficient", "cutlass")
                    rows[impl] = [n[:160] for n in names if any(k in n.lower() for k in keys)]
                    del model
                except Exception as e:
                    rows[impl] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            rec["hf_llama_attention_kernels"] = rows
        except Exception as e:
            rec["hf_llama_attention_kernels"] = f"{type(e).__name__}: {e}"[:300]
        print(json.dumps(rec["hf_llama_attention_kernels"], indent=1))
        save()

    # ---------------- power and SM clock under sustained load, per kernel kind (NVML samples every 50 ms)
    if "power" in sections and cuda and nvml_sample is not None:
        loads: list[tuple[str, Any, float | None]] = []
        q = torch.randn(1, 32, 32768, 128, device=device, dtype=dt, requires_grad=True)
        g = torch.randn_like(q)
        for name, be in (
            ("fa2_causal_32k_fwd_bwd", SDPBackend.FLASH_ATTENTION),
            ("cudnn_causal_32k_fwd_bwd", SDPBackend.CUDNN_ATTENTION),
        ):

            def attn(be=be) -> None:
                with sdpa_kernel([be]):
                    F.scaled_dot_product_attention(q, q, q, is_causal=True).backward(g)

            loads.append((name, attn, 3.5 * 4.0 * 32 * 128 * (32768 * 32768 / 2 + 16384)))
        a16 = torch.randn(8192, 8192, device=device, dtype=dt)
        loads.append(("bf16_gemm_8192", lambda: a16 @ a16, 2.0 * 8192**3))
        a8 = a16.to(torch.float8_e4m3fn)
        one = torch.ones((), device=device, dtype=torch.float32)
        loads.append(
            (
                "fp8_gemm_8192",
                lambda: torch._scaled_mm(a8, a8.t(), scale_a=one, scale_b=one, out_dtype=dt),
                2.0 * 8192**3,
            )
        )
        big = torch.empty(2**30, device=device, dtype=torch.uint8)
        loads.append(("copy_1gib", lambda: big.clone(), None))
        rec["power"] = []
        for name, fn, flops in loads:
            row = {"load": name, **sustained(fn, args.power_seconds)}
            row["tflops"] = flops * row["calls"] / row["seconds"] / 1e12 if flops else None
            rec["power"].append(row)
            print(json.dumps(row))
            save()

    # ---------------- FlexAttention (torch.compile'd Triton kernels): full causal and a causal sliding window
    if "flex" in sections and cuda:
        rec["flex"] = []
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention

            flex = torch.compile(flex_attention, dynamic=False)
            # (label, batch, seq, heads, kv_heads, head_dim, window or None): gpt-oss-120b's attention (64 heads of
            # 64, 8 K/V heads; every other layer a 128-token window) at 4k, and Llama 3 8B's at 4k for reference
            cases_f = [
                ("gptoss-causal-4k", 2, 4096, 64, 8, 64, None),
                ("gptoss-window128-4k", 2, 4096, 64, 8, 64, 128),
                ("llama-causal-4k", 2, 4096, 32, 8, 128, None),
            ]
            for label, b, sq, heads, kvh, d, window in cases_f:
                if args.smoke:
                    b, sq, heads, kvh, d = 1, 256, 8, 2, 32
                    window = 32 if window else None

                def mask(bb, hh, q_idx, kv_idx, window=window):
                    keep = q_idx >= kv_idx
                    return keep & (q_idx - kv_idx < window) if window else keep

                block = create_block_mask(mask, None, None, sq, sq, device=device)
                w = window or sq
                pairs = sum(min(i + 1, w) for i in range(sq))  # attended (query, key) pairs per head
                fwd_flops = 2.0 * b * heads * 2 * d * pairs
                row: dict[str, Any] = {"case": label, "batch": b, "seq": sq, "heads": heads, "kv_heads": kvh}
                row.update(head_dim=d, window=window, fwd_flops=fwd_flops, bwd_flops=2.5 * fwd_flops)
                try:
                    q = torch.randn(b, heads, sq, d, device=device, dtype=dt, requires_grad=True)
                    k = torch.randn(b, kvh, sq, d, device=device, dtype=dt, requires_grad=True)
                    v = torch.randn(b, kvh, sq, d, device=device, dtype=dt, requires_grad=True)
                    with torch.no_grad():
                        fwd_s = timed(lambda: flex(q, k, v, block_mask=block, enable_gqa=True))
                    g = torch.randn(b, heads, sq, d, device=device, dtype=dt)

                    def both_f() -> None:
                        flex(q, k, v, block_mask=block, enable_gqa=True).backward(g)

                    both_s = timed(both_f)
                    row.update(fwd_s=fwd_s, fwd_bwd_s=both_s, bwd_s=both_s - fwd_s)
                    row.update(fwd_tflops=fwd_flops / fwd_s / 1e12, fwd_bwd_tflops=3.5 * fwd_flops / both_s / 1e12)
                    row["sustained_fwd_bwd"] = sustained(both_f, args.clock_seconds)
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                rec["flex"].append(row)
                print(json.dumps({k2: row.get(k2) for k2 in ("case", "fwd_tflops", "fwd_bwd_tflops", "error")}))
                save()
        except Exception as e:
            rec["flex"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            save()

    # ---------------- the special-function unit's exponential throughput (softmax's exp in flash attention)
    if "sfu" in sections and cuda:
        try:
            import triton
            import triton.language as tl

            @triton.jit
            def _exp2_chain(x_ptr, out_ptr, iters, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                acc = tl.load(x_ptr + offs)
                for _ in range(iters):  # a dependent chain per element; a block's many elements give the parallelism
                    acc = tl.inline_asm_elementwise(
                        "ex2.approx.ftz.f32 $0, $1;", "=r,r", [acc * -0.5], dtype=tl.float32, is_pure=True, pack=1
                    )
                tl.store(out_ptr + offs, acc)

            sms = torch.cuda.get_device_properties(0).multi_processor_count
            block, per_sm = 1024, 8  # 8 blocks of 1024 elements per SM: every SM full, whole waves
            n = sms * per_sm * block
            iters = 4096
            x = torch.rand(n, device=device, dtype=torch.float32)
            y = torch.empty_like(x)

            def run() -> None:
                _exp2_chain[(n // block,)](x, y, iters, BLOCK=block)

            exp_s = timed(run)
            row = {"elements": n, "iters": iters, "exp2_per_call": n * iters, "median_s": exp_s}
            row["exp2_per_s"] = n * iters / exp_s
            row["sustained"] = sustained(run, args.clock_seconds)
            s_run = row["sustained"]
            row["exp2_per_s_sustained"] = n * iters * s_run["calls"] / s_run["seconds"]
            clock = s_run["sm_clock_mhz_median"]
            if clock:
                row["exp2_per_clock_per_sm"] = row["exp2_per_s_sustained"] / (sms * clock * 1e6)
            rec["sfu"] = row
        except Exception as e:
            rec["sfu"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        print(json.dumps(rec["sfu"]))
        save()

    rec["nvidia_smi_after"] = _gpu_facts() if cuda else {}
    rec["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save()
    if not args.out:
        print(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
