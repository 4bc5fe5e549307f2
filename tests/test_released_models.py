"""The models the repository releases (``models/``), as a fresh clone has them: each loads
by name with its sha256 checked, translates the check sentences (written for the release,
no Multi30k text) as the float32 checkpoint it came from did, and its card shows the
figures its ``results.json`` holds; the files stay within the sizes git can carry."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

import seq2seq
from seq2seq.inference.released import (
    CARD,
    MANIFEST,
    MODELS_ENV,
    RESULTS,
    card_figures,
    released_names,
)

MODELS = Path(__file__).resolve().parents[1] / "models"
NAMES = released_names(MODELS)
MAX_FILE_MB, MAX_TOTAL_MB = 16, 40  # what git is asked to carry (MiB)


@pytest.fixture(autouse=True)
def the_repositorys_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODELS_ENV, str(MODELS))


def test_every_model_the_readme_names_is_released():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"--model ([a-z0-9-]+)", text))
    assert named and named <= set(NAMES), sorted(named - set(NAMES))


def test_a_released_model_reads_its_links_as_its_manifest_records(run_here):
    """multi30k-en-fr's manifest records the extraction the Hansards trial set chose (layer
    0, head 0, Shift-Att, mutual argmax): alignment=True, translate --alignment and the
    server read links that way; the same model opened from its checkpoint reads the mean,
    as any does."""
    from seq2seq.inspection.extraction import MEAN_ARGMAX, Extraction
    from seq2seq.serve.engine import Engine, SearchKey, Sentence

    lines = ["A black dog jumps into the lake.", "Two men are playing guitars."]
    model = seq2seq.load("multi30k-en-fr")
    chosen = Extraction(layer=0, head=0, shift=True, method="mutual-argmax")
    assert model.extraction == chosen
    expected = model.translate(lines, alignment=chosen)
    assert model.translate(lines, alignment=True) == expected
    assert expected != model.translate(lines, alignment=MEAN_ARGMAX)  # the record matters
    done = run_here("translate", "--model", "multi30k-en-fr", "--alignment",
                    stdin="\n".join(lines) + "\n")  # fmt: skip
    assert done.stdout.splitlines() == [f"{a.text} ||| {a.pharaoh()}" for a in expected]
    answers = Engine(model).run(SearchKey(model.search.beam, 1),
                                [Sentence(line, alignment=True) for line in lines])  # fmt: skip
    assert [a["translations"][0]["alignment"] for a in answers] == [a.pharaoh() for a in expected]
    checkpoint = seq2seq.load(str(MODELS / "multi30k-en-fr" / "model.ckpt"))
    assert checkpoint.extraction == MEAN_ARGMAX


@pytest.mark.parametrize("name", NAMES)
def test_a_released_model_translates_as_its_float32_checkpoint_did(name: str):
    manifest = json.loads((MODELS / name / MANIFEST).read_text(encoding="utf-8"))
    checks = manifest["checks"]
    model = seq2seq.load(name)  # by name: its files' sha256 checked first
    assert model.translate(checks["sources"]) == checks["translations"]


@pytest.mark.parametrize("name", NAMES)
def test_the_card_shows_the_figures_of_its_results(name: str):
    results = json.loads((MODELS / name / RESULTS).read_text(encoding="utf-8"))
    card = (MODELS / name / CARD).read_text(encoding="utf-8")
    assert card_figures(results) in card, f"{name}: rerun make bench-models"


def test_the_files_stay_within_what_git_carries():
    sizes = {path: path.stat().st_size / 2**20 for path in MODELS.rglob("*") if path.is_file()}
    too_big = [str(path) for path, size in sizes.items() if size > MAX_FILE_MB]
    assert too_big == [], f"over {MAX_FILE_MB} MiB: {too_big}"
    assert sum(sizes.values()) <= MAX_TOTAL_MB


def readme_lines() -> list[str]:
    """The README's commands with a released model (the block after the two commands)."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = text.split("Then a real model", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if line.strip()]


