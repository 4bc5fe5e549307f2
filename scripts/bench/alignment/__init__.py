"""The parts of ``scripts.bench.bench_align``, the word-alignment benchmark on human gold."""
