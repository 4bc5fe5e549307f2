"""`seq2seq serve` under load: 1, 8 and 32 clients on 127.0.0.1 for a fixed time each.

The server (this checkout's code) loads the checkpoint (or a CTranslate2 export) once; for
each number of clients, that many threads each send one line of ``--src`` per ``POST
/translate``, waiting for each answer, until ``--seconds`` have passed. Per level: requests
answered and failed, p50 and p99 latency, sentences/s, the server's peak RSS (VmHWM, reset
before each level where the kernel allows) and sentences per batch of the dynamic batcher.
The server is always killed.

    python -m scripts.bench.bench_serve --ckpt runs/x/checkpoints/last.ckpt \\
        --src data/multi30k/test_2016_flickr.en.gz --out runs/bench/serve.json
    python -m scripts.bench.bench_serve --ctranslate2 runs/x/ct2-int8 --src ... --out ...
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import socket
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from scripts.bench.benchkit import REPO, SEQ2SEQ, memory_mb, python_path, save_json
from seq2seq.text.lines import read_lines

STARTUP_SECONDS = 300  # the longest the server may take to load the model and answer
REQUEST_SECONDS = 60  # a request not answered by then counts as lost


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(url: str, body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of a GET, or of a POST of ``body``."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_SECONDS) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, {"error": error.read().decode(errors="replace")}


def start_server(model: list[str], port: int, extra: list[str], log: Path) -> subprocess.Popen:
    """``seq2seq serve MODEL`` (``--ckpt C`` or ``--ctranslate2 DIR``) on ``port``."""
    argv = [*SEQ2SEQ, "serve", *model, "--host", "127.0.0.1", "--port", str(port), *extra]
    with open(log, "w") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=python_path(REPO), cwd=REPO
        )


def wait_until_up(server: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server ended ({server.returncode}): {log.read_text()}")
        try:
            if call(url + "/health")[0] == 200:
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"the server did not answer within {STARTUP_SECONDS} s")


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux 4.0+, needs write access); False if refused."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def load(url: str, lines: list[str], clients: int, seconds: float, beam: int | None) -> dict:
    """``clients`` threads sending one sentence per request until ``seconds`` have passed."""
    next_line = itertools.count()
    lock = threading.Lock()
    latencies: list[float] = []
    failures: list[str] = []
    deadline = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < deadline:
            with lock:
                line = lines[next(next_line) % len(lines)]
            body = {"text": [line], **({"beam": beam} if beam else {})}
            start = time.perf_counter()
            try:
                status, answer = call(url + "/translate", body)
                ok = status == 200 and answer["results"][0]["source"] == line
                reason = f"{status}: {answer}"
            except (OSError, ValueError, KeyError) as error:
                ok, reason = False, f"{type(error).__name__}: {error}"
            seconds_taken = time.perf_counter() - start
            with lock:
                (latencies.append(seconds_taken) if ok else failures.append(reason))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + REQUEST_SECONDS + 10)
    elapsed = time.perf_counter() - start
    ordered = sorted(latencies)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    return {
        "clients": clients,
        "answered": len(latencies),
        "failed": len(failures),
        "failures": failures[:5],
        "seconds": round(elapsed, 2),
        "p50_s": round(quantile(0.50), 4),
        "p99_s": round(quantile(0.99), 4),
        "mean_s": round(statistics.fmean(latencies), 4) if latencies else None,
        "sentences_per_s": round(len(latencies) / elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--ckpt", type=Path)
    model.add_argument("--ctranslate2", type=Path, help="a CTranslate2 export instead")
    parser.add_argument("--src", type=Path, required=True, help="sentences, one per line")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=20.0, help="per number of clients")
    parser.add_argument("--beam", type=int, help="each request's beam (default: the server's)")
    parser.add_argument(
        "--serve-args", default="", help='more options for serve, e.g. "--batch-wait-ms 10"'
    )
    parser.add_argument("--out", type=Path, required=True, help="results (JSON)")
    args = parser.parse_args()
    lines = [line for line in read_lines(args.src) if line.strip()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log = args.out.with_suffix(".server.log")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    served = ["--ckpt", str(args.ckpt)] if args.ckpt else ["--ctranslate2", str(args.ctranslate2)]
    server = start_server(served, port, shlex.split(args.serve_args), log)
    try:
        wait_until_up(server, url, log)
        load(url, lines, 1, min(3.0, args.seconds), args.beam)  # warm-up, not recorded
        levels = []
        for clients in args.clients:
            resettable = reset_peak_rss(server.pid)
            batches_before = call(url + "/health")[1]["batches"]
            level = load(url, lines, clients, args.seconds, args.beam)
            batches = call(url + "/health")[1]["batches"] - batches_before
            level["batches"] = batches
            level["sentences_per_batch"] = round(
                (level["answered"] + level["failed"]) / max(batches, 1), 2
            )
            level["peak_rss_mb"] = round(memory_mb("VmHWM", server.pid), 1)
            level["peak_rss_since"] = "this level" if resettable else "server start"
            levels.append(level)
            print(json.dumps(level), flush=True)
    finally:
        server.kill()
        server.wait(timeout=60)
    base = levels[0]["sentences_per_s"] if levels and levels[0]["clients"] == 1 else None
    result = {
        "model": served,
        "src": str(args.src),
        "sentences": len(lines),
        "seconds_per_level": args.seconds,
        "beam": args.beam,
        "serve_args": args.serve_args,
        "cores": os.cpu_count(),
        "levels": levels,
        "speedup_over_1_client": {
            str(level["clients"]): round(level["sentences_per_s"] / base, 2) for level in levels
        }
        if base
        else None,
    }
    save_json(args.out, result)
    print(json.dumps(result["speedup_over_1_client"]))


if __name__ == "__main__":
    main()
