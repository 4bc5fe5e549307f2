"""Hard word alignments from attention maps, symmetrization and the Pharaoh format; AER,
precision and recall (Och & Ney 2003) on hand-computed cases, gold file notations, and
`seq2seq align-score`."""

from __future__ import annotations

import pytest
import torch

from seq2seq.commands.main import main
from seq2seq.common.errors import DataError
from seq2seq.inspection.word_alignments import (
    GoldAlignment,
    argmax_links,
    drop_outside,
    extract_links,
    grow_diag,
    mutual_argmax_links,
    parse_gold_line,
    read_gold,
    score_alignments,
    symmetrize,
    threshold_links,
    transpose,
)
from seq2seq.text.pharaoh import format_pharaoh, read_links
from seq2seq.text.words import merge_to_words, word_spans

# target words (rows) x source words (columns): "b a c" attending to "a b c" crosswise
CROSSED = torch.tensor(
    [
        [0.1, 0.8, 0.1],
        [0.6, 0.35, 0.05],
        [0.0, 0.3, 0.7],
    ]
)


def test_argmax_links_are_source_first_one_per_target_word():
    assert argmax_links(CROSSED) == {(1, 0), (0, 1), (2, 2)}
    assert format_pharaoh(argmax_links(CROSSED)) == "0-1 1-0 2-2"


def test_a_target_row_without_attention_gets_no_link():
    weights = torch.tensor([[0.0, 0.0], [0.2, 0.8]])
    assert argmax_links(weights) == {(1, 1)}
    assert argmax_links(torch.zeros(2, 0)) == set()  # no source word at all
    assert argmax_links(torch.zeros(0, 3)) == set()


def test_mutual_argmax_keeps_only_the_links_that_are_best_both_ways():
    # target word 2 attends to source 0 most, but source 0 is attended by target 0 more
    weights = torch.tensor([[0.9, 0.1, 0.0], [0.1, 0.2, 0.7], [0.5, 0.4, 0.1], [0.0, 0.0, 0.0]])
    assert argmax_links(weights) == {(0, 0), (2, 1), (0, 2)}
    assert mutual_argmax_links(weights) == {(0, 0), (2, 1)}  # the empty row: no link either
    assert mutual_argmax_links(CROSSED) == argmax_links(CROSSED)  # every pick is mutual there
    assert extract_links(weights, "mutual-argmax") == mutual_argmax_links(weights)
    assert mutual_argmax_links(torch.zeros(2, 0)) == set()
    assert mutual_argmax_links(torch.zeros(0, 3)) == set()


def test_threshold_links_keep_every_weight_at_least_the_threshold():
    assert threshold_links(CROSSED, 0.3) == {(1, 0), (0, 1), (1, 1), (1, 2), (2, 2)}
    assert threshold_links(CROSSED, 0.75) == {(1, 0)}
    with pytest.raises(ValueError):
        threshold_links(CROSSED, 0.0)


def test_extract_links_from_a_piece_level_map():
    # "forty two" -> "zwei und vierzig": German says the units first, so the word-level
    # alignment crosses once the pieces of "for ty" and "vier zig" are merged.
    src, tgt = ["▁for", "ty", "▁two"], ["▁zwei", "▁und", "▁vier", "zig"]
    weights = torch.tensor(
        [
            [0.1, 0.1, 0.8],  # zwei -> two
            [0.3, 0.3, 0.4],  # und: best piece "two", best word "forty" (0.3 + 0.3)
            [0.7, 0.2, 0.1],  # vier -> for
            [0.2, 0.7, 0.1],  # zig -> ty
        ]
    )
    words_map = merge_to_words(weights, word_spans(tgt), word_spans(src))
    assert words_map.shape == (3, 2)
    # the argmax is taken per word, not per piece: und -> forty
    assert format_pharaoh(extract_links(words_map, "argmax")) == "0-1 0-2 1-0"
    assert format_pharaoh(extract_links(words_map, "threshold", 0.5)) == "0-1 0-2 1-0"


