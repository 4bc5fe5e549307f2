"""scripts/peers/bench_joey_decoding.py offline: output description and the alternating runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import ModuleType

import pytest
from test_bench_scripts import load_script, usage_error

REFERENCES = ["ein hund läuft schnell", "zwei kinder spielen fußball", "eine frau liest gern"]


@pytest.fixture(scope="module")
def decoding() -> ModuleType:
    return load_script("peers/bench_joey_decoding")


def test_output_is_described_by_bleu_and_length(decoding: ModuleType, tmp_path: Path):
    hypotheses = tmp_path / "hyp.txt"
    hypotheses.write_text("\n".join(REFERENCES) + "\n")
    assert decoding.describe_output(hypotheses, REFERENCES) == {"bleu": 100.0, "mean_words": 4.0}
    hypotheses.write_text("ein hund\n")
    with pytest.raises(RuntimeError, match="1 lines for 3 references"):
        decoding.describe_output(hypotheses, REFERENCES)
    record = decoding.with_words_per_sec({"sentences_per_sec": 10.0, "mean_words": 4.5})
    assert record["words_per_sec"] == 45.0


def test_searches_alternate_between_the_toolkits(
    decoding: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    corpus = tmp_path / "multi30k"
    corpus.mkdir()
    for lang, lines in (("en", ["x"] * 3), ("de", REFERENCES)):
        with gzip.open(corpus / f"test_2016_flickr.{lang}.gz", "wt") as f:
            f.write("\n".join(lines) + "\n")
    ours, joey = tmp_path / "ours.ckpt", tmp_path / "joey.ckpt"
    ours.write_bytes(b"")
    joey.write_bytes(b"")
    calls: list[tuple[str, int] | tuple[str, int, bool]] = []

    def fake_joey(python, model, data_dir, work, beam, checkpoint, test_lines) -> dict:
        assert checkpoint == joey
        calls.append(("joey", beam))
        (work / "out.test").write_text("ein hund\nzwei kinder\neine frau\n")  # 2 words each
        return {"sentences_per_sec": 10.0, "peak_rss_gb": 0.8, "hypotheses": str(work / "out.test")}

    def fake_evaluate(checkpoint, src, ref, folder, beam, bf16) -> dict:
        assert checkpoint == str(ours)
        calls.append(("seq2seq", beam, bf16))
        (folder / "hypotheses.txt").write_text("\n".join(REFERENCES) + "\n")  # 4 words each
        return {"decode_sentences_per_sec": 100.0, "eval_peak_rss_mb": 1024.0}

    monkeypatch.setattr(decoding, "joey_environment", lambda args: (Path("python"), corpus))
    monkeypatch.setattr(decoding, "measure_decode", fake_joey)
    monkeypatch.setattr(decoding, "evaluate", fake_evaluate)
    out = tmp_path / "joey-decoding.json"
    cache = str(tmp_path / "cache")
    decoding.main(["--ours", str(ours), "--joey", str(joey), "--corpus", str(corpus),
                   "--cache", cache, "--out", str(out), "--rounds", "2"])  # fmt: skip

    assert calls == [
        ("joey", 5), ("seq2seq", 5, False), ("joey", 1), ("seq2seq", 1, False),
        ("joey", 5), ("seq2seq", 5, True),  # Joey's fp32 beam 5 against our bf16 one
    ] * 2  # fmt: skip
    record = json.loads(out.read_text())
    beam = record["beam5"]
    assert beam["ratio"] == 10.0 and beam["ratio_per_round"] == [10.0, 10.0]
    assert beam["rounds"][0]["seq2seq"] == {
        "sentences_per_sec": 100.0, "peak_rss_gb": 1.0, "bleu": 100.0, "mean_words": 4.0,
        "words_per_sec": 400.0,
    }  # fmt: skip
    assert beam["rounds"][0]["joey"]["words_per_sec"] == 20.0
    assert record["greedy"]["ours"] == str(ours)
    assert record["beam5-bf16"]["ratio_per_round"] == [10.0, 10.0]


def test_missing_checkpoints_are_refused(decoding: ModuleType, tmp_path: Path, capsys):
    args = ["--ours", str(tmp_path / "no.ckpt"), "--joey", str(tmp_path)]
    message = usage_error(capsys, decoding.parse_args, args)
    assert message.endswith(f"error: no checkpoint {tmp_path / 'no.ckpt'}")
    # no bench_quality result to take the checkpoint from
    message = usage_error(capsys, decoding.parse_args, ["--ours-result", str(tmp_path / "r.json")])
    assert message.endswith(f"error: no result {tmp_path / 'r.json'}: run bench_quality.py first")


def test_the_checkpoints_default_to_what_the_other_benchmarks_left(
    decoding: ModuleType, tmp_path: Path
):
    corpus = tmp_path / "multi30k"
    corpus.mkdir()
    (corpus / "test_2016_flickr.de.gz").write_bytes(b"")
    ours = tmp_path / "averaged.ckpt"
    ours.write_bytes(b"")
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"evaluated": str(ours)}))
    latest = tmp_path / "cache" / "joey-runs" / "transformer" / "models" / "t_w300" / "latest.ckpt"
    latest.parent.mkdir(parents=True)
    latest.write_bytes(b"")
    args = decoding.parse_args(["--ours-result", str(result), "--corpus", str(corpus),
                                "--cache", str(tmp_path / "cache")])  # fmt: skip
    assert (args.ours, args.joey) == (ours, latest)
