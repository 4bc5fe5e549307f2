"""What the gap between seq2seq's search and CTranslate2's is made of: both engines run
bench_engines.py's beam-5 decoding under Linux ``perf record``, which samples native code
too, and each process's samples are summed by what their function does (matrix products,
softmax, top-k, copies, the kernel, OpenMP, Python). Needs ``perf`` and
``perf_event_paranoid`` <= 2. The samples cover the whole process: counts compare across
the engines, shares within one.

    python -m scripts.bench.profile_engines --ckpt CKPT --src test_2016_flickr.en.gz \\
        --ref test_2016_flickr.de.gz --out runs/bench/engines
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from scripts.bench.benchkit import engine_arguments, run_engine, save_json
from seq2seq.inference.checkpoint import load_trained
from seq2seq.inference.export import export_ctranslate2

ENGINES = ("seq2seq-fp32", "ct2-float32")
OTHER = "other"


def category(dso: str, symbol: str) -> str:
    """What a sampled function does, from its library (``dso``) and name (first match)."""
    if dso.startswith("[JIT]") or "gemm" in symbol.lower() or "mkl_blas" in symbol:
        return "matrix products"
    if "softmax" in symbol or "expf" in symbol:
        return "softmax"
    if "TopK" in symbol or "topk" in symbol or "introselect" in symbol:
        return "top-k"
    if any(word in symbol for word in ("copy_kernel", "memmove", "memcpy", "memset")):
        return "copies"
    if dso.startswith("[kernel"):
        return "kernel (page zeroing, faults)"
    if "gomp" in dso or "iomp" in dso:
        return "OpenMP runtime"
    if "python" in dso:
        return "Python interpreter"
    return OTHER


def report_rows(report: str) -> Iterator[tuple[int, str, str]]:
    """(samples, dso, symbol) of ``perf report -t '|' -F sample,dso,symbol`` output."""
    for line in report.splitlines():
        if line.startswith("#") or line.count("|") < 2:
            continue
        samples, dso, symbol = line.split("|", 2)
        if samples.strip().isdigit():
            yield int(samples), dso.strip(), symbol.strip()


def by_category(rows: Iterable[tuple[int, str, str]]) -> Counter[str]:
    """Samples summed by ``category``."""
    totals: Counter[str] = Counter()
    for samples, dso, symbol in rows:
        totals[category(dso, symbol)] += samples
    return totals


def profile(args: argparse.Namespace, engine: str, folder: Path) -> tuple[dict, Counter[str]]:
    """One beam-5 run of ``engine`` under ``perf record``: its speed and samples by category."""
    data = folder / f"{engine}.perf"
    record = ["perf", "record", "-q", "-F", str(args.frequency), "-o", str(data), "--"]
    result = run_engine(args, engine, "beam5", prefix=record)
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--sort", "dso,symbol",
         "-F", "sample,dso,symbol", "-t", "|"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return result, by_category(report_rows(report))


def table(speeds: dict[str, float], samples: dict[str, Counter[str]]) -> list[str]:
    """Markdown: samples and shares per category, one column per engine."""
    names = list(samples)
    order = sorted({c for counts in samples.values() for c in counts} - {OTHER},
                   key=lambda c: -samples[names[0]][c]) + [OTHER]  # fmt: skip
    lines = ["| where the samples fall | " + " | ".join(names) + " |",
             "|---|" + "---:|" * len(names)]  # fmt: skip
    for name in order:
        cells = [f"{samples[e][name]} ({100 * samples[e][name] / samples[e].total():.1f}%)"
                 for e in names]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| all | " + " | ".join(str(samples[e].total()) for e in names) + " |")
    lines.append("| sentences/s (under perf) | "
                 + " | ".join(f"{speeds[e]:.1f}" for e in names) + " |")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    engine_arguments(parser)
    parser.add_argument("--frequency", type=int, default=999, help="samples per second")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        sys.exit("profile_engines needs Linux perf (e.g. the linux-tools package) on PATH")
    if not (args.out / "ct2-float32" / "model.bin").is_file():
        export_ctranslate2(load_trained(args.ckpt), args.out / "ct2-float32", "float32")
    speeds, samples = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for engine in ENGINES:
            result, samples[engine] = profile(args, engine, Path(scratch))
            speeds[engine] = result["sentences_per_s"]
    print("\n".join(table(speeds, samples)))
    if args.json:
        record = {e: {"sentences_per_s": speeds[e], "samples": dict(samples[e])} for e in ENGINES}
        save_json(args.json, record)


if __name__ == "__main__":
    main()
