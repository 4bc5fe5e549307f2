"""The measuring tools of scripts/gpu/gpu_check.py: host synchronizations counted by line (in
a block, or over training batches of a Lightning fit), the measured bf16 matrix-product
peak, the Transformer's FLOPs, a profile, corpora of realistic lengths, and training steps
as the toolkit trains."""

from __future__ import annotations

import functools
import inspect
import random
import resource
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from pytorch_lightning import Callback, LightningModule, Trainer
from pytorch_lightning.utilities import move_data_to_device
from torch.utils import benchmark

from scripts.bench.benchkit import REPO, logged_metrics, save_json
from seq2seq.batch import Batch
from seq2seq.inference.batching import TokenBucketBatchSampler, collate
from seq2seq.model import VocabSpec
from seq2seq.training.loss import label_smoothed_nll
from seq2seq.transformer import Transformer

SYNC_WARNING = "called a synchronizing CUDA operation"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compute_dtype(device: torch.device) -> torch.dtype:
    """bf16 on a GPU, as the recipes train; float32 on a CPU, where the check only checks
    itself (bf16 is emulated, and slow, on CPUs without AVX512-BF16)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


class HostSyncs:
    """Counts the host synchronizations made inside its block on CUDA, by the innermost
    line of the repository (seq2seq, the scripts) that led to each: torch's sync debug mode
    warns at every operation that waits for the GPU, and the warnings are caught and
    counted. Those of the backward pass, which runs on autograd's own threads, are not seen
    (the profile's synchronization calls are). On another device it counts nothing
    (``enabled`` is False)."""

    def __init__(self, device: torch.device) -> None:
        self.enabled = device.type == "cuda"
        self.sites: Counter[str] = Counter()
        self._caught: Any = None

    def __enter__(self) -> HostSyncs:
        if self.enabled:
            self._caught = warnings.catch_warnings()
            self._caught.__enter__()
            warnings.simplefilter("always")
            warnings.showwarning = self._record
            torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            torch.cuda.set_sync_debug_mode("default")
            self._caught.__exit__(*exc)

    def _record(self, message: Warning | str, *args: object, **kwargs: object) -> None:
        if SYNC_WARNING in str(message):
            self.sites[sync_site(traceback.extract_stack()[:-1])] += 1

    @property
    def total(self) -> int | None:
        return sum(self.sites.values()) if self.enabled else None


def sync_site(stack: traceback.StackSummary) -> str:
    """``seq2seq/inference/search.py:273`` for the innermost frame in the repository,
    followed by the innermost frame of all (a library's line) where that is another."""

    def name(frame: traceback.FrameSummary) -> str:
        path = Path(frame.filename)
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else Path(*path.parts[-2:])
        return f"{shown}:{frame.lineno}"

    frames = [f for f in stack if not f.filename.endswith("warnings.py")]
    ours = [f for f in frames if Path(f.filename).is_relative_to(REPO)]
    if not frames:
        return "?"
    inner = name(frames[-1])
    return inner if not ours or name(ours[-1]) == inner else f"{name(ours[-1])} <- {inner}"


def peak_memory_gib(device: torch.device) -> float:
    """The GPU allocator's peak since the last reset; on a CPU the process's peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


@functools.cache
def matmul_peak_tflops(device: torch.device, size: int, seconds: float) -> float:
    """Measured matrix-product rate in ``compute_dtype``, TFLOP/s: the median [n, n] @ [n, n]
    on random data (never zeros, which run faster), timed by torch.utils.benchmark; once a
    run (the training sections share it)."""
    dtype = compute_dtype(device)
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    (a @ b).sum().item()  # warm-up: the library's handles and kernels
    timer = benchmark.Timer("a @ b", globals={"a": a, "b": b})
    return 2 * size**3 / timer.blocked_autorange(min_run_time=seconds).median / 1e12


def forward_flops(settings: dict[str, Any], vocab: int, src: np.ndarray, tgt: np.ndarray) -> int:
    """The matrix-product FLOPs of the Transformer's forward pass over pairs of ``src[i]``
    source and ``tgt[i]`` target positions (valid positions only; a multiply-add is 2).

    With model size d, feed-forward size f, target vocabulary V, per pair of S and T:
      encoder, each layer: 8 S d^2 (query, key, value, output projections)
                           + 4 S^2 d (scores, weighted values) + 4 S d f (feed-forward)
      decoder, each layer: 12 T d^2 (self q, k, v, o; cross q, o) + 4 S d^2 (cross k, v)
                           + 4 T^2 d (self-attention, the causal half counted too, as the
                           kernels compute it) + 4 T S d (cross-attention) + 4 T d f
      output layer:        2 T d V
    Training (forward and backward) is 3 times this, the usual count (6 x parameters x
    tokens plus attention). Layer norms, softmax, embeddings and the optimizer are left
    out. tests/test_gpu_check.py checks it against PyTorch's FlopCounterMode.
    """
    d, f = settings["model_size"], settings["ff_size"]
    S, T = src.astype(np.int64), tgt.astype(np.int64)
    encoder = settings["encoder_layers"] * (8 * S * d * d + 4 * S * S * d + 4 * S * d * f)
    decoder = settings["decoder_layers"] * (
        12 * T * d * d + 4 * S * d * d + 4 * T * T * d + 4 * T * S * d + 4 * T * d * f
    )
    return int((encoder + decoder + 2 * T * d * vocab).sum())


def transformer_settings(recipe: Path, overrides: dict[str, int]) -> dict[str, Any]:
    """The Transformer's init_args in ``recipe`` over the class's defaults, then ``overrides``."""
    init_args = yaml.safe_load(recipe.read_text())["model"]["network"]["init_args"]
    parameters = inspect.signature(Transformer).parameters
    defaults = {k: p.default for k, p in parameters.items() if p.default is not p.empty}
    return {**defaults, **init_args, **overrides}


# -- corpora -------------------------------------------------------------------------------
def wmt_like_lengths(pairs: int, seed: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Source and target lengths in pieces (EOS aside) of ``pairs`` WMT14-like pairs: the
    source log-normal with median 25 and sigma 0.6 (mean about 30, 1% over 100), the target
    that times e^N(0.05, 0.15) (German a little longer), both in [1, max_len]. An
    assumption about WMT14 En-De with a 32k joint vocabulary, not a measurement of it."""
    rng = np.random.default_rng(seed)
    src = rng.lognormal(np.log(25), 0.6, pairs)
    tgt = src * np.exp(rng.normal(0.05, 0.15, pairs))
    src_len, tgt_len = (np.clip(np.rint(x), 1, max_len).astype(np.int64) for x in (src, tgt))
    return src_len, tgt_len


def batches(
    src_ids: Callable[[int], Sequence[int]],
    tgt_ids: Callable[[int], Sequence[int]],
    lengths: np.ndarray,
    spec: VocabSpec,
    max_tokens: int,
    count: int | None = None,
) -> list[Batch]:
    """The first ``count`` (default: all) batches of the toolkit's shuffled bucketing under
    ``max_tokens`` positions, of pairs ``i`` with ids ``src_ids(i)``, ``tgt_ids(i)`` and
    ``lengths[i]`` (the longer side, EOS or BOS included)."""
    sampler = TokenBucketBatchSampler(lengths, max_tokens, shuffle=True, seed=1, num_replicas=1)
    made = []
    for indices, _ in zip(sampler, range(count or len(sampler)), strict=False):
        rows = [{"id": i, "src_ids": src_ids(i), "tgt_ids": tgt_ids(i)} for i in indices]
        made.append(collate(rows, spec.pad_id, spec.bos_id, spec.eos_id))
    return made


def random_batches(
    src_len: np.ndarray, tgt_len: np.ndarray, spec: VocabSpec, max_tokens: int, count: int
) -> list[Batch]:
    """``count`` batches over pairs of these lengths with random ids: what the model
    computes does not depend on the ids."""
    rng = np.random.default_rng(2)
    return batches(
        lambda i: rng.integers(4, spec.src_size, src_len[i]).tolist(),
        lambda i: rng.integers(4, spec.tgt_size, tgt_len[i]).tolist(),
        np.maximum(src_len, tgt_len) + 1,
        spec,
        max_tokens,
        count,
    )


def joined_pairs(
    base: Sequence[tuple[str, str]], count: int, mean: float, seed: int
) -> list[tuple[str, str]]:
    """``count`` pairs of 1 + Poisson(mean - 1) demo-corpus pairs joined by "; " on both
    sides: real parallel text at the lengths asked for (a demo pair has 4.6 English words)."""
    rng = random.Random(seed)
    generator = np.random.default_rng(seed)
    joined = []
    for k in 1 + generator.poisson(mean - 1, count):
        chosen = rng.choices(base, k=int(k))
        joined.append(("; ".join(s for s, _ in chosen), "; ".join(t for _, t in chosen)))
    return joined


def write_split(folder: Path, split: str, pairs: Sequence[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for lang, side in (("en", 0), ("de", 1)):
        text = "".join(pair[side] + "\n" for pair in pairs)
        (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")


# -- training steps ------------------------------------------------------------------------
def train_steps(
    model: Transformer,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Batch],
    device: torch.device,
    smoothing: float,
    schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
) -> None:
    """One optimizer step per batch, as TranslationTask trains under bf16-mixed: the model
    and loss under bf16 autocast (on a GPU, see ``compute_dtype``), the backward pass
    outside it, AdamW."""
    bf16 = compute_dtype(device) == torch.bfloat16
    for batch in batches:
        b = move_data_to_device(batch, device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits, _ = model(b.src, b.src_lens, b.tgt_in, need_weights=False)
            loss, _, n_tokens = label_smoothed_nll(logits, b.tgt_out, b.tgt_lens, smoothing)
        (loss / n_tokens).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if schedule is not None:
            schedule.step()


def profile_steps(step: Callable[[], None], device: torch.device, out: Path) -> dict[str, Any]:
    """torch.profiler over ``step``: its heaviest operators (self time on the device, on
    the CPU without one), the synchronization calls and device-to-host copies it saw; the
    whole table into ``out``."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        step()
        synchronize(device)
    events = profiler.key_averages()
    timed = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    out.write_text(events.table(sort_by=timed, row_limit=30))
    heaviest = sorted(events, key=lambda e: -getattr(e, timed))[:8]
    return {
        "top": [[e.key[:60], e.count, round(getattr(e, timed) / 1e3, 2)] for e in heaviest],
        "sync_calls": sum(e.count for e in events if "Synchronize" in e.key),
        "device_to_host_copies": sum(e.count for e in events if "DtoH" in e.key),
    }


def count_steps(model: Transformer) -> Callable[[], int]:
    """Counts ``model.step`` calls from now on; the returned function reads the count."""
    calls = [0]
    step = model.step

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return step(*args, **kwargs)

    model.step = counted  # type: ignore[method-assign]
    return lambda: max(calls[0], 1)


class HostSyncAudit(Callback):
    """For ``fit``: counts the host synchronizations of ``batches`` training batches after
    the first ``skip``, from the start of one batch to the start of the next (the step,
    the optimizer and every callback), by line; writes them to ``out`` as JSON. Passed to
    the CLI in a config (``trainer.callbacks``), with the repository on PYTHONPATH."""

    def __init__(self, out: str, skip: int = 10, batches: int = 10) -> None:
        self.out, self.skip, self.batches = Path(out), skip, batches
        self.seen = 0
        self.syncs: HostSyncs | None = None
        self.written = False

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.seen == self.skip:
            self.syncs = HostSyncs(pl_module.device).__enter__()
        elif self.seen == self.skip + self.batches:
            self.write()
        self.seen += 1

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.write()

    def write(self) -> None:
        """Once: what was counted (nothing, where the fit had too few batches)."""
        if self.written:
            return
        record: dict[str, Any] = {"batches": 0, "syncs": None, "sites": {}}
        if self.syncs is not None:
            self.syncs.__exit__(None, None, None)
            record = {
                "batches": self.seen - self.skip,
                "syncs": self.syncs.total,
                "sites": dict(self.syncs.sites),
            }
        save_json(self.out, record)
        self.written = True


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` written over it, nested dictionaries merged."""
    merged = dict(base)
    for key, value in extra.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = merge(merged[key], value) if both else value
    return merged


def logged_throughput(run: Path) -> float | None:
    """The last ``train|...items_per_sec`` (real target tokens/s, from the toolkit's
    ThroughputMonitor, named as this machine's Lightning names it) logged by the first run."""
    rows = logged_metrics(run, "0")
    named = sorted(
        c for c in (rows[0] if rows else {}) if c.startswith("train") and "items_per_sec" in c
    )
    values = [float(r[c]) for r in rows for c in named[:1] if r.get(c)]
    return values[-1] if values else None
