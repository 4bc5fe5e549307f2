# The README's two commands: `make demo` and `make test`. Both install into .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SEQ2SEQ := $(BIN)/seq2seq
STAMP := $(VENV)/.installed
PROJECT_WITH_EXTRAS := -e ".[dev,tensorboard,serve,export,hf]"
export HF_DATASETS_OFFLINE ?= 1
export HF_HUB_OFFLINE ?= 1
# Python keeps each module it compiles in __pycache__ for the next process. Some machines turn
# that off (PYTHONDONTWRITEBYTECODE); the tests start dozens of processes, each of which would
# then compile torch, Lightning and the toolkit again.
unexport PYTHONDONTWRITEBYTECODE

# Multi30k: linked from a local copy when there is one, else downloaded.
MULTI30K_LOCAL ?= ../shared/data/multi30k
MULTI30K_URL ?= https://github.com/multi30k/dataset/raw/master/data/task1
# Word-alignment gold (Hansards En-Fr, Europarl De-En): linked from a local copy (on the
# project's machines, beside the checkout); elsewhere fetch the sets its README names.
ALIGNMENT_LOCAL ?= ../shared/data/alignment
# fast_align is not on PyPI: `make aligners` builds it from its sources (a git URL or folder)
FAST_ALIGN_REPO ?= https://github.com/clab/fast_align
DEMO_DATA := data/numbers-en-de
DEMO_RUN := runs/demo
DEMO_CKPT := $(DEMO_RUN)/checkpoints/best.ckpt

.PHONY: install demo test test-fast lint multi30k clean-demo bench bench-step bench-speed bench-scale bench-joey \
	bench-joey-speed bench-quality bench-joey-decoding bench-corpus bench-cold-start bench-engines \
	bench-serve bench-decoder-shapes profile-search profile-engines gpu-wheels gpu-check student \
	bench-models bench-align aligners alignment-gold

install: $(STAMP)

# torch first, pinned to the CPU wheel; then the project, whose torch range admits it, with
# uv (the same packages as pip, in a fraction of the time: parallel downloads); pip where uv
# cannot reach an index. Nothing is compiled ahead: a run imports a fraction of what is
# installed, each module compiled at its first import and kept (see above).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-compile torch==2.13.0 uv
	$(BIN)/uv pip install --python $(BIN)/python --quiet $(PROJECT_WITH_EXTRAS) \
		|| $(BIN)/pip install --quiet --disable-pip-version-check --no-compile $(PROJECT_WITH_EXTRAS)
	touch $@

demo: $(STAMP)
	test -f $(DEMO_DATA)/train.en || $(SEQ2SEQ) corpus --out $(DEMO_DATA)
	rm -rf $(DEMO_RUN)
	$(SEQ2SEQ) fit --config configs/demo.yaml
	$(SEQ2SEQ) evaluate --ckpt $(DEMO_CKPT) --src $(DEMO_DATA)/test.en --ref $(DEMO_DATA)/test.de --beam 5
	@echo "--- five test sentences and their translations:"
	@paste <(head -n 5 $(DEMO_DATA)/test.en) <(head -n 5 $(DEMO_DATA)/test.en | $(SEQ2SEQ) translate --ckpt $(DEMO_CKPT))
	$(SEQ2SEQ) attention --ckpt $(DEMO_CKPT) --src $(DEMO_DATA)/test.en --limit 3 --out $(DEMO_RUN)/attention

# the lint first (style, layers, types), then every core a pytest-xdist worker (one torch
# thread each: tests/conftest.py), each taking whole files: a module's fixtures (trained
# models, corpora) are then built once, not once per worker
test: lint
	$(BIN)/pytest -n auto --dist loadfile

# the unit tier: everything but fits, several processes and the browser (about a minute)
test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow"

