"""The GPU path, proven and measured in one short run. On a machine with a CUDA GPU, in
about 4 minutes (8 at most):

1. tests: the model-level tests (masks, loss, attention, RNN, Transformer, search,
   ensembles) on the GPU (``pytest --device cuda``);
2. training: steps of the WMT14 recipe's Transformer base (configs/wmt14/en-de/
   transformer-base.yaml) under bf16 autocast on a synthetic corpus of WMT-like lengths,
   with the recipe's batches and larger ones, with our attention and with PyTorch's SDPA
   (``sdpa: true``, cuDNN's kernel excluded: docs/benchmarks/gpu.md): target tokens/s,
   peak GPU memory, host synchronizations per step, and the model FLOPs utilization
   against the bf16 matrix-product peak measured on the same card in the same run; a
   torch.profiler table of the heaviest kernels;
3. decoding: a Transformer of the Multi30k recipe's size, trained here in seconds on the
   embedded corpus, translating Multi30k-length sentences with beam 5 and greedy: the GPU's
   sentences/s against 2 CPU threads of the same machine, the GPU's float32 translations
   compared token by token with the CPU's, host synchronizations per decoder step, and a
   profile of one beam-5 translation of the test set;
4. fit: ``seq2seq fit`` through the real CLI and Lightning on one GPU with the WMT14 recipe
   (bf16-mixed) for a few hundred steps, then ``--ckpt_path last`` continuing it; the host
   synchronizations of a Lightning training batch, by the line that makes them.

Opt-in, ``--sections compiled`` (about 90 s more): step 2's training step with SDPA on
batches of one fixed shape, eager and under ``torch.compile``, compilation included.

It writes ``gpu_check.json``, ``gpu_check_profile.txt`` (training) and
``gpu_check_decode.txt`` (decoding) into ``--out`` and prints one
short table last. A section that fails is reported and the others still run; the exit
status is then 1. Its scratch (corpora, checkpoints of 0.5 GB) goes to ``--work``, a
temporary folder by default. The measuring tools are in ``gpukit.py`` beside it.

On a GPU machine without a network whose Python has PyTorch with CUDA, Lightning,
torchmetrics, sacrebleu, sentencepiece, pyarrow and matplotlib but lacks ``datasets``,
``jsonargparse``'s signatures extra, ``sacremoses``, ``num2words`` and ``babel``:

- beforehand, where there is a network: ``make gpu-wheels`` (pure-Python wheels of what it
  lacks, the versions installed here, into the ignored folder ``.gpu-wheels``);
- there, with ``.gpu-wheels`` copied beside the checkout: ``make gpu-check
  GPU_CHECK_OUT=OUT``, or without make ``python3 -m pip install -q --no-index --no-deps
  --no-compile --target /tmp/gpu-site .gpu-wheels/*.whl && PYTHONPATH=/tmp/gpu-site:$PWD
  python3 -m scripts.gpu.gpu_check --out OUT``.

On a CPU, ``--device cpu --tiny`` runs every section on tiny sizes
(tests/test_gpu_check.py), so the check cannot rot between the times a GPU is at hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from scripts.bench.benchkit import REPO, SEQ2SEQ, python_path, save_json
from scripts.gpu.gpukit import (
    HostSyncs,
    batches,
    compute_dtype,
    count_steps,
    forward_flops,
    joined_pairs,
    logged_throughput,
    matmul_peak_tflops,
    merge,
    peak_memory_gib,
    profile_steps,
    random_batches,
    synchronize,
    train_steps,
    transformer_settings,
    wmt_like_lengths,
    write_split,
)
from seq2seq.batch import Batch
from seq2seq.inference.checkpoint import Trained, read_checkpoint
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.translator import translate_lines
from seq2seq.model import VocabSpec
from seq2seq.text.demo_corpus import generate_pairs
from seq2seq.text.metrics import score_corpus
from seq2seq.text.tokenizer import VocabSettings, Vocabulary
from seq2seq.training.task import adamw
from seq2seq.transformer import Transformer

WMT_RECIPE = REPO / "configs/wmt14/en-de/transformer-base.yaml"
MULTI30K_RECIPE = REPO / "configs/multi30k/base/transformer.yaml"
SIZES = ("model_size", "ff_size", "num_heads", "encoder_layers", "decoder_layers")
MODEL_TESTS = ("masking", "loss", "attention", "rnn", "transformer", "search", "ensemble")
TINY_MODEL = dict(model_size=32, num_heads=2, ff_size=64, encoder_layers=1, decoder_layers=1)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The sizes of one run: ``FULL`` on a GPU, ``TINY`` to check the script on a CPU."""

    tests: tuple[str, ...]  # test modules (tests/test_NAME.py)
    test_workers: int  # pytest-xdist processes, where it is installed
    matmul_size: int  # the bf16 peak: [n, n] @ [n, n]
    matmul_seconds: float
    pairs: int  # the synthetic training corpus (step 2)
    vocab: int  # its vocabulary (the recipe's 32000)
    max_tokens: tuple[int, ...]  # batch sizes of step 2, in target and source positions
    fixed_tokens: tuple[int, ...]  # batch sizes of the compiled section (pairs of 31 + EOS)
    steps: tuple[int, int, int]  # warm-up, timed and audited (syncs, profile) steps
    model: dict[str, int]  # overrides of the recipes' model sizes
    base_pairs: int  # demo-corpus pairs joined into longer sentences (steps 3 and 4)
    decode_pairs: tuple[int, int]  # train, test pairs of step 3
    decode_steps: int
    decode_rounds: int  # timed translations of the test set on the GPU
    # threads of step 3's CPU side (the 2-core reference machine); None: the process's own,
    # so that a check beside other work on a small CPU does not ask for more cores than it has
    decode_cpu_threads: int | None
    fit_pairs: int  # training pairs of step 4
    fit_eval_pairs: int  # its validation and test pairs, each
    fit_steps: tuple[int, int, int]  # optimizer steps before, after resuming; validate every
    fit_audit: tuple[int, int]  # training batches skipped, then audited for host syncs
    fit_overrides: dict[str, Any]  # step 4's config, beyond the recipe's


