"""A serving deployment: how a replica is laid out, and the traffic it serves."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import JobError, LayoutError
from .choices import STATIC_ENGINES, Engine, KvCache, Weights, values

#: Bytes per KV-cache element of each --kv-cache choice.
KV_DTYPES = {KvCache.BF16.value: 2.0, KvCache.FP16.value: 2.0, KvCache.FP8.value: 1.0, KvCache.INT8.value: 1.0}
ENGINES = values(Engine)
WEIGHTS = values(Weights)


@dataclass(frozen=True)
class ServingLayout:
    """One replica spans tp x pp GPUs; ``replicas`` copies serve traffic side by side."""

    tp: int = 1
    pp: int = 1
    replicas: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "replicas"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LayoutError(f"--{name} must be a whole number >= 1, got {value!r}")

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class ServingJob:
    """What is served: weight and KV formats, request shape, batch, and latency targets.

    ``batch`` is a static batch (all prompts prefilled together); ``concurrency`` is continuous batching
    with that many sequences in flight, new prompts packed into the engine's token budget per step beside the
    running decodes (chunked prefill). With neither, a server engine batches continuously (as many sequences
    as its batch cap and memory allow) and a compiled single stream statically.
    """

    weights: str = "bf16"
    kv_cache: str = "bf16"
    prompt_tokens: int = 512
    output_tokens: int = 256
    batch: int | None = None
    concurrency: int | None = None
    context: int | None = None
    max_tpot_s: float | None = None
    max_ttft_s: float | None = None
    engine: str = "server"

    def __post_init__(self) -> None:
        if self.weights not in WEIGHTS:
            raise JobError(f"--weights must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")
        if self.kv_cache not in KV_DTYPES:
            raise JobError(f"--kv-cache must be one of {', '.join(KV_DTYPES)}, got {self.kv_cache!r}")
        if self.engine not in ENGINES:
            raise JobError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        for name in ("prompt_tokens", "output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise JobError(f"--{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        for name in ("batch", "concurrency", "context"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise JobError(f"--{name} must be a whole number >= 1, got {value!r}")
        if self.batch is not None and self.concurrency is not None:
            raise JobError("give --batch (static batching) or --concurrency (continuous batching), not both")
        if self.concurrency is not None and self.engine in STATIC_ENGINES:
            raise JobError(
                f"--engine {self.engine} runs one static batch, without a scheduler: give --batch N, or a server "
                "engine (vllm, sglang, trtllm, tgi) for --concurrency"
            )
        if self.weights.startswith("gguf") and self.engine == "hf":
            raise JobError(
                f"--weights {self.weights} is llama.cpp's format; --engine {self.engine} dequantizes it when it "
                "loads it: use --engine llama.cpp, or --weights bf16|fp8|int8|int4"
            )
        if self.context is not None and self.context < self.prompt_tokens + self.output_tokens:
            raise JobError(
                f"--context {self.context} is shorter than prompt + output = "
                f"{self.prompt_tokens + self.output_tokens} tokens"
            )
        for name in ("max_tpot_s", "max_ttft_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise JobError(f"--{name[:-2].replace('_', '-')} must be positive")

    @property
    def sequence_tokens(self) -> int:
        """Tokens of KV cache one sequence may hold: --context, else prompt + output."""
        return self.context or (self.prompt_tokens + self.output_tokens)

    @property
    def continuous(self) -> bool:
        """Continuous batching: --concurrency, or a server engine when no static --batch is given."""
        return self.concurrency is not None or (self.batch is None and self.engine not in STATIC_ENGINES)