# Benchmarks (docs: BENCHMARKS.md). Each part runs on its own (`make bench-speed`, ...) and
# is resumable: a finished measurement is a file and is not redone. A full run takes hours;
# `make bench QUICK=1` checks every part in minutes, into runs/bench-quick. bench-corpus
# (corpora of 100k to 5M pairs: hours, and about 5 GB of disk) is not part of `make bench`.
BENCH_MINUTES ?= 60
ifeq ($(QUICK),1)
BENCH := runs/bench-quick
STEP_ARGS := --lengths 50 1000 --seconds 0.05 --repeats 1
SPEED_ARGS := --steps 3 --rounds 1 --warmup 1
SCALE_ARGS := --budgets 500 2000 --steps 2 --lengths 25 100
JOEY_ARGS := --train-minutes 1.2 --log-every 5
JOEY_SPEED_ARGS := --models transformer --minutes 0.5 --rounds 1 --log-every 10 --joey-log-every 3
JOEY_DECODING_ARGS := --rounds 1 --test-lines 20
QUALITY_PAIRS := en-de
QUALITY_ARGS := --smoke --test-lines 20 --configs bahdanau transformer
CORPUS_ARGS := --sizes 20000 60000 --steps 12
else
BENCH := runs/bench
STEP_ARGS :=
SPEED_ARGS := --steps 20 --rounds 4
SCALE_ARGS :=
JOEY_ARGS := --train-minutes $(BENCH_MINUTES)
JOEY_SPEED_ARGS := --minutes 5 --rounds 2
JOEY_DECODING_ARGS := --rounds 2
QUALITY_PAIRS := en-de en-fr
QUALITY_ARGS := --minutes $(BENCH_MINUTES)
CORPUS_ARGS :=
endif
RUN_PY := OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/python

bench: bench-step bench-speed bench-scale bench-joey-speed bench-joey bench-quality bench-joey-decoding
	$(RUN_PY) -m scripts.bench.bench_summary $(BENCH)

bench-step: $(BENCH)/attention-step/step_times.json
$(BENCH)/attention-step/step_times.json: | $(STAMP)
	$(RUN_PY) -m scripts.bench.bench_attention_step --out $(@D) $(STEP_ARGS)

bench-speed: $(BENCH)/transformer-speed.json
$(BENCH)/transformer-speed.json: | $(STAMP) multi30k
	$(RUN_PY) -m scripts.bench.bench_transformer_speed --data data/multi30k --out $@ $(SPEED_ARGS)

bench-scale: $(STAMP) multi30k
	$(RUN_PY) -m scripts.bench.bench_scale --data data/multi30k --out $(BENCH)/scale $(SCALE_ARGS)

# Joey NMT and seq2seq training, whole runs alternating A B A B
bench-joey-speed: $(STAMP) multi30k
	$(RUN_PY) -m scripts.peers.bench_joey_speed --out $(BENCH)/joey-speed.json $(JOEY_SPEED_ARGS)

# Joey NMT's Transformer trained as long as ours, for bench-joey-decoding (`--decode` naming
# no search: training only, since bench-joey-decoding decodes both models in turn)
bench-joey: $(STAMP) multi30k
	$(RUN_PY) -m scripts.peers.peer_joey --model transformer --decode --out $(BENCH)/joey.json $(JOEY_ARGS)

bench-quality: $(STAMP) multi30k
	for pair in $(QUALITY_PAIRS); do \
	  $(RUN_PY) -m scripts.bench.bench_quality --pair $$pair --out $(BENCH)/quality-$$pair $(QUALITY_ARGS) || exit 1; done

# both Transformers decode test_2016, alternating A B A B (after bench-joey and bench-quality)
bench-joey-decoding: $(STAMP) multi30k
	$(RUN_PY) -m scripts.peers.bench_joey_decoding --out $(BENCH)/joey-decoding.json \
	  --ours-result $(BENCH)/quality-en-de/transformer/result.json $(JOEY_DECODING_ARGS)

# The released models' cards: each model's test_2016 scores, beam-5 speed and load time,
# from the shipped files, into models/NAME/results.json and its README.md; not in `bench`.
BENCH_MODELS_ARGS ?=
bench-models: $(STAMP) multi30k
	$(RUN_PY) -m scripts.bench.bench_models --data data/multi30k --work $(BENCH)/models $(BENCH_MODELS_ARGS)

# Word alignments on human gold: the released models' attention beside eflomal and
# fast_align trained on the same data (docs/benchmarks/alignment.md); not in `bench`
bench-align: $(STAMP) multi30k alignment-gold aligners
	$(RUN_PY) -m scripts.bench.bench_align --gold data/alignment --data data/multi30k \
	  --work $(BENCH)/align --doc docs/benchmarks/alignment.md

