"""The Python API (``import seq2seq``): ``load`` translates exactly as the commands do, for
one checkpoint and an ensemble; ``score`` gives evaluate's scores; ``attention`` gives the
maps as arrays and a Figure with one map per layer and head; the notebooks run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tiny_run import cut_into_pieces, nbest_rows, tiny_config, write_config

import seq2seq
from seq2seq.commands.main import main

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO_ROOT / "docs" / "notebooks").glob("*.ipynb"))


def sources(trained_run: dict, count: int = 12) -> list[str]:
    return (trained_run["corpus"] / "test.en").read_text(encoding="utf-8").splitlines()[:count]


def command_translations(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    capsys.readouterr()
    main(["translate", *args])
    return capsys.readouterr().out.split("\n")[:-1]


def test_load_translates_as_the_translate_command(
    trained_transformer: Path, trained_run: dict, tmp_path: Path, capsys
) -> None:
    lines = sources(trained_run)
    (tmp_path / "src.en").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    model = seq2seq.load(trained_transformer)
    expected = command_translations(
        capsys,
        "--ckpt",
        str(trained_transformer),
        "--beam",
        "3",
        "--input",
        str(tmp_path / "src.en"),
    )
    assert model.translate(lines, beam=3) == expected
    assert model.translate(lines[0], beam=3) == expected[0]
    assert all(len(best) == 2 for best in model.translate(lines[:3], beam=3, n_best=2))


def test_an_ensemble_translates_as_the_command_with_its_weights(
    trained_transformer: Path, trained_run: dict, tmp_path: Path, capsys
) -> None:
    lines = sources(trained_run)
    (tmp_path / "src.en").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    members = [str(trained_run["ckpt"]), str(trained_transformer)]
    model = seq2seq.load(members, ensemble_weights=[0.3, 0.7])
    expected = command_translations(
        capsys, "--ckpt", members[0], "--ckpt", members[1], "--ensemble-weights", "0.3", "0.7",
        "--beam", "2", "--input", str(tmp_path / "src.en"),
    )  # fmt: skip
    assert model.translate(lines, beam=2) == expected


def test_score_gives_evaluates_scores(trained_transformer: Path, trained_run: dict) -> None:
    refs = (trained_run["corpus"] / "test.de").read_text(encoding="utf-8").splitlines()[:12]
    evaluation = seq2seq.load(trained_transformer).score(sources(trained_run), refs, beam=2)
    assert set(evaluation.scores) == {"bleu", "chrf", "bleu_literature"}
    assert len(evaluation.translations) == 12
    with pytest.raises(seq2seq.Seq2SeqError, match="12 sources but 3 references"):
        seq2seq.load(trained_transformer).score(sources(trained_run), refs[:3])


def test_score_joins_subword_nmt_pieces_when_asked(
    trained_transformer: Path, trained_run: dict
) -> None:
    model = seq2seq.load(trained_transformer)
    translations = model.translate(sources(trained_run), beam=2)
    cut = [cut_into_pieces(translation) for translation in translations]
    assert cut != translations
    joined = model.score(sources(trained_run), cut, beam=2, remove_bpe=True)
    assert joined.scores["bleu_literature"]["score"] == pytest.approx(100.0)
    assert joined.translations == translations
    assert model.score(sources(trained_run), cut, beam=2).scores["bleu_literature"]["score"] < 100


def test_attention_is_arrays_and_a_figure_with_every_layer_and_head(
    trained_transformer: Path, trained_run: dict
) -> None:
    source = sources(trained_run, 1)[0]
    attention = seq2seq.load(trained_transformer).attention(source)
    T, S = len(attention.tgt_pieces), len(attention.src_pieces)
    layers, heads = attention.weights.shape[1:3]
    assert attention.weights.shape == (T, layers, heads, S) and (layers, heads) == (2, 2)
    assert np.allclose(attention.weights.sum(-1), 1, atol=1e-4)
    assert attention.summary.shape == (T, S)
    assert attention.word_weights.shape == (len(attention.tgt_words), len(attention.src_words))
    figure = attention.plot()
    maps = [axis for axis in figure.axes if axis.images]
    heads_maps = [axis.get_title() for axis in maps if axis.get_title().startswith("L")]
    assert heads_maps == [f"L{l} H{h}" for l in (1, 2) for h in (1, 2)]  # noqa: E741
    assert len(maps) == 2 + layers * heads  # a layer's and every layer's mean above them


def test_an_ensembles_attention_is_one_members_with_ensemble_attention(
    trained_transformer: Path, trained_run: dict
) -> None:
    """The attention command's --ensemble-attention, from Python: the RNN and the
    Transformer together show the Transformer's layers and heads with
    ``ensemble_attention=1``; the argument's old name still works, with a FutureWarning."""
    source = sources(trained_run, 1)[0]
    members = [str(trained_run["ckpt"]), str(trained_transformer)]
    attention = seq2seq.load(members, ensemble_attention=1).attention(source)
    assert attention.weights.shape[1:3] == (2, 2)  # the Transformer's (layers, heads)
    with pytest.raises(seq2seq.Seq2SeqError, match="ensemble_attention 2 names no member of 2"):
        seq2seq.load(members, ensemble_attention=2)
    with pytest.warns(FutureWarning, match=r"attention_from=\.\.\.\) is now ensemble_attention"):
        old = seq2seq.load(members, attention_from=1).attention(source)
    assert np.array_equal(old.weights, attention.weights)


