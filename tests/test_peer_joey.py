"""scripts/peers/joeykit.py offline, as peer_joey.py and the comparisons run Joey NMT: config
rewriting and Joey's log parsing (no Joey, no network)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from test_bench_scripts import load_script


@pytest.fixture(scope="module")
def peer() -> ModuleType:
    return load_script("peers/joeykit")


CONFIG = """\
model_dir: "MODEL_DIR/rnn"
data:
    train: "DATA_DIR/train"
    dev: "DATA_DIR/val"
testing:
    beam_size: 5
training:
    scheduling: "warmupinversesquareroot"   # a comment
    logging_freq: 100
"""

TRAIN_LOG = """\
2026-11-21 22:36:44,546 - INFO - joeynmt.training - EPOCH 1
2026-11-21 22:37:32,270 - INFO - joeynmt.training - Epoch   1, Step:       10, \
Batch Loss:     7.460077, Batch Acc: 0.042796, Tokens per Sec:      394, Lr: 0.000017
2026-11-21 22:38:13,286 - INFO - joeynmt.training - Epoch   1, Step:       20, \
Batch Loss:     7.348019, Batch Acc: 0.038616, Tokens per Sec:      425, Lr: 0.000033
2026-11-21 22:38:53,286 - INFO - joeynmt.training - Epoch   1, Step:       30, \
Batch Loss:     7.1, Batch Acc: 0.04, Tokens per Sec:      431, Lr: 0.000050
2026-11-21 22:38:59,679 - INFO - joeynmt.training - Interrupt at epoch 1, step 33.
"""

TEST_LOG = """\
2026-11-21 22:38:46,505 - INFO - joeynmt.prediction - Decoding on dev set... (device: cpu)
2026-11-21 22:38:46,690 - INFO - joeynmt.prediction - Generation took 0.1797[sec].
2026-11-21 22:38:46,691 - INFO - joeynmt.prediction - Decoding on test set... (device: cpu)
2026-11-21 22:41:37,697 - INFO - joeynmt.prediction - Generation took 171.0053[sec].
"""


def test_rewrite_config_fills_dirs_and_overrides(peer: ModuleType) -> None:
    text = peer.rewrite_config(
        CONFIG,
        Path("/d"),
        Path("/m"),
        {"logging_freq": "10", "dev": '"/d/dev1"', "scheduling": '"plateau"'},
    )
    assert 'model_dir: "/m/rnn"' in text
    assert 'train: "/d/train"' in text
    assert '    dev: "/d/dev1"\n' in text
    assert "    logging_freq: 10\n" in text
    assert '    scheduling: "plateau"\n' in text  # value and comment replaced
    assert "DATA_DIR" not in text and "MODEL_DIR" not in text


def test_rewrite_config_rejects_an_absent_key(peer: ModuleType) -> None:
    with pytest.raises(KeyError, match="logging_frequency"):
        peer.rewrite_config(CONFIG, Path("/d"), Path("/m"), {"logging_frequency": "10"})


def test_parse_train_log_medians_after_warmup(peer: ModuleType) -> None:
    result = peer.parse_train_log(TRAIN_LOG)
    assert result["steps"] == 30
    assert result["intervals"] == 3
    assert result["target_tokens_per_sec"] == pytest.approx(428.0)  # median of 425, 431
    assert result["target_tokens_per_sec_all"] == [394.0, 425.0, 431.0]
    assert not result["warmup_included"]
    first = TRAIN_LOG.splitlines()[:2]  # only the warm-up interval: kept, and flagged
    assert peer.parse_train_log("\n".join(first))["warmup_included"]


def test_parse_train_log_without_lines(peer: ModuleType) -> None:
    assert peer.parse_train_log("EPOCH 1\n")["target_tokens_per_sec"] is None


def test_parse_test_log_per_data_set(peer: ModuleType) -> None:
    assert peer.parse_test_log(TEST_LOG) == {"dev": 0.1797, "test": 171.0053}


def test_with_test_checkpoint_sets_load_model(peer: ModuleType) -> None:
    text = peer.with_test_checkpoint(CONFIG, Path("/m/best.ckpt"))
    assert 'testing:\n    load_model: "/m/best.ckpt"\n    beam_size: 5\n' in text
    with pytest.raises(KeyError, match="testing"):
        peer.with_test_checkpoint("model_dir: x\n", Path("/m/best.ckpt"))


def test_test_subset_keeps_the_first_lines_of_both_sides(peer: ModuleType, tmp_path: Path):
    for lang in peer.LANGS:
        lines = [f"{lang} sentence {i}" for i in range(5)]
        (tmp_path / f"test_2016_flickr.{lang}").write_text("\n".join(lines) + "\n", "utf-8")
    assert peer.test_subset(tmp_path, None) == tmp_path / "test_2016_flickr"
    prefix = peer.test_subset(tmp_path, 2)
    for lang in peer.LANGS:
        text = (tmp_path / f"{prefix.name}.{lang}").read_text("utf-8")
        assert text == f"{lang} sentence 0\n{lang} sentence 1\n"


def fake_joey_test(config: Path, options: tuple[str, ...], sentences: int) -> str:
    """What ``joey.py test CONFIG OPTIONS`` of Joey NMT 2.3 checks and writes: its own
    option names, a model_dir that exists, hypotheses in OUTPUT.test; returns its log."""
    parser = argparse.ArgumentParser("joeynmt")
    parser.add_argument("-o", "--output-path", required=True)
    output = parser.parse_args(options).output_path
    model_dir = re.search(r'^model_dir: "(.*)"$', config.read_text("utf-8"), re.MULTILINE)
    assert model_dir is not None and Path(model_dir.group(1)).is_dir(), "model_dir not found"
    Path(f"{output}.test").write_text("hyp\n" * sentences, "utf-8")
    return TEST_LOG


def fake_peers(
    peer: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    transformer_config: str,
    run_joey: Callable[..., tuple[str, float, float]],
) -> tuple[Path, Path]:
    """A peers folder holding ``transformer_config`` and ``run_joey`` in place of Joey NMT;
    returns the (empty) data and work folders for peer_joey's measurements."""
    peers, data, work = tmp_path / "peers", tmp_path / "data", tmp_path / "work"
    for folder in (peers, data, work):
        folder.mkdir()
    (peers / "transformer.yaml").write_text(transformer_config, "utf-8")
    monkeypatch.setattr(peer, "PEERS", peers)
    monkeypatch.setattr(peer, "run_joey", run_joey)
    return data, work