def test_the_readmes_lines_with_a_released_model_run_as_written(tmp_path: Path):
    """Each line as a user types it in a checkout (``.venv/bin/seq2seq`` is this Python's
    seq2seq), in a folder of its own: a translation, attention pictures on disk, and a
    server that answers with the model's name."""
    translate, attention, serve = readme_lines()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = f"{sys.executable} -m seq2seq"
    as_typed = {line: line.split("  #")[0].replace(".venv/bin/seq2seq", command)
                for line in (translate, attention, serve)}  # fmt: skip
    done = subprocess.run(as_typed[translate], shell=True, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() and done.stdout.strip()[0].isupper()  # cased German, recased
    done = subprocess.run(as_typed[attention], shell=True, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted((tmp_path / "attention").glob("*.png"))
    assert (tmp_path / "attention/report.html").is_file()
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    port = free_port()
    server = subprocess.Popen(f"exec {as_typed[serve]} --port {port}", shell=True, cwd=tmp_path,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)  # fmt: skip
    try:
        health = wait_for_health(f"http://127.0.0.1:{port}/health", server)
        assert health["model"] == serve.split("--model ")[1].split()[0]
    finally:
        server.kill()
        server.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_health(url: str, server: subprocess.Popen, seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the server ended: {server.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"no answer from {url} in {seconds} s")


# -- the headline model outside seq2seq: transformers and CTranslate2 ------------------------
HEADLINE = "multi30k-en-de"  # the README's first model: a post-norm Transformer, exportable
LONG = " ".join(["A man in a red shirt and a woman in a blue dress walk past a small shop"] * 3)


@pytest.fixture(scope="module")
def headline_checks() -> tuple[list[str], list[str]]:
    """The check sentences and the shipped model's own lowercase translations of them (its
    recorded ones, recased, are what the tests above hold)."""
    sources = json.loads((MODELS / HEADLINE / MANIFEST).read_text(encoding="utf-8"))["checks"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MODELS_ENV, str(MODELS))
        ours = seq2seq.load(HEADLINE, recase=False).translate(sources["sources"])
    return sources["sources"], ours


def test_the_headline_model_exports_to_transformers_and_translates_alike_there(
    run_here, tmp_path: Path, headline_checks: tuple[list[str], list[str]]
):
    """`seq2seq export --model multi30k-en-de --to huggingface`, read back by transformers
    alone: beam search with seq2seq's ranking (no length penalty in either) writes what
    seq2seq writes, and the generation config is the model's search, with a length limit
    that a long sentence does not reach."""
    transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")
    out = tmp_path / "hf"
    done = run_here("export", "--model", HEADLINE, "--to", "huggingface", "--out", str(out))
    assert done.returncode == 0, done.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    config = hf.generation_config
    manifest = json.loads((MODELS / HEADLINE / MANIFEST).read_text(encoding="utf-8"))
    assert config.num_beams == 5 and config.max_length >= 256
    assert config.length_penalty > 0  # the model's own (val chose lp 2): not transformers' 1.0
    assert manifest["released_from"]["setting"].endswith("@lp2")
    sources, ours = headline_checks
    batch = tokenizer([*sources, LONG], padding=True, return_tensors="pt")
    with torch.inference_mode():
        ids = hf.generate(**batch, length_penalty=0.0, early_stopping=True)
    theirs = tokenizer.batch_decode(ids, skip_special_tokens=True)
    model = seq2seq.load(HEADLINE, recase=False)
    assert theirs == model.translate([*sources, LONG], length_penalty=0.0)
    with torch.inference_mode():  # the export's defaults: not cut at transformers' 20 pieces
        long_ids = hf.generate(**tokenizer([LONG], return_tensors="pt"))
    assert long_ids.shape[1] > 21 and long_ids[0, -1].item() == hf.config.eos_token_id
    assert ours[0].startswith("ein junges mädchen")  # a translation, lowercase underneath


@pytest.mark.parametrize("quantization", ["float32", "int8"])
def test_the_headline_model_exports_to_ctranslate2_and_translates_alike_there(
    run_here, tmp_path: Path, headline_checks: tuple[list[str], list[str]], quantization: str
):
    pytest.importorskip("ctranslate2", reason="the export extra is not installed")
    out = tmp_path / "ct2"
    done = run_here("export", "--model", HEADLINE, "--to", "ctranslate2", "--out", str(out),
                    "--quantization", quantization)  # fmt: skip
    assert done.returncode == 0, done.stderr
    sources, ours = headline_checks
    assert seq2seq.load(out).translate(sources) == ours


def huggingface_example() -> tuple[str, str]:
    """docs/huggingface.md's export command and the Python that reads its folder."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "huggingface.md").read_text("utf-8")
    section = text.split("## Export a seq2seq Transformer to transformers", 1)[1]
    command = section.split("```bash\n", 1)[1].split("```", 1)[0].strip()
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    return command, code


def test_the_huggingface_pages_export_example_runs_as_written(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    command, code = huggingface_example()
    assert f"--model {HEADLINE}" in command
    done = subprocess.run(command.replace("seq2seq", f"{sys.executable} -m seq2seq", 1),
                          shell=True, cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/huggingface.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "hund" in printed and "strand" in printed  # "a dog runs on the beach."
