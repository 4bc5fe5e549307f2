"""transformers' MarianMT models opened as seq2seq models, and seq2seq's post-norm
Transformers written as MarianMT models, each proven by equal outputs: on a tiny MarianMT
model the tests build and train with transformers itself (a SentencePiece vocabulary of
the demo corpus, a few hundred steps, so that its outputs end), and on a tiny Transformer
of ours. Offline: everything is under the tests' temporary folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from tiny_run import tiny_config, write_config

import seq2seq
from seq2seq.commands.main import main
from seq2seq.common.errors import Seq2SeqError, UsageError
from seq2seq.inference.checkpoint import load_trained
from seq2seq.inference.huggingface import export_huggingface, load_huggingface
from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.masking import sequence_mask

transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # trains a MarianMT model, and fits one of ours
SOURCES = ["forty-two", "three hundred and one", "on Monday, May 4, 1998", "seven"]


def train_spm(lines: list[str], prefix: Path, size: int) -> Path:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=size,
        model_type="unigram", character_coverage=1.0, pad_id=-1, bos_id=-1, eos_id=-1,
        unk_id=0, minloglevel=2, num_threads=1,
    )  # fmt: skip
    return prefix.with_suffix(".model")


@pytest.fixture(scope="module")
def marian(trained_run: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A MarianMT model of transformers, trained on the demo corpus and saved with
    ``save_pretrained`` (tokenizer included)."""
    root = tmp_path_factory.mktemp("marian")
    corpus = trained_run["corpus"]
    src = (corpus / "train.en").read_text(encoding="utf-8").splitlines()
    tgt = (corpus / "train.de").read_text(encoding="utf-8").splitlines()
    models = [train_spm(src, root / "source", 150), train_spm(tgt, root / "target", 150)]
    pieces = ["</s>", "<unk>"]
    for model in models:
        processor = spm.SentencePieceProcessor(model_file=str(model))
        pieces += [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    vocab = {piece: i for i, piece in enumerate(dict.fromkeys([*pieces, "<pad>"]))}
    (root / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = transformers.MarianTokenizer(
        source_spm=str(models[0]),
        target_spm=str(models[1]),
        vocab=str(root / "vocab.json"),
        source_lang="en",
        target_lang="de",
    )
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, activation_function="swish", scale_embedding=True, dropout=0.0,
        max_position_embeddings=128, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        rows = torch.randint(len(src), (32,), generator=generator).tolist()
        batch = tokenizer([src[r] for r in rows], text_target=[tgt[r] for r in rows],
                          padding=True, return_tensors="pt")  # fmt: skip
        labels = batch["labels"].masked_fill(batch["labels"] == pad, -100)
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     labels=labels).loss  # fmt: skip
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    folder = root / "model"
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def hf_inputs(folder: Path, sources: list[str]) -> tuple[object, dict]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return tokenizer, tokenizer(sources, padding=True, return_tensors="pt")


def test_forced_decoding_log_probabilities_and_cross_attention_equal_transformers(marian):
    ours = load_huggingface(marian)
    hf = transformers.MarianMTModel.from_pretrained(marian, attn_implementation="eager").eval()
    tokenizer, batch = hf_inputs(marian, SOURCES)
    targets = tokenizer(text_target=["zweiundvierzig", "dreihunderteins", "sieben", "acht"],
                        padding=True, return_tensors="pt")["input_ids"]  # fmt: skip
    start = torch.full((len(SOURCES), 1), hf.config.decoder_start_token_id)
    tgt_in = torch.cat([start, targets[:, :-1]], dim=1)
    src_lens = batch["attention_mask"].sum(1)
    with torch.no_grad():
        out = hf(**batch, decoder_input_ids=tgt_in, output_attentions=True)
        logits, attention = ours.model(batch["input_ids"], src_lens, tgt_in)
    theirs = torch.log_softmax(out.logits, -1)
    mine = torch.log_softmax(logits, -1)
    assert (theirs - mine).abs().max() < 1e-4
    cross = torch.stack(out.cross_attentions, dim=1)  # [B, L, H, T, S]
    valid = sequence_mask(src_lens, batch["input_ids"].size(1))[:, None, None, None, :]
    assert ((cross - attention) * valid).abs().max() < 1e-5


def test_greedy_and_beam_search_equal_generate(marian):
    model = seq2seq.load(marian)  # a save_pretrained folder is recognised as one
    tokenizer, batch = hf_inputs(marian, SOURCES)
    hf = transformers.MarianMTModel.from_pretrained(marian).eval()
    with torch.no_grad():
        greedy = hf.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=40)
    assert all(hf.config.eos_token_id in row for row in greedy.tolist())  # they end
    assert model.translate(SOURCES, beam=1) == tokenizer.batch_decode(
        greedy, skip_special_tokens=True
    )
    k = 4
    with torch.no_grad():
        beams = hf.generate(**batch, num_beams=k, num_return_sequences=k, length_penalty=0.0,
                            early_stopping=True, do_sample=False, max_new_tokens=40)  # fmt: skip
    theirs = tokenizer.batch_decode(beams, skip_special_tokens=True)
    ours = model.translate(SOURCES, beam=k, n_best=k, length_penalty=0.0)
    for i, nbest in enumerate(ours):
        assert nbest == theirs[i * k : (i + 1) * k]  # the same k hypotheses, in order


