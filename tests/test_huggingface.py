"""transformers' MarianMT models opened as seq2seq models, and seq2seq's post-norm
Transformers written as MarianMT models, each proven by equal outputs: on a tiny MarianMT
model the tests build and train with transformers itself (a SentencePiece vocabulary of
the demo corpus, a few hundred steps, so that its outputs end), and on a tiny Transformer
of ours. Offline: everything is under the tests' temporary folders."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from tiny_run import tiny_config, write_config

import seq2seq
from seq2seq.commands.main import main
from seq2seq.common.errors import Seq2SeqError, UsageError
from seq2seq.inference.checkpoint import build_model, load_trained
from seq2seq.inference.export import export_ctranslate2
from seq2seq.inference.huggingface import export_huggingface, load_huggingface
from seq2seq.inference.opening import open_trained
from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.masking import sequence_mask
from seq2seq.training.init_from import model_block, starting_weights
from seq2seq.training.loss import label_smoothed_nll

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


def test_a_transformers_model_gives_word_alignments_as_a_checkpoint_does(marian, run_here):
    """translate --hf --alignment (with the extraction options) writes the links the Python
    API reads from the MarianMT model's cross-attention; align reads forced decoding's."""
    lines = SOURCES[:2]
    chosen = seq2seq.Extraction(layer=1, head=0, shift=True, method="mutual-argmax")
    options = ["--alignment-layer", "1", "--alignment-head", "0", "--alignment-shift",
               "--alignment-method", "mutual-argmax"]  # fmt: skip
    done = run_here("translate", "--hf", str(marian), "--beam", "1", "--alignment", *options,
                    stdin="\n".join(lines) + "\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    model = seq2seq.load(marian)
    aligned = model.translate(lines, alignment=chosen, beam=1)
    assert done.stdout.splitlines() == [f"{a.text} ||| {a.pharaoh()}" for a in aligned]
    assert aligned != model.translate(lines, alignment=True, beam=1)  # another map read
    texts = [a.text for a in aligned]
    links = model.align(lines, texts)
    for source, text, found in zip(lines, texts, links, strict=True):
        assert found and found == model.attention(source, text).alignment
        assert all(i < len(source.split()) and j < len(text.split()) for i, j in found)


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


def test_our_reading_of_a_marian_tokenizer_encodes_and_decodes_as_transformers(marian, trained_run):
    """seq2seq reads a MarianMT tokenizer with SentencePiece alone (a checkpoint holds its
    files, not transformers' object): the ids and texts are transformers' own, special
    tokens and language codes written in the text included; it pickles for the workers."""
    vocab = load_huggingface(marian).vocab
    tokenizer = transformers.AutoTokenizer.from_pretrained(marian)
    corpus = trained_run["corpus"]
    sources = (corpus / "train.en").read_text(encoding="utf-8").splitlines()[:200]
    targets = (corpus / "train.de").read_text(encoding="utf-8").splitlines()[:200]
    sources += ["Héllo wörld ✓", "a</s>b <pad>c <unk>", ">>de<< forty-two", "", "  two  "]
    theirs = tokenizer(sources, add_special_tokens=False)["input_ids"]
    assert vocab.src.encode_batch(sources) == theirs
    theirs = tokenizer(text_target=targets, add_special_tokens=False)["input_ids"]
    assert vocab.tgt.encode_batch(targets) == theirs
    ended = [ids + [tokenizer.eos_token_id, tokenizer.pad_token_id] for ids in theirs]
    assert [vocab.tgt.decode(ids) for ids in ended] == tokenizer.batch_decode(
        ended, skip_special_tokens=True
    )
    assert pickle.loads(pickle.dumps(vocab.src)).encode_batch(sources) == vocab.src.encode_batch(
        sources
    )


def small_corpus(trained_run: dict, folder: Path, pairs: int = 16) -> Path:
    """The demo corpus cut to ``pairs`` training pairs (one batch) and 8 val and test pairs."""
    folder.mkdir(parents=True)
    for split, count in [("train", pairs), ("val", 8), ("test", 8)]:
        for lang in ("en", "de"):
            lines = (trained_run["corpus"] / f"{split}.{lang}").read_text(encoding="utf-8")
            (folder / f"{split}.{lang}").write_text("\n".join(lines.splitlines()[:count]) + "\n")
    return folder


def marian_batch(tokenizer, sources: list[str], targets: list[str]) -> dict:
    batch = tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    return batch


def test_a_batchs_training_loss_is_transformers_label_smoothed_loss(marian, trained_run):
    """The loss fit minimises (the task's, on the model fit starts from) equals the one
    transformers' Trainer minimises with the same label smoothing, on the same pairs."""
    from transformers.trainer_pt_utils import LabelSmoother

    opened = open_trained(str(marian))
    network = build_model({"model": {"network": model_block(opened)}}, opened.trained.vocab.spec)
    network.load_state_dict(starting_weights(opened))
    vocab, spec = opened.trained.vocab, opened.trained.vocab.spec
    corpus = trained_run["corpus"]
    sources = (corpus / "train.en").read_text(encoding="utf-8").splitlines()[:12]
    targets = (corpus / "train.de").read_text(encoding="utf-8").splitlines()[:12]
    tokenizer = transformers.AutoTokenizer.from_pretrained(marian)
    hf = transformers.MarianMTModel.from_pretrained(marian).eval()
    batch = marian_batch(tokenizer, sources, targets)
    with torch.no_grad():
        theirs = LabelSmoother(epsilon=0.1)(hf(**batch), batch["labels"])
    src = [vocab.src.encode(s) + [spec.eos_id] for s in sources]
    tgt = [vocab.tgt.encode(t) for t in targets]
    width = max(map(len, tgt)) + 1

    def padded(rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor([row + [spec.pad_id] * (width - len(row)) for row in rows])

    tgt_in = padded([[spec.bos_id, *t] for t in tgt])
    tgt_out = padded([[*t, spec.eos_id] for t in tgt])
    lengths = torch.tensor([len(t) + 1 for t in tgt])
    assert torch.equal(tgt_out.masked_fill(tgt_out == spec.pad_id, -100), batch["labels"])
    with torch.no_grad():
        logits, _ = network(batch["input_ids"], torch.tensor(list(map(len, src))), tgt_in)
        ours, _, tokens = label_smoothed_nll(logits, tgt_out, lengths, 0.1)
    assert abs(float(ours / tokens) - float(theirs)) < 1e-4


def test_fit_trains_a_marian_model_as_transformers_does_and_exports_it_back(
    marian, trained_run, tmp_path, run_here
):
    """``fit --init_from`` a MarianMT folder with the fine-tuning recipe: after a few AdamW
    steps on one batch (no dropout, the recipe's clipping), the weights are those
    transformers reaches with the same settings; the export is a MarianMT model with the
    tokenizer's own files whose greedy translations in transformers are seq2seq's."""
    corpus = small_corpus(trained_run, tmp_path / "corpus")
    root, steps, lr = tmp_path / "run", 3, 1e-3
    done = run_here("fit", "--config", str(REPO / "configs" / "finetune.yaml"),
                    "--init_from", str(marian), "--data.source", str(corpus),
                    "--data.cache_dir", str(tmp_path / "cache"),
                    "--trainer.default_root_dir", str(root), "--trainer.max_steps", str(steps),
                    "--trainer.val_check_interval", str(steps), "--trainer.precision", "32-true",
                    "--model.warmup_steps", "0", "--model.lr", str(lr))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"starting from {marian} (huggingface)" in done.stderr
    checkpoint = root / "checkpoints" / "last.ckpt"
    fine_tuned = load_trained(checkpoint)
    assert fine_tuned.vocab.to_state() == load_huggingface(marian).vocab.to_state()

    tokenizer = transformers.AutoTokenizer.from_pretrained(marian)
    hf = transformers.MarianMTModel.from_pretrained(marian).train()
    smoother = transformers.trainer_pt_utils.LabelSmoother(epsilon=0.1)
    optimizer = torch.optim.AdamW(hf.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    sources = (corpus / "train.en").read_text(encoding="utf-8").splitlines()
    targets = (corpus / "train.de").read_text(encoding="utf-8").splitlines()
    batch = marian_batch(tokenizer, sources, targets)
    for _ in range(steps):
        optimizer.zero_grad()
        smoother(hf(**batch), batch["labels"]).backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
        optimizer.step()
    exported = export_huggingface(fine_tuned, tmp_path / "hf")
    ours = transformers.MarianMTModel.from_pretrained(exported).state_dict()
    start = transformers.MarianMTModel.from_pretrained(marian).state_dict()
    # Adam divides each gradient by its own running size, so float rounding in a gradient
    # near zero moves its weight by up to lr: each tensor's update is compared as a whole
    # (a smoothing of 0.05 instead of 0.1 puts every tensor 12-100% apart; these agree
    # within 3.2%). A key projection's bias is left out: its gradient is zero but for
    # rounding (softmax does not change when one number is added to every key's score).
    for name, weight in hf.state_dict().items():
        if "embed_positions" in name or name == "final_logits_bias" or "k_proj.bias" in name:
            continue
        step = weight - start[name]
        assert step.abs().max() > 0, name  # it trained
        assert (ours[name] - weight).norm() <= 0.05 * step.norm(), name

    for name in ("source.spm", "target.spm", "vocab.json"):
        assert (exported / name).read_bytes() == (marian / name).read_bytes(), name
    with pytest.raises(Seq2SeqError, match="exports to transformers"):
        export_ctranslate2(fine_tuned, tmp_path / "ct2")
    reread = transformers.AutoTokenizer.from_pretrained(exported)
    model = transformers.MarianMTModel.from_pretrained(exported).eval()
    inputs = reread(SOURCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        greedy = model.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=40)
    assert seq2seq.load(checkpoint).translate(SOURCES, beam=1) == reread.batch_decode(
        greedy, skip_special_tokens=True
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--data.subword_nbest", "4"], "a MarianMT tokenizer has none to sample"),
        (["--data.lowercase", "true"], "data.lowercase is True here but False in the model"),
        (["--data.vocab_size", "8000"], "data.vocab_size is 8000 here but"),
    ],
)
def test_fit_refuses_what_contradicts_a_marian_models_tokenizer_in_one_line(
    marian, trained_run, tmp_path, run_here, option, message
):
    root = tmp_path / "run"
    done = run_here("fit", "--config", str(REPO / "configs" / "finetune.yaml"),
                    "--init_from", str(marian), "--data.source", str(trained_run["corpus"]),
                    "--trainer.default_root_dir", str(root), *option)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr
    assert not root.exists()


@pytest.fixture(scope="module")
def post_norm(trained_run: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`seq2seq fit` of a small post-norm Transformer on the demo corpus: its checkpoint
    (no validation: the tests need only the weights)."""
    root = tmp_path_factory.mktemp("post-norm")
    config = tiny_config(root, trained_run["corpus"])
    config["trainer"].update(max_epochs=3, limit_val_batches=0)
    config["model"]["network"] = {
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