FULL = Plan(
    tests=MODEL_TESTS, test_workers=8, matmul_size=8192, matmul_seconds=1.0,
    pairs=200_000, vocab=32_000, max_tokens=(4096, 16384, 32768, 65536),
    fixed_tokens=(32768, 65536),
    steps=(10, 40, 4),
    model={},
    base_pairs=2000, decode_pairs=(40_000, 1000), decode_steps=600, decode_rounds=3,
    decode_cpu_threads=2,
    fit_pairs=20_000, fit_eval_pairs=100, fit_steps=(150, 200, 50), fit_audit=(20, 20),
    fit_overrides={},
)  # fmt: skip
TINY = Plan(
    tests=("masking",), test_workers=0, matmul_size=128, matmul_seconds=0.05,
    pairs=2000, vocab=500, max_tokens=(600,), fixed_tokens=(640,), steps=(2, 3, 2),
    model=TINY_MODEL,
    base_pairs=150, decode_pairs=(300, 6), decode_steps=8, decode_rounds=1,
    decode_cpu_threads=None,
    fit_pairs=300, fit_eval_pairs=8, fit_steps=(4, 6, 2), fit_audit=(2, 2),
    fit_overrides={"data": {"max_tokens": 400, "num_workers": 0},
                   "model": {"network": {"init_args": TINY_MODEL}}},
)  # fmt: skip