def test_translate_and_attention_take_a_transformers_model(marian, tmp_path, run_here):
    done = run_here("translate", "--hf", str(marian), "--beam", "1", stdin="forty-two\n")
    assert done.returncode == 0 and done.stdout.strip() == seq2seq.load(marian).translate(
        "forty-two", beam=1
    )
    drawn = run_here("attention", "--hf", str(marian), "forty-two", "--out", str(tmp_path / "a"))
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "a" / "report.html").is_file()
    attention = seq2seq.load(marian).attention("forty-two")
    assert attention.weights.shape[1:3] == (2, 2)  # every layer and head of the decoder
    assert attention.src_pieces[-1] == "</s>" and attention.src_pieces[0].startswith("▁")


def test_what_is_not_a_marian_model_is_refused_in_one_line(marian, tmp_path, run_here):
    bart = tmp_path / "bart"
    transformers.BartForConditionalGeneration(transformers.BartConfig(
        vocab_size=50, d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
    )).save_pretrained(bart)  # fmt: skip
    broken = tmp_path / "broken"
    shutil.copytree(marian, broken)
    (broken / "source.spm").unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder, message in [
        (bart, "is a transformers 'bart' model, which seq2seq does not open"),
        (broken, "its tokenizer lacks source.spm"),
        (empty, "holds no config.json: not a transformers model"),
    ]:
        done = run_here("translate", "--hf", str(folder), stdin="forty-two\n")
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr
    with pytest.raises(UsageError, match="bart"):
        seq2seq.load(bart)


def test_fit_refuses_to_train_a_marian_model_further_in_one_line(
    marian, trained_run, tmp_path, run_here
):
    """Until a checkpoint can hold transformers' tokenizer: refused before any work."""
    root = tmp_path / "run"
    done = run_here("fit", "--config", str(REPO / "configs" / "finetune.yaml"),
                    "--init_from", str(marian), "--data.source", str(trained_run["corpus"]),
                    "--trainer.default_root_dir", str(root))  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "a transformers model cannot be trained further by fit yet" in done.stderr
    assert not root.exists()


@pytest.fixture(scope="module")
def post_norm(trained_run: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`seq2seq fit` of a small post-norm Transformer on the demo corpus: its checkpoint
    (no validation: the tests need only the weights)."""
    root = tmp_path_factory.mktemp("post-norm")
    config = tiny_config(root, trained_run["corpus"])
    config["trainer"].update(max_epochs=3, limit_val_batches=0)
    config["model"]["model"] = {
        "class_path": "seq2seq.transformer.Transformer",
        "init_args": {"model_size": 32, "num_heads": 2, "ff_size": 64, "encoder_layers": 2,
                      "decoder_layers": 2, "norm": "post", "dropout": 0.0},
    }  # fmt: skip
    main(["fit", "--config", str(write_config(root / "post.yaml", config))])
    return root / "run/checkpoints/last.ckpt"


def test_an_exported_transformer_computes_in_transformers_as_in_seq2seq(post_norm, tmp_path):
    trained = load_trained(post_norm)
    out = export_huggingface(trained, tmp_path / "hf")
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    tokenizer, batch = hf_inputs(out, SOURCES)
    ids = [trained.vocab.src.encode(s) + [trained.vocab.spec.eos_id] for s in SOURCES]
    assert [row[: len(i)] for row, i in zip(batch["input_ids"].tolist(), ids, strict=True)] == ids
    tgt_in = torch.tensor([[trained.vocab.spec.bos_id, 5, 6, 7]] * len(SOURCES))
    with torch.no_grad():
        theirs = hf(**batch, decoder_input_ids=tgt_in).logits
        ours, _ = trained.model(batch["input_ids"], batch["attention_mask"].sum(1), tgt_in)
    assert (theirs - ours).abs().max() < 1e-4
    limit = 20  # ours: at most 20 tokens, then EOS; transformers: 21 new tokens, EOS forced
    with torch.no_grad():
        greedy = hf.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=limit + 1)
    search = SearchSettings(beam=1, max_len_ratio=0.0, max_len_offset=limit)
    hyps = translate_batch(trained.model, batch["input_ids"], batch["attention_mask"].sum(1),
                           search)  # fmt: skip
    ours_text = [trained.vocab.tgt.decode(h[0].tokens) for h in hyps]
    assert ours_text == tokenizer.batch_decode(greedy, skip_special_tokens=True)
    back = load_huggingface(out)  # and open it again as a seq2seq model
    with torch.no_grad():
        again, _ = back.model(batch["input_ids"], batch["attention_mask"].sum(1), tgt_in)
    assert torch.equal(again, ours)


def test_export_refuses_what_transformers_would_compute_otherwise(
    trained_transformer, trained_run, tmp_path, run_here
):
    pre = run_here("export", "--ckpt", str(trained_transformer), "--to", "huggingface",
                   "--out", str(tmp_path / "pre"))  # fmt: skip
    assert pre.returncode == 1 and "pre-norm" in pre.stderr and pre.stderr.count("\n") == 1
    rnn = run_here("export", "--ckpt", str(trained_run["ckpt"]), "--to", "huggingface",
                   "--out", str(tmp_path / "rnn"))  # fmt: skip
    assert rnn.returncode == 1 and "RNNSeq2Seq" in rnn.stderr
    with pytest.raises(Seq2SeqError, match="pre-norm"):
        export_huggingface(load_trained(trained_transformer), tmp_path / "x")