# eflomal (pip, compiled with the machine's C compiler) and fast_align (built with cmake)
# into the venv, for bench-align only: make test needs neither
aligners: $(STAMP)
	$(BIN)/uv pip install --python $(BIN)/python --quiet "eflomal>=2" \
	  || $(BIN)/pip install --quiet --disable-pip-version-check "eflomal>=2"
	@if [ ! -x $(BIN)/fast_align ]; then rm -rf build/fast_align && \
	  git clone --quiet --depth 1 $(FAST_ALIGN_REPO) build/fast_align && \
	  cmake -S build/fast_align -B build/fast_align/build -DCMAKE_BUILD_TYPE=Release > /dev/null && \
	  cmake --build build/fast_align/build --target fast_align > /dev/null && \
	  cp build/fast_align/build/fast_align $(BIN)/fast_align && echo "built $(BIN)/fast_align"; fi

alignment-gold:
	@mkdir -p data
	@if [ -e data/alignment ]; then echo "data/alignment is already there"; \
	elif [ -d "$(ALIGNMENT_LOCAL)" ]; then ln -s "$$(cd "$(ALIGNMENT_LOCAL)" && pwd)" data/alignment && echo "linked $(ALIGNMENT_LOCAL)"; \
	else echo "no alignment gold: put the sets of docs/benchmarks/alignment.md under data/alignment" >&2; exit 1; fi

# Start-up time, peak RSS of every process, cache size and tokens/s against corpus size
# (Multi30k pairs joined two by two); not in `bench`: it takes hours, run it on its own
bench-corpus: $(STAMP) multi30k
	$(RUN_PY) -m scripts.bench.bench_corpus --out $(BENCH)/corpus $(CORPUS_ARGS)

# `seq2seq translate --ckpt C` on one line against `python -c "import torch"`, alternating;
# C is the demo's checkpoint unless COLD_START_CKPT says otherwise (`make demo` first), and
# COLD_START_BEFORE=DIR also times the code of another checkout (e.g. `git worktree add
# --detach DIR c5fc07d`). Seconds, not part of `make bench`.
COLD_START_CKPT ?= $(DEMO_CKPT)
COLD_START_ROUNDS ?= 7
bench-cold-start: $(STAMP)
	$(RUN_PY) -m scripts.bench.bench_cold_start --ckpt $(COLD_START_CKPT) --rounds $(COLD_START_ROUNDS) \
	  $(if $(COLD_START_BEFORE),--before $(COLD_START_BEFORE)) --out $(BENCH)/cold-start.json

# One Transformer decoding test_2016 with seq2seq (fp32, bf16) and its CTranslate2 export
# (float32, int8; one and two workers), beam 5 and greedy, runs alternating; not in
# `bench`. ENGINES_CKPT: by default the checkpoint bench-quality's Transformer evaluated.
ENGINES_CKPT ?= $(shell $(BIN)/python -c "import json; print(json.load(open('$(BENCH)/quality-en-de/transformer/result.json'))['evaluated'])" 2>/dev/null)
bench-engines: $(STAMP) multi30k
	@test -n "$(ENGINES_CKPT)" || { echo "give ENGINES_CKPT=... or run make bench-quality first"; exit 1; }
	$(RUN_PY) -m scripts.bench.bench_engines --ckpt $(ENGINES_CKPT) --out $(BENCH)/engines \
	  --src data/multi30k/test_2016_flickr.en.gz --ref data/multi30k/test_2016_flickr.de.gz \
	  --rounds 4

# Both engines under Linux perf (native code included): what the gap between them is made
# of; not in `bench`.
profile-engines: $(STAMP) multi30k
	@test -n "$(ENGINES_CKPT)" || { echo "give ENGINES_CKPT=... or run make bench-quality first"; exit 1; }
	$(RUN_PY) -m scripts.bench.profile_engines --ckpt $(ENGINES_CKPT) --out $(BENCH)/engines \
	  --src data/multi30k/test_2016_flickr.en.gz --ref data/multi30k/test_2016_flickr.de.gz \
	  --json $(BENCH)/profile-engines.json

# Where beam search spends its time on the same checkpoint (the first 500 sentences of
# test_2016, profiled by operator); not in `bench`.
profile-search: $(STAMP) multi30k
	@test -n "$(ENGINES_CKPT)" || { echo "give ENGINES_CKPT=... or run make bench-quality first"; exit 1; }
	$(RUN_PY) -m scripts.bench.profile_search --ckpt $(ENGINES_CKPT) \
	  --src data/multi30k/test_2016_flickr.en.gz --json $(BENCH)/profile-search.json

