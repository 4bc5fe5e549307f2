"""Released models on a tiny model the tests release themselves: loading by name (the
Python API, every command's --model, `seq2seq models`), the sha256 check that refuses an
altered or truncated file, and the half-precision file that translates as its checkpoint."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_run import assert_same_search, nbest_rows

import seq2seq
from seq2seq.common.errors import CheckpointError, Seq2SeqError
from seq2seq.inference.checkpoint import (
    CHECKPOINT_KEY,
    load_trained,
    read_checkpoint,
    save_checkpoint,
)
from seq2seq.inference.released import (
    FIGURES_END,
    FIGURES_START,
    MODEL_FILE,
    MODELS_ENV,
    RESULTS,
    card_figures,
    half_precision,
    released_names,
    resolve,
    write_manifest,
)
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.translator import translate_lines
from seq2seq.text.casing import Recaser
from seq2seq.text.lines import TextLines

NAME = "tiny-en-de"
SOURCES = ["forty-two", "on Monday, May 4, 1998", "three hundred and one"]
SEARCH = {"beam": 2, "length_penalty": 1.0}


def release(checkpoint: Path, folder: Path, casing: Path | None = None) -> Path:
    """``checkpoint`` released as ``folder`` (models/NAME), as select_on_val.py release does."""
    folder.mkdir(parents=True)
    trained = read_checkpoint(checkpoint)
    search = {**trained[CHECKPOINT_KEY]["search"], **SEARCH}
    save_checkpoint(half_precision(trained, search), folder / MODEL_FILE)
    files = [MODEL_FILE]
    if casing is not None:
        shutil.copyfile(casing, folder / casing.name)
        files.append(casing.name)
    expected = seq2seq.load(checkpoint, recase=casing or False, beam=2).translate(SOURCES)
    manifest = {
        "name": folder.name, "description": "a tiny model of the tests", "src_lang": "en",
        "tgt_lang": "de", "casing": casing.name if casing else None,
        "checks": {"sources": SOURCES, "translations": expected},
    }  # fmt: skip
    write_manifest(folder, manifest, files)
    return folder


@pytest.fixture(scope="module")
def models(trained_run: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder holding the session's tiny run, released with a casing table."""
    root = tmp_path_factory.mktemp("released")
    casing = root / "casing.de.json"
    Recaser.learn(TextLines(str(trained_run["corpus"] / "train.de"))).save(casing)
    release(trained_run["ckpt"], root / "models" / NAME, casing)
    return root / "models"


