"""A transformers MarianMT model trained further by ``seq2seq fit --init_from``, beside the
same training in transformers: how equal the two are.

On the first ``--pairs`` training pairs of ``--data`` (one batch), with the fine-tuning
recipe (``--steps`` AdamW updates at ``--lr``, no warm-up, float32, the recipe's gradient
clipping, label smoothing 0.1, no dropout):

- before training, seq2seq's loss of the batch against transformers' Trainer loss
  (``LabelSmoother``) on the same pairs;
- after the updates, each weight tensor's distance from transformers' as a share of
  transformers' update (largest and median over the tensors; a key projection's bias is
  left out, its gradient being zero but for rounding), and the largest elementwise
  difference;
- the fine-tuned model exported back (``export --to huggingface``): its greedy translations
  in transformers against seq2seq's, on ``--data``'s test split, both searches allowed the
  same 256 pieces (a model trained on 16 pairs repeats itself, and seq2seq's default limit,
  1.5 times the source plus 10, would cut it earlier).

Writes ``--out`` (JSON) and prints a summary.

    python -m scripts.bench.bench_marian_finetune --hf DIR --data CORPUS --out marian.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch

import seq2seq
from scripts.bench.benchkit import cpu_model, save_json
from seq2seq.inference.checkpoint import build_model, load_trained
from seq2seq.inference.huggingface import export_huggingface, import_transformers
from seq2seq.inference.opening import open_trained
from seq2seq.text.lines import read_lines
from seq2seq.training.init_from import model_block, starting_weights
from seq2seq.training.loss import label_smoothed_nll

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "finetune.yaml"
SMOOTHING, CLIP, BETAS = 0.1, 1.0, (0.9, 0.98)  # the task's defaults and the recipe's clip
MAX_NEW = 256  # pieces either search may write, EOS included


def one_batch(data: Path, folder: Path, pairs: int) -> Path:
    """``data`` cut to ``pairs`` training pairs, with its val and test splits."""
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val", "test"):
        for lang in ("en", "de"):
            lines = read_lines(data / f"{split}.{lang}")
            kept = lines[:pairs] if split == "train" else lines
            (folder / f"{split}.{lang}").write_text("".join(f"{line}\n" for line in kept))
    return folder


def labelled(tokenizer: Any, sources: list[str], targets: list[str]) -> dict:
    batch = tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    return batch


def loss_difference(hf_folder: str, sources: list[str], targets: list[str]) -> float:
    """|seq2seq's loss per target token - transformers' Trainer loss| of one batch."""
    transformers = import_transformers()
    opened = open_trained(hf_folder)
    vocab, spec = opened.trained.vocab, opened.trained.vocab.spec
    network = build_model({"model": {"network": model_block(opened)}}, spec).eval()
    network.load_state_dict(starting_weights(opened))
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_folder)
    hf = transformers.MarianMTModel.from_pretrained(hf_folder).eval()
    batch = labelled(tokenizer, sources, targets)
    smoother = transformers.trainer_pt_utils.LabelSmoother(epsilon=SMOOTHING)
    tgt = vocab.tgt.encode_batch(targets)
    width = max(map(len, tgt)) + 1
    tgt_in = torch.tensor([[spec.bos_id, *t] + [spec.pad_id] * (width - len(t) - 1) for t in tgt])
    tgt_out = torch.tensor([[*t, spec.eos_id] + [spec.pad_id] * (width - len(t) - 1) for t in tgt])
    lengths = torch.tensor([len(t) + 1 for t in tgt])
    with torch.no_grad():
        theirs = float(smoother(hf(**batch), batch["labels"]))
        logits, _ = network(batch["input_ids"], batch["attention_mask"].sum(1), tgt_in)
        loss, _, tokens = label_smoothed_nll(logits, tgt_out, lengths, SMOOTHING)
    return abs(float(loss / tokens) - theirs)


def trained_in_transformers(hf_folder: str, batch: dict, steps: int, lr: float) -> Any:
    """The MarianMT model after ``steps`` AdamW updates on ``batch``, as fit makes them."""
    transformers = import_transformers()
    hf = transformers.MarianMTModel.from_pretrained(hf_folder).train()
    smoother = transformers.trainer_pt_utils.LabelSmoother(epsilon=SMOOTHING)
    optimizer = torch.optim.AdamW(hf.parameters(), lr=lr, betas=BETAS, weight_decay=0.0)
    for _ in range(steps):
        optimizer.zero_grad()
        smoother(hf(**batch), batch["labels"]).backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), CLIP)
        optimizer.step()
    return hf.eval()


def weight_gaps(start: dict, theirs: dict, ours: dict) -> dict[str, float]:
    """Each tensor's |ours - theirs| / |theirs - start| (norms), and the largest element gap."""
    shares, largest = {}, 0.0
    for name, weight in theirs.items():
        if "embed_positions" in name or name == "final_logits_bias" or "k_proj.bias" in name:
            continue
        shares[name] = float((ours[name] - weight).norm() / (weight - start[name]).norm())
        largest = max(largest, float((ours[name] - weight).abs().max()))
    worst = max(shares, key=shares.__getitem__)
    return {"largest_share": shares[worst], "largest_share_tensor": worst,
            "median_share": statistics.median(shares.values()),
            "largest_element": largest}  # fmt: skip