def measure_training(
    settings: dict[str, Any],
    spec: VocabSpec,
    batches: list[Batch],
    device: torch.device,
    plan: Plan,
    peak_tflops: float,
    profile_to: Path | None,
    compiled: bool = False,
) -> dict[str, Any]:
    """Tokens/s, peak memory, MFU and host syncs per step of the recipe's training step on
    ``batches`` (``plan.steps``: warm-up, timed, audited); ``compiled``: the model under
    ``torch.compile`` (inductor on a GPU; on a CPU its eager backend, a check of the script)."""
    warm, timed, audited = plan.steps
    torch.manual_seed(1)
    recipe = yaml.safe_load(WMT_RECIPE.read_text())["model"]
    model = Transformer(spec, **settings).to(device).train()
    parameters = list(model.parameters())
    if compiled:
        model = torch.compile(model, backend="inductor" if device.type == "cuda" else "eager")
    optimizer = adamw(parameters, recipe["lr"], tuple(recipe["betas"]), fused=device.type == "cuda")

    def run(chosen: Sequence[Batch]) -> None:
        train_steps(model, optimizer, chosen, device, recipe["label_smoothing"])

    started = time.perf_counter()
    run(batches[:warm])
    synchronize(device)
    warm_seconds = time.perf_counter() - started
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    chosen = batches[warm : warm + timed]
    started = time.perf_counter()
    run(chosen)
    synchronize(device)
    seconds = time.perf_counter() - started
    with HostSyncs(device) as syncs:
        run(batches[warm + timed :])
    synchronize(device)
    tokens = sum(b.target_tokens for b in chosen)
    positions = sum(b.tgt_in.numel() for b in chosen)
    flops = 3 * sum(
        forward_flops(settings, spec.tgt_size, b.src_lens.numpy(), b.tgt_lens.numpy())
        for b in chosen
    )
    result = {
        "variant": ("compiled " if compiled else "") + ("sdpa" if settings["sdpa"] else "eager"),
        "sdpa": settings["sdpa"],
        "parameters": sum(p.numel() for p in parameters),
        "warm_up_seconds": warm_seconds,
        "step_ms": 1e3 * seconds / len(chosen),
        "target_tokens_per_s": tokens / seconds,
        "padding_share": 1 - tokens / positions,
        "model_tflops": flops / seconds / 1e12,
        "mfu": flops / seconds / 1e12 / peak_tflops,
        "peak_memory_gib": peak_memory_gib(device),
        "host_syncs_per_step": None if syncs.total is None else syncs.total / audited,
        "sync_sites": dict(syncs.sites),
    }
    if profile_to is not None:
        result["profile"] = profile_steps(lambda: run(batches[warm + timed :]), device, profile_to)
    return result


# -- the four sections ---------------------------------------------------------------------
def tests_section(device: torch.device, plan: Plan, work: Path) -> dict[str, Any]:
    """The model-level tests on ``device``, in a child pytest (its report: JUnit XML)."""
    report = work / "tests.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "not slow"]
    command += ["--device", str(device), f"--junitxml={report}"]
    command += [f"tests/test_{name}.py" for name in plan.tests]
    if plan.test_workers and importlib.util.find_spec("xdist"):
        command += ["-n", str(plan.test_workers)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240)
    if not report.is_file():
        raise RuntimeError(f"pytest wrote no report (status {done.returncode}): {done.stdout}")
    cases = list(ElementTree.parse(report).getroot().iter("testcase"))
    failed = [
        f"{c.get('classname')}::{c.get('name')}"
        for c in cases
        if c.find("failure") is not None or c.find("error") is not None
    ]
    skipped = sum(c.find("skipped") is not None for c in cases)
    return {
        "files": [f"tests/test_{name}.py" for name in plan.tests],
        "passed": len(cases) - len(failed) - skipped,
        "failed": len(failed),
        "skipped": skipped,
        "failures": failed[:20],
        "output_tail": done.stdout[-3000:] if failed else "",
    }


