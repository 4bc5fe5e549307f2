"""``fit --init_from``: a new run that starts from a trained model (a released name, a
checkpoint), with the shipped fine-tuning recipe (configs/finetune.yaml) on a corpus of the
tests' own (numbers and dates spelt out, a domain the captions model never saw): the loss
on it falls, the vocabulary stays the model's, zero steps change nothing, frozen parts stay
bit-identical, and options that contradict the model are refused before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import seq2seq
from seq2seq.commands.fit import run_lightning
from seq2seq.inference.checkpoint import Trained, load_trained, read_checkpoint
from seq2seq.inference.released import MANIFEST, MODELS_ENV, resolve
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.text.lines import read_lines
from seq2seq.training.freezing import model_parts

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "finetune.yaml"
RELEASED = "multi30k-en-de"
QUICK = [  # the recipe, made to run in seconds: small batches, few steps, one validation
    "--trainer.max_steps", "6", "--trainer.val_check_interval", "6",
    "--trainer.precision", "32-true", "--data.max_tokens", "400",
    "--model.warmup_steps", "0", "--model.lr", "0.001",
]  # fmt: skip


@pytest.fixture(autouse=True)
def the_repositorys_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODELS_ENV, str(REPO / "models"))


@pytest.fixture(scope="module")
def numbers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small corpus of another domain: numbers and dates, English to German."""
    folder = tmp_path_factory.mktemp("numbers") / "corpus"
    write_corpus(folder, seed=5, sizes={"train": 120, "val": 16, "test": 16})
    return folder


def fit_options(corpus: Path, root: Path, *extra: str, quick: bool = True) -> list[str]:
    """``seq2seq fit`` of the recipe on ``corpus`` into ``root`` (``quick``: in seconds)."""
    return ["fit", "--config", str(RECIPE), "--data.source", str(corpus),
            "--data.cache_dir", str(root / "cache"), "--trainer.default_root_dir", str(root),
            *(QUICK if quick else []), *extra]  # fmt: skip


def mean_nll(trained: Trained, sources: list[str], targets: list[str]) -> float:
    """The model's mean negative log-likelihood per target piece (EOS included) of the pairs,
    by teacher forcing."""
    vocab, spec, model = trained.vocab, trained.vocab.spec, trained.model.eval()
    total, count = 0.0, 0
    for source, target in zip(sources, targets, strict=True):
        src = torch.tensor([[*vocab.src.encode(source), spec.eos_id]])
        tgt = vocab.tgt.encode(target)
        tgt_in = torch.tensor([[spec.bos_id, *tgt]])
        tgt_out = torch.tensor([*tgt, spec.eos_id])
        with torch.inference_mode():
            logits, _ = model(src, torch.tensor([src.size(1)]), tgt_in, need_weights=False)
        logprobs = torch.log_softmax(logits[0].float(), dim=-1)
        total -= float(logprobs.gather(1, tgt_out[:, None]).sum())
        count += len(tgt_out)
    return total / count


def test_a_released_model_fine_tuned_on_a_new_domain_learns_it(
    numbers: Path, tmp_path: Path, run_here
):
    """A few steps of the recipe on numbers: the loss on the new domain falls, the data are
    encoded with the model's own vocabulary, the architecture and search are the model's,
    and the fit summary names what it started from with the released file's sha256."""
    done = run_here(*fit_options(numbers, tmp_path, "--init_from", RELEASED))
    assert done.returncode == 0, done.stderr
    released = resolve(RELEASED)
    digest = json.loads((released.folder / MANIFEST).read_text())["files"]["model.ckpt"]["sha256"]
    assert f"starting from {RELEASED} (released, sha256 {digest})" in done.stderr
    start = seq2seq.load(RELEASED).trained
    tuned = load_trained(tmp_path / "checkpoints" / "last.ckpt")
    assert tuned.vocab.to_state() == start.vocab.to_state()  # no new SentencePiece model
    assert tuned.config["model"]["network"] == start.config["model"]["network"]
    assert tuned.search.length_penalty == start.search.length_penalty == 2.0
    assert read_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 6
    pairs = read_lines(numbers / "train.en")[:40], read_lines(numbers / "train.de")[:40]
    before, after = mean_nll(start, *pairs), mean_nll(tuned, *pairs)
    assert after < 0.8 * before, (before, after)


