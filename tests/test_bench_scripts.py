"""The scripts' logic on made-up records: bench_summary.py, bench_quality.py (significance,
adopted runs), select_on_val.py (choosing on val, testing once, ensembles), the profilers."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

from seq2seq.text.pharaoh import parse_links
from seq2seq.text.tokenizer import Tokenizer, VocabSettings

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` (NAME: ``bench/benchkit``) as a fresh module of its dotted name
    (``scripts.bench.benchkit``), with the repository on the path for the kits it imports."""
    dotted = "scripts." + name.replace("/", ".")
    spec = importlib.util.spec_from_file_location(dotted, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(REPO))
        patch.setitem(sys.modules, dotted, module)  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def usage_error(capsys: pytest.CaptureFixture[str], call: Callable[..., object], *args) -> str:
    """``call(*args)`` ends as argparse ends on a usage error (exit status 2); its message,
    the last line of stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        call(*args)
    assert stop.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


@pytest.fixture(scope="module")
def summary() -> ModuleType:
    return load_script("bench/bench_summary")


@pytest.fixture(scope="module")
def quality() -> ModuleType:
    return load_script("bench/bench_quality")


def test_target_line_gives_the_ratio_and_the_verdict(summary: ModuleType):
    met = summary.target_line("tok/s", 2500.0, 800.0, 2.5)
    assert "3.12×" in met and met.endswith("| met |")
    assert summary.target_line("tok/s", 1000.0, 800.0, 2.5).endswith("| missed |")
    assert "not measured (the peer's)" in summary.target_line("tok/s", 1000.0, None, 2.5)


def write_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_summary_reads_every_part_and_reports_missing_ones(summary: ModuleType, tmp_path: Path):
    write_json(
        tmp_path / "transformer-speed.json",
        {
            "median_target_tokens_per_s": {
                "seq2seq Transformer": 4000.0,
                "torch.nn.Transformer": 2000.0,
            }
        },
    )
    write_json(
        tmp_path / "joey-speed.json",
        {"transformer": {"seq2seq_median": 4000.0, "joey_median": 1000.0}},
    )
    write_json(
        tmp_path / "joey-decoding.json",
        {
            "beam5": {"seq2seq_median": 90.0, "joey_median": 10.0},
            "beam5-bf16": {"seq2seq_median": 150.0, "joey_median": 10.0},
        },
    )
    rows = [
        {"name": "bahdanau", "bleu": 30.0, "bleu_literature": 38.5, "budget": "1 min"},
        {"name": "transformer", "bleu": 35.0, "bleu_literature": 40.0, "budget": "1 min",
         "decode_sentences_per_sec": 100.0},
        {"name": "transformer-lowercase", "bleu": 8.0, "bleu_literature": 41.2,
         "budget": "1 min"},  # a Transformer, however well it scores: not the best RNN
    ]  # fmt: skip
    write_json(tmp_path / "quality-en-de" / "results.json", {"results": rows})
    text = summary.summary(tmp_path)
    lines = text.splitlines()
    joey_row = next(
        line for line in lines if "(Joey NMT)" in line and "Transformer training" in line
    )
    assert "4.00×" in joey_row and joey_row.endswith("| met |")
    plain_row = next(line for line in lines if "(torch.nn.Transformer)" in line)
    assert "2.00×" in plain_row
    rnn_row = next(line for line in lines if "Bahdanau RNN" in line)
    assert rnn_row.endswith("not measured (ours) |")
    joey_decoding = next(line for line in lines if "decoding of test_2016" in line)
    assert "9.00×" in joey_decoding and joey_decoding.endswith("| missed |")
    bf16 = next(line for line in lines if "under --bf16" in line)
    assert "15.00×" in bf16 and bf16.endswith("| met |")
    best = next(line for line in lines if line.startswith("| best Transformer ("))
    assert best.startswith("| best Transformer (transformer-lowercase,") and "| met |" in best
    assert any(line.startswith("| best RNN (bahdanau") and "| met |" in line for line in lines)
    decoding = next(line for line in lines if line.startswith("| Transformer beam-5 decoding ("))
    assert "| 100.00 | ≥ 100 | met |" in decoding


def bootstrap_table(
    quality: ModuleType, folder: Path, refs: list[str], outputs: dict[str, list[str]],
    bleus: dict[str, tuple[float, float]],
) -> list[str]:  # fmt: skip
    """bench_quality's paired-bootstrap lines for configs that wrote ``outputs`` into
    ``folder`` and scored ``bleus`` (sacreBLEU, literature BLEU) against ``refs``."""
    ref = folder / "ref.txt"
    ref.write_text("\n".join(refs) + "\n")
    for name, hyps in outputs.items():
        (folder / name).mkdir()
        (folder / name / "hypotheses.txt").write_text("\n".join(hyps) + "\n")
    results = [
        {"name": name, "bleu": bleu, "bleu_literature": literature}
        for name, (bleu, literature) in bleus.items()
    ]
    return quality.paired_bootstrap(results, folder, ref, samples=200)


def test_paired_bootstrap_compares_every_config_with_the_baseline(
    quality: ModuleType, tmp_path: Path
):
    refs = [f"a small dog number {i} runs on the green grass" for i in range(40)]
    outputs = {
        "bahdanau": refs[:20] + ["a dog"] * 20,
        "luong-dot": ["a dog"] * 40,
        "transformer": refs,
    }
    bleus = {"bahdanau": (50.0, 50.0), "luong-dot": (1.0, 1.0), "transformer": (100.0, 100.0)}
    lines = bootstrap_table(quality, tmp_path, refs, outputs, bleus)
    rows = [line for line in lines if line.startswith("| bahdanau |")]
    assert [row.split(" | ")[1] for row in rows] == ["bahdanau", "luong-dot", "transformer"]
    assert rows[0].endswith("| – |")  # the baseline has no p-value against itself
    p_values = [float(row.rstrip(" |").split("| ")[-1]) for row in rows[1:]]
    assert all(p < 0.05 for p in p_values)  # both differ clearly from the baseline
    assert len(rows) == 3  # the best RNN is the baseline: no second comparison


def test_paired_bootstrap_pits_the_best_rnn_against_the_best_transformer_lowercased(
    quality: ModuleType, tmp_path: Path
):
    refs = [f"A small dog number {i} runs on the green grass" for i in range(40)]
    outputs = {  # lowercased training writes lowercase: its BLEU here must not suffer for it
        "luong-concat": refs[:20] + ["A dog"] * 20,
        "luong-concat-lowercase": [line.lower() for line in refs],
        "transformer": refs[:30] + ["A dog"] * 10,
        "transformer-lowercase": [line.lower() for line in refs[:35]] + ["a dog"] * 5,
    }
    bleus = {
        "luong-concat": (50.0, 50.0),
        "luong-concat-lowercase": (5.0, 100.0),
        "transformer": (80.0, 80.0),
        "transformer-lowercase": (6.0, 90.0),
    }
    lines = bootstrap_table(quality, tmp_path, refs, outputs, bleus)
    rows = [line.split(" | ") for line in lines if line.startswith("| ")][1:]
    assert [(row[0], row[1]) for row in rows] == [
        ("| luong-concat-lowercase", "luong-concat-lowercase"),
        ("| luong-concat-lowercase", "transformer-lowercase"),
    ]
    assert rows[0][2].startswith("100.00")  # lowercase output scored against cased references


def test_an_adopted_run_is_scored_from_its_own_records(quality: ModuleType, tmp_path: Path):
    import torch

    run_dir = tmp_path / "run"
    checkpoints = run_dir / "logs" / "version_0" / "checkpoints"
    checkpoints.mkdir(parents=True)
    best = checkpoints / "epoch03-bleu40.00.ckpt"
    best.write_bytes(b"")
    (checkpoints / "recent-epoch04.ckpt").write_bytes(b"")
    state = {
        "callbacks": {
            "Timer": {"time_elapsed": {"train": 3456.5, "validate": 1.0}},
            "ModelCheckpoint{'monitor': 'epoch', 'mode': 'max'}": {
                "monitor": "epoch",
                "best_model_path": str(checkpoints / "recent-epoch04.ckpt"),
            },  # the recent epochs' callback: newest, not best
            "ModelCheckpoint{'monitor': 'val_bleu'}": {
                "monitor": "val_bleu",
                "best_model_path": str(best),
            },
        }
    }
    torch.save(state, checkpoints / "last.ckpt")
    (run_dir / "logs" / "version_0" / "metrics.csv").write_text(
        "epoch,step,train/device/items_per_sec,val_bleu\n"
        "0,50,1000.0,\n0,100,3000.0,\n0,100,,12.0\n1,150,2000.0,\n1,200,,20.0\n"
    )
    folder = tmp_path / "transformer"
    folder.mkdir()

    trained = quality.adopt(run_dir, folder)

    assert trained["checkpoint"] == str(best)
    assert trained["train_tokens_per_sec"] == pytest.approx(2000.0)
    assert trained["epochs"] == 2
    assert trained["train_seconds"] == pytest.approx(3456.5)
    assert trained["train_peak_rss_mb"] is None  # not measured: the fit ran elsewhere
    assert json.loads((folder / "train.json").read_text()) == trained
    # with one recent-*.ckpt, nothing to average: the run's best checkpoint is what gets scored
    val = (tmp_path / "val.en", tmp_path / "val.de")
    assert quality.chosen_checkpoint(trained, folder, val, beam=5) == (str(best), {})


@pytest.mark.parametrize(("averaged_bleu", "chosen"), [(30.0, "averaged"), (20.0, "best")])
def test_val_chooses_between_the_average_and_the_best_checkpoint(
    quality: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, averaged_bleu, chosen
):
    checkpoints = tmp_path / "run" / "logs" / "version_0" / "checkpoints"
    checkpoints.mkdir(parents=True)
    for epoch in range(3):
        (checkpoints / f"recent-epoch{epoch:02d}.ckpt").write_bytes(b"")
    paths = {"best": str(checkpoints / "epoch02-bleu25.00.ckpt"),
             "averaged": str(tmp_path / "averaged.ckpt")}  # fmt: skip
    val_bleu = {paths["averaged"]: averaged_bleu, paths["best"]: 25.0}
    scored = []

    def fake_evaluate(checkpoint: str, src: Path, ref: Path, folder: Path, beam: int) -> dict:
        scored.append((checkpoint, src.name, folder.name))
        return {"bleu": 0.0, "bleu_literature": val_bleu[checkpoint]}

    averaged_from = []

    def fake_average(checkpoints: list[Path], out: Path) -> Path:
        averaged_from.append([path.name for path in checkpoints])
        return out

    monkeypatch.setattr(quality, "evaluate", fake_evaluate)
    monkeypatch.setattr(quality, "averaged", fake_average)
    trained = {"checkpoint": paths["best"], "run_dir": str(tmp_path / "run")}
    val = (tmp_path / "val.en", tmp_path / "val.de")
    checkpoint, scores = quality.chosen_checkpoint(trained, tmp_path, val, beam=5)
    assert checkpoint == paths[chosen]
    assert averaged_from == [[f"recent-epoch{epoch:02d}.ckpt" for epoch in range(3)]]
    assert scores == {"val_bleu_literature_averaged": averaged_bleu,
                      "val_bleu_literature_best": 25.0}  # fmt: skip
    assert scored == [(paths["averaged"], "val.en", "val-averaged"),
                      (paths["best"], "val.en", "val-best")]  # fmt: skip
    # a run with nothing to average: its best checkpoint, no val decoding
    for recent in checkpoints.glob("recent-*.ckpt"):
        recent.unlink()
    assert quality.chosen_checkpoint(trained, tmp_path, val, beam=5) == (paths["best"], {})


def is_script(path: Path) -> bool:
    """A script runs (``python -m scripts.bench.X``); a kit (benchkit) is only imported."""
    return 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")


SCRIPT_NAMES = sorted(
    path.relative_to(SCRIPTS).with_suffix("").as_posix()
    for path in SCRIPTS.rglob("*.py")
    if path.name != "__init__.py"
)  # bench/benchkit, select_on_val, ...


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_script_imports_and_imports_no_other_script(name: str):
    """As ``python -m scripts.bench.X`` runs them, importing the kits as ``scripts.*``."""
    load_script(name)
    imported = set()
    for node in ast.walk(ast.parse((SCRIPTS / f"{name}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    scripts = {
        "scripts." + n.replace("/", ".") for n in SCRIPT_NAMES if is_script(SCRIPTS / f"{n}.py")
    }
    assert not imported & scripts


def test_no_script_edits_the_import_path_and_one_runs_as_a_module():
    """Python's own way to run a module of a package, ``python -m scripts.bench.X`` from the
    repository's root, needs no script to edit ``sys.path``."""
    editing = [n for n in SCRIPT_NAMES if "sys.path" in (SCRIPTS / f"{n}.py").read_text()]
    assert editing == []
    done = subprocess.run([sys.executable, "-m", "scripts.bench.bench_summary", "--help"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def write_metrics(path: Path, rows: list[tuple[int, float | str, float | str]]) -> None:
    """A CSVLogger's metrics.csv of (step, train/time, val_bleu) rows; "" where not logged."""
    path.parent.mkdir(parents=True)
    lines = ["epoch,step,train/time,val_bleu"] + [f"0,{s},{t},{b}" for s, t, b in rows]
    path.write_text("\n".join(lines) + "\n")


def test_the_bleu_curve_puts_a_continued_fit_after_its_first_part(tmp_path: Path):
    plot = load_script("analysis/plot_bleu_curve")
    logs = tmp_path / "logs"
    first_part = [(49, 60.0, ""), (99, 120.0, ""), (99, "", 5.0)]
    write_metrics(logs / "version_0/metrics.csv", first_part)
    continued = [(149, 30.0, ""), (199, 90.0, ""), (199, "", 9.0)]  # from step 100 on
    write_metrics(logs / "version_1/metrics.csv", continued)
    assert plot.bleu_curve(tmp_path) == [(2.0, 5.0), (3.5, 9.0)]
    # version_10 sorts after version_9, not after version_1
    for version in range(2, 10):
        write_metrics(logs / f"version_{version}/metrics.csv", [])
    write_metrics(logs / "version_10/metrics.csv", [(49, 60.0, ""), (49, "", 2.0)])
    assert plot.bleu_curve(tmp_path) == [(1.0, 2.0)]  # its steps start over: a new training


@pytest.mark.slow  # trains two models
def test_the_speed_benchmark_step_trains_both_contenders():
    import torch

    from seq2seq.inference.batching import collate
    from seq2seq.model import VocabSpec

    speed = load_script("bench/bench_transformer_speed")
    vocab = VocabSpec(src_size=40, tgt_size=40, pad_id=0, bos_id=2, eos_id=3, joint=True)
    rows = [{"id": i, "src_ids": [5 + i] * (3 + i), "tgt_ids": [9 + i] * (2 + i)} for i in range(3)]
    batch = collate(rows, pad_id=0, bos_id=2, eos_id=3)
    torch.manual_seed(0)
    for model, loss_of in [
        (speed.Transformer(vocab, **speed.SIZE), speed.ours_loss),
        (speed.PlainTransformer(vocab), speed.plain_loss),
    ]:
        before = [p.detach().clone() for p in model.parameters()]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        seconds, faults = speed.train_step(model, loss_of, optimizer, batch, bf16=False)
        assert seconds > 0 and faults >= 0
        assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
        assert speed.train_step(model, loss_of, optimizer, batch, bf16=True)[0] > 0


def test_the_step_benchmark_times_attention_and_the_whole_decoder_step_of_each_variant():
    from seq2seq.rnn import RNNSeq2Seq

    step = load_script("bench/bench_attention_step")
    for name, attention in step.variants(window=2).items():
        model = RNNSeq2Seq(step.VOCAB, 8, 8, style="luong", attention=attention).eval()
        times = step.time_steps(model, batch=3, length=12, seconds=0.001)
        assert set(times) == set(step.PARTS), name
        assert all(seconds > 0 for seconds in times.values()), name


@pytest.fixture(scope="module")
def selection() -> SimpleNamespace:
    """select_on_val.py (``command``) and the parts of scripts/selection it runs, each by
    its module's name, as the command imported them: a test patches a name where it is
    looked up."""
    command = load_script("select_on_val")
    parts = ("records", "runs", "table", "on_val", "on_test", "distill", "release", "record")
    return SimpleNamespace(
        command=command, **{part: sys.modules[f"scripts.selection.{part}"] for part in parts}
    )


def train_arguments(
    selection: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, data: Path, *words: str
) -> argparse.Namespace:
    """``select_on_val.py --data DATA train WORDS`` parsed from the repository's root, as
    `make student` runs it."""
    (data / "val.en.gz").touch()
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "argv", ["select_on_val.py", "--data", str(data), "train", *words])
    return selection.command.parse_args()


def test_a_recipe_of_recipes_yaml_trains_with_its_config_files(
    selection: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
):
    recipe = ["--recipe", "transformer-student-6-2-short"]
    args = train_arguments(selection, monkeypatch, tmp_path, "--name", "fast", *recipe)
    folder = Path("configs/multi30k")
    assert args.config == [
        folder / "base/transformer.yaml",
        folder / "en-de/transformer-lowercase.yaml",
        folder / "en-de/transformer-anchor.yaml",
        folder / "en-de/transformer-student-6-2-short.yaml",
    ]
    unknown = ["--name", "x", "--recipe", "no-such"]
    message = usage_error(capsys, train_arguments, selection, monkeypatch, tmp_path, *unknown)
    assert "error: no en-de recipe 'no-such' in configs/multi30k/recipes.yaml" in message
    both = ["--name", "x", "--recipe", "transformer-anchor", "--config",
            "configs/multi30k/base/transformer.yaml"]  # fmt: skip
    message = usage_error(capsys, train_arguments, selection, monkeypatch, tmp_path, *both)
    assert message.endswith("error: argument --config: not allowed with argument --recipe")


@pytest.mark.parametrize("pieces", [True, False])
def test_a_recipe_on_subword_nmt_pieces_is_scored_joined_on_val_and_on_test(
    selection: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pieces: bool
):
    """train --remove-bpe: the recipe's record says so, so that val and `final`'s test set
    both score the pieces joined; such a recipe is no ensemble member (nor teacher)."""
    joined = []

    def evaluate(*args: object, remove_bpe: bool = False, **kwargs: object) -> dict:
        joined.append(remove_bpe)
        return {"bleu_literature": 30.0, "bleu": 29.0, "chrf": 50.0}

    def fit(args: argparse.Namespace, seed: int, folder: Path) -> None:
        write_json(folder / "train.json", {"seconds": 60.0, "seed": seed})

    monkeypatch.setattr(selection.runs, "evaluate", evaluate)
    monkeypatch.setattr(selection.runs, "fit", fit)
    monkeypatch.setattr(
        selection.runs, "final_models", lambda run, folder: {"last-1": folder / "x"}
    )
    words = ["--name", "cut", "--config", "base.yaml", *(["--remove-bpe"] if pieces else [])]
    args = train_arguments(selection, monkeypatch, tmp_path, *words)
    args.out = tmp_path / "selection"
    selection.on_val.train(args)
    recipe = json.loads((args.out / "cut" / "recipe.json").read_text())
    assert recipe.get("remove_bpe", False) is pieces
    assert joined == [pieces] * len(selection.records.LENGTH_PENALTIES)
    final = argparse.Namespace(
        out=args.out, name="cut", again=False, skip_scored=False,
        test_split="test_2016_flickr", data=tmp_path, pair="en-de", beam=5, recase=None,
    )  # fmt: skip
    selection.on_test.final(final)
    assert joined[-1] is pieces and len(joined) == len(selection.records.LENGTH_PENALTIES) + 1
    if pieces:
        with pytest.raises(SystemExit, match="subword-nmt"):
            selection.runs.member_model(args.out, "cut:1")
    else:
        assert selection.runs.member_model(args.out, "cut:1")[0] == args.out / "cut" / "seed1" / "x"


def write_seed(recipe: Path, seed: int, scores: dict[str, float], minutes: float = 30) -> None:
    """A trained seed's records: val literature BLEU per setting key, and its fit's time."""
    write_json(recipe / "recipe.json", {"config": ["base.yaml"], "override": []})
    write_json(recipe / f"seed{seed}" / "train.json", {"seconds": minutes * 60, "seed": seed})
    records = {k: {"bleu_literature": b, "bleu": b - 1, "chrf": b + 20} for k, b in scores.items()}
    write_json(recipe / f"seed{seed}" / "val.json", records)


def test_selection_chooses_the_setting_with_the_best_mean_over_seeds(
    selection: SimpleNamespace, tmp_path: Path
):
    # last-5 wins seed 1 by a little and loses seed 2 by a lot: its mean is lower
    write_seed(tmp_path / "anchor", 1, {"last-5@lp1.5": 40.0, "last-10@lp1.5": 39.9})
    write_seed(tmp_path / "anchor", 2, {"last-5@lp1.5": 38.0, "last-10@lp1.5": 39.7})
    chosen = selection.records.chosen_setting(selection.records.seed_scores(tmp_path / "anchor"))
    assert chosen == selection.records.Setting("last-10", 1.5)
    (row,) = selection.table.val_rows(tmp_path)
    scores = ["39.80 ± 0.14", "38.80 ± 0.14", "59.80 ± 0.14"]
    assert row == ["anchor", "1, 2", "last-10", "1.5", *scores, "30", "–"]


def test_selection_scores_a_recipe_on_each_test_set_only_once(
    selection: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    write_seed(tmp_path / "anchor", 1, {"last-1@lp1": 30.0})
    scored = [{"split": "test_2016_flickr", "scores": {"1": {"bleu_literature": 30.0}}}]
    write_json(tmp_path / "anchor" / "final.json", scored)
    args = argparse.Namespace(
        out=tmp_path, name="anchor", again=False, skip_scored=False,
        test_split="test_2016_flickr", data=tmp_path, pair="en-de", beam=5, recase=None,
    )  # fmt: skip
    with pytest.raises(SystemExit, match="scored on test_2016_flickr already"):
        selection.on_test.final(args)
    args.skip_scored = True  # what `make student` asks: the recorded score, no new one
    selection.on_test.final(args)
    assert "scored already" in capsys.readouterr().out
    assert json.loads((tmp_path / "anchor" / "final.json").read_text()) == scored
    # another split is scored, and the figure keeps showing test_2016's first score
    checkpoint = tmp_path / "anchor" / "seed1" / "last.ckpt"
    monkeypatch.setattr(selection.runs, "final_models", lambda run, folder: {"last-1": checkpoint})
    monkeypatch.setattr(
        selection.runs, "evaluate",
        lambda *a, **k: {"bleu_literature": 25.0, "bleu": 24.0, "chrf": 50.0},
    )  # fmt: skip
    args.skip_scored, args.test_split = False, "test_2017_mscoco"
    selection.on_test.final(args)
    history = json.loads((tmp_path / "anchor" / "final.json").read_text())
    assert [record["split"] for record in history] == ["test_2016_flickr", "test_2017_mscoco"]
    assert selection.records.first_test_scores(tmp_path / "anchor") == scored[0]["scores"]
    assert selection.table.candidates(tmp_path)[0].test == [30.0]


def test_a_seed_trained_after_the_scoring_is_scored_alone_and_once(
    selection: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    write_seed(tmp_path / "anchor", 1, {"last-10@lp2": 41.5, "last-5@lp2": 41.1})
    scored = [{"split": "test_2016_flickr", "setting": "last-10@lp2",
               "scores": {"1": {"bleu_literature": 40.2}}}]  # fmt: skip
    write_json(tmp_path / "anchor" / "final.json", scored)
    write_seed(tmp_path / "anchor", 2, {"last-10@lp2": 40.0, "last-5@lp2": 41.0})
    evaluated, recased = [], []

    def evaluate(checkpoint: Path, *args: object, recase: Path | None = None, **_: object) -> dict:
        evaluated.append(checkpoint)
        recased.append(recase)
        return {"bleu_literature": 40.9, "bleu": 20.0, "chrf": 51.0}

    models = lambda run, folder: {"last-5": folder / "last-5.ckpt", "last-10": folder / "x"}  # noqa: E731
    monkeypatch.setattr(selection.runs, "final_models", models)
    monkeypatch.setattr(selection.runs, "evaluate", evaluate)
    args = argparse.Namespace(
        out=tmp_path, name="anchor", again=False, skip_scored=True,
        test_split="test_2016_flickr", data=tmp_path, pair="en-de", beam=5,
        recase=tmp_path / "casing.de.json",
    )  # fmt: skip
    selection.on_test.final(args)  # even as `make student` asks it (--skip-scored)
    assert evaluated == [tmp_path / "anchor" / "seed2" / "last-5.ckpt"]  # seed 1 not again
    assert recased == [args.recase]  # its translations recased, and the record says so
    history = json.loads((tmp_path / "anchor" / "final.json").read_text())
    assert history[0] == scored[0]
    assert history[1]["recase"] == str(args.recase)
    assert history[1]["setting"] == "last-5@lp2"  # val's choice over both seeds now
    assert list(history[1]["scores"]) == ["2"]
    assert selection.records.first_test_scores(tmp_path / "anchor") == {
        "1": {"bleu_literature": 40.2}, "2": history[1]["scores"]["2"]
    }  # fmt: skip
    assert selection.table.candidates(tmp_path)[0].test == [40.2, 40.9]
    selection.on_test.final(args)  # both scored: nothing is scored again
    assert len(evaluated) == 1
    args.skip_scored = False
    with pytest.raises(SystemExit, match="scored on test_2016_flickr already"):
        selection.on_test.final(args)


def test_an_ensemble_is_listed_with_the_weights_and_length_penalty_val_chose(
    selection: SimpleNamespace, tmp_path: Path
):
    write_seed(tmp_path / "anchor", 1, {"last-5@lp1.5": 40.0})
    write_json(tmp_path / "pair" / "ensemble.json", {"members": ["anchor:1", "anchor:2"]})
    records = {"ensemble@lp1": 41.0, "ensemble@lp1.5": 41.6, "ensemble[0.7,0.3]@lp2": 41.2}
    write_json(
        tmp_path / "pair" / "val.json",
        {k: {"bleu_literature": b, "bleu": b - 1, "chrf": b + 20} for k, b in records.items()},
    )
    assert selection.table.ensemble_rows(tmp_path) == [
        ["pair", "anchor:1, anchor:2", "equal", "1.5", "41.60", "40.60", "61.60"]
    ]
    records["ensemble[0.7,0.3]@lp2"] = 41.7
    write_json(
        tmp_path / "pair" / "val.json",
        {k: {"bleu_literature": b, "bleu": b - 1, "chrf": b + 20} for k, b in records.items()},
    )
    assert selection.table.ensemble_rows(tmp_path) == [
        ["pair", "anchor:1, anchor:2", "0.7, 0.3", "2", "41.70", "40.70", "61.70"]
    ]
    assert [row[0] for row in selection.table.val_rows(tmp_path)] == ["anchor"]


def test_the_figure_shows_val_per_seed_and_the_first_test_score(
    selection: SimpleNamespace, tmp_path: Path
):
    write_seed(tmp_path / "anchor", 1, {"last-5@lp1.5": 40.0, "last-1@lp1": 39.0})
    write_seed(tmp_path / "anchor", 2, {"last-5@lp1.5": 41.0, "last-1@lp1": 41.5})
    write_seed(tmp_path / "untested", 1, {"last-1@lp1": 38.0})
    first, again = {"1": 39.5, "2": 40.5}, {"1": 10.0, "2": 10.0}
    write_json(
        tmp_path / "anchor" / "final.json",
        [{"scores": {seed: {"bleu_literature": b} for seed, b in scores.items()}}
         for scores in (first, again)],
    )  # fmt: skip
    write_json(tmp_path / "pair" / "ensemble.json", {"members": ["anchor:1", "anchor:2"]})
    scores = {"bleu_literature": 42.0, "bleu": 41.0, "chrf": 60.0}
    write_json(tmp_path / "pair" / "val.json", {"ensemble@lp2": scores})
    tested = [{"scores": {"ensemble": {"bleu_literature": 41}}}]
    write_json(tmp_path / "pair" / "final.json", tested)
    assert selection.table.candidates(tmp_path) == [
        selection.table.Candidate("anchor", [40.0, 41.0], [39.5, 40.5]),  # last-5 has the best mean
        selection.table.Candidate("untested", [38.0], []),
        selection.table.Candidate("pair", [42.0], [41]),
    ]
    selection.table.print_table(tmp_path)
    assert (tmp_path / "val-table.png").read_bytes().startswith(b"\x89PNG")


def test_an_ensemble_member_must_be_a_val_scored_seed(selection: SimpleNamespace, tmp_path: Path):
    write_seed(tmp_path / "anchor", 1, {"last-1@lp1": 30.0})
    with pytest.raises(SystemExit, match="no val-scored seed '2' of 'anchor'"):
        selection.runs.member_model(tmp_path, "anchor:2")


def test_an_ensemble_is_scored_on_the_test_set_only_once(
    selection: SimpleNamespace, tmp_path: Path
):
    write_json(tmp_path / "pair" / "ensemble.json", {"members": ["anchor:1", "anchor:2"]})
    write_json(tmp_path / "pair" / "val.json", {"ensemble@lp1": {"bleu_literature": 1.0}})
    scored = {"split": "test_2016_flickr", "scores": {"ensemble": {"bleu_literature": 1.0}}}
    write_json(tmp_path / "pair" / "final.json", [scored])
    args = argparse.Namespace(
        out=tmp_path, name="pair", again=False, skip_scored=False, test_split="test_2016_flickr"
    )
    with pytest.raises(SystemExit, match="scored on test_2016_flickr already"):
        selection.on_test.final(args)


@pytest.fixture(scope="module")
def profiler() -> ModuleType:
    return load_script("bench/profile_search")


def test_operators_are_put_where_they_belong(profiler: ModuleType):
    expected = {
        "aten::addmm": "matrix products",
        "aten::bmm": "matrix products",
        "aten::_log_softmax": "softmax",
        "aten::native_layer_norm": "layer norm",
        "aten::topk": "beam bookkeeping",
        "aten::index_select": "beam bookkeeping",
        "aten::cat": "copies and reshapes",
        "aten::expand": "copies and reshapes",
        "aten::add": "element-wise",
        "aten::embedding": "element-wise",
        "aten::_local_scalar_dense": "other operators",
    }
    assert {name: profiler.category(name) for name in expected} == expected
    output_layer = [[30, 256], [8000, 256], [8000]]  # the inputs of the vocabulary projection
    assert profiler.category("aten::addmm", output_layer, vocab=8000) == (
        "matrix products of the output layer (vocabulary)"
    )
    assert profiler.category("aten::addmm", [[30, 256], [1024, 256]], vocab=8000) == (
        "matrix products"
    )
    assert profiler.category("aten::topk", [[30, 8000]], vocab=8000) == "beam bookkeeping"


def test_the_profiled_time_is_split_without_loss(profiler: ModuleType):
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    wall, seconds = profiler.profiled_shares(lambda: [a @ b for _ in range(50)])
    assert sum(seconds.values()) >= wall * (1 - 1e-9)  # every second of the run is somewhere
    assert seconds["matrix products"] > 0
    assert seconds[profiler.BETWEEN_OPERATORS] >= 0


def test_an_ensemble_final_scores_it_and_its_members_with_a_bootstrap(
    selection: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """final on an ensemble: each member under its recipe's setting, the ensemble under its
    own, the paired bootstrap against the best member, all recorded once."""
    write_seed(tmp_path / "anchor", 1, {"last-5@lp1.5": 40.0})
    write_seed(tmp_path / "anchor", 2, {"last-5@lp1.5": 39.0})
    write_json(tmp_path / "pair" / "ensemble.json", {"members": ["anchor:1", "anchor:2"]})
    write_json(
        tmp_path / "pair" / "val.json",
        {"ensemble@lp2": {"bleu_literature": 41.0}, "ensemble[3,1]@lp1": {"bleu_literature": 41.5}},
    )
    refs = ["a b c d", "e f g h", "i j k l"]
    ref = tmp_path / "ref.txt"
    ref.write_text("".join(line + "\n" for line in refs))
    outputs = {"anchor:1": ["a b c x", "e f x x", "i x x x"], "anchor:2": ["x x x x"] * 3}
    outputs["ensemble"] = refs
    calls = []

    def fake_evaluate(model, src, ref_path, folder, beam, lp, weights=None, recase=None):
        name = "ensemble" if isinstance(model, list) else str(model)
        calls.append((name, lp, weights))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hypotheses.txt").write_text("".join(h + "\n" for h in outputs[name]))
        bleu = {"anchor:1": 30.0, "anchor:2": 10.0, "ensemble": 90.0}[name]
        return {"bleu_literature": bleu, "bleu": bleu, "chrf": bleu}

    monkeypatch.setattr(selection.runs, "evaluate", fake_evaluate)
    chosen = selection.records.Setting("last-5", 1.5)  # what the seeds' val.json above choose
    monkeypatch.setattr(selection.runs, "member_model", lambda out, member: (member, chosen))
    monkeypatch.setattr(selection.on_test, "split_files", lambda *args: (ref, ref))
    args = argparse.Namespace(out=tmp_path, name="pair", again=False, data=tmp_path,
                              test_split="test_2016_flickr", pair="en-de", beam=5,
                              recase=None)  # fmt: skip
    selection.on_test.final(args)
    assert calls == [("anchor:1", 1.5, None), ("anchor:2", 1.5, None), ("ensemble", 1.0, [3, 1])]
    (record,) = json.loads((tmp_path / "pair" / "final.json").read_text())
    assert record["setting"] == "ensemble[3,1]@lp1"
    assert record["bootstrap"]["baseline"] == "anchor:1"
    assert 0 < record["bootstrap"]["p_value"] <= 1
    assert record["bootstrap"]["b"]["score"] > record["bootstrap"]["a"]["score"]
    assert "case:lc|eff:no|tok:none" in record["bootstrap"]["signature"]  # literature BLEU


def fit_args(data: Path) -> argparse.Namespace:
    """What `select_on_val.py train` gives `fit`: the recipe "anchor" of one config."""
    return argparse.Namespace(name="anchor", config=[Path("base.yaml")], data=data, override=[])


@pytest.mark.parametrize("stopped", [False, True])
def test_a_stopped_fit_continues_from_its_last_checkpoint(
    selection: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stopped: bool
):
    folder = tmp_path / "anchor" / "seed1"
    if stopped:
        (folder / "run" / "checkpoints").mkdir(parents=True)
        (folder / "run" / "checkpoints" / "last.ckpt").write_bytes(b"")
    folder.mkdir(parents=True, exist_ok=True)
    commands = []

    def fake_run(command, stdout, stderr):
        commands.append(command)
        return SimpleNamespace(status=0, seconds=60.0, peak_rss_mb=100.0)

    monkeypatch.setattr(selection.runs, "run", fake_run)
    args = fit_args(tmp_path)
    record = selection.runs.fit(args, 1, folder)
    (command,) = commands
    assert (command[-2:] == ["--ckpt_path", "last"]) is stopped
    assert record["resumed"] is stopped
    assert json.loads((folder / "train.json").read_text()) == record
    write_json(folder / "val.json", {"last-1@lp1": {"bleu_literature": 1, "bleu": 1, "chrf": 1}})
    write_json(tmp_path / "anchor" / "recipe.json", {"config": ["base.yaml"], "override": []})
    (row,) = selection.table.val_rows(tmp_path)
    assert row[-2:] == (["1 (resumed: the last part)", "–"] if stopped else ["1", "–"])


def test_a_fit_stopped_and_continued_counts_the_time_of_every_part(
    selection: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A fit stopped (GracefulStop's exit status) keeps its part's time; the part that
    finishes it continues from last.ckpt, and the record sums both parts' times, not that of
    a failed start that left no checkpoint."""
    folder = tmp_path / "anchor" / "seed1"
    (folder / "run" / "checkpoints").mkdir(parents=True)
    # status, seconds, peak RSS: a crash before any checkpoint (its time is no part of the
    # fit), a stop by SIGTERM (GracefulStop saves last.ckpt, exit 128 + 15), the part after it
    outcomes = iter([(1, 5.0, 900.0), (143, 100.0, 300.0), (0, 60.0, 200.0)])

    def fake_run(command, stdout, stderr):
        status, seconds, peak = next(outcomes)
        assert (command[-2:] == ["--ckpt_path", "last"]) is (status == 0)
        if status == 143:
            (folder / "run" / "checkpoints" / "last.ckpt").write_bytes(b"")
        return SimpleNamespace(status=status, seconds=seconds, peak_rss_mb=peak)

    monkeypatch.setattr(selection.runs, "run", fake_run)
    args = fit_args(tmp_path)
    with pytest.raises(RuntimeError, match=r"exit 1\)"):
        selection.runs.fit(args, 1, folder)
    with pytest.raises(RuntimeError, match="exit 143"):
        selection.runs.fit(args, 1, folder)
    assert not (folder / "train.json").exists()
    record = selection.runs.fit(args, 1, folder)
    assert record == {"seconds": 160.0, "peak_rss_mb": 300.0, "seed": 1, "parts": 2,
                      "resumed": False}  # fmt: skip
    assert not (folder / "stopped.json").exists()  # no stale parts for a later continuation
    write_json(folder / "val.json", {"last-1@lp1": {"bleu_literature": 1, "bleu": 1, "chrf": 1}})
    write_json(tmp_path / "anchor" / "recipe.json", {"config": ["base.yaml"], "override": []})
    (row,) = selection.table.val_rows(tmp_path)
    assert row[-2] == "3 (in parts)"


def test_an_ensembles_weights_are_named_in_its_setting_and_read_back(selection: SimpleNamespace):
    for weights in (None, [0.7, 0.3], [2.0, 1.0, 1.0]):
        model = selection.records.ensemble_model(weights)
        assert selection.records.ensemble_weights(model) == weights
    assert selection.records.ensemble_model([0.7, 0.3]) == "ensemble[0.7,0.3]"
    assert selection.on_val.parse_weighting("0.7,0.3", 2) == [0.7, 0.3]
    for wrong in ("0.7", "0.7,x", "1,-1", "0,0"):
        with pytest.raises(SystemExit, match=f"--weights {wrong}: "):
            selection.on_val.parse_weighting(wrong, 2)


@pytest.fixture(scope="module")
def engines_profile() -> ModuleType:
    return load_script("bench/profile_engines")


def test_perf_samples_are_put_where_they_belong(engines_profile: ModuleType):
    """Both engines' functions, as perf names them, in the categories of the gap's table."""
    expected = {
        ("libtorch_cpu.so", "mkl_blas_def_sgemm_kernel_0_zen"): "matrix products",
        ("[JIT] tid 26366", "0x00007f57922c523c"): "matrix products",  # oneDNN's kernels
        ("libctranslate2.so.4", "dnnl::impl::cpu::x64::gemm_info_t<float>::jit_init"): (
            "matrix products"
        ),
        ("libtorch_cpu.so", "at::native::AVX512::serial_vec_log_softmax_lastdim_range<float>"): (
            "softmax"
        ),
        ("libctranslate2.so.4", "ctranslate2::cpu::softmax<(ctranslate2::cpu::CpuIsa)2>"): (
            "softmax"
        ),
        ("libctranslate2.so.4", "ctranslate2::cpu::parallel_for<ctranslate2::ops::TopK>"): (
            "top-k"
        ),
        ("libtorch_cpu.so", "at::native::AVX2::direct_copy_kernel(at::TensorIteratorBase&)"): (
            "copies"
        ),
        ("libc.so.6", "__memmove_avx512_unaligned_erms"): "copies",
        ("[kernel.kallsyms]", "clear_page_erms"): "kernel (page zeroing, faults)",
        ("libgomp.so.1", "0x000000000001e02a"): "OpenMP runtime",
        ("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault"): "Python interpreter",
        ("libtorch_cpu.so", "at::native::AVX2::RowwiseMomentsImpl<float, 4l>"): "other",
    }
    assert {key: engines_profile.category(*key) for key in expected} == expected


def test_a_perf_report_is_summed_by_category(engines_profile: ModuleType):
    report = "\n".join([
        "# Samples: 18K of event 'cpu-clock:ppp'",
        "#",
        "10477|libtorch_cpu.so|[.] mkl_blas_def_sgemm_kernel_0_zen",
        "   40|[JIT] tid 26366|[.] 0x00007f57922c523c",
        "  702|libtorch_cpu.so|[.] at::native::serial_vec_log_softmax_lastdim_range<float>",
        "    5|libfoo.so|[.] a|b",  # a '|' inside a symbol stays in the symbol
        "",
    ])  # fmt: skip
    rows = list(engines_profile.report_rows(report))
    assert rows[-1] == (5, "libfoo.so", "[.] a|b")
    totals = engines_profile.by_category(rows)
    assert totals == {"matrix products": 10517, "softmax": 702, "other": 5}
    lines = engines_profile.table({"a": 100.0, "b": 120.0}, {"a": totals, "b": totals})
    assert lines[2] == "| matrix products | 10517 (93.7%) | 10517 (93.7%) |"
    assert lines[-2] == "| all | 11224 | 11224 |" and lines[-1].endswith("| 100.0 | 120.0 |")


def test_selection_takes_the_averages_a_run_trained_elsewhere_brought_back(
    selection: SimpleNamespace, tmp_path: Path
):
    """A seed trained on a lent machine comes back as its averaged checkpoints alone (no run
    folder): those, and only those, are its candidate final models."""
    seed = tmp_path / "student" / "seed1"
    seed.mkdir(parents=True)
    for name in ("last-5.ckpt", "last-10.ckpt"):
        (seed / name).write_bytes(b"")
    models = selection.runs.final_models(seed / "run", seed)
    assert models == {"last-5": seed / "last-5.ckpt", "last-10": seed / "last-10.ckpt"}


def test_a_teacher_distills_under_the_setting_val_chose_and_only_once(
    selection: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """distill: the teacher's val-chosen checkpoints, length penalty and ensemble weights
    reach `seq2seq distill`; its cost is kept beside the teacher; a corpus is written once."""
    write_seed(tmp_path / "anchor", 1, {"last-10@lp2": 41.5, "last-5@lp1": 41.0})
    write_seed(tmp_path / "anchor", 2, {"last-10@lp2": 40.5, "last-5@lp1": 40.9})
    models = {name: tmp_path / f"{name}.ckpt" for name in ("last-5", "last-10")}
    monkeypatch.setattr(selection.runs, "final_models", lambda run, folder: models)
    commands = []

    def fake_run(command, stdout, stderr=None, **options):
        commands.append(command[3:])
        out = Path(command[command.index("--out") + 1])
        out.mkdir()
        (out / "distill.json").write_text("{}")
        return SimpleNamespace(status=0, seconds=12.5, peak_rss_mb=300.0)

    monkeypatch.setattr(selection.distill, "run", fake_run)
    corpus = tmp_path / "kd"
    args = argparse.Namespace(
        out=tmp_path, data=tmp_path / "multi30k", pair="en-de", beam=5, teacher="anchor:2",
        corpus=corpus, keep_originals=True,
    )  # fmt: skip
    selection.distill.distill(args)
    assert commands == [[
        "distill", "--ckpt", str(models["last-10"]), "--data", str(tmp_path / "multi30k"),
        "--out", str(corpus), "--src-lang", "en", "--tgt-lang", "de", "--beam", "5",
        "--length-penalty", "2", "--keep-originals",
    ]]  # fmt: skip
    cost = json.loads((tmp_path / "anchor" / "distill" / "kd" / "distill.json").read_text())
    assert cost["teacher"] == "anchor:2" and cost["seconds"] == 12.5
    selection.distill.distill(args)  # written already: nothing runs
    assert len(commands) == 1
    # an ensemble teacher: its members under their recipe's choice, its own weights and penalty
    write_json(tmp_path / "pair" / "ensemble.json", {"members": ["anchor:1", "anchor:2"]})
    write_json(tmp_path / "pair" / "val.json", {"ensemble[3,1]@lp1.5": {"bleu_literature": 42.0}})
    args.teacher, args.corpus, args.keep_originals = "pair", tmp_path / "kd-pair", False
    selection.distill.distill(args)
    assert commands[1][commands[1].index("--length-penalty") :] == [
        "--length-penalty", "1.5", "--ensemble-weights", "3.0", "1.0",
    ]  # fmt: skip
    assert commands[1].count("--ckpt") == 2
    args.teacher, args.corpus = "nobody", tmp_path / "kd-nobody"
    with pytest.raises(SystemExit, match="neither recipe:seed nor a val-scored ensemble"):
        selection.distill.distill(args)


def test_record_keeps_the_committed_records_a_retrained_run_would_replace(
    selection: SimpleNamespace, tmp_path: Path
):
    """`record` copies the records and the table; more val scores or another test split
    extend a committed record and are copied, while a teacher trained again in the same
    folder (another fit time, other val scores) stops the copy whole; --names records the
    others."""
    out, into = tmp_path / "runs", tmp_path / "docs"
    write_seed(out / "teacher", 1, {"last-1@lp1": 40.0}, minutes=60)
    tested = {"split": "test_2016_flickr", "scores": {"1": {"bleu_literature": 39.5}}}
    write_json(out / "teacher" / "final.json", [tested])
    args = argparse.Namespace(out=out, into=into, names=[])
    selection.record.record(args)
    committed = json.loads((into / "teacher" / "seed1" / "train.json").read_text())
    assert committed["seconds"] == 3600 and (into / "val-table.md").exists()

    write_seed(out / "teacher", 1, {"last-1@lp1": 40.0, "last-5@lp1": 40.5}, minutes=60)
    write_json(out / "teacher" / "final.json", [tested, {**tested, "split": "test_2017_flickr"}])
    selection.record.record(args)
    assert len(json.loads((into / "teacher" / "final.json").read_text())) == 2
    assert "last-5@lp1" in json.loads((into / "teacher" / "seed1" / "val.json").read_text())

    write_seed(out / "teacher", 1, {"last-1@lp1": 39.0}, minutes=61)  # trained again
    write_seed(out / "student", 1, {"last-1@lp1": 41.0})
    with pytest.raises(SystemExit, match="nothing copied") as stopped:
        selection.record.record(args)
    assert "teacher/seed1/train.json" in str(stopped.value)
    assert "teacher/seed1/val.json" in str(stopped.value)
    assert json.loads((into / "teacher" / "seed1" / "train.json").read_text()) == committed
    assert not (into / "student").exists()

    args.names = ["student"]
    selection.record.record(args)
    assert (into / "student" / "seed1" / "val.json").exists()
    assert json.loads((into / "teacher" / "seed1" / "train.json").read_text()) == committed


def test_the_committed_val_table_is_what_the_committed_records_give(selection: SimpleNamespace):
    """docs/benchmarks/results/selection holds the selection's records (`select_on_val.py
    record`) and the table the report links: regenerated from the records, it is the same,
    so the two cannot drift apart."""
    records = SCRIPTS.parent / "docs" / "benchmarks" / "results" / "selection"
    committed = (records / "val-table.md").read_text(encoding="utf-8").splitlines()
    cells = selection.table.val_rows(records) + selection.table.ensemble_rows(records)
    rows = [load_script("bench/benchkit").markdown_row(row) for row in cells]
    assert rows and all(row in committed for row in rows)
    table_rows = [line for line in committed if line.startswith("| ") and "---" not in line]
    assert len(table_rows) == len(rows) + 1 + bool(selection.table.ensemble_rows(records))


def test_decoder_shapes_all_decode_every_sentence_to_its_limit(tmp_path: Path):
    """bench_decoder_shapes.py: the untrained models never choose EOS, so two shapes search
    the same steps (the source pieces + 2 of each sentence), and the table compares them."""
    shapes = load_script("bench/bench_decoder_shapes")
    lines = ["a man rides a bike", "two dogs", "one", "children play in the park today"]
    (tmp_path / "src.en").write_text("\n".join(lines) + "\n")
    out = tmp_path / "shapes.json"
    argv = ["bench_decoder_shapes.py", "--src", str(tmp_path / "src.en"), "--out", str(out)]
    argv += ["--shapes", "4+4 d128 V8k", "6+1 d128 V10k", "--rounds", "1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", argv)
        shapes.main()
    median = json.loads(out.read_text())["median"]
    pieces = [int(1.2 * len(line.split())) for line in lines]
    limits = [n + 1 + 2 for n in pieces]  # the source with its EOS, ratio 1, offset 2
    assert [result["tokens"] for result in median.values()] == [sum(limits)] * 2


def test_segmentations_are_compared_token_by_token_without_their_markers():
    """compare_segmentation.py: a token's SentencePiece pieces spell it without the
    word-start marker or an empty piece (punctuation learnt attached to words comes as the
    marker alone, then itself), and the tokens two cuts disagree on are counted."""
    segmentation = load_script("analysis/compare_segmentation")
    text = ["ein mann fährt ein fahrrad.", "zwei männer fahren.", "ein hund, eine katze."]
    tokenizer = Tokenizer.train(text * 5, VocabSettings(vocab_size=300, model_type="bpe"))
    cut = segmentation.sentencepiece_cut(tokenizer)
    for token in ["mann", "fahrrad", ".", ",", "katzen"]:
        pieces = cut(token)
        assert "".join(pieces) == token and all(pieces), pieces

    def whole(token: str) -> list[str]:
        return [token]

    def halves(token: str) -> list[str]:
        return [token[:2], token[2:]] if len(token) > 2 else [token]

    tokens = ["ab", "abc", "abc", "xyzw"]
    assert segmentation.differently_cut(tokens, whole, halves) == {"abc": 2, "xyzw": 1}


def test_the_alignment_benchmark_reads_gold_and_turns_a_reverse_models_links_round(tmp_path):
    models = load_script("bench/alignment/models")
    # mean, layers, heads; with and without Shift-Att; argmax and mutual argmax
    assert len(models.extractions((3, 4))) == (1 + 3 + 3 * 4) * 2 * 2
    assert models.extractions(()) == [  # an RNN: the mean
        {"shift": shift, "method": method}
        for shift in (False, True)
        for method in ("argmax", "mutual-argmax")
    ]
    (tmp_path / "set.src-tgt").write_text("a b ||| x y z\nc ||| w\n", encoding="utf-8")
    (tmp_path / "set.gold").write_text("1-1 2p3\n1-1 1-2\n", encoding="utf-8")  # from 1
    pairs, gold = load_script("bench/alignment/gold").read_set(tmp_path, "set.src-tgt", "set.gold")
    assert pairs == [(["a", "b"], ["x", "y", "z"]), (["c"], ["w"])]
    assert gold[0].sure == {(0, 0)} and gold[0].possible == {(0, 0), (1, 2)}
    assert gold[1].sure == {(0, 0)}  # 1-2 points past the one word of "w": dropped

    class Reverse:  # a model that translates right to left: its links are (right, left)
        def align_each(self, sources, targets, extractions):
            assert sources == ["x y z", "w"] and targets == ["a b", "c"]
            return [[[(2, 1)], [(0, 0)]] for _ in extractions]

    assert models.model_links(Reverse(), pairs, left_to_right=False) == [{(1, 2)}, {(0, 0)}]


def test_the_alignment_benchmark_joins_a_forward_choice_with_the_reverse_models_choice(
    monkeypatch: pytest.MonkeyPatch,
):
    """The symmetrized rows join each forward model's trial choice with the reverse model's
    (its links turned round to (left, right)), by grow-diag-final, grow-diag and the
    symmetrization the two choices' trial links score best with."""
    align = load_script("bench/bench_align")
    pairs = [(["a", "b", "c"], ["x", "y", "z"])]
    gold = align.GoldAlignment(sure=frozenset({(0, 0)}), possible=frozenset({(0, 0)}))
    trial = ([(["c"], ["z"])], [gold])

    class Backward:  # an RNN (no heads: the mean is its only extraction), right to left
        heads = ()

        def align_each(self, sources, targets, extractions):
            assert (sources, targets) in [(["x y z"], ["a b c"]), (["z"], ["c"])]
            links = [(0, 0), (1, 2)] if len(sources[0]) > 1 else [(0, 0)]  # (right, left)
            return [[links] for _ in extractions]

    monkeypatch.setattr(align, "reverse_model", lambda gold_set, args: {"checkpoint": "fr-en"})
    monkeypatch.setattr(align.seq2seq, "load", lambda checkpoint: Backward())
    # the forward choice's trial links: the gold's one link and another that the reverse
    # model's lacks, so that only the intersection scores no error
    record = {"models": {"m": {"chosen": "layer 0", "trial_links": ["0-0 0-1"]}}}
    forward = [{(0, 0), (2, 2)}]
    systems = {"m, layer 0 (trial's choice)": forward}
    rows = align.symmetrized_rows(
        align.SETS[0], systems, ["m"], pairs, trial, argparse.Namespace(), record
    )
    backward = {(0, 0), (2, 1)}
    assert rows["fr→en trained here, mean (trial's choice)"] == [backward]  # turned round
    for how in ("grow-diag-final", "grow-diag"):
        joined = rows[f"m ⇄ fr→en trained here, {how} of the trial's choices"]
        assert joined == [align.symmetrize(forward[0], backward, how)]
    grown = rows["m ⇄ fr→en trained here, grow-diag of the trial's choices"]
    assert grown == [{(0, 0)}]  # both directions' link; (2, 2) and (2, 1) touch none of it
    choice = record["joined_choice"]["m ⇄ fr→en trained here"]
    assert choice["chosen"] == "intersection" and choice["trial_aer"]["intersection"] == 0
    assert choice["trial_aer"]["union"] > 0
    chosen = rows["m ⇄ fr→en trained here, intersection of the trial's choices (trial's choice)"]
    assert chosen == [{(0, 0)}]


def test_the_alignment_benchmark_shows_the_symmetrization_an_aligners_trial_links_choose():
    """An aligner's rows: grow-diag-final and grow-diag always, the symmetrization with the
    lowest trial AER beside them (marked), each of the test pairs alone (the trial's first
    in what the aligner found); without a trial set, grow-diag-final is the choice."""
    align = load_script("bench/bench_align")
    gold = align.GoldAlignment(sure=frozenset({(0, 0)}), possible=frozenset({(0, 0)}))
    forward, backward = [{(0, 0), (1, 1)}, {(0, 0), (1, 1)}], [{(0, 0)}, {(0, 0), (0, 1)}]
    found = {
        "gold pairs": {
            how: [align.symmetrize(f, b, how) for f, b in zip(forward, backward, strict=True)]
            for how in align.SYMMETRIZATIONS
        },
        "left to right": [forward[1]],
        "seconds": 1.0,
    }
    record: dict = {}
    rows = align.aligner_rows("eflomal", found, align.SETS[0], [gold], record)
    choice = record["aligner_choice"]["eflomal"]
    assert choice["chosen"] == "intersection" and choice["trial_aer"]["intersection"] == 0
    assert choice["trial_aer"]["grow-diag-final"] > 0
    assert rows == {
        "eflomal, grow-diag-final": [align.symmetrize(forward[1], backward[1], "grow-diag-final")],
        "eflomal, grow-diag": [align.symmetrize(forward[1], backward[1], "grow-diag")],
        "eflomal, intersection (trial's choice)": [{(0, 0)}],
        "eflomal, en→fr only": [forward[1]],
    }
    untried: dict = {}
    rows = align.aligner_rows("eflomal", found, align.SETS[0], [], untried)
    assert untried["aligner_choice"]["eflomal"]["chosen"] == "grow-diag-final"
    assert rows["eflomal, grow-diag-final"] == found["gold pairs"]["grow-diag-final"]
    assert len(rows) == 3


def test_the_alignment_benchmarks_training_time_counts_every_fit_and_aligner_once():
    report = load_script("bench/alignment/report")
    results = {
        "sets": {
            "En-Fr": {
                "finetune_seconds": 100,
                "guided_finetune_seconds": 1000,
                "reverse_guided_seconds": 900,
                "aligner_seconds": {"eflomal": 12.5, "fast_align": 4.5},
                "twins": {"plain": {"fit_seconds": 700}, "guided": {"fit_seconds": 800}},
                "reverse": {"fit_seconds": 1800, "checkpoint": "x"},
                "models": {"m": {"seconds": 2.0}},  # reading links: not training
            },
            "De-En": {"finetune_seconds": 70, "aligner_seconds": {"eflomal": 11.0}},
        }
    }
    assert report.training_seconds(results) == 100 + 1000 + 900 + 17 + 1500 + 1800 + 70 + 11


def test_the_alignment_benchmark_guides_the_reverse_model_with_eflomals_links_turned_round(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """Given the forward guided model, the reverse model learns eflomal's links of the gold's
    pairs (trial's, then test's) turned round to (right, left), by the same updates, starting
    from its own checkpoint in a folder of its own, and is joined with that model alone."""
    align = load_script("bench/bench_align")
    pairs = [(["a", "b", "c"], ["x", "y", "z"])]
    gold = align.GoldAlignment(sure=frozenset({(0, 0)}), possible=frozenset({(0, 0)}))
    trial = ([(["c"], ["z"])], [gold])
    guide = [{(0, 0)}, {(0, 1), (2, 2)}]  # eflomal's: the trial pair's, the test pair's

    class Backward:  # an RNN, right to left; the guided one links y to c
        heads = ()

        def __init__(self, checkpoint: str):
            self.checkpoint = checkpoint

        def align_each(self, sources, targets, extractions):
            links = [(1, 2)] if self.checkpoint == "guided.ckpt" else [(0, 0)]
            return [[links for _ in sources] for _ in extractions]

    trained = {}

    def fine_tuned(gold_set, test, trial_pairs, args, start=None, guide=(), run=None):
        trained.update(left_to_right=gold_set.model_left_to_right, start=start, guide=guide)
        trained.update(run=run, steps=args.gold_guided_steps)
        return "guided.ckpt"

    monkeypatch.setattr(align, "reverse_model", lambda gold_set, args: {"checkpoint": "fr-en"})
    monkeypatch.setattr(align, "fine_tuned", fine_tuned)
    monkeypatch.setattr(align.seq2seq, "load", Backward)
    record = {
        "models": {
            "m": {"chosen": "layer 0", "trial_links": ["0-0"]},
            "g": {"chosen": "layer 1", "trial_links": ["0-0"]},
        }
    }
    systems = {"m, layer 0 (trial's choice)": [{(0, 0)}], "g, layer 1 (trial's choice)": [{(2, 2)}]}
    args = argparse.Namespace(gold_guided_steps=5, work=tmp_path)
    rows = align.symmetrized_rows(
        align.SETS[0], systems, ["m", "g"], pairs, trial, args, record, guided=("g", guide)
    )
    assert trained == {
        "left_to_right": False,
        "start": "fr-en",
        "guide": ["0-0", "1-0 2-2"],  # (right, left): trial's pair, then the test pair's
        "run": "finetune-guided-fr-en",
        "steps": 5,
    }
    guided = "fr→en trained here + 5 guided updates on the gold's pairs"
    assert rows[f"{guided}, mean (trial's choice)"] == [{(2, 1)}]  # turned round
    joined = rows[f"g ⇄ {guided}, grow-diag-final of the trial's choices"]
    assert joined == [align.symmetrize({(2, 2)}, {(2, 1)}, "grow-diag-final")]
    assert f"m ⇄ {guided}, grow-diag of the trial's choices" not in rows  # the last one only
    assert "m ⇄ fr→en trained here, grow-diag of the trial's choices" in rows


def test_the_guided_twin_learns_eflomals_token_links_on_the_words_as_written():
    aligners = load_script("bench/alignment/aligners")
    written = (["A man, in bushes.", "Hello"], ["Un homme, dans l'herbe.", "Bonjour"])
    tokenized = (["a man , in bushes .", "hullo"], ["un homme , dans l' herbe .", "bonjour"])
    # token links: man-homme, ','-',', bushes-herbe, '.'-'.', in-dans, in-l'
    links = [{(1, 1), (2, 2), (4, 5), (5, 6), (3, 3), (3, 4)}, {(0, 0)}]
    gold = [{(0, 1), (2, 0)}]
    lines, unmapped = aligners.twin_guide(written, tokenized, links, gold)
    # words as written: A | man, | in | bushes.  and  Un | homme, | dans | l'herbe.
    assert parse_links(lines[0]) == {(1, 1), (2, 2), (2, 3), (3, 3)}
    assert lines[1] == "" and unmapped == 1  # "hullo" does not spell "Hello"
    assert lines[2:] == ["0-1 2-0"]
    assert aligners.token_words(["ab", "c"], ["a", "bc"]) == [0, 0]
    assert aligners.token_words(["ab"], ["a"]) is None  # a character left over