def training_section(device: torch.device, plan: Plan, out: Path) -> dict[str, Any]:
    """Step 2: the recipe's training step at each batch size, with and without SDPA."""
    settings = transformer_settings(WMT_RECIPE, plan.model)
    spec = VocabSpec(plan.vocab, plan.vocab, pad_id=0, bos_id=2, eos_id=3, joint=True)
    peak = matmul_peak_tflops(device, plan.matmul_size, plan.matmul_seconds)
    max_len = yaml.safe_load(WMT_RECIPE.read_text())["data"]["max_len"]
    src_len, tgt_len = wmt_like_lengths(plan.pairs, seed=1, max_len=max_len)
    variants = []
    for max_tokens in plan.max_tokens:
        batches = random_batches(src_len, tgt_len, spec, max_tokens, sum(plan.steps))
        if device.type == "cuda":
            batches = [batch.pin_memory() for batch in batches]
        for sdpa in (False, True):
            first = not variants
            profile = out / "gpu_check_profile.txt" if first else None
            variant = {**settings, "sdpa": sdpa}
            measured = measure_training(variant, spec, batches, device, plan, peak, profile)
            variants.append({"max_tokens": max_tokens, **measured})
            print(f"gpu_check:   {variant_line(variants[-1])}", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return {
        "model": {k: settings[k] for k in SIZES},
        "vocab": plan.vocab,
        "corpus": {
            "pairs": plan.pairs,
            "mean_source_pieces": float(src_len.mean()),
            "mean_target_pieces": float(tgt_len.mean()),
        },
        "matmul_peak_tflops": peak,
        "variants": variants,
    }


def compiled_section(device: torch.device, plan: Plan) -> dict[str, Any]:
    """Step 2, compiled (opt-in: ``--sections compiled``): the recipe's training step with
    SDPA on batches of one fixed shape (pairs of 31 pieces + EOS on both sides), eager and
    under ``torch.compile``: what compiled steps would give once the data come in a few
    bucketed shapes, each compiled once (its warm-up holds the compilation)."""
    settings = {**transformer_settings(WMT_RECIPE, plan.model), "sdpa": True}
    spec = VocabSpec(plan.vocab, plan.vocab, pad_id=0, bos_id=2, eos_id=3, joint=True)
    peak = matmul_peak_tflops(device, plan.matmul_size, plan.matmul_seconds)
    lengths = np.full(plan.pairs, 31)
    variants = []
    for max_tokens in plan.fixed_tokens:
        batches = random_batches(lengths, lengths, spec, max_tokens, sum(plan.steps))
        for compiled in (False, True):
            measured = measure_training(settings, spec, batches, device, plan, peak, None, compiled)
            variants.append({"max_tokens": max_tokens, **measured})
            print(f"gpu_check:   {variant_line(variants[-1])}", flush=True)
    return {"matmul_peak_tflops": peak, "variants": variants}


@functools.cache
def demo_corpus(pairs: int) -> list[tuple[str, str]]:
    """Pairs of the embedded corpus, drawn once for steps 3 and 4 (a few seconds)."""
    return generate_pairs(pairs, seed=5)


def translate_timed(
    trained: Trained, lines: list[str], search: SearchSettings, rounds: int, max_tokens: int
) -> tuple[list[list[int]], list[float], float]:
    """(best tokens, scores, median sentences/s over ``rounds`` translations of ``lines``)."""
    rates, translations = [], []
    for _ in range(rounds):
        synchronize(next(trained.model.parameters()).device)
        started = time.perf_counter()
        translations = translate_lines(trained, lines, search, max_tokens=max_tokens)
        rates.append(len(lines) / (time.perf_counter() - started))
    best = [t.hypotheses[0] for t in translations]
    return [h.tokens for h in best], [h.score for h in best], statistics.median(rates)


def compare(cpu: tuple[list, list], gpu: tuple[list, list], lines: list[str]) -> dict[str, Any]:
    """Token ids of the CPU's and the GPU's translations, sentence by sentence; a sentence
    whose two best hypotheses differ but score within 1e-3 is a near tie (which of two
    nearly equal hypotheses wins can turn on float rounding)."""
    differ = [i for i, (a, b) in enumerate(zip(cpu[0], gpu[0], strict=True)) if a != b]
    ties = [i for i in differ if abs(cpu[1][i] - gpu[1][i]) < 1e-3]
    return {
        "sentences": len(lines),
        "identical": len(lines) - len(differ),
        "near_ties": len(ties),
        "different": len(differ) - len(ties),
        "examples": [
            {"source": lines[i], "cpu_score": cpu[1][i], "gpu_score": gpu[1][i]} for i in differ[:5]
        ],
    }


def decoding_section(device: torch.device, plan: Plan, work: Path, out: Path) -> dict[str, Any]:
    """Step 3: train a Multi30k-sized Transformer here, then translate with it on the
    CPU (the plan's threads) and on the device, and compare; the profile of one beam-5
    translation of the test set goes to ``out``."""
    base = demo_corpus(plan.base_pairs)
    train_n, test_n = plan.decode_pairs
    pairs = joined_pairs(base, train_n + test_n, mean=2.5, seed=6)  # Multi30k: ~12 words
    train, test = pairs[:train_n], pairs[train_n:]
    sources, targets = [s for s, _ in train], [t for _, t in train]
    pieces = VocabSettings(vocab_size=8000, max_piece_length=7, threads=os.cpu_count() or 1)
    vocab = Vocabulary.train(sources, targets, pieces)
    spec, settings = vocab.spec, transformer_settings(MULTI30K_RECIPE, plan.model)
    src_ids, tgt_ids = vocab.src.encode_batch(sources), vocab.tgt.encode_batch(targets)
    lengths = np.array([max(len(s), len(t)) + 1 for s, t in zip(src_ids, tgt_ids, strict=True)])
    training = batches(src_ids.__getitem__, tgt_ids.__getitem__, lengths, spec, 8192)
    torch.manual_seed(1)
    model = Transformer(spec, **settings).to(device).train()
    optimizer = adamw(model.parameters(), 1e-3, (0.9, 0.98), fused=device.type == "cuda")
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 100))
    steps = [training[i % len(training)] for i in range(plan.decode_steps)]
    started = time.perf_counter()
    train_steps(model, optimizer, steps, device, 0.1, warmup)
    synchronize(device)
    train_seconds = time.perf_counter() - started
    trained = Trained(model.eval(), vocab, config={})
    lines = [s for s, _ in test]
    beam, greedy = SearchSettings(beam=5), SearchSettings(beam=1)
    result: dict[str, Any] = {
        "model": {k: settings[k] for k in SIZES},
        "vocab": spec.tgt_size,
        "train_steps": plan.decode_steps,
        "train_seconds": train_seconds,
        "test_sentences": len(lines),
    }
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # float32
    try:
        model.cpu()
        torch_threads = torch.get_num_threads()
        torch.set_num_threads(plan.decode_cpu_threads or torch_threads)
        try:
            cpu_beam = translate_timed(trained, lines, beam, 1, 4096)
            cpu_greedy = translate_timed(trained, lines, greedy, 1, 4096)
        finally:
            torch.set_num_threads(torch_threads)
        model.to(device)
        translate_lines(trained, lines[:50], beam)  # warm-up on the device
        gpu_beam = translate_timed(trained, lines, beam, plan.decode_rounds, 4096)
        gpu_greedy = translate_timed(trained, lines, greedy, plan.decode_rounds, 4096)
        gpu_big = translate_timed(trained, lines, beam, plan.decode_rounds, 32768)
        low = dataclasses.replace(beam, bf16=compute_dtype(device) == torch.bfloat16)
        bf16 = translate_timed(trained, lines, low, plan.decode_rounds, 4096)
        profile = profile_steps(
            lambda: translate_lines(trained, lines, beam), device, out / "gpu_check_decode.txt"
        )
        steps = count_steps(model)
        with HostSyncs(device) as syncs:
            translate_lines(trained, lines, beam)
        synchronize(device)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    references = [t for _, t in test]
    result.update(
        cpu_beam5_sentences_per_s=cpu_beam[2],
        cpu_greedy_sentences_per_s=cpu_greedy[2],
        device_beam5_sentences_per_s=gpu_beam[2],
        device_greedy_sentences_per_s=gpu_greedy[2],
        device_beam5_32k_tokens_sentences_per_s=gpu_big[2],
        device_beam5_bf16_sentences_per_s=bf16[2],
        beam5_speedup=gpu_beam[2] / cpu_beam[2],
        greedy_speedup=gpu_greedy[2] / cpu_greedy[2],
        beam5_compared=compare(cpu_beam[:2], gpu_beam[:2], lines),
        greedy_compared=compare(cpu_greedy[:2], gpu_greedy[:2], lines),
        bf16_same_as_float32=sum(a == b for a, b in zip(bf16[0], gpu_beam[0], strict=True)),
        bleu=score_corpus([vocab.tgt.decode(t) for t in gpu_beam[0]], references)["bleu"]["score"],
        host_syncs_per_decoder_step=None if syncs.total is None else syncs.total / steps(),
        sync_sites=dict(syncs.sites),
        profile=profile,
    )
    return result


