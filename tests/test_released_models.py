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
    assert sorted((tmp_path / "attention").glob("*.png")) and (tmp_path / "attention/report.html")
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
