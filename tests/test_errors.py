"""Bad input through the `seq2seq` command: one error line naming the cause, no traceback.

Each test runs the command's entry point (`seq2seq.commands.main.main`) in this process, as the
other CLI tests do: a user's mistake must end in SystemExit with a non-zero status and
exactly one ``seq2seq: error:`` line, and any other exception fails the test. The
misaligned corpus, `--model.lrr`, a missing checkpoint for `translate` and empty stdin
are checked in test_cli.py. docs/errors.md lists every message.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from cli_errors import cli_error
from tiny_run import tiny_config, write_config

from seq2seq.commands.main import main
from seq2seq.inference.checkpoint import load_trained
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.text.tokenizer import UNK_ID


def run_config(trained_run: dict, root: Path, corpus: Path | None = None) -> Path:
    """The tiny run's config, writing under ``root`` and reading ``corpus`` (default: its
    own corpus, with its cached vocabulary)."""
    config = tiny_config(root, corpus or trained_run["corpus"])
    if corpus is None:
        config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    return write_config(root / "config.yaml", config)


# -- corpus files --------------------------------------------------------------------------
def empty_both_sides(corpus: Path) -> None:
    (corpus / "train.en").write_text("")
    (corpus / "train.de").write_text("")


def remove_target_side(corpus: Path) -> None:
    (corpus / "train.de").unlink()


def break_utf8_on_line_7(corpus: Path) -> None:
    lines = (corpus / "train.de").read_bytes().split(b"\n")
    lines[6] = b"zw\xc3i"  # a lead byte without its continuation byte
    (corpus / "train.de").write_bytes(b"\n".join(lines))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            empty_both_sides,
            r"the train split is empty: \S+train\.en \+ \S+train\.de holds no pairs",
        ),
        (remove_target_side, r"\S+corpus: no train\.de or train\.de\.gz \(splits found for en-de"),
        (break_utf8_on_line_7, r"\S+train\.de: line 7 is not valid UTF-8 \(invalid continuation"),
    ],
)
def test_bad_corpus_file_stops_fit(
    trained_run: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: Callable[[Path], None],
    message: str,
) -> None:
    corpus = shutil.copytree(trained_run["corpus"], tmp_path / "corpus")
    damage(corpus)
    status, error = cli_error(
        capsys, "fit", "--config", str(run_config(trained_run, tmp_path, corpus))
    )
    assert status == 1
    assert re.fullmatch(message + r".*", error), error


def test_bad_translate_input(
    trained_run: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ckpt = str(trained_run["ckpt"])
    missing = tmp_path / "missing.en"
    assert cli_error(capsys, "translate", "--ckpt", ckpt, "--input", str(missing)) == (
        1,
        f"{missing}: no such file",
    )
    latin1 = tmp_path / "latin1.en"
    latin1.write_bytes("one\ntwo\nthree ist drei, fünf\n".encode("latin-1"))
    assert cli_error(capsys, "translate", "--ckpt", ckpt, "--input", str(latin1)) == (
        1,
        f"{latin1}: line 3 is not valid UTF-8 (invalid start byte)",
    )
    stdin = io.TextIOWrapper(io.BytesIO(b"one\n\xff two\n"), encoding="utf-8")
    monkeypatch.setattr("sys.stdin", stdin)
    assert cli_error(capsys, "translate", "--ckpt", ckpt) == (
        1,
        "<stdin>: line 2 is not valid UTF-8 (invalid start byte)",
    )


# -- configs -------------------------------------------------------------------------------
def test_config_value_of_the_wrong_type(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(trained_run["config"])
    assert cli_error(capsys, "fit", "--config", config, "--model.lr", "abc") == (
        2,
        "Parser key \"model.lr\": Expected a <class 'float'>. Got value: abc "
        "(see seq2seq fit --help)",
    )
    settings = yaml.safe_load(trained_run["config"].read_text())
    settings["data"]["max_tokens"] = "many"
    path = write_config(tmp_path / "many.yaml", settings)
    assert cli_error(capsys, "fit", "--config", str(path)) == (
        2,
        "Parser key \"data.max_tokens\": Expected a <class 'int'>. Got value: many "
        "(see seq2seq fit --help)",
    )


def test_unknown_key_in_a_config_file(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = yaml.safe_load(trained_run["config"].read_text())
    settings["data"]["max_tokenz"] = 800
    path = write_config(tmp_path / "typo.yaml", settings)
    assert cli_error(capsys, "fit", "--config", str(path)) == (
        2,
        "Subcommand 'fit' does not accept option 'data.max_tokenz' (see seq2seq fit --help)",
    )


# -- checkpoints ---------------------------------------------------------------------------
def cut_in_half(data: bytes) -> bytes:
    return data[: len(data) // 2]


def random_bytes(data: bytes) -> bytes:
    return bytes(reversed(hashlib.sha256(data).digest() * 1000))  # no zip structure at all


def flip_a_weight_byte(data: bytes) -> bytes:
    """Damage one byte inside a tensor record; the archive's structure stays intact."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        tensors = [info for info in archive.infolist() if info.filename.startswith("archive/data/")]
    record = max(tensors, key=lambda info: info.file_size)
    start = record.header_offset
    name_len = int.from_bytes(data[start + 26 : start + 28], "little")
    extra_len = int.from_bytes(data[start + 28 : start + 30], "little")
    middle = start + 30 + name_len + extra_len + record.file_size // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