# Beam-5 cost of Transformer shapes (the recipe's, the anchor's, shallow decoders) at the
# same output lengths, untrained: which student shape could decode 2x the recipe; not in `bench`.
bench-decoder-shapes: $(STAMP) multi30k
	$(RUN_PY) -m scripts.bench.bench_decoder_shapes --src data/multi30k/test_2016_flickr.en.gz \
	  --out $(BENCH)/decoder-shapes.json

# `seq2seq serve --ckpt SERVE_CKPT` on 127.0.0.1 under 1, 8 and 32 clients sending single
# test_2016 sentences, SERVE_SECONDS each: latency, sentences/s, peak RSS, lost requests,
# sentences per batch. Not in `bench`; SERVE_ARGS="--batch-wait-ms 10" passes server options.
SERVE_SECONDS ?= 20
bench-serve: $(STAMP) multi30k
	@test -n "$(SERVE_CKPT)" || { echo "give SERVE_CKPT=... (a checkpoint to serve)"; exit 1; }
	$(RUN_PY) -m scripts.bench.bench_serve --ckpt $(SERVE_CKPT) --src data/multi30k/test_2016_flickr.en.gz \
	  --seconds $(SERVE_SECONDS) --serve-args "$(SERVE_ARGS)" --out $(BENCH)/serve.json

# The GPU check (scripts/gpu/gpu_check.py; not part of `make bench`). Here, beforehand:
# `make gpu-wheels` downloads pure-Python wheels of the packages the lent GPU machine lacks
# (the versions installed here) into GPU_WHEELS, about 14 MB. There, with GPU_WHEELS carried:
# `make gpu-check` installs them and seq2seq without dependencies into that machine's own
# Python and PyTorch, and runs the check (at most about 8 minutes).
GPU_WHEELS := .gpu-wheels
GPU_PACKAGES := datasets dill multiprocess jsonargparse docstring_parser typeshed_client \
	sacremoses num2words babel
GPU_SITE := /tmp/gpu-site
GPU_CHECK_OUT ?= runs/gpu-check