def test_transpose_turns_reverse_model_links_around():
    assert transpose({(0, 2), (1, 0)}) == {(2, 0), (0, 1)}


def test_symmetrization_by_hand():
    forward = {(0, 0), (1, 1), (2, 1)}  # source 2 also aligned to target 1
    backward = {(0, 0), (1, 1), (2, 2), (3, 3)}
    assert symmetrize(forward, backward, "intersection") == {(0, 0), (1, 1)}
    assert symmetrize(forward, backward, "union") == forward | backward
    # grow-diag from the intersection: (2, 1) and (2, 2) neighbor (1, 1) and align a new
    # source word (2) or target word (2); (3, 3) neighbors (2, 2) once that is in.
    assert symmetrize(forward, backward, "grow-diag") == {
        (0, 0), (1, 1), (2, 1), (2, 2), (3, 3),
    }  # fmt: skip


def test_grow_diag_does_not_add_links_between_already_aligned_words():
    forward = {(0, 0), (1, 1), (0, 1)}
    backward = {(0, 0), (1, 1), (1, 0)}
    assert grow_diag(forward, backward) == {(0, 0), (1, 1)}


def test_grow_diag_final_adds_union_links_of_unaligned_words():
    forward = {(0, 0), (3, 3)}
    backward = {(0, 0), (5, 5)}
    assert grow_diag(forward, backward) == {(0, 0)}  # (3, 3) and (5, 5) are no neighbors
    assert grow_diag(forward, backward, final=True) == {(0, 0), (3, 3), (5, 5)}


def test_pharaoh_is_sorted_source_first_and_empty_for_no_links():
    assert format_pharaoh({(2, 0), (0, 3), (0, 1)}) == "0-1 0-3 2-0"
    assert format_pharaoh(set()) == ""


def gold(line: str) -> GoldAlignment:
    return parse_gold_line(line)


def test_sure_links_only():
    # A = {00, 12, 22}, S = P = {00, 11, 22}: |A&S| = |A&P| = 2
    score = score_alignments([gold("0-0 1-1 2-2")], [{(0, 0), (1, 2), (2, 2)}])
    assert score.precision == pytest.approx(2 / 3)
    assert score.recall == pytest.approx(2 / 3)
    assert score.aer == pytest.approx(1 - (2 + 2) / (3 + 3))


def test_possible_links_count_for_precision_not_recall():
    # S = {00, 22}, P = S + {11, 23}; A = {00, 11, 23, 31}: |A&S| = 1, |A&P| = 3
    score = score_alignments([gold("0-0 1p1 2-2 2p3")], [{(0, 0), (1, 1), (2, 3), (3, 1)}])
    assert score.precision == pytest.approx(3 / 4)
    assert score.recall == pytest.approx(1 / 2)
    assert score.aer == pytest.approx(1 - (1 + 3) / (4 + 2))


def test_a_perfect_alignment_of_sure_links_has_zero_aer():
    score = score_alignments([gold("0-0 1-1 1p2")], [{(0, 0), (1, 1)}])
    assert (score.aer, score.precision, score.recall) == (0.0, 1.0, 1.0)


def test_counts_are_summed_over_the_corpus_before_dividing():
    # sentence 1: A = 1 link, right; sentence 2: A = 3 links, 1 right. Micro precision
    # 2/4, not the mean of 1 and 1/3.
    golds = [gold("0-0"), gold("0-0 1-1 2-2")]
    hyps = [{(0, 0)}, {(0, 0), (0, 1), (0, 2)}]
    score = score_alignments(golds, hyps)
    assert (score.hyp, score.sure, score.hyp_sure, score.hyp_possible) == (4, 4, 2, 2)
    assert score.precision == pytest.approx(0.5)
    assert score.aer == pytest.approx(0.5)


