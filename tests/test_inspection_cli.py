"""`seq2seq attention` and `seq2seq align-score` end to end on the tiny trained models."""

from __future__ import annotations

import json

import pytest

from seq2seq.commands.main import main
from seq2seq.inference.checkpoint import load_trained
from seq2seq.inspection.pipeline import InspectSettings, inspect_attention
from seq2seq.inspection.word_alignments import grow_diag, read_gold
from seq2seq.text.pharaoh import read_links

PNG = b"\x89PNG\r\n\x1a\n"
STATISTICS = {
    "mean_entropy", "eos_share", "punctuation_share", "monotonic_steps", "kendall_tau",
    "mean_coverage", "under_covered", "over_covered",
}  # fmt: skip


def lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def report_data(path) -> dict:
    """The attention data embedded in a report page."""
    page = path.read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page
    return json.loads(page.split('id="data">')[1].split("</script>")[0])


def assert_links_fit_the_words(alignments: list[set], sources: list[str], targets: list[str]):
    """Every link joins an existing source word and target word (0-indexed, source first)."""
    assert len(alignments) == len(sources) == len(targets)
    for links, source, target in zip(alignments, sources, targets, strict=True):
        for i, j in links:
            assert 0 <= i < len(source.split()) and 0 <= j < len(target.split())


@pytest.fixture(scope="module")
def test_files(trained_run, tmp_path_factory):
    """Six test sentences with a blank line among them (it must stay a line of its own)."""
    folder = tmp_path_factory.mktemp("attention-input")
    corpus = trained_run["corpus"]
    for lang in ("en", "de"):
        text = lines(corpus / f"test.{lang}")[:6]
        (folder / f"test.{lang}").write_text("\n".join([*text[:3], "", *text[3:]]) + "\n")
    return folder / "test.en", folder / "test.de"


def test_attention_of_references(trained_run, test_files, tmp_path, capsys):
    src, ref = test_files
    out = tmp_path / "forced"
    main(["attention", "--ckpt", str(trained_run["ckpt"]), "--src", str(src), "--ref", str(ref),
          "--out", str(out), "--limit", "4"])  # fmt: skip
    printed = capsys.readouterr().out
    # lines 0-3 are drawn except the blank line 3
    assert sorted(p.name for p in out.glob("*.png")) == [
        "attention_0000.png", "attention_0001.png", "attention_0002.png",
    ]  # fmt: skip
    assert all(p.read_bytes()[:8] == PNG for p in out.glob("*.png"))
    assert not (out / "translations.txt").exists()  # the references were aligned
    alignments = read_links(out / "alignments.txt")
    assert_links_fit_the_words(alignments, lines(src), lines(ref))
    assert alignments[3] == set() and all(alignments[:3])
    stats = json.loads((out / "stats.json").read_text())
    assert stats["summary"]["sentences"] == 7 and set(stats["summary"]) >= STATISTICS
    assert 0 <= stats["summary"]["eos_share"] <= 1
    assert [s["index"] for s in stats["sentences"]] == list(range(7))
    assert [c["word"] for c in stats["sentences"][0]["coverage"]] == lines(src)[0].split()
    shown = report_data(out / "report.html")["sentences"]
    assert [s["index"] for s in shown] == [0, 1, 2]
    assert shown[0]["links"] == (out / "alignments.txt").read_text().splitlines()[0]
    assert "mean_entropy" in printed and str(out / "report.html") in printed


def test_attention_of_own_translations_by_threshold(trained_transformer, test_files, tmp_path):
    """The tiny Transformer writes words ("Ja Ja ..."; the tiny RNN writes ""): its links
    join the words of its own translations."""
    src, _ = test_files
    out = tmp_path / "own"
    main(["attention", "--ckpt", str(trained_transformer), "--src", str(src), "--out", str(out),
          "--beam", "2", "--limit", "1", "--method", "threshold",
          "--threshold", "0.2"])  # fmt: skip
    translations = lines(out / "translations.txt")
    assert len(translations) == 7 and translations[3] == ""
    assert all(len(line.split()) > 1 for i, line in enumerate(translations) if i != 3)
    alignments = read_links(out / "alignments.txt")
    assert_links_fit_the_words(alignments, lines(src), translations)
    assert all(alignments[:3]) and all(alignments[4:])
    assert len(list(out.glob("*.png"))) == 1


