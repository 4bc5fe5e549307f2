#!/usr/bin/env bash
# Training target tokens/s against corpus size, measured longer than bench_corpus.py does:
# the reference Transformer config for 300 steps (tokens/s over the 280 after the 20th),
# validation off, on the caches `make bench-corpus` left in runs/bench/corpus, each size in
# turn, two rounds. Run alone on the machine, after `make bench-corpus`.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=runs/bench/corpus-speed
mkdir -p "$out"
for round in 1 2; do
  for size in multi30k 100000 1000000 5000000; do
    if [ "$size" = multi30k ]; then src=data/multi30k; else src=runs/bench/corpus/data/pairs-$size; fi
    root=$(mktemp -d)
    BENCH_CORPUS_PROBE=$out/$size-$round.json BENCH_CORPUS_WARMUP=20 PYTHONPATH=. \
      OMP_NUM_THREADS=2 .venv/bin/seq2seq fit --config configs/multi30k/base/transformer.yaml \
      --config configs/multi30k/en-de/transformer.yaml \
      --data.source "$src" --data.cache_dir "runs/bench/corpus/cache/$size" \
      --trainer.default_root_dir "$root" --trainer.max_steps 300 --trainer.max_time null \
      --trainer.enable_progress_bar false --model.schedule constant \
      --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0 \
      --trainer.callbacks+=scripts.bench.bench_corpus.FirstStepProbe > "$out/$size-$round.log" 2>&1
    rm -rf "$root"
    .venv/bin/python -c "import json; r = json.load(open('$out/$size-$round.json')); \
print('$size', 'round $round:', round(r['target_tokens_per_s']), 'target tokens/s')"
  done
done