@pytest.mark.slow  # a Lightning fit
def test_fit_trains_from_python_as_the_command_does(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``seq2seq.fit`` runs the command's fit on the same config and returns its chosen
    checkpoint; a second run into that folder is the command's refusal, as an exception."""
    config = tiny_config(tmp_path, trained_run["corpus"])
    config["trainer"]["max_epochs"] = 1
    path = write_config(tmp_path / "tiny.yaml", config)
    best = seq2seq.fit(path, options=["--model.lr", "0.004"])
    assert best.parent == tmp_path / "run" / "checkpoints" and best.is_file()
    checkpoint = torch.load(best, weights_only=True)  # the option reached the optimizer
    assert checkpoint["optimizer_states"][0]["param_groups"][0]["initial_lr"] == 0.004
    assert yaml.safe_load(checkpoint["seq2seq"]["config"])["model"]["lr"] == 0.004
    lines = sources(trained_run, 4)
    (tmp_path / "src.en").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    search = {"beam": 3, "n_best": 3}  # the n-best's scores: the tiny RNN writes ""
    expected = command_translations(
        capsys, "--ckpt", str(best), "--input", str(tmp_path / "src.en"), "--beam", "3",
        "--n-best", "3",
    )  # fmt: skip
    model = seq2seq.load(best)
    translations = model.translate_all(lines, search=model.searching(**search))
    assert nbest_rows(translations) == expected
    with pytest.raises(seq2seq.Seq2SeqError, match="--replace_checkpoints"):
        seq2seq.fit(path)


def test_a_missing_checkpoint_is_the_commands_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(seq2seq.Seq2SeqError, match="nope.ckpt"):
        seq2seq.load(tmp_path / "nope.ckpt")


CAPTIONS = [  # (en, de, fr), written for these tests: no Multi30k text is committed
    (
        "A young girl in a pink dress is running across the grass.",
        "Ein junges Mädchen in einem rosa Kleid läuft über das Gras.",
        "Une jeune fille en robe rose court dans l'herbe.",
    ),
    (
        "Two men are playing guitars on a small stage.",
        "Zwei Männer spielen Gitarre auf einer kleinen Bühne.",
        "Deux hommes jouent de la guitare sur une petite scène.",
    ),
    (
        "A black dog jumps into the lake to catch a ball.",
        "Ein schwarzer Hund springt in den See, um einen Ball zu fangen.",
        "Un chien noir saute dans le lac pour attraper une balle.",
    ),
    (
        "Three children are sitting on a bench in the park.",
        "Drei Kinder sitzen auf einer Bank im Park.",
        "Trois enfants sont assis sur un banc dans le parc.",
    ),
]


def caption_corpus(folder: Path) -> Path:
    """A val split in Multi30k's layout (``val.en``, ``val.de``, ``val.fr``) of CAPTIONS."""
    folder.mkdir()
    for column, lang in enumerate(["en", "de", "fr"]):
        lines = "".join(f"{caption[column]}\n" for caption in CAPTIONS)
        (folder / f"val.{lang}").write_text(lines, encoding="utf-8")
    return folder


def run_notebook(notebook: Path, folder: Path, timeout: int = 300) -> tuple[str, int]:
    """Runs ``notebook`` top to bottom in a Jupyter kernel in ``folder``: what it printed,
    and how many pictures it showed. Fails on any error in a cell."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    book = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(
        book, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute()
    outputs = [o for c in book.cells for o in c.get("outputs", [])]
    assert [o for o in outputs if o.output_type == "error"] == []
    pictures = sum("image/png" in o.get("data", {}) for o in outputs)
    return "".join(o.get("text", "") for o in outputs), pictures


@pytest.mark.slow  # a Jupyter kernel runs each notebook top to bottom
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_the_notebook_runs_top_to_bottom(
    notebook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nbformat = pytest.importorskip("nbformat")
    book = nbformat.read(notebook, as_version=4)
    assert all(not cell.get("outputs") for cell in book.cells if cell.cell_type == "code"), (
        "notebooks are committed without outputs"
    )
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SEQ2SEQ_NOTEBOOK_QUICK", "1")  # small corpora, one epoch
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # what a notebook writes stays in the test's folder
    if notebook.stem == "compare-attention":  # the released models, on captions of our own
        monkeypatch.setenv("SEQ2SEQ_MULTI30K", str(caption_corpus(tmp_path / "multi30k")))
    printed, pictures = run_notebook(notebook, tmp_path)
    assert "skipped" not in printed  # every notebook ran its whole path
    assert pictures > 0
    if notebook.stem == "compare-attention":  # two released German writers, side by side
        assert "RNN: multi30k-en-de-rnn, en->de" in printed
        assert "Transformer: multi30k-en-de, en->de" in printed
        assert "the two models' links agree" in printed
        assert pictures == 3  # each model's maps, and the two word maps side by side


@pytest.mark.slow  # a Jupyter kernel
def test_the_comparison_notebook_sets_the_maps_side_by_side_when_both_write_german(
    trained_transformer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint of one's own in place of a released model; both models writing German,
    the notebook also compares their links."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SEQ2SEQ_MULTI30K", str(caption_corpus(tmp_path / "multi30k")))
    monkeypatch.setenv("SEQ2SEQ_TRANSFORMER", str(trained_transformer))
    notebook = REPO_ROOT / "docs" / "notebooks" / "compare-attention.ipynb"
    printed, pictures = run_notebook(notebook, tmp_path)
    assert f"Transformer: {trained_transformer}, en->de" in printed
    assert "the two models' links agree" in printed
    assert pictures == 3  # each model's maps, and the two word maps side by side
    assert "skipped" not in printed


@pytest.mark.slow  # a Jupyter kernel
def test_the_comparison_notebook_says_what_is_missing_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SEQ2SEQ_MULTI30K", str(tmp_path / "no-corpus"))
    monkeypatch.setenv("SEQ2SEQ_RNN", str(tmp_path / "no.ckpt"))
    notebook = REPO_ROOT / "docs" / "notebooks" / "compare-attention.ipynb"
    printed, pictures = run_notebook(notebook, tmp_path, 120)
    assert "skipped, missing: the Multi30k corpus (val.en" in printed
    assert f"the RNN (checkpoint not found: {tmp_path / 'no.ckpt'})" in printed
    assert "Transformer: " not in printed and pictures == 0  # nothing after the first cell ran