def test_measure_decode_gives_joey_a_model_dir_and_options_it_accepts(
    peer: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    seen = {}

    def run_joey(python, mode, config, log_path, minutes=None, options=()):
        seen.update(mode=mode, config=config.read_text("utf-8"))
        return fake_joey_test(config, options, sentences=2), 1.0, 0.5

    peer_config = (
        'model_dir: "MODEL_DIR/transformer"\ndata:\n    dev: "DATA_DIR/val"\n'
        '    test: "DATA_DIR/test"\ntesting:\n    beam_size: 5\n'
    )
    data, work = fake_peers(peer, tmp_path, monkeypatch, peer_config, run_joey)
    for lang in peer.LANGS:
        (data / f"test_2016_flickr.{lang}").write_text("a\nb\nc\n", "utf-8")
    checkpoint = tmp_path / "trained" / "latest.ckpt"
    result = peer.measure_decode(Path("python"), "transformer", data, work, 5, checkpoint, 2)
    assert seen["mode"] == "test"
    assert f'load_model: "{checkpoint}"' in seen["config"]
    assert result["sentences"] == 2 and result["sentences_per_sec"] == round(2 / 171.0053, 2)
    assert Path(result["hypotheses"]).read_text("utf-8") == "hyp\nhyp\n"


def test_measure_train_keeps_validation_a_multiple_of_logging(
    peer: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Joey refuses a validation_freq that logging_freq does not divide (QUICK logs every 3)."""
    seen = {}

    def run_joey(python, mode, config, log_path, minutes=None, options=()):
        seen["config"] = config.read_text("utf-8")
        line = "Epoch 1, Step: 30, Batch Loss: 5.0, Batch Acc: 0.1, Tokens per Sec: 800"
        return line + "\n", 30.0, 2.0

    peer_config = (
        'model_dir: "MODEL_DIR/transformer"\ndata:\n    train: "DATA_DIR/train"\n'
        "training:\n    logging_freq: 100\n    validation_freq: 1000\n"
    )
    data, work = fake_peers(peer, tmp_path, monkeypatch, peer_config, run_joey)
    peer.measure_train(Path("python"), "transformer", data, work, 0.5, log_every=3)
    logging = int(re.search(r"logging_freq: (\d+)", seen["config"]).group(1))
    validation = int(re.search(r"validation_freq: (\d+)", seen["config"]).group(1))
    assert logging == 3 and validation % logging == 0 and validation >= 100_000