def test_empty_alignments():
    nothing = score_alignments([gold("")], [set()])
    assert (nothing.aer, nothing.precision, nothing.recall) == (None, None, None)
    no_hyp = score_alignments([gold("0-0 1-1")], [set()])
    assert (no_hyp.aer, no_hyp.precision, no_hyp.recall) == (1.0, None, 0.0)
    no_gold = score_alignments([gold("")], [{(0, 0)}])
    assert (no_gold.aer, no_gold.precision, no_gold.recall) == (1.0, 0.0, None)
    only_possible = score_alignments([gold("0p0")], [{(0, 0)}])
    assert (only_possible.aer, only_possible.precision, only_possible.recall) == (0.0, 1.0, None)


@pytest.mark.parametrize(
    ("token", "sure"),
    [("3-4", True), ("3-4s", True), ("3-4-S", True), ("3p4", False), ("3P4", False),
     ("3?4", False), ("3-4p", False), ("3-4-P", False)],
)  # fmt: skip
def test_gold_notations(token, sure):
    parsed = gold(token)
    assert parsed.possible == {(3, 4)}
    assert parsed.sure == ({(3, 4)} if sure else set())


def test_one_indexed_gold_is_shifted_and_a_zero_index_is_an_error():
    parsed = parse_gold_line("1-1 3p2", one_indexed=True)
    assert parsed.sure == {(0, 0)} and parsed.possible == {(0, 0), (2, 1)}
    with pytest.raises(DataError, match="index 0"):
        parse_gold_line("0-1", one_indexed=True)


@pytest.mark.parametrize("token", ["3:4", "3-", "a-b", "3p4s", "3-4-5"])
def test_malformed_gold_links_are_errors(token):
    with pytest.raises(DataError):
        gold(token)


def test_files_keep_blank_lines_as_empty_alignments(tmp_path):
    (tmp_path / "gold").write_text("0-0 1p1\n\n2-2\n")
    (tmp_path / "hyp").write_text("0-0\n\n2-2 1-1\n")
    golds, hyps = read_gold(tmp_path / "gold"), read_links(tmp_path / "hyp")
    assert [g.sure for g in golds] == [{(0, 0)}, set(), {(2, 2)}]
    assert hyps == [{(0, 0)}, set(), {(2, 2), (1, 1)}]
    with pytest.raises(DataError, match="hyp:1"):
        (tmp_path / "hyp").write_text("0p0\n")
        read_links(tmp_path / "hyp")


def test_align_score_prints_aer_precision_recall(tmp_path, capsys):
    (tmp_path / "gold").write_text("1-1 2p2 3-3\n1-1\n")  # 1-indexed
    (tmp_path / "hyp").write_text("0-0 1-1 2-1\n\n")
    main(["align-score", "--gold", str(tmp_path / "gold"), "--hyp", str(tmp_path / "hyp"),
          "--one-indexed"])  # fmt: skip
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    # S = {00, 22, 00'}, P = S + {11}; A = {00, 11, 21}: |A&S| = 1, |A&P| = 2
    assert float(lines["precision"]) == pytest.approx(2 / 3, abs=1e-4)
    assert float(lines["recall"]) == pytest.approx(1 / 3, abs=1e-4)
    assert float(lines["AER"].split()[0]) == pytest.approx(1 - 3 / 6, abs=1e-4)


def test_align_score_of_files_of_different_lengths_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "gold").write_text("0-0\n1-1\n")
    (tmp_path / "hyp").write_text("0-0\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["align-score", "--gold", str(tmp_path / "gold"), "--hyp", str(tmp_path / "hyp")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err == f"seq2seq: error: {tmp_path / 'gold'} has 2 lines but {tmp_path / 'hyp'} has 1"


def test_gold_links_past_the_last_word_are_dropped_the_last_word_kept():
    gold = [parse_gold_line("0-0 2-1 3-1 1p2"), parse_gold_line("0-0")]
    kept, dropped = drop_outside(gold, [(3, 2), (1, 1)])  # 3 source, 2 target words
    assert kept == [parse_gold_line("0-0 2-1"), gold[1]]
    assert dropped == ["line 1: 1-2 3-1 outside its 3 x 2 words"]
