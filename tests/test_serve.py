"""`seq2seq serve`: the server run as a real process on a free port of 127.0.0.1 and asked
over HTTP (its dynamic batcher on its own: test_batcher.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tiny_run import run_seq2seq

import seq2seq
from seq2seq.commands.serve import model_name
from seq2seq.text.words import words

REPO_ROOT = Path(__file__).resolve().parents[1]
needs_serve_extra = pytest.mark.skipif(
    importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None,
    reason="fastapi or uvicorn is not installed (pip install -e '.[serve]')",
)
STARTUP_SECONDS = 120  # the longest a server may take to answer /health
REQUEST_SECONDS = 60  # the longest one request may take


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    paths = [str(REPO_ROOT), str(REPO_ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
    path = os.pathsep.join(paths)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def request(url: str, body: bytes | dict | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of a GET (no body) or a POST of JSON (a dict) or raw bytes."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    headers = {"Content-Type": "application/json"} if data is not None else {}
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_SECONDS) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class Server:
    """`seq2seq serve` in a process of its own, its output in a log file."""

    def __init__(self, ckpt: Path, log: Path, *options: str, model_option: str = "--ckpt"):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        args = ["serve", model_option, str(ckpt), "--port", str(self.port), *options]
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "seq2seq", *args],
                stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True,
            )  # fmt: skip

    def wait_until_up(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server ended ({self.process.returncode}): {self.log.read_text()}")
            try:
                if request(self.url + "/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        pytest.fail(f"the server did not answer in {STARTUP_SECONDS} s: {self.log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(trained_run, tmp_path_factory) -> Iterator[Server]:
    """One server for the module: beam 2 by default, small limits to test them."""
    log = tmp_path_factory.mktemp("serve") / "server.log"
    running = Server(
        trained_run["ckpt"], log, "--beam", "2", "--max-beam", "4", "--max-sentences", "10",
        "--max-chars", "200",
    )  # fmt: skip
    try:
        running.wait_until_up()
        yield running
    finally:
        running.stop()


def test_other_commands_do_not_import_the_server_stack_and_serve_names_the_extra(trained_run):
    """`import seq2seq.commands.main` loads no FastAPI, uvicorn or pydantic; without FastAPI,
    `serve` says in one line what to install."""
    code = (
        "import sys, seq2seq.commands.main, seq2seq.commands.translate, seq2seq.commands.serve\n"
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'pydantic') if m in sys.modules))\n"
        "sys.modules['fastapi'] = None\n"
        f"seq2seq.commands.main.main(['serve', '--ckpt', {str(trained_run['ckpt'])!r}])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert result.stdout.strip() == "[]", result.stderr
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "seq2seq: error: seq2seq serve needs the serve extra (fastapi is not installed): "
        "pip install 'seq2seq[serve]'"
    )


@needs_serve_extra
def test_health(server, trained_run):
    status, answer = request(server.url + "/health")
    assert status == 200
    assert answer["model_loaded"] is True
    assert answer["version"] == seq2seq.__version__
    assert answer["model"] == "run"  # the run folder of run/checkpoints/last.ckpt
    assert (answer["src_lang"], answer["tgt_lang"]) == ("en", "de")
    before = answer["batches"]
    assert request(server.url + "/translate", {"text": ["one"]})[0] == 200
    after = request(server.url + "/health")[1]
    assert after["batches"] == before + 1 and after["sentences_per_batch"] >= 1


@needs_serve_extra
def test_no_answer_shows_a_path_of_the_servers_disk(server, trained_run):
    with urllib.request.urlopen(server.url + "/", timeout=REQUEST_SECONDS) as response:
        page = response.read().decode()
    assert "<title>seq2seq: run</title>" in page
    body = {"text": ["twenty-one"], "alignment": True, "attention": True}
    answers = [
        page,
        json.dumps(request(server.url + "/health")),
        json.dumps(request(server.url + "/translate", body)),
        json.dumps(request(server.url + "/translate", {"text": ["x" * 201]})),  # refused
    ]
    checkpoint = Path(trained_run["ckpt"]).resolve()
    folders = [*checkpoint.parents][:-1]  # every folder above the checkpoint but /
    for path in {checkpoint, *folders, REPO_ROOT, Path.cwd(), Path.home()}:
        assert not [answer for answer in answers if str(path) in answer], path


@pytest.mark.parametrize(
    ("checkpoints", "name"),
    [
        (["runs/multi30k-en-de-transformer/checkpoints/last.ckpt"], "multi30k-en-de-transformer"),
        (["/srv/models/old/logs/version_3/checkpoints/best.ckpt"], "old"),
        (["/home/someone/average.ckpt"], "average"),
        (["a/checkpoints/last.ckpt", "b/checkpoints/last.ckpt"], "a + b"),
    ],
)
def test_a_served_model_is_named_after_its_run_folder(checkpoints, name):
    assert model_name(checkpoints) == name


def _lines(trained_run, n: int) -> list[str]:
    return (trained_run["corpus"] / "test.en").read_text().splitlines()[:n]


def _nbest_lines(results: list[dict]) -> list[str]:
    """Answers as `seq2seq translate --n-best` prints them: index, score, text."""
    return [
        f"{i}\t{hyp['score']:.4f}\t{hyp['text']}"
        for i, result in enumerate(results)
        for hyp in result["translations"]
    ]


@needs_serve_extra
def test_translate_equals_the_translate_command(server, trained_run, run_here):
    lines = [*_lines(trained_run, 8), ""]
    cli = run_here(
        "translate", "--ckpt", str(trained_run["ckpt"]), "--beam", "2", "--n-best", "2",
        stdin="".join(line + "\n" for line in lines),
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    status, answer = request(server.url + "/translate", {"text": lines, "beam": 2, "n_best": 2})
    assert status == 200
    assert [r["source"] for r in answer["results"]] == lines
    assert _nbest_lines(answer["results"]) == cli.stdout.splitlines()
    assert "alignment" not in answer["results"][0]["translations"][0]  # not asked for


@needs_serve_extra
def test_alignment_and_attention_on_request(server, trained_run):
    line = _lines(trained_run, 1)[0]
    body = {"text": [line, ""], "beam": 2, "n_best": 2, "alignment": True, "attention": True}
    status, answer = request(server.url + "/translate", body)
    assert status == 200
    first, blank = answer["results"]
    assert len(first["translations"]) == 2
    for hyp in first["translations"]:
        attention = hyp["attention"]
        # words as `seq2seq attention` counts them (an untrained model's lone "▁" is one)
        n_src_words = len(words(attention["source"][:-1]))
        n_tgt_words = len(words(attention["target"][:-1]))
        assert n_src_words == len(line.split())
        for link in hyp["alignment"].split():
            i, j = map(int, link.split("-"))
            assert 0 <= i < n_src_words and 0 <= j < n_tgt_words
        S, T = len(attention["source"]), len(attention["target"])
        assert attention["source"][-1] == attention["target"][-1] == "</s>"
        assert len(attention["weights"]) == T and {len(row) for row in attention["weights"]} == {S}
        assert [sum(row) for row in attention["weights"]] == pytest.approx([1.0] * T, abs=1e-3)
        heads = attention["heads"]  # [L][H][T][S]: the tiny RNN has one layer of one head
        assert (len(heads), len(heads[0])) == (1, 1) and heads[0][0] == attention["weights"]
    assert blank["translations"] == [{"text": "", "score": 0.0, "alignment": ""}]


def _request_for(k: int, lines: list[str]) -> dict:
    """Request k of the concurrency test: two lines, beam 1 or 2, n-best 1 or 2."""
    text = [lines[k % len(lines)], lines[(3 * k + 1) % len(lines)]]
    return {"text": text, "beam": 1 + k % 2, "n_best": 2 if k % 4 == 1 else 1}


@needs_serve_extra
def test_concurrent_requests_get_their_own_answers(server, trained_run):
    lines = _lines(trained_run, 16)
    bodies = [_request_for(k, lines) for k in range(40)]
    alone = [request(server.url + "/translate", body) for body in bodies]
    with ThreadPoolExecutor(max_workers=8) as clients:  # 8 clients, 5 requests each
        together = list(clients.map(lambda body: request(server.url + "/translate", body), bodies))
    for body, (status, answer), (status_alone, answer_alone) in zip(
        bodies, together, alone, strict=True
    ):
        assert status == status_alone == 200
        assert [r["source"] for r in answer["results"]] == body["text"]
        for result, result_alone in zip(answer["results"], answer_alone["results"], strict=True):
            assert [h["text"] for h in result["translations"]] == [
                h["text"] for h in result_alone["translations"]
            ]
            assert [h["score"] for h in result["translations"]] == pytest.approx(
                [h["score"] for h in result_alone["translations"]], abs=1e-4
            )


BAD_REQUESTS = [
    (b"not json", 400, "the body is not valid JSON"),
    (b"[1, 2]", 422, "the body must be a JSON object"),
    (b"{}", 422, "text: Field required"),
    (b'{"text": []}', 422, "text: List should have at least 1 item"),
    (b'{"text": "one"}', 422, "text: Input should be a valid list"),
    (b'{"text": [1]}', 422, "text.0: Input should be a valid string"),
    (json.dumps({"text": ["a" * 201]}).encode(), 422, "text.0: String should have at most 200"),
    (json.dumps({"text": ["one"] * 11}).encode(), 422, "text: List should have at most 10 items"),
    (b'{"text": ["one"], "beam": 0}', 422, "beam: Input should be greater than or equal to 1"),
    (b'{"text": ["one"], "beam": 5}', 422, "beam: Input should be less than or equal to 4"),
    (b'{"text": ["one"], "beam": "2"}', 422, "beam: Input should be a valid integer"),
    (b'{"text": ["one"], "beam": 1, "n_best": 2}', 422, "n_best 2 is more than beam 1"),
    (b'{"text": ["one"], "alignment": "yes"}', 422, "alignment: Input should be a valid boolean"),
    (b'{"text": ["one"], "color": "red"}', 422, "unknown field 'color'"),
]


@needs_serve_extra
@pytest.mark.parametrize(("body", "status", "message"), BAD_REQUESTS)
def test_bad_request_is_refused_with_its_reason(server, body, status, message):
    got_status, answer = request(server.url + "/translate", body)
    assert (got_status, list(answer)) == (status, ["error"])
    assert message in answer["error"]
    assert request(server.url + "/health")[0] == 200  # and the server goes on


@needs_serve_extra
def test_unknown_path_is_a_json_404(server):
    assert request(server.url + "/nowhere") == (404, {"error": "Not Found"})


@needs_serve_extra
def test_a_port_in_use_is_one_line(trained_run):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_seq2seq("serve", "--ckpt", str(trained_run["ckpt"]), "--port", str(port))
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"seq2seq: error: cannot listen on 127.0.0.1:{port}:")
    )


def _wait_for_in_flight(server: Server, count: int) -> None:
    deadline = time.monotonic() + REQUEST_SECONDS
    while request(server.url + "/health")[1]["in_flight"] < count:
        assert time.monotonic() < deadline, "the request never arrived"
        time.sleep(0.05)


@needs_serve_extra
def test_sigterm_answers_the_request_in_flight_then_exits_0(trained_run, tmp_path):
    """The first request is long (64 sentences of 1000 characters, beam 16), so it is still
    being translated while a second one is refused (--max-concurrent 1) and SIGTERM
    arrives; it is answered all the same."""
    running = Server(trained_run["ckpt"], tmp_path / "server.log", "--max-concurrent", "1")
    try:
        running.wait_until_up()
        answers: list[tuple[int, dict]] = []
        sentence = " ".join(_lines(trained_run, 100))[:1000]
        long = {"text": [sentence] * 64, "beam": 16}
        body = {"text": _lines(trained_run, 1)}
        first = threading.Thread(
            target=lambda: answers.append(request(running.url + "/translate", long))
        )
        first.start()
        _wait_for_in_flight(running, 1)
        status, refusal = request(running.url + "/translate", body)
        assert status == 503 and "--max-concurrent" in refusal["error"]
        running.process.send_signal(signal.SIGTERM)
        first.join(timeout=REQUEST_SECONDS)
        assert running.process.wait(timeout=REQUEST_SECONDS) == 0, running.log.read_text()
        assert len(answers) == 1 and answers[0][0] == 200
        assert answers[0][1]["results"][0]["source"] == sentence
    finally:
        running.stop()


@needs_serve_extra
def test_the_page_is_self_contained_and_uses_the_report(server):
    with urllib.request.urlopen(server.url + "/", timeout=REQUEST_SECONDS) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/html")
        page = response.read().decode()
    assert '<form id="ask">' in page and "function addSentence(s)" in page
    for external in ("src=", "href=", "@import", "url(", "://"):
        assert external not in page


def _outlined(heads: list, t: int, groups: list[int]) -> list[int]:
    """The source pieces the page outlines for target piece ``t`` in the view averaging the
    flat head indices ``groups`` of ``heads`` [L][H][T][S]: at least half the row's peak,
    each weight rounded to thousandths (half up) as the page receives it."""
    flat = [head for layer in heads for head in layer]
    row = [
        sum(math.floor(1000 * flat[g][t][k] + 0.5) for g in groups) / (1000 * len(groups))
        for k in range(len(flat[0][t]))
    ]
    return [k for k, w in enumerate(row) if w > 0 and w >= 0.5 * max(row)]


@needs_serve_extra
@pytest.mark.slow  # a headless browser
def test_the_page_translates_draws_and_highlights_in_a_browser(
    browser, trained_run, trained_transformer, tmp_path
):
    """Type a sentence, submit, see the translation, the heatmap and the word alignment;
    hovering a target piece outlines the source pieces it attends to most, in the view the
    layer and head selector shows. The tiny Transformer (2 layers of 2 heads) translates
    to words, where the tiny RNN leaves every line empty."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    running = Server(trained_transformer, tmp_path / "server.log")
    try:
        running.wait_until_up()
        line = _lines(trained_run, 1)[0]
        body = {"text": [line], "alignment": True, "attention": True}
        status, answer = request(running.url + "/translate", body)  # what the page must show
        assert status == 200
        best = answer["results"][0]["translations"][0]
        assert best["text"].strip(), "the tiny Transformer gave no word to hover"

        browser.get(running.url + "/")
        browser.find_element(By.ID, "source").send_keys(line)
        browser.find_element(By.CSS_SELECTOR, "#ask button[type=submit]").click()
        shown = WebDriverWait(browser, REQUEST_SECONDS).until(
            lambda driver: driver.find_element(By.ID, "translation").text
        )
        assert shown == best["text"]
        assert browser.find_element(By.ID, "status").text == ""
    finally:
        running.stop()  # the page has all it needs

    attention = best["attention"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#sentence-0 table.heatmap tbody tr")
    assert len(rows) == len(attention["target"])
    cells = rows[0].find_elements(By.TAG_NAME, "td")
    assert len(cells) == len(attention["source"])
    assert all(cell.value_of_css_property("background-color").startswith("rgba") for cell in cells)
    links = browser.find_element(By.CSS_SELECTOR, "#sentence-0 .links").text
    assert links == f"word alignment (source-target): {best['alignment'] or 'none'}"

    sources = browser.find_elements(By.CSS_SELECTOR, "#sentence-0 .src .tok")
    targets = browser.find_elements(By.CSS_SELECTOR, "#sentence-0 .tgt .tok")
    assert [t.text for t in sources] == attention["source"]
    assert [t.text for t in targets] == attention["target"]

    def outlined_after_hovering(t: int) -> list[int]:
        ActionChains(browser).move_to_element(targets[t]).perform()
        assert "active" in targets[t].get_attribute("class")
        return [k for k, tok in enumerate(sources) if "hl" in tok.get_attribute("class")]

    selector = Select(browser.find_element(By.ID, "view"))
    assert selector.first_selected_option.text == "mean over all layers and heads"
    assert outlined_after_hovering(0) == _outlined(attention["heads"], 0, [0, 1, 2, 3]) != []
    ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    assert not browser.find_elements(By.CSS_SELECTOR, "#sentence-0 .src .tok.hl")
    selector.select_by_visible_text("layer 2, head 1")
    assert outlined_after_hovering(1) == _outlined(attention["heads"], 1, [2]) != []


@pytest.fixture(scope="module")
def export_server(trained_transformer, tmp_path_factory) -> Iterator[tuple[Server, Path]]:
    """The session's tiny Transformer exported to CTranslate2 and served, beam 2."""
    pytest.importorskip("ctranslate2")
    from seq2seq.inference.checkpoint import load_trained
    from seq2seq.inference.export import export_ctranslate2

    folder = tmp_path_factory.mktemp("served-export")
    exported = export_ctranslate2(load_trained(trained_transformer), folder / "tiny-export")
    running = Server(exported, folder / "server.log", "--beam", "2", model_option="--ctranslate2")
    try:
        running.wait_until_up()
        yield running, exported
    finally:
        running.stop()


@needs_serve_extra
def test_an_export_is_served_as_the_translate_command_translates_with_it(
    export_server, trained_run, run_here
):
    server, exported = export_server
    lines = [*_lines(trained_run, 6), ""]
    cli = run_here(
        "translate", "--ctranslate2", str(exported), "--beam", "2", "--n-best", "2",
        stdin="".join(line + "\n" for line in lines),
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    status, answer = request(server.url + "/translate", {"text": lines, "beam": 2, "n_best": 2})
    assert status == 200
    assert _nbest_lines(answer["results"]) == cli.stdout.splitlines()
    health = request(server.url + "/health")[1]
    assert health["model"] == "tiny-export" and health["tgt_lang"] == "de"


@needs_serve_extra
def test_an_export_refuses_alignment_and_attention_in_one_line(export_server):
    server, _ = export_server
    for asked in ("alignment", "attention"):
        status, answer = request(server.url + "/translate", {"text": ["one"], asked: True})
        assert status == 422
        assert answer == {
            "error": "alignment and attention need a checkpoint: this server's model is a "
            "CTranslate2 export, which keeps no attention"
        }
