# The README's two commands: `make demo` and `make test`. Both install into .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SEQ2SEQ := $(BIN)/seq2seq
STAMP := $(VENV)/.installed
export HF_DATASETS_OFFLINE ?= 1
export HF_HUB_OFFLINE ?= 1

# Multi30k: linked from a local copy when there is one, else downloaded.
MULTI30K_LOCAL ?= ../shared/data/multi30k
MULTI30K_URL ?= https://github.com/multi30k/dataset/raw/master/data/task1
DEMO_DATA := data/numbers-en-de
DEMO_RUN := runs/demo
DEMO_CKPT := $(DEMO_RUN)/checkpoints/best.ckpt

.PHONY: install demo test lint multi30k clean-demo bench

install: $(STAMP)

# torch first, pinned to the CPU wheel; then the project, whose torch range admits it.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev,tensorboard]"
	touch $@

demo: $(STAMP)
	test -f $(DEMO_DATA)/train.en || $(SEQ2SEQ) corpus --out $(DEMO_DATA)
	rm -rf $(DEMO_RUN)
	$(SEQ2SEQ) fit --config configs/demo.yaml
	$(SEQ2SEQ) evaluate --ckpt $(DEMO_CKPT) --src $(DEMO_DATA)/test.en --ref $(DEMO_DATA)/test.de --beam 5
	@echo "--- five test sentences and their translations:"
	@paste <(head -n 5 $(DEMO_DATA)/test.en) <(head -n 5 $(DEMO_DATA)/test.en | $(SEQ2SEQ) translate --ckpt $(DEMO_CKPT))
	$(SEQ2SEQ) attention --ckpt $(DEMO_CKPT) --src $(DEMO_DATA)/test.en --limit 3 --out $(DEMO_RUN)/attention

test: $(STAMP)
	$(BIN)/pytest

# Attention benchmarks: one decoder step against source length (seconds), then every
# configs/multi30k/en-de variant trained for BENCH_MINUTES each (hours; resumable).
BENCH_MINUTES ?= 20
bench: $(STAMP) multi30k
	$(BIN)/python scripts/bench_attention_step.py --out runs/bench/attention-step
	$(BIN)/python scripts/bench_attention_variants.py --minutes $(BENCH_MINUTES) --data data/multi30k --out runs/bench/attention-variants

lint: $(STAMP)
	$(BIN)/ruff check seq2seq tests scripts
	$(BIN)/ruff format --check seq2seq tests scripts

multi30k:
	@mkdir -p data
	@if [ -e data/multi30k ]; then echo "data/multi30k is already there"; \
	elif [ -d "$(MULTI30K_LOCAL)" ]; then ln -s "$$(cd "$(MULTI30K_LOCAL)" && pwd)" data/multi30k && echo "linked $(MULTI30K_LOCAL)"; \
	else mkdir -p data/multi30k.part && \
	  for f in train val test_2016_flickr; do for l in en de fr cs; do \
	    curl -fsSL -o data/multi30k.part/$$f.$$l.gz "$(MULTI30K_URL)/raw/$$f.$$l.gz" || exit 1; done; done && \
	  mv data/multi30k.part data/multi30k && echo "downloaded Multi30k into data/multi30k"; fi