def test_alignments_score_against_themselves_perfectly(trained_run, test_files, tmp_path, capsys):
    src, ref = test_files
    out = tmp_path / "self"
    main(["attention", "--ckpt", str(trained_run["ckpt"]), "--src", str(src), "--ref", str(ref),
          "--out", str(out), "--limit", "1"])  # fmt: skip
    capsys.readouterr()
    hyp = out / "alignments.txt"
    main(["align-score", "--gold", str(hyp), "--hyp", str(hyp)])
    scores = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert scores["AER"].startswith("0.0000  (95% interval 0.0000-0.0000")
    assert (scores["precision"], scores["recall"]) == ("1.0000", "1.0000")


def test_symmetrization_with_a_reverse_model(trained_run, test_files, tmp_path):
    """The tiny model stands in for a reverse one: the words line up all the same."""
    src, ref = test_files
    trained = load_trained(trained_run["ckpt"])
    options = InspectSettings(symmetrization="grow-diag", limit=0, progress=False)
    sources, references = lines(src), lines(ref)
    inspect_attention(trained, sources, tmp_path, options, references, reverse=trained)
    forward = read_links(tmp_path / "alignments.forward.txt")
    backward = read_links(tmp_path / "alignments.reverse.txt")
    combined = read_links(tmp_path / "alignments.txt")
    assert_links_fit_the_words(backward, sources, references)
    assert combined == [grow_diag(f, b) for f, b in zip(forward, backward, strict=True)]


def test_positional_encoding_plots(tmp_path, capsys):
    main(["positional-encoding", "--dim", "32", "--positions", "40", "--out", str(tmp_path)])
    pngs = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in pngs] == [
        "positional_encoding_curves.png", "positional_encoding_heatmap.png",
    ]  # fmt: skip
    assert all(p.read_bytes()[:8] == PNG for p in pngs)


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        ([], 2, "attention needs --model, --ckpt or --hf, one of them"),
        (["CKPT"], 2, "attention needs sentences or --src, one of them"),
        (["CKPT", "--src", "SRC", "forty-two"], 2, "attention needs sentences or --src"),
        (["CKPT", "--src", "SRC", "--ref", "REF"], 1, "has 7 lines but"),
        (["CKPT", "--src", "SRC", "--layer", "0"], 1, "has no layers to choose"),
    ],
)  # fmt: skip
def test_attention_mistakes_are_one_line_errors(
    trained_run, test_files, tmp_path, capsys, args, status, message
):
    src, ref = test_files
    (tmp_path / "short.de").write_text("eins\n")
    values = {"CKPT": str(trained_run["ckpt"]), "SRC": str(src), "REF": str(tmp_path / "short.de")}
    args = [values.get(a, a) for a in args]
    if args and args[0] == values["CKPT"]:
        args = ["--ckpt", *args]
    with pytest.raises(SystemExit) as exit_info:
        main(["attention", *args, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == status
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("seq2seq: error: ") and message in error[0]


def test_transformer_layers_and_heads(trained_transformer, test_files, tmp_path, capsys):
    src, ref = test_files
    out = tmp_path / "transformer"
    main(["attention", "--ckpt", str(trained_transformer), "--src", str(src), "--ref", str(ref),
          "--out", str(out), "--limit", "2", "--layer", "-1"])  # fmt: skip
    assert len(list(out.glob("*.png"))) == 2
    assert_links_fit_the_words(read_links(out / "alignments.txt"), lines(src), lines(ref))
    data = report_data(out / "report.html")
    # everything, then per layer: its mean and its 2 heads
    assert len(data["views"]) == 1 + 2 * 3
    assert data["views"][data["defaultView"]]["label"] == "layer 2: mean over heads"
    assert len(data["sentences"][0]["w"][0]) == 4  # [T][layers x heads][S]
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["attention", "--ckpt", str(trained_transformer), "--src", str(src), "--out",
              str(tmp_path / "x"), "--layer", "2"])  # fmt: skip
    assert stop.value.code == 1  # a one-line error, not a usage error
    assert "--layer 2 does not exist" in capsys.readouterr().err


def test_gold_file_from_the_attention_output_reads_as_sure_links(trained_run, test_files, tmp_path):
    src, ref = test_files
    main(["attention", "--ckpt", str(trained_run["ckpt"]), "--src", str(src), "--ref", str(ref),
          "--out", str(tmp_path), "--limit", "1"])  # fmt: skip
    gold = read_gold(tmp_path / "alignments.txt")
    assert [g.sure for g in gold] == read_links(tmp_path / "alignments.txt")
