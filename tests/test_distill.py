"""Sequence-level knowledge distillation (docs/distillation.md), the whole path on the
embedded corpus: a teacher fit (the session's tiny run), `seq2seq distill`, a student fit
on the distilled corpus, and `seq2seq translate` with the student."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tiny_run import tiny_config, write_config

from seq2seq.commands.distill import one_line
from seq2seq.commands.main import main

BEAM = ["--beam", "2"]  # the teacher's search, in distill and in translate alike


def distill(*args: str) -> None:
    main(["distill", "--src-lang", "en", "--tgt-lang", "de", *BEAM, *args])


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]  # every line ends with \n


@pytest.fixture(scope="module")
def corpus(trained_run: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The teacher's corpus, with a blank source (and target) at line 4 of train."""
    folder = tmp_path_factory.mktemp("distill") / "corpus"
    shutil.copytree(trained_run["corpus"], folder)
    for lang in ("en", "de"):
        path = folder / f"train.{lang}"
        text = lines(path)
        text[3] = ""
        path.write_text("".join(line + "\n" for line in text), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def teacher(trained_transformer: Path) -> Path:
    """The session's tiny Transformer: unlike the tiny GRU, which ends every sentence at
    once after its two epochs, it writes a translation as long as its source, so each line
    of the distilled corpus shows which source it came from."""
    return trained_transformer


@pytest.fixture(scope="module")
def distilled(teacher: Path, corpus: Path) -> Path:
    out = corpus.parent / "distilled"
    distill("--ckpt", str(teacher), "--data", str(corpus), "--out", str(out))
    return out


def test_the_distilled_corpus_is_the_teachers_translation_of_every_source_in_order(
    teacher: Path, corpus: Path, distilled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = lines(corpus / "train.en")
    assert (distilled / "train.en").read_bytes() == (corpus / "train.en").read_bytes()
    targets = lines(distilled / "train.de")
    assert len(targets) == len(sources) == 400
    assert targets[3] == "" and all(targets[:3] + targets[4:])  # a blank source: a blank line
    capsys.readouterr()
    main(["translate", "--ckpt", str(teacher), *BEAM,
          "--input", str(corpus / "train.en")])  # fmt: skip
    assert targets == capsys.readouterr().out.split("\n")[:-1]  # line i translates source i
    assert targets != lines(corpus / "train.de")  # the teacher's, not the references


def test_val_and_test_stay_the_human_references(corpus: Path, distilled: Path) -> None:
    for name in ("val.en", "val.de", "test.en", "test.de"):
        assert (distilled / name).read_bytes() == (corpus / name).read_bytes(), name
    manifest = json.loads((distilled / "distill.json").read_text())
    assert manifest["distilled"] == 400 and manifest["keep_originals"] is False
    assert manifest["copied"] == ["test.de", "test.en", "val.de", "val.en"]
    assert manifest["search"]["beam"] == 2
    files = {path.name for path in distilled.iterdir()}
    assert files == {"train.en", "train.de", "distill.json", *manifest["copied"]}
    assert [path.name for path in distilled.parent.iterdir() if path.name.startswith(".")] == []


def test_keep_originals_appends_the_original_pairs(
    teacher: Path, corpus: Path, distilled: Path
) -> None:
    both = corpus.parent / "both"
    ckpt = str(teacher)
    distill("--ckpt", ckpt, "--data", str(corpus), "--out", str(both), "--keep-originals")
    sources, targets = lines(corpus / "train.en"), lines(corpus / "train.de")
    assert lines(both / "train.en") == sources + sources
    assert lines(both / "train.de") == lines(distilled / "train.de") + targets


@pytest.mark.slow  # a fit
def test_a_student_fits_on_the_distilled_corpus_and_translates(
    distilled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tiny_config(tmp_path, distilled)
    config["trainer"]["max_epochs"] = 1
    main(["fit", "--config", str(write_config(tmp_path / "student.yaml", config))])
    assert "train: kept 399 of 400 pairs (1 empty" in capsys.readouterr().err
    student = tmp_path / "run/checkpoints/last.ckpt"
    main(["translate", "--ckpt", str(student), "--input", str(distilled / "val.en")])
    assert len(capsys.readouterr().out.split("\n")[:-1]) == len(lines(distilled / "val.en"))


def test_a_translation_with_a_line_break_stays_one_line() -> None:
    assert one_line("zwei\nund\r\ndrei") == "zwei und  drei"


def test_an_interrupted_distillation_leaves_no_corpus(
    trained_run: dict, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def stop_at_the_tenth(text: str) -> str:
        calls.append(text)
        if len(calls) == 10:
            raise KeyboardInterrupt
        return text

    monkeypatch.setattr("seq2seq.commands.distill.one_line", stop_at_the_tenth)
    out = corpus.parent / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        distill("--ckpt", str(trained_run["ckpt"]), "--data", str(corpus), "--out", str(out))
    assert not out.exists()
    assert [p.name for p in corpus.parent.iterdir() if p.name.startswith(".interrupted")] == []


def cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`seq2seq distill ARGS` fails with one error line, status 1; that line."""
    with pytest.raises(SystemExit) as stopped:
        distill(*args)
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("seq2seq: error: ")]
    return line.removeprefix("seq2seq: error: ")


def test_bad_input_is_one_line_and_writes_nothing(
    trained_run: dict, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = ["--ckpt", str(trained_run["ckpt"])]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    assert cli_error(capsys, *ckpt, "--data", str(corpus), "--out", str(tmp_path / "full")) == (
        f"--out {tmp_path / 'full'} already holds files; give a new folder or remove it"
    )
    out = str(tmp_path / "out")
    assert cli_error(capsys, *ckpt, "--data", str(tmp_path / "nowhere"), "--out", out) == (
        f"--data {tmp_path / 'nowhere'}: not a folder of {{split}}.{{lang}} files"
    )
    assert cli_error(capsys, *ckpt, "--data", str(corpus), "--out", out, "--train-split", "x") == (
        f"{corpus}: no x.en or x.en.gz"
    )
    short = tmp_path / "short"
    shutil.copytree(corpus, short)
    (short / "train.de").write_text("eins\n")
    assert cli_error(capsys, *ckpt, "--data", str(short), "--out", out, "--keep-originals") == (
        f"{short}/train.en has 400 lines but {short}/train.de has 1"
    )
    (short / "train.de").unlink()
    assert cli_error(capsys, *ckpt, "--data", str(short), "--out", out, "--keep-originals") == (
        f"{short}: --keep-originals needs train.de (or .gz)"
    )
    assert not (tmp_path / "out").exists()


def test_a_teacher_into_another_language_is_refused(
    trained_run: dict, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--ckpt", str(trained_run["ckpt"]), "--data", str(corpus), "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as stopped:
        main(["distill", "--src-lang", "en", "--tgt-lang", "fr", *args])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "seq2seq: error: --tgt-lang fr: the teacher translates into de (see seq2seq distill --help)"
    )