@pytest.fixture
def named(models: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$SEQ2SEQ_MODELS set to the tiny models folder, for this test and its commands."""
    monkeypatch.setenv(MODELS_ENV, str(models))
    return models


def test_the_released_file_holds_half_precision_weights_and_no_paths(models: Path):
    checkpoint = torch.load(models / NAME / MODEL_FILE, weights_only=True)
    floats = [v for v in checkpoint["state_dict"].values() if v.is_floating_point()]
    assert floats and all(v.dtype == torch.float16 for v in floats)
    payload = checkpoint[CHECKPOINT_KEY]
    assert set(payload) == {"vocab", "config", "search", "precision"}  # no random states
    assert "\n  dirpath: /" not in payload["config"] and " /tmp" not in payload["config"]
    assert payload["search"]["beam"] == 2


def test_a_model_loads_by_name_and_translates_as_its_checkpoint_did(named: Path, trained_run: dict):
    """The released weights are the checkpoint's rounded to float16 and computed with in
    float32: the checkpoint's search, to float16's precision; exactly the search of the
    checkpoint with its weights rounded so."""
    model = seq2seq.load(NAME)
    manifest = json.loads((named / NAME / "manifest.json").read_text())
    assert model.translate(manifest["checks"]["sources"]) == manifest["checks"]["translations"]
    search = SearchSettings(beam=3, n_best=3)
    released = model.translate_all(SOURCES, search=search)
    checkpoint = load_trained(trained_run["ckpt"])
    full = translate_lines(checkpoint, SOURCES, search)
    assert_same_search(released, full, atol=0.01)
    with torch.no_grad():
        for weight in checkpoint.model.parameters():
            weight.copy_(weight.half().float())
    assert_same_search(released, translate_lines(checkpoint, SOURCES, search))
    assert model.search.beam == 2  # the search it was released with
    assert model.recaser is not None  # its own casing table, by default
    assert seq2seq.load(NAME, recase=False).recaser is None


def test_a_name_that_does_not_exist_gets_the_names_that_do(named: Path):
    with pytest.raises(Seq2SeqError, match=f"no released model called 'tiny-en-da'.*{NAME}"):
        seq2seq.load("tiny-en-da")
    assert released_names() == [NAME]


@pytest.mark.parametrize("damage", ["one byte", "truncated", "missing"])
def test_an_altered_or_truncated_file_is_refused_in_one_line(
    named: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_here, damage: str
):
    copy = tmp_path / "models"
    shutil.copytree(named, copy)
    monkeypatch.setenv(MODELS_ENV, str(copy))
    path = copy / NAME / MODEL_FILE
    data = bytearray(path.read_bytes())
    if damage == "one byte":
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    elif damage == "truncated":
        path.write_bytes(bytes(data[:-100]))
    else:
        path.unlink()
    with pytest.raises(CheckpointError) as refused:
        seq2seq.load(NAME)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "restore it" in message
    done = run_here("translate", "--model", NAME, stdin="forty-two\n")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and str(path) in done.stderr


def test_a_damaged_casing_table_is_refused_too(named: Path, tmp_path, monkeypatch):
    copy = tmp_path / "models"
    shutil.copytree(named, copy)
    monkeypatch.setenv(MODELS_ENV, str(copy))
    table = copy / NAME / "casing.de.json"
    table.write_text(table.read_text().replace("Mai", "MAI", 1))
    with pytest.raises(CheckpointError, match="casing.de.json is not the file released"):
        seq2seq.load(NAME)


def test_the_commands_take_a_model_by_name(named: Path, tmp_path: Path, run_here):
    expected = seq2seq.load(NAME).translate(SOURCES)
    done = run_here("translate", "--model", NAME, stdin="".join(s + "\n" for s in SOURCES))
    assert done.returncode == 0 and done.stdout.splitlines() == expected
    nbest = seq2seq.load(NAME).translate_all(SOURCES, search=SearchSettings(beam=3, n_best=3))
    done = run_here("translate", "--model", NAME, "--beam", "3", "--n-best", "3",
                    stdin="".join(s + "\n" for s in SOURCES))  # fmt: skip
    assert done.returncode == 0 and done.stdout.splitlines() == nbest_rows(nbest)
    lowercase = run_here("translate", "--model", NAME, "--recase", "none", stdin="forty-two\n")
    assert lowercase.stdout.strip() == seq2seq.load(NAME, recase=False).translate("forty-two")
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("".join(s + "\n" for s in SOURCES))
    ref.write_text("".join(t + "\n" for t in expected))
    hyp = tmp_path / "hyp.de"
    scored = run_here("evaluate", "--model", NAME, "--src", str(src), "--ref", str(ref), "--json",
                      "--output", str(hyp))  # fmt: skip
    assert json.loads(scored.stdout)["decoding"]["sentences"] == len(SOURCES)
    assert hyp.read_text().splitlines() == expected
    drawn = run_here("attention", "--model", NAME, "forty-two", "--out", str(tmp_path / "a"))
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "a" / "report.html").is_file()
    assert sorted((tmp_path / "a").glob("*.png"))


def test_a_command_without_a_model_names_the_released_ones(named: Path, run_here):
    for args in (["serve"], ["translate"], ["attention", "forty-two"]):
        done = run_here(*args)
        assert done.returncode == 2, done
        assert f"released models: {NAME}" in done.stderr and done.stderr.count("\n") == 1
    done = run_here("translate", "--model", "tiny-en-da")
    assert done.returncode == 1 and f"released models: {NAME}" in done.stderr
    both = run_here("translate", "--model", NAME, "--ckpt", "x.ckpt")
    assert both.returncode == 2 and "--model and --ckpt exclude each other" in both.stderr


def test_seq2seq_models_lists_each_name_with_its_cards_figures(named: Path, run_here):
    done = run_here("models")
    assert done.returncode == 0 and NAME in done.stdout and "not benchmarked yet" in done.stdout
    results = {
        "parameters": "40.1 K", "file_mib": 0.1, "cpu_kind": "AVX512, no bf16 instructions",
        "beam5_sentences_per_sec": 123.4,
        "test_2016_flickr": {"bleu_literature": 12.34, "bleu": 11.11, "chrf": 40.0, "cased": True},
    }  # fmt: skip
    (named / NAME / RESULTS).write_text(json.dumps(results))
    try:
        line = next(row for row in run_here("models").stdout.splitlines() if NAME in row)
    finally:
        (named / NAME / RESULTS).unlink()
    for cell in ("en->de", "40.1 K", "0.1 MiB", "12.34 / 11.11", "123 on AVX512"):
        assert cell in line, line
    assert resolve(NAME).results == {}


def test_export_writes_a_ctranslate2_model_of_a_released_transformer_by_name(
    trained_transformer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_here
):
    pytest.importorskip("ctranslate2", reason="the export extra is not installed")
    release(trained_transformer, tmp_path / "models" / "tiny-transformer")
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "models"))
    out = tmp_path / "ct2"
    done = run_here(
        "export", "--model", "tiny-transformer", "--to", "ctranslate2", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert (out / "model.bin").is_file()


def test_the_benchmark_writes_the_cards_figures_from_the_shipped_files(
    named: Path, trained_run: dict, tmp_path: Path
):
    """scripts/bench/bench_models.py (make bench-models) on the tiny model: its results.json and
    the figures block of its card, which tests/test_released_models.py holds together."""
    models = tmp_path / "models"
    shutil.copytree(named, models)
    card = models / NAME / "README.md"
    card.write_text(f"# {NAME}\n\nA card.\n\n{FIGURES_START}\n{FIGURES_END}\n\nMore text.\n")
    data = tmp_path / "data"
    data.mkdir()
    for lang in ("en", "de"):  # the tiny corpus's test split, as Multi30k's test_2016
        text = (trained_run["corpus"] / f"test.{lang}").read_bytes()
        (data / f"test_2016_flickr.{lang}.gz").write_bytes(gzip.compress(text))
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench.bench_models", "--models", str(models),
         "--data", str(data), "--work", str(tmp_path / "work"), "--rounds", "1"],
        capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((models / NAME / RESULTS).read_text())
    assert results["test_2016_flickr"]["cased"] and not results["recased"]  # not lowercased
    assert results["beam5_sentences_per_sec"] > 0 and results["load_seconds"] > 0
    text = card.read_text()
    assert card_figures(results) in text and text.endswith("More text.\n")
    assert f"{NAME}: test_2016 literature BLEU" in done.stdout