def greedy(folder: Path, sources: list[str]) -> list[str]:
    transformers = import_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.MarianMTModel.from_pretrained(folder).eval()
    out = []
    for i in range(0, len(sources), 64):
        batch = tokenizer(sources[i : i + 64], padding=True, return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW)
        out += tokenizer.batch_decode(ids, skip_special_tokens=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hf", required=True, help="a MarianMT folder (save_pretrained's)")
    parser.add_argument("--data", type=Path, required=True, help="a corpus folder (numbers)")
    parser.add_argument("--pairs", type=int, default=16, help="training pairs: one batch")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/marian-finetune.json"))
    args = parser.parse_args()
    transformers = import_transformers()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = one_batch(args.data, Path(scratch) / "corpus", args.pairs)
        sources, targets = read_lines(corpus / "train.en"), read_lines(corpus / "train.de")
        root = Path(scratch) / "run"
        options = ["--data.source", str(corpus), "--data.cache_dir", f"{scratch}/cache",
                   "--trainer.default_root_dir", str(root), "--trainer.max_steps",
                   str(args.steps), "--trainer.val_check_interval", str(args.steps),
                   "--trainer.precision", "32-true", "--model.warmup_steps", "0",
                   "--model.lr", str(args.lr)]  # fmt: skip
        seq2seq.fit(RECIPE, init_from=args.hf, options=options)
        fine_tuned = load_trained(root / "checkpoints" / "last.ckpt")
        exported = export_huggingface(fine_tuned, Path(scratch) / "exported")
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.hf)
        theirs = trained_in_transformers(args.hf, labelled(tokenizer, sources, targets),
                                         args.steps, args.lr)  # fmt: skip
        start = transformers.MarianMTModel.from_pretrained(args.hf).state_dict()
        ours = transformers.MarianMTModel.from_pretrained(exported).state_dict()
        gaps = weight_gaps(start, theirs.state_dict(), ours)
        test = read_lines(corpus / "test.en")
        limit = {"max_len_ratio": 0.0, "max_len_offset": MAX_NEW - 1}  # transformers' limit
        ours_text = seq2seq.load(root / "checkpoints" / "last.ckpt").translate(
            test, beam=1, **limit
        )
        equal = sum(a == b for a, b in zip(greedy(exported, test), ours_text, strict=True))
    record = {
        "cpu": cpu_model(), "hf": args.hf, "pairs": args.pairs, "steps": args.steps,
        "lr": args.lr, "loss_difference": loss_difference(args.hf, sources, targets),
        "weights": gaps, "greedy_equal": equal, "greedy_of": len(test),
    }  # fmt: skip
    save_json(args.out, record)
    print(f"loss difference before training: {record['loss_difference']:.2e}")
    print(f"after {args.steps} updates: each tensor within {gaps['largest_share']:.1%} of "
          f"transformers' update (median {gaps['median_share']:.2%}); largest element gap "
          f"{gaps['largest_element']:.1e}")  # fmt: skip
    print(f"exported, greedy in transformers equal to seq2seq: {equal} of {len(test)}")


if __name__ == "__main__":
    main()