def test_zero_steps_from_a_released_model_translate_as_the_model(numbers: Path, tmp_path: Path):
    """The run's model before any step is the released model: the same weights, vocabulary
    and search give the same translations and val BLEU."""
    options = ["--init_from", RELEASED, "--trainer.max_steps", "0"]
    cli = run_lightning(fit_options(numbers, tmp_path, *options, quick=False))
    saved = tmp_path / "zero.ckpt"
    cli.trainer.save_checkpoint(saved)
    sources, references = read_lines(numbers / "val.en"), read_lines(numbers / "val.de")
    start, zero = seq2seq.load(RELEASED, recase=False), seq2seq.load(saved)
    translations = start.translate(sources)
    assert len(set(translations)) > 5  # translations that differ, so that equal means equal
    assert zero.translate(sources) == translations
    assert zero.score(sources, references).scores == start.score(sources, references).scores


def test_a_checkpoint_of_ones_own_trains_further(
    trained_transformer: Path, trained_run: dict, tmp_path: Path, run_here
):
    """--init_from a checkpoint: a new run (step 0, its own folder), the checkpoint's weights
    as its start, its vocabulary kept."""
    done = run_here(*fit_options(trained_run["corpus"], tmp_path, "--init_from",
                                 str(trained_transformer)))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"starting from {trained_transformer} (checkpoint)" in done.stderr
    last = tmp_path / "checkpoints/last.ckpt"
    start, tuned = load_trained(trained_transformer), load_trained(last)
    assert tuned.vocab.to_state() == start.vocab.to_state()
    assert read_checkpoint(last)["global_step"] == 6
    before, after = start.model.state_dict(), tuned.model.state_dict()
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_frozen_parts_stay_bit_identical(
    numbers: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """Through the Python API (seq2seq.fit's init_from), the embeddings and the encoder kept
    fixed: only the decoder's weights change, and the fit summary counts what trains."""
    options = fit_options(numbers, tmp_path, "--model.freeze", "[embeddings, encoder]")[3:]
    with caplog.at_level("INFO", logger="seq2seq"):
        best = seq2seq.fit(RECIPE, init_from=RELEASED, options=options)
    assert "trainable: embeddings and encoder frozen" in caplog.text
    assert load_trained(best).config["model"]["freeze"] == ["embeddings", "encoder"]
    start = seq2seq.load(RELEASED).trained.model
    tuned = load_trained(tmp_path / "checkpoints/last.ckpt").model
    parts, before, after = model_parts(start), start.state_dict(), tuned.state_dict()
    changed = {name for name in parts if not torch.equal(before[name].float(), after[name])}
    assert changed and {parts[name] for name in changed} == {"decoder"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--model.network.init_args.model_size", "256"],
         "model.network.init_args.model_size is 256 here but 128 in the model"),
        (["--data.vocab_size", "8000"], "data.vocab_size is 8000 here but 10000 in the model"),
        (["--data.lowercase", "false"], "data.lowercase is False here but True in the model"),
        (["--config", str(REPO / "configs/multi30k/base/transformer.yaml")],
         "in the model; the architecture comes from the model"),
    ],
    ids=["model size", "vocabulary size", "casing", "another recipe's architecture"],
)  # fmt: skip
def test_an_option_that_contradicts_the_model_is_refused_before_any_work(
    numbers: Path, tmp_path: Path, run_here, options: list[str], message: str
):
    root = tmp_path / "run"
    done = run_here(*fit_options(numbers, root, "--init_from", RELEASED, *options))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not root.exists()  # nothing written: no cache, logs or checkpoints


def test_what_cannot_be_trained_further_is_refused_in_one_line(
    numbers: Path, tmp_path: Path, run_here, monkeypatch: pytest.MonkeyPatch
):
    export = tmp_path / "ct2"
    exported = run_here("export", "--model", RELEASED, "--to", "ctranslate2", "--out", str(export))
    assert exported.returncode == 0, exported.stderr
    done = run_here(*fit_options(numbers, tmp_path / "a", "--init_from", str(export)))
    assert done.returncode == 2 and "is a CTranslate2 export" in done.stderr
    done = run_here(*fit_options(numbers, tmp_path / "b", "--init_from", str(tmp_path / "no.ckpt")))
    assert done.returncode != 0 and "not found" in done.stderr and done.stderr.count("\n") == 1
    altered = tmp_path / "models"  # a released file altered after its release
    shutil.copytree(REPO / "models" / RELEASED, altered / RELEASED)
    with (altered / RELEASED / "model.ckpt").open("r+b") as file:
        file.seek(1000)
        byte = file.read(1)
        file.seek(1000)
        file.write(bytes([byte[0] ^ 1]))
    monkeypatch.setenv(MODELS_ENV, str(altered))
    done = run_here(*fit_options(numbers, tmp_path / "c", "--init_from", RELEASED))
    assert done.returncode != 0 and "sha256 differs" in done.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()
