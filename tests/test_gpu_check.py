"""scripts/gpu/gpu_check.py, the check of the GPU path: its FLOP count against PyTorch's, its
comparison of translations, and the whole check on a CPU in its tiny mode, so that it
cannot rot between the times a GPU is at hand."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from test_bench_scripts import load_script
from torch.utils.flop_counter import FlopCounterMode

from seq2seq.model import VocabSpec
from seq2seq.transformer import Transformer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gpukit() -> ModuleType:
    return load_script("gpu/gpukit")


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    return load_script("gpu/gpu_check")


def test_the_flop_count_is_what_pytorch_counts(gpukit: ModuleType) -> None:
    """On a batch without padding, the formula's forward FLOPs are what FlopCounterMode
    counts in the matrix products, and forward and backward together three times that."""
    settings = {"model_size": 32, "ff_size": 48, "encoder_layers": 2, "decoder_layers": 3}
    vocab = 50
    torch.manual_seed(0)
    model = Transformer(VocabSpec(vocab, vocab, 0, 2, 3, joint=True), num_heads=4, **settings)
    B, S, T = 3, 7, 5
    src, tgt_in = torch.randint(4, vocab, (B, S)), torch.randint(4, vocab, (B, T))
    with FlopCounterMode(display=False) as forward:
        logits, _ = model(src, torch.full((B,), S), tgt_in, need_weights=False)
    with FlopCounterMode(display=False) as training:
        logits, _ = model(src, torch.full((B,), S), tgt_in, need_weights=False)
        logits.sum().backward()
    counted = gpukit.forward_flops(settings, vocab, np.full(B, S), np.full(B, T))
    assert forward.get_total_flops() == counted
    assert training.get_total_flops() == 3 * counted


def test_translations_that_differ_only_in_a_near_tie_are_told_apart(gpu_check: ModuleType):
    cpu = ([[5, 6], [7], [8, 9]], [-1.0, -2.0, -3.0])
    gpu = ([[5, 6], [4], [8]], [-1.0, -2.0004, -2.5])
    compared = gpu_check.compare(cpu, gpu, ["a", "b", "c"])
    assert (compared["identical"], compared["near_ties"], compared["different"]) == (1, 1, 1)
    assert [e["source"] for e in compared["examples"]] == ["b", "c"]


def test_the_opt_in_compiled_section_times_one_shape_eager_and_compiled(gpu_check: ModuleType):
    """On a CPU the compiled model runs under torch.compile's eager backend: a check of the
    section's plumbing, on batches that all have the one shape a compiled step wants."""
    result = gpu_check.compiled_section(torch.device("cpu"), gpu_check.TINY)
    variants = result["variants"]
    assert [v["variant"] for v in variants] == ["sdpa", "compiled sdpa"]
    assert all(v["target_tokens_per_s"] > 0 and v["padding_share"] == 0 for v in variants)
    assert variants[0]["parameters"] == variants[1]["parameters"]


def finite_numbers(record: object) -> list[float]:
    """Every number in a JSON record, nested."""
    if isinstance(record, dict):
        return [x for value in record.values() for x in finite_numbers(value)]
    if isinstance(record, list):
        return [x for value in record for x in finite_numbers(value)]
    return [record] if isinstance(record, int | float) and not isinstance(record, bool) else []


@pytest.mark.slow  # two Lightning fits, a child pytest and a few training steps
def test_the_check_runs_end_to_end_on_a_cpu(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.gpu.gpu_check",
            "--device",
            "cpu",
            "--tiny",
            "--out",
            str(out),
            "--work",
            str(work),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    results = json.loads((out / "gpu_check.json").read_text())
    sections = results["sections"]
    assert set(sections) == {"tests", "training", "decoding", "fit"}
    assert not [name for name, record in sections.items() if "error" in record]
    assert all(math.isfinite(x) for x in finite_numbers(results))
    assert sections["tests"]["passed"] > 0 and sections["tests"]["failed"] == 0
    variants = sections["training"]["variants"]
    assert [v["sdpa"] for v in variants] == [False, True]
    assert all(v["target_tokens_per_s"] > 0 and v["mfu"] > 0 for v in variants)
    assert variants[0]["profile"]["top"] and (out / "gpu_check_profile.txt").is_file()
    decoding = sections["decoding"]
    for search in ("beam5_compared", "greedy_compared"):  # the CPU against itself
        assert decoding[search]["identical"] == decoding[search]["sentences"] > 0
    assert decoding["device_beam5_sentences_per_s"] > 0
    assert decoding["profile"]["top"]
    fit = sections["fit"]
    assert [fit["first"]["step"], fit["resumed"]["step"]] == fit["steps_expected"]
    assert f"at step {fit['steps_expected'][0]}" in fit["resumed"]["resuming"]
    assert "seq2seq GPU check on" in done.stdout
    written = ["gpu_check.json", "gpu_check_decode.txt", "gpu_check_profile.txt"]
    assert sorted(p.name for p in out.iterdir()) == written