gpu-wheels: $(STAMP)
	rm -rf $(GPU_WHEELS)
	$(BIN)/pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
	  --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 -d $(GPU_WHEELS) \
	  $$($(BIN)/python -c "import importlib.metadata as m; \
	    print(*(f'{p}=={m.version(p)}' for p in '$(GPU_PACKAGES)'.split()))")
	du -ch $(GPU_WHEELS)/*.whl | tail -n 1

gpu-check:
	python3 -m pip install --quiet --no-index --no-deps --no-compile --target $(GPU_SITE) \
	  $(GPU_WHEELS)/*.whl
	python3 -m pip install --quiet --no-index --no-deps --no-build-isolation -e . \
	  || echo "gpu-check: seq2seq is imported from this folder (PYTHONPATH)"
	mkdir -p $(GPU_CHECK_OUT)
	set -o pipefail; PYTHONPATH=$(GPU_SITE):$(CURDIR) PYTHONUNBUFFERED=1 \
	  python3 -m scripts.gpu.gpu_check --out $(GPU_CHECK_OUT) 2>&1 | tee $(GPU_CHECK_OUT)/gpu_check.log

# Issue 40's final recipe end to end, each step skipped once done (its records in
# runs/selection; about 7 hours on 2 CPU cores with the anchor as the teacher): the teacher's
# recipe trained and chosen on val; its translations of the training sources beside the
# original pairs; a student of the anchor's size trained on them and chosen on val; both
# scored once on each test set the corpus has (`make multi30k` fetches test_2016, test_2017
# and mscoco), their lowercase translations recased by the word forms of the cased training
# targets (CASING), so that sacreBLEU scores cased text beside the literature's lowercased
# BLEU. SEEDS: the seeds of the teacher's recipe and of the student; TEACHER: RECIPE:SEED,
# the recipe `anchor` (the replica) or `lowercase` (the 7.6M recipe, about an hour), or the
# name of an ensemble made and val-scored beforehand (`select_on_val.py ensemble`), which
# trains nothing here; STUDENT: `student` (the anchor's recipe) or student-NAME, the recipe
# transformer-student-NAME of configs/multi30k/recipes.yaml, such as `student-6-2` (six
# encoder and two decoder layers, an 8k vocabulary: the shape that decodes faster),
# `student-short` (the anchor's shape in 3600 updates), `student-6-2-short` (both) or
# `student-6-2-bf16` (the 6+2 shape in 5400 updates under bf16 autocast, the same time on a
# CPU with AVX512-BF16).
SEEDS ?= 1
TEACHER ?= anchor:1
STUDENT ?= student
# the recipes (configs/multi30k/recipes.yaml) of the teacher and of the student
RECIPES := configs/multi30k/recipes.yaml
STUDENT_RECIPE := transformer-$(if $(filter student,$(STUDENT)),anchor,$(filter student-%,$(STUDENT)))
# checked before anything is made: a student without a recipe would fail after the teacher
ifneq ($(filter student,$(MAKECMDGOALS)),)
ifeq ($(shell grep -q "^  $(STUDENT_RECIPE):" $(RECIPES) && echo found),)
$(error STUDENT=$(STUDENT): it is student, or student-NAME with a recipe transformer-student-NAME in $(RECIPES))
endif
endif
TEACHER_PARTS := $(subst :, ,$(TEACHER))
TEACHER_RECIPE := $(filter anchor lowercase,$(firstword $(TEACHER_PARTS)))
# the teacher recipe's seeds to train: SEEDS, and the teacher's own (TEACHER=anchor:2, SEEDS=1)
TEACHER_SEEDS := $(sort $(SEEDS) $(word 2,$(TEACHER_PARTS)))
# the teacher's corpus: anchor:1's is multi30k-distill-anchor-orig, anchor:2's
# multi30k-distill-anchor2-orig, an ensemble NAME's multi30k-distill-NAME-orig
STUDENT_DATA := data/multi30k-distill-$(subst :,,$(patsubst %:1,%,$(TEACHER)))-orig
SELECT := $(RUN_PY) -m scripts.select_on_val
TEST_SPLITS := test_2016_flickr test_2017_flickr test_2017_mscoco
CASING := data/casing/multi30k.de.json
$(CASING): | $(STAMP) multi30k
	mkdir -p $(dir $@)
	$(SEQ2SEQ) recase --learn data/multi30k/train.de.gz --table $@
student: $(STAMP) multi30k $(CASING)
	$(if $(TEACHER_RECIPE),$(SELECT) train --name $(TEACHER_RECIPE) --seeds $(TEACHER_SEEDS) \
	  --recipe transformer-$(TEACHER_RECIPE))
	$(SELECT) distill --teacher $(TEACHER) --corpus $(STUDENT_DATA) --keep-originals
	$(SELECT) --data $(STUDENT_DATA) train --name $(STUDENT) --seeds $(SEEDS) \
	  --recipe $(STUDENT_RECIPE)
	for split in $(TEST_SPLITS); do test -f data/multi30k/$$split.en.gz || continue; \
	  for name in $(TEACHER_RECIPE) $(STUDENT); do $(SELECT) final --name $$name \
	    --test-split $$split --skip-scored --recase $(CASING) || exit 1; done; done

lint: $(STAMP)
	$(BIN)/ruff check seq2seq tests scripts
	$(BIN)/ruff format --check seq2seq tests scripts
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

multi30k:
	@mkdir -p data
	@if [ -e data/multi30k ]; then echo "data/multi30k is already there"; \
	elif [ -d "$(MULTI30K_LOCAL)" ]; then ln -s "$$(cd "$(MULTI30K_LOCAL)" && pwd)" data/multi30k && echo "linked $(MULTI30K_LOCAL)"; \
	else mkdir -p data/multi30k.part && \
	  for f in train val test_2016_flickr; do for l in en de fr cs; do \
	    curl -fsSL -o data/multi30k.part/$$f.$$l.gz "$(MULTI30K_URL)/raw/$$f.$$l.gz" || exit 1; done; done && \
	  for f in test_2017_flickr test_2017_mscoco; do for l in en de fr; do \
	    curl -fsSL -o data/multi30k.part/$$f.$$l.gz "$(MULTI30K_URL)/raw/$$f.$$l.gz" || exit 1; done; done && \
	  mv data/multi30k.part data/multi30k && echo "downloaded Multi30k into data/multi30k"; fi