def fit_section(device: torch.device, plan: Plan, work: Path) -> dict[str, Any]:
    """Step 4: ``seq2seq fit`` of the WMT14 recipe on one device through the real CLI, on
    demo text joined to WMT lengths, then ``--ckpt_path last`` continuing it."""
    corpus, run = work / "fit-corpus", work / "fit"
    held = plan.fit_eval_pairs
    pairs = joined_pairs(demo_corpus(plan.base_pairs), plan.fit_pairs + 2 * held, mean=6.0, seed=7)
    for split, chosen in [
        ("train", pairs[2 * held :]),
        ("validation", pairs[:held]),
        ("test", pairs[held : 2 * held]),
    ]:
        write_split(corpus, split, chosen)
    first, total, every = plan.fit_steps
    accumulate = yaml.safe_load(WMT_RECIPE.read_text())["trainer"]["accumulate_grad_batches"]
    skip, audited = plan.fit_audit
    audit = {
        "class_path": "scripts.gpu.gpukit.HostSyncAudit",
        "init_args": {"out": str(work / "fit-syncs.json"), "skip": skip, "batches": audited},
    }
    config = merge(
        {
            "trainer": {
                "accelerator": "gpu" if device.type == "cuda" else "cpu",
                "devices": 1,
                "strategy": "auto",
                "max_steps": first,
                "check_val_every_n_epoch": None,
                "val_check_interval": every * accumulate,
                "log_every_n_steps": 10,
                "enable_progress_bar": False,
                "default_root_dir": str(run),
                "callbacks": [audit],
            },
            "checkpoint": {"dirpath": str(run / "checkpoints")},
            "data": {
                "source": str(corpus),
                "hub_config": None,
                "vocab_size": 4000,
                "spm_sample": 5000,
                "spm_threads": os.cpu_count() or 1,
                "cache_dir": str(work / "cache"),
            },
        },
        plan.fit_overrides,
    )
    if device.type != "cuda":  # see gpukit.compute_dtype
        config["trainer"]["precision"] = "32-true"
    overrides = work / "fit-overrides.yaml"
    overrides.write_text(yaml.safe_dump(config))
    command = [*SEQ2SEQ, "fit", "--config", str(WMT_RECIPE), "--config", str(overrides)]
    env = python_path(REPO)  # scripts.gpu.gpukit.HostSyncAudit
    resume = ["--ckpt_path", "last", "--trainer.max_steps", str(total)]
    runs = {}
    for name, extra in [("first", []), ("resumed", resume)]:
        started = time.perf_counter()
        done = subprocess.run(
            [*command, *extra], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            raise RuntimeError(
                f"seq2seq fit ({name}) ended with status {done.returncode}: {done.stderr[-1500:]}"
            )
        last = run / "checkpoints" / "last.ckpt"
        resuming = [line for line in done.stderr.splitlines() if "resuming from" in line]
        runs[name] = {
            "seconds": time.perf_counter() - started,
            "step": read_checkpoint(last)["global_step"],
            "resuming": resuming[0] if resuming else None,
        }
    syncs = json.loads((work / "fit-syncs.json").read_text())
    return {
        **runs,
        "steps_expected": [first, total],
        "target_tokens_per_s": logged_throughput(run),
        "host_syncs_per_batch": None
        if syncs["syncs"] is None
        else syncs["syncs"] / syncs["batches"],
        "sync_sites": syncs["sites"],
    }


# -- the run -------------------------------------------------------------------------------
def machine(device: torch.device) -> dict[str, Any]:
    info = {
        "device": str(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        info.update(
            name=properties.name,
            cuda=torch.version.cuda,
            memory_gib=properties.total_memory / 2**30,
            multiprocessors=properties.multi_processor_count,
        )
    else:
        info["name"] = platform.processor() or platform.machine()
    return info


def run_section(function: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The section's record, or its error: a failed section does not stop the others."""
    started = time.perf_counter()
    try:
        record = function()
    except Exception as error:
        record = {
            "error": f"{type(error).__name__}: {error}"[:2000],
            "traceback": traceback.format_exc()[-3000:],
        }
    record["seconds"] = time.perf_counter() - started
    return record


def variant_line(v: dict[str, Any]) -> str:
    """One measured training variant: its name, then its figures after ": "."""
    return (
        f"train {v['max_tokens']} tokens, {v['variant']}: {v['target_tokens_per_s']:.0f} "
        f"target tokens/s, MFU {100 * v['mfu']:.1f}%, {v['peak_memory_gib']:.1f} GiB, "
        f"syncs/step {v['host_syncs_per_step']}"
    )


def table(results: dict[str, Any]) -> str:
    """The short table printed last: one line per measurement, or a section's error."""
    sections, rows = results["sections"], {}
    tests = sections.get("tests", {})
    if "passed" in tests:
        rows["model-level tests"] = f"{tests['passed']} passed, {tests['failed']} failed"
    training = sections.get("training", {})
    if "matmul_peak_tflops" in training:
        rows["matmul peak"] = f"{training['matmul_peak_tflops']:.3g} TFLOP/s"
    rows.update(variant_line(v).split(": ", 1) for v in training.get("variants", []))
    compiled = sections.get("compiled", {})
    rows.update(variant_line(v).split(": ", 1) for v in compiled.get("variants", []))
    decoding = sections.get("decoding", {})
    if "beam5_speedup" in decoding:
        beam, greedy = decoding["beam5_compared"], decoding["greedy_compared"]
        rows["beam 5"] = (
            f"{decoding['device_beam5_sentences_per_s']:.0f} sentences/s "
            f"= {decoding['beam5_speedup']:.1f}x 2 CPU threads; bf16 "
            f"{decoding['device_beam5_bf16_sentences_per_s']:.0f}, batches of 32k tokens "
            f"{decoding['device_beam5_32k_tokens_sentences_per_s']:.0f}"
        )
        rows["greedy"] = (
            f"{decoding['device_greedy_sentences_per_s']:.0f} sentences/s "
            f"= {decoding['greedy_speedup']:.1f}x"
        )
        rows["float32 = CPU"] = (
            f"beam {beam['identical']}/{beam['sentences']}, greedy "
            f"{greedy['identical']}/{greedy['sentences']} (near ties "
            f"{beam['near_ties']}, {greedy['near_ties']}); syncs/step "
            f"{decoding['host_syncs_per_decoder_step']}"
        )
    fit = sections.get("fit", {})
    if "first" in fit:
        rows["fit, resumed"] = (
            f"steps {fit['first']['step']}, {fit['resumed']['step']}; "
            f"{fit['target_tokens_per_s'] or 0:.0f} target tokens/s; "
            f"syncs/batch {fit['host_syncs_per_batch']}"
        )
    rows.update((name, r["error"][:100]) for name, r in sections.items() if "error" in r)
    width = max(map(len, rows), default=0)
    info = results["machine"]
    title = f"seq2seq GPU check on {info['name']} ({info['device']}, torch {info['torch']})"
    return "\n".join([title, *(f"  {name:<{width}}  {value}" for name, value in rows.items())])


SECTIONS = ("tests", "training", "decoding", "fit")
OPT_IN = ("compiled",)  # run only when --sections names it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: a check of the script")
    parser.add_argument("--out", type=Path, required=True, help="gpu_check.json goes here")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS + OPT_IN, default=list(SECTIONS))
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("this PyTorch sees no CUDA device (--device cpu --tiny checks the script)")
    plan = TINY if args.tiny else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    with scratch(args.work) as work:
        steps = {
            "tests": lambda: tests_section(device, plan, work),
            "training": lambda: training_section(device, plan, args.out),
            "compiled": lambda: compiled_section(device, plan),
            "decoding": lambda: decoding_section(device, plan, work, args.out),
            "fit": lambda: fit_section(device, plan, work),
        }
        results: dict[str, Any] = {"machine": machine(device), "tiny": args.tiny, "sections": {}}
        for name in args.sections:
            print(f"gpu_check: {name}...", file=sys.stderr, flush=True)
            results["sections"][name] = run_section(steps[name])
            save_json(args.out / "gpu_check.json", results)
    print(table(results))
    return int(any("error" in r for r in results["sections"].values()))


@contextmanager
def scratch(folder: Path | None) -> Iterator[Path]:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as temporary:
        yield Path(temporary)


if __name__ == "__main__":
    sys.exit(main())