@pytest.mark.parametrize(
    ("damage", "cause"),
    [
        (cut_in_half, "not a complete torch.save archive"),
        (random_bytes, "not a complete torch.save archive"),
        (flip_a_weight_byte, r"archive/data/\d+ fails its CRC check"),
    ],
)
@pytest.mark.parametrize("command", ["translate", "fit"])
def test_damaged_checkpoint(
    trained_run: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    damage: Callable[[bytes], bytes],
    cause: str,
    command: str,
) -> None:
    ckpt = tmp_path / "damaged.ckpt"
    ckpt.write_bytes(damage(trained_run["ckpt"].read_bytes()))
    if command == "translate":
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"twenty-one\n")))
        args = ["translate", "--ckpt", str(ckpt)]
    else:
        args = ["fit", "--config", str(run_config(trained_run, tmp_path)), "--ckpt_path", str(ckpt)]
    status, error = cli_error(capsys, *args)
    assert status == 1
    expected = rf"cannot read checkpoint {re.escape(str(ckpt))}: truncated or corrupted \({cause}\)"
    assert re.fullmatch(expected, error), error


def test_missing_checkpoint_to_resume_from(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = run_config(trained_run, tmp_path)
    missing = tmp_path / "nope.ckpt"
    status, error = cli_error(capsys, "fit", "--config", str(config), "--ckpt_path", str(missing))
    assert (status, error) == (1, f"checkpoint not found: {missing}")


def test_checkpoint_of_another_vocabulary_is_refused_and_kept(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    write_corpus(other, seed=9, sizes={"train": 120, "val": 8, "test": 8})
    config = run_config(trained_run, tmp_path, other)
    before = trained_run["ckpt"].read_bytes()
    status, error = cli_error(
        capsys, "fit", "--config", str(config), "--ckpt_path", str(trained_run["ckpt"])
    )
    assert status == 1
    assert error == (
        "the checkpoint's vocabulary does not match the data's (400 pieces in both, but not the "
        "same pieces): use the data and SentencePiece settings it was trained with"
    )
    assert trained_run["ckpt"].read_bytes() == before
    assert not list(tmp_path.glob("run/checkpoints/*.ckpt"))  # nothing trained or saved


# -- what translate accepts ----------------------------------------------------------------
def test_translate_of_an_empty_file_prints_nothing(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty.en").write_text("")
    main(["translate", "--ckpt", str(trained_run["ckpt"]), "--input", str(tmp_path / "empty.en")])
    assert capsys.readouterr().out == ""


def test_a_line_of_10000_characters_is_cut_with_a_warning(
    trained_run: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    long_line = ("twenty-one thousand four hundred " * 400)[:10_000]
    (tmp_path / "long.en").write_text(f"five\n{long_line}\nsix\n", encoding="utf-8")
    args = ["translate", "--ckpt", str(trained_run["ckpt"]), "--input", str(tmp_path / "long.en")]
    with caplog.at_level(logging.WARNING, logger="seq2seq"):
        main([*args, "--beam", "1"])
    assert len(capsys.readouterr().out.splitlines()) == 3
    [warning] = caplog.messages
    assert re.fullmatch(
        r"line 2 has \d+ pieces: translating its first 512 \(raise --max-source-len\)", warning
    )


MIXED = [
    "twenty-one 🚀🎉 👍🏽 ⚖️ ok",
    "Съешь же ещё этих мягких французских булок",
    "我爱自然语言处理。東京タワーに行きました",
    "Ünïcödé façade — “quotes” ∑ ∞ ẞ مرحبا שלום",
]


def test_mixed_scripts_and_emoji_round_trip_and_translate(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vocab = load_trained(trained_run["ckpt"]).vocab  # trained on English and German numbers
    for text in MIXED:
        for tokenizer in (vocab.src, vocab.tgt):
            ids = tokenizer.encode(text)
            assert tokenizer.decode(ids) == text
            assert UNK_ID not in ids  # byte fallback
    (tmp_path / "mixed.txt").write_text("\n".join(MIXED) + "\n", encoding="utf-8")
    ckpt = str(trained_run["ckpt"])
    main(["translate", "--ckpt", ckpt, "--input", str(tmp_path / "mixed.txt"), "--beam", "2"])
    assert len(capsys.readouterr().out.splitlines()) == len(MIXED)
