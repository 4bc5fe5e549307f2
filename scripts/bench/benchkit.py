"""What the benchmarks share: run a command and measure it, alternate contenders and take
medians, keep results as JSON, the Multi30k splits and recipes, the checkpoints a run leaves
and their scores, and the training step the speed benchmarks time.

Scripts run as ``python -m scripts.FOLDER.X`` put the repository first on their path and
import this module as ``scripts.bench.benchkit``; no script imports another.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from operator import methodcaller
from pathlib import Path
from typing import Any, TypeVar

import torch
import yaml
from torch import Tensor, nn

from seq2seq.batch import Batch
from seq2seq.common.atomic import write_atomically
from seq2seq.inference.checkpoint import average_checkpoints, save_checkpoint
from seq2seq.inference.released import CARD, FIGURES_END, FIGURES_START, card_figures
from seq2seq.model import VocabSpec
from seq2seq.text.lines import read_lines
from seq2seq.training.loss import label_smoothed_nll

REPO = Path(__file__).resolve().parents[2]
SEQ2SEQ = [sys.executable, "-m", "seq2seq"]
RECIPES = Path("configs/multi30k/recipes.yaml")  # recipe name -> its --config files, by pair
RATE = "train/device/items_per_sec"  # seq2seq's logged training target tokens/s
R = TypeVar("R")


# -- results ---------------------------------------------------------------------------------
def load_json(path: Path, default: Any = None) -> Any:
    """The JSON record in ``path``; ``default`` ({} unless given) when there is none yet."""
    if path.exists():
        return json.loads(path.read_text("utf-8"))
    return {} if default is None else default


def save_json(path: Path, record: Any) -> None:
    """Write ``record`` as indented JSON (other numbers, numpy's, as floats), atomically: a
    benchmark stopped at any moment leaves its last whole record."""
    text = json.dumps(record, indent=2, default=float) + "\n"
    write_atomically(path, methodcaller("write", text.encode("utf-8")))


def markdown_row(cells: Sequence[str]) -> str:
    """One line of a Markdown table."""
    return "| " + " | ".join(cells) + " |"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table's lines: ``header``, its rule, then a line for each of ``rows``."""
    return [markdown_row(header), "|" + "---|" * len(header), *map(markdown_row, rows)]


@contextmanager
def figure(path: Path, dpi: float | None = 120, **subplots: Any) -> Iterator[Any]:
    """The axes of ``plt.subplots(**subplots)`` to draw on; the figure is laid out tight,
    saved to ``path`` (its folder made) and closed after the block. matplotlib (Agg) is
    imported here, not by the scripts: one loaded inside a training process never draws."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawing, axes = plt.subplots(**subplots)
    try:
        yield axes
        drawing.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        drawing.savefig(path, dpi=dpi)
    finally:
        plt.close(drawing)  # drawn or not: pyplot keeps every open figure


# -- a command, its time and the peak memory of its process tree -----------------------------
def _proc(pid: int | str, name: str) -> str:
    """/proc/<pid>/<name>; empty once the process is gone."""
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def memory_mb(field_name: str, pid: int | str = "self") -> float:
    """A memory figure of /proc/<pid>/status in MB: ``VmHWM`` (the peak resident set, which
    starts afresh at exec, unlike getrusage's ru_maxrss), ``VmRSS`` (now) or ``RssAnon``;
    0 when the process is gone."""
    for line in _proc(pid, "status").splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Process:
    """One process of a measured command's tree, as last seen, with its largest memory."""

    pid: int
    ppid: int
    name: str = ""
    cmdline: str = ""
    rank: str | None = None  # LOCAL_RANK of the environment it started with (DDP's ranks)
    peak_rss_mb: float = 0.0  # VmHWM
    peak_anon_mb: float = 0.0  # the largest RssAnon polled: its own memory, not mapped files


class Tree:
    """Every process under ``root`` seen by ``poll``; a process is (pid, start time), so
    that a reused pid is another process."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[tuple[int, str], Process] = {}

    def poll(self) -> None:
        stats = {}
        for entry in Path("/proc").iterdir():
            text = _proc(entry.name, "stat") if entry.name.isdigit() else ""
            if text:  # the fields after the name, which may hold spaces: state, ppid, ...
                stats[int(entry.name)] = text[text.rindex(")") + 2 :].split()
        children: dict[int, list[int]] = {}
        for pid, fields in stats.items():
            children.setdefault(int(fields[1]), []).append(pid)
        todo = [self.root] if self.root in stats else []
        while todo:
            pid = todo.pop()
            todo += children.get(pid, [])
            peak = memory_mb("VmHWM", pid)
            if not peak:  # a zombie, or gone
                continue
            seen = self.seen.setdefault((pid, stats[pid][19]), Process(pid, int(stats[pid][1])))
            seen.name = _proc(pid, "comm").strip()  # as of its latest exec
            seen.cmdline = _proc(pid, "cmdline").replace("\0", " ").strip()
            environ = _proc(pid, "environ").split("\0")
            seen.rank = next((v[11:] for v in environ if v.startswith("LOCAL_RANK=")), None)
            seen.peak_rss_mb = max(seen.peak_rss_mb, peak)
            seen.peak_anon_mb = max(seen.peak_anon_mb, memory_mb("RssAnon", pid))


@dataclass
class Run:
    """What ``run`` measured of one command."""

    pid: int  # the command's
    status: int
    seconds: float
    start: float  # time.time() at launch
    timed_out: bool
    processes: list[Process] = field(default_factory=list)

    @property
    def peak_rss_mb(self) -> float:
        """The largest peak of any one process of the tree (0: none was seen)."""
        return max((p.peak_rss_mb for p in self.processes), default=0.0)


def python_path(*first: Path | str) -> dict[str, str]:
    """This environment with ``first`` put before its PYTHONPATH."""
    paths = [*map(str, first), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A benchmark started in the
    background inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(
    command: Sequence[str],
    stdout: Path,
    stderr: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    stop: Sequence[signal.Signals] = (signal.SIGKILL,),
    grace: float = 60.0,
    interval: float = 0.2,
) -> Run:
    """Run ``command`` in a session of its own (stdout into ``stdout``; stderr into ``stderr``,
    else the same file; ``env`` over this environment), polling the peak RSS of every process
    of its tree every ``interval`` seconds until it ends (a process that lives less may be
    missed). After ``timeout`` seconds it is sent the signals of ``stop`` in turn, ``grace``
    seconds apart: each to the command, the last to its whole session. Interrupted here, the
    whole session is killed."""
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
    signals = list(stop)
    with ExitStack() as files:
        out = files.enter_context(stdout.open("w"))
        err = files.enter_context(stderr.open("w")) if stderr else subprocess.STDOUT
        start, clock = time.time(), time.perf_counter()
        child = subprocess.Popen(
            command, stdout=out, stderr=err, env=env, start_new_session=True,
            preexec_fn=_default_sigint,
        )  # fmt: skip
        tree, due = Tree(child.pid), None if timeout is None else clock + timeout
        try:
            while child.poll() is None:
                tree.poll()
                if due is not None and time.perf_counter() > due and signals:
                    sig = signals.pop(0)
                    if signals:
                        child.send_signal(sig)
                    else:
                        os.killpg(child.pid, sig)
                    due = time.perf_counter() + grace
                time.sleep(interval)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    processes = sorted(tree.seen.values(), key=lambda p: p.pid)
    timed_out = len(signals) < len(stop)
    seconds = time.perf_counter() - clock
    return Run(child.pid, child.returncode, seconds, start, timed_out, processes)


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it, for a benchmark's record."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return "unknown CPU"


# -- contenders in turn ----------------------------------------------------------------------
def alternate(
    rounds: list[dict[str, R]],
    count: int,
    contenders: Sequence[str],
    measure: Callable[[str, int], R],
    save: Callable[[], object] = lambda: None,
) -> list[dict[str, R]]:
    """A B A B: ``count`` rounds, each measuring every contender once, in turn, so that a slow
    spell of a shared machine falls on all alike. ``rounds[i][name]`` is a contender's record
    of round i: one already there is kept (a larger ``count`` adds rounds to an earlier
    run's), and ``save()`` follows each new one."""
    rounds += [{} for _ in range(count - len(rounds))]
    for index, done in enumerate(rounds[:count]):
        for name in contenders:
            if name not in done:
                done[name] = measure(name, index)
                save()
    return rounds


def medians(records: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The median of every figure over a contender's ``records``."""
    return {key: statistics.median(record[key] for record in records) for key in records[0]}


# -- Multi30k, its recipes and seq2seq fit ---------------------------------------------------
def split_files(
    data: Path, split: str, pair: str, lines: int | None = None, scratch: Path | None = None
) -> tuple[Path, Path]:
    """A split's source and reference files, cut to their first ``lines`` in ``scratch``."""
    files = tuple(data / f"{split}.{lang}.gz" for lang in pair.split("-"))
    if lines is None or scratch is None:
        return files[0], files[1]
    cut = [scratch / path.name.removesuffix(".gz") for path in files]
    for path, target in zip(files, cut, strict=True):
        target.write_text("".join(line + "\n" for line in read_lines(path)[:lines]))
    return cut[0], cut[1]


def recipe_configs(pair: str, root: Path = Path()) -> dict[str, list[Path]]:
    """Every Multi30k recipe of ``pair`` in recipes.yaml: its name and --config files."""
    index = yaml.safe_load((root / RECIPES).read_text(encoding="utf-8"))
    return {
        name: [root / RECIPES.parent / path for path in files]
        for name, files in index.get(pair, {}).items()
    }


def fit_command(configs: Sequence[Path], data: Path, run_dir: Path, *options: str) -> list[str]:
    """``seq2seq fit`` of the merged ``configs`` (later ones win) on ``data`` into
    ``run_dir``, without a progress bar, then ``options``."""
    return [
        *SEQ2SEQ, "fit", *(arg for path in configs for arg in ("--config", str(path))),
        "--data.source", str(data), "--trainer.default_root_dir", str(run_dir),
        "--trainer.enable_progress_bar", "false", *options,
    ]  # fmt: skip


def max_time(minutes: float) -> str:
    """Lightning's DD:HH:MM:SS for a budget in minutes."""
    s = round(minutes * 60)
    return f"{s // 86400:02d}:{s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def logged_metrics(run_dir: Path, version: str = "*") -> list[dict[str, str]]:
    """Every row of a run's metrics.csv files (Lightning's CSV logger), by version (those of
    ``logs/version_<version>``)."""
    rows: list[dict[str, str]] = []
    for path in sorted(run_dir.glob(f"logs/version_{version}/metrics.csv")):
        with path.open(newline="") as f:
            rows += csv.DictReader(f)
    return rows


def logged_rates(run_dir: Path) -> list[float]:
    """seq2seq's logged training target tokens/s (``RATE``), in step order."""
    return [float(row[RATE]) for row in logged_metrics(run_dir) if row.get(RATE)]


def multi30k_batches(data_dir: str, max_tokens: int, count: int) -> tuple[list[Batch], VocabSpec]:
    """The first ``count`` En-De training batches of Multi30k under ``max_tokens``, as
    seq2seq fit draws them (seed 1), and the vocabulary."""
    # datasets: imported only where needed
    from seq2seq.training.data.datamodule import TranslationDataModule

    torch.manual_seed(1)
    data = TranslationDataModule(
        data_dir, "en", "de", test_split="test_2016_flickr", max_tokens=max_tokens
    )
    data.setup("fit")
    loader = iter(data.train_dataloader())
    return [next(loader) for _ in range(count)], data.vocab.spec


# -- checkpoints and scores ------------------------------------------------------------------
def last_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The newest ``last.ckpt`` of a run and its contents (callback states included)."""
    lasts = sorted(run_dir.glob("checkpoints/last.ckpt")) or sorted(
        run_dir.glob("logs/version_*/checkpoints/last.ckpt")  # the layout of older versions
    )
    if not lasts:
        raise FileNotFoundError(f"no checkpoint under {run_dir}")
    return lasts[-1], torch.load(lasts[-1], map_location="cpu", weights_only=True)


def best_checkpoint(last: Path, state: dict[str, Any]) -> Path:
    """The checkpoint with the best validation BLEU the run's callbacks recorded, else last.
    (A ModelCheckpoint that keeps the recent epochs monitors ``epoch``: not a best.)"""
    for callback in state.get("callbacks", {}).values():
        monitor = str(callback.get("monitor")) if isinstance(callback, dict) else ""
        best = callback.get("best_model_path") if monitor.startswith("val_bleu") else None
        # beside last, named as the run found it: Lightning records it absolute
        if best and (beside := last.parent / Path(best).name).is_file():
            return beside
    return last


def recent_checkpoints(run_dir: Path) -> list[Path]:
    """The run's ``recent-*.ckpt``, oldest epoch first (their names sort by epoch)."""
    return sorted(run_dir.glob("checkpoints/recent-*.ckpt")) or sorted(
        run_dir.glob("logs/version_*/checkpoints/recent-*.ckpt")  # runs of older versions
    )


def averaged(checkpoints: Sequence[Path], out: Path) -> Path:
    """``out``: the checkpoint whose weights are the mean of ``checkpoints`` (written once)."""
    if not out.exists():
        save_checkpoint(average_checkpoints(checkpoints), out)
    return out


def evaluate_json(
    model: Sequence[str], src: Path, ref: Path, folder: Path, options: Sequence[str],
    env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], Run]:  # fmt: skip
    """``seq2seq evaluate --json`` of ``model`` (its options: ``--ckpt CKPT``, ``--model
    NAME``) on ``src``/``ref`` with ``options``, the translations into
    ``folder``/hypotheses.txt: its JSON, and what ``run`` measured of it."""
    command = [*SEQ2SEQ, "evaluate", *model, "--src", str(src), "--ref", str(ref), "--json"]
    command += ["--output", str(folder / "hypotheses.txt"), *options]
    usage = run(command, folder / "evaluate.json", folder / "evaluate.log", env=env)
    if usage.status != 0:
        raise RuntimeError(f"evaluation failed, see {folder / 'evaluate.log'}")
    return load_json(folder / "evaluate.json"), usage


def evaluate(
    checkpoint: str | list[str],
    src: Path,
    ref: Path,
    folder: Path,
    beam: int,
    bf16: bool = False,
    length_penalty: float | None = None,
    ensemble_weights: list[float] | None = None,
    recase: Path | None = None,
    remove_bpe: bool = False,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Scores and decoding speed from ``seq2seq evaluate --json`` (the hypotheses kept in
    ``folder``), and its peak RSS. Several checkpoints decode as an ensemble, weighted by
    ``ensemble_weights`` (default: equally); the length penalty is the checkpoint's unless
    given; ``bf16`` searches under bf16 autocast; ``recase``: the casing table that recases
    the translations before they are scored; ``remove_bpe``: translations and references
    are subword-nmt pieces, joined before they are scored (``evaluate --remove-bpe``);
    ``env``: over this process's environment."""
    members = [checkpoint] if isinstance(checkpoint, str) else checkpoint
    options = ["--beam", str(beam)] + (["--bf16"] if bf16 else [])
    options += [] if length_penalty is None else ["--length-penalty", str(length_penalty)]
    if ensemble_weights is not None:
        options += ["--ensemble-weights", *map(str, ensemble_weights)]
    options += [] if recase is None else ["--recase", str(recase)]
    options += ["--remove-bpe"] if remove_bpe else []
    model = [a for m in members for a in ("--ckpt", m)]
    scores, usage = evaluate_json(model, src, ref, folder, options, env)
    return {
        "bleu": scores["bleu"]["score"],
        "bleu_literature": scores.get("bleu_literature", {}).get("score"),
        "chrf": scores["chrf"]["score"],
        "bleu_signature": scores["bleu"]["signature"],
        "evaluated": checkpoint,
        "test_sentences": scores["decoding"]["sentences"],
        "decode_sentences_per_sec": scores["decoding"]["sentences_per_s"],
        "eval_peak_rss_mb": usage.peak_rss_mb,
    }


def best_by_literature_bleu(results: list[dict[str, Any]], transformers: bool) -> dict | None:
    """The Transformer recipes' (``transformer*``) or the RNNs' result with the highest
    literature BLEU."""
    rows = [r for r in results if r["name"].startswith("transformer") == transformers]
    return max(rows, key=lambda r: r["bleu_literature"] or 0) if rows else None


# -- a decoding engine's run (bench_engines.py, profile_engines.py) --------------------------
def engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of an engine's run: model, data, exports, threads."""
    parser.add_argument("--ckpt", type=Path, required=True, help="a Transformer checkpoint")
    parser.add_argument("--src", type=Path, required=True, help="source sentences (.gz or not)")
    parser.add_argument("--ref", type=Path, required=True, help="reference translations")
    parser.add_argument("--out", type=Path, required=True, help="folder for exports and results")
    parser.add_argument("--threads", type=int, default=2, help="threads of every engine")
    parser.add_argument("--max-tokens", type=int, default=4096, help="source pieces per batch")


def run_engine(
    args: argparse.Namespace, engine: str, search: str, prefix: Sequence[str] = ()
) -> dict[str, Any]:
    """One engine translating ``args.src`` under one search in a process of its own
    (``python -m scripts.bench.bench_engines --child``, wrapped in ``prefix``: a profiler): its
    JSON line of speed, peak RSS and hypotheses."""
    command = [*prefix, sys.executable, "-m", "scripts.bench.bench_engines", "--child",
               "--engine", engine, "--search", search, "--ckpt", str(args.ckpt), "--src",
               str(args.src), "--ref", str(args.ref), "--out", str(args.out), "--threads",
               str(args.threads), "--max-tokens", str(args.max_tokens)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode:
        raise RuntimeError(f"{engine} {search} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


# -- the training step the speed benchmarks time ---------------------------------------------
SIZE = dict(model_size=256, num_heads=4, ff_size=1024, encoder_layers=3, decoder_layers=3)
Loss = Callable[[nn.Module, Batch, bool], Tensor]


def ours_loss(model: nn.Module, batch: Batch, bf16: bool) -> Tensor:
    """What TranslationTask does: the fused label-smoothed loss over the valid lengths."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits, _ = model(batch.src, batch.src_lens, batch.tgt_in, need_weights=False)
    loss, _, n = label_smoothed_nll(logits, batch.tgt_out, batch.tgt_lens, 0.1)
    return loss / n


def train_step(
    model: nn.Module, loss_of: Loss, optimizer: torch.optim.Optimizer, batch: Batch, bf16: bool
) -> tuple[float, int]:
    """One training step (loss, backward, clipping, optimizer); its seconds and minor page
    faults."""
    model.train()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    loss_of(model, batch, bf16).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


TEST_SPLIT = "test_2016_flickr"


def test_files(data: Path, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """test_2016's source and reference files for a language pair."""
    files = data / f"{TEST_SPLIT}.{src_lang}.gz", data / f"{TEST_SPLIT}.{tgt_lang}.gz"
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        sys.exit(f"no {', '.join(missing)} (make multi30k, or --data)")
    return files


def write_card(folder: Path, results: dict[str, Any]) -> None:
    """The card's figures block replaced by the one ``results`` gives."""
    card = folder / CARD
    text = card.read_text(encoding="utf-8")
    if FIGURES_START not in text or FIGURES_END not in text:
        sys.exit(f"{card} has no figures block ({FIGURES_START} ... {FIGURES_END})")
    before, _, rest = text.partition(FIGURES_START)
    after = rest.partition(FIGURES_END)[2]
    card.write_text(before + card_figures(results) + after, encoding="utf-8")
