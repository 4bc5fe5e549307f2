"""Word alignments with every translation: `translate --alignment`, the Python API's
``translate(alignment=True)`` and ``align``, and the server's ``alignment`` field give the
links ``attention`` reads, for the RNN and the Transformer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import seq2seq
from seq2seq import translation_model
from seq2seq.commands.decoding import BEAM_SEARCH, ModelSettings, open_model
from seq2seq.commands.main import main
from seq2seq.common.errors import Seq2SeqError
from seq2seq.inspection.extraction import Extraction
from seq2seq.serve.engine import Engine, SearchKey, Sentence
from seq2seq.translation_model import Aligned

LINES = ["forty-two", "", "three hundred and one", "on Monday, May 4, 1998"]


@pytest.fixture(params=["rnn", "transformer"])
def checkpoint(request, trained_run) -> Path:
    if request.param == "rnn":
        return trained_run["ckpt"]
    return request.getfixturevalue("trained_transformer")


def within_words(links: list[tuple[int, int]], source: str, target: str) -> bool:
    return all(i < len(source.split()) and j < len(target.split()) for i, j in links)


def test_translate_alignment_writes_the_links_attention_reads(checkpoint, run_here):
    """The links of the translation the command makes, as `attention` reads them."""
    plain = run_here("translate", "--ckpt", str(checkpoint), stdin="\n".join(LINES) + "\n")
    done = run_here("translate", "--ckpt", str(checkpoint), "--alignment",
                    stdin="\n".join(LINES) + "\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    model = open_model("translate", ModelSettings(ckpt=[str(checkpoint)]), BEAM_SEARCH)
    texts = []
    for source, line in zip(LINES, done.stdout.splitlines(), strict=True):
        text, separator, links = line.partition(" ||| ")
        assert separator and line.count(" ||| ") == 1
        texts.append(text)
        expected = model.attention(source).alignment if source else []
        assert links == " ".join(f"{i}-{j}" for i, j in expected)
        assert bool(links) == bool(source and text)  # every word of a translation has one
    assert texts == plain.stdout.splitlines()


def test_the_api_and_the_server_give_the_same_links(checkpoint):
    model = seq2seq.load(checkpoint)
    aligned = model.translate(LINES, alignment=True, beam=3, n_best=2)
    answers = Engine(model).run(SearchKey(beam=3, n_best=2),
                                [Sentence(line, alignment=True) for line in LINES])  # fmt: skip
    assert [[a.text for a in each] for each in aligned] == model.translate(LINES, beam=3, n_best=2)
    for source, each, answer in zip(LINES, aligned, answers, strict=True):
        assert all(isinstance(a, Aligned) for a in each)
        assert [a.pharaoh() for a in each] == [h["alignment"] for h in answer["translations"]]
        assert all(within_words(a.links, source, a.text) for a in each)
    assert model.translate("forty-two", alignment=True) == aligned[0][0]


def test_align_gives_the_links_of_forced_decoding(checkpoint):
    model = seq2seq.load(checkpoint)
    sources = ["forty-two", "seven", "", "three hundred and one"]
    targets = ["zweiundvierzig", "", "drei", "dreihundert und eins"]
    links = model.align(sources, targets)
    assert links[1] == [] and links[2] == []
    for k in (0, 3):
        assert links[k] == model.attention(sources[k], targets[k]).alignment
        assert within_words(links[k], sources[k], targets[k]) and links[k]
    with pytest.raises(Seq2SeqError, match="2 sources but 1 targets"):
        model.align(sources[:2], targets[:1])


def test_align_each_reads_every_extraction_from_one_forced_decoding(
    trained_transformer, monkeypatch: pytest.MonkeyPatch
):
    """align_each gives, per extraction, the links align gives with it, and decodes the
    pairs once whatever the number of extractions."""
    model = seq2seq.load(trained_transformer)
    sources = ["forty-two", "", "three hundred and one"]
    targets = ["zweiundvierzig", "drei", "dreihundert und eins"]
    chosen = [
        Extraction(),
        Extraction(layer=1, head=0, shift=True, method="mutual-argmax"),
        Extraction(layer=0, shift=True),
    ]
    expected = [
        model.align(sources, targets, layer=e.layer, head=e.head, shift=e.shift, method=e.method)
        for e in chosen
    ]
    assert len({str(links) for links in expected}) == len(chosen)  # each reads other links
    decodings = []
    forced = translation_model.reference_attention

    def counted(*args, **kwargs):
        decodings.append(args[1])
        return forced(*args, **kwargs)

    monkeypatch.setattr(translation_model, "reference_attention", counted)
    assert model.align_each(sources, targets, chosen) == expected
    assert len(decodings) == 1
    with pytest.raises(Seq2SeqError, match="layer"):
        model.align_each(sources, targets, [Extraction(layer=9)])


def test_a_model_finds_its_attention_heads_once_however_many_extractions_it_checks(
    trained_transformer, monkeypatch: pytest.MonkeyPatch
):
    """The head axes take a forward pass: checking 64 extractions must not take 64."""
    model = seq2seq.load(trained_transformer)
    passes = []
    found = translation_model.head_axes

    def counted(trained):
        passes.append(trained)
        return found(trained)

    monkeypatch.setattr(translation_model, "head_axes", counted)
    tried = [Extraction(layer=layer, shift=shift) for layer in (0, 1) for shift in (False, True)]
    model.align_each(["forty-two"], ["zweiundvierzig"], tried)
    model.align_each(["forty-two"], ["zweiundvierzig"], tried)
    assert model.heads == found(model.trained) and len(passes) == 1


def test_the_alignment_options_choose_the_map_and_step_the_links_are_read_from(
    trained_transformer, run_here
):
    lines = [line for line in LINES if line]
    done = run_here("translate", "--ckpt", str(trained_transformer), "--alignment",
                    "--alignment-layer", "1", "--alignment-head", "0", "--alignment-shift",
                    "--alignment-method", "mutual-argmax",
                    stdin="\n".join(lines) + "\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    model = open_model("translate", ModelSettings(ckpt=[str(trained_transformer)]), BEAM_SEARCH)
    chosen = Extraction(layer=1, head=0, shift=True, method="mutual-argmax")
    expected = model.translate(lines, alignment=chosen)
    assert done.stdout.splitlines() == [f"{a.text} ||| {a.pharaoh()}" for a in expected]
    assert expected != model.translate(lines, alignment=True)  # another map, other links
    argmax = model.translate(lines, alignment=dataclasses.replace(chosen, method="argmax"))
    assert expected != argmax  # another rule, other links


def test_the_server_reads_links_from_the_extraction_its_options_choose(trained_transformer):
    """serve --alignment-layer 1 --alignment-head 0 --alignment-shift: a request's links are
    those translate --alignment reads with the same options; an extraction the model cannot
    give is refused before the server starts."""
    lines = [line for line in LINES if line]
    model = seq2seq.load(trained_transformer)
    chosen = Extraction(layer=1, head=0, shift=True)
    sentences = [Sentence(line, alignment=True) for line in lines]
    answers = Engine(model, chosen).run(SearchKey(beam=model.search.beam, n_best=1), sentences)
    expected = model.translate(lines, alignment=chosen)
    assert [a["translations"][0]["alignment"] for a in answers] == [a.pharaoh() for a in expected]
    assert expected != model.translate(lines, alignment=True)  # the mean gives other links
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--ckpt", str(trained_transformer), "--alignment-layer", "7"])
    assert stop.value.code == 1


def test_alignment_options_without_alignment_are_refused(trained_transformer, run_here):
    done = run_here("translate", "--ckpt", str(trained_transformer), "--alignment-shift",
                    stdin="one\n")  # fmt: skip
    assert done.returncode == 2 and "give --alignment too" in done.stderr and not done.stdout
