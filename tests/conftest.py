"""Shared fixtures. The test suite never touches the network."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

# Before anything imports datasets or huggingface_hub: both read these once, at import.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs two workers on two cores
    os.environ["OMP_NUM_THREADS"] = "1"  # for the commands the tests start, too
    torch.set_num_threads(1)
from tiny_run import SIZES, tiny_config, write_config  # noqa: E402

from seq2seq.commands.main import main  # noqa: E402
from seq2seq.text.demo_corpus import write_corpus  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FITTING_FIXTURES = {"trained_run", "trained_transformer"}  # each runs `seq2seq fit`


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        default="cpu",
        help="torch device of the model-level tests (models, attention, masks, search, "
        "loss) that use the on_device fixture: cpu (the default) or cuda",
    )


def pytest_configure(config: pytest.Config) -> None:
    """An unknown or absent --device ends the run at once, in one line."""
    try:
        device = torch.device(config.getoption("--device"))
    except RuntimeError as error:
        raise pytest.UsageError(f"--device: {error}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError("--device cuda: this PyTorch sees no CUDA device")


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> torch.device:
    """The device of --device. On CUDA, float32 products stay float32 (no TF32), so the
    tolerances written for the CPU hold there too."""
    device = torch.device(request.config.getoption("--device"))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return device


@pytest.fixture
def on_device(device: torch.device) -> Iterator[torch.device]:
    """Tensors and modules that the test makes without naming a device are made on
    --device (torch's default-device context); on the CPU nothing changes."""
    if device.type == "cpu":
        yield device
        return
    with device:
        yield device


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs a trained model is slow (``make test-fast`` leaves it out). The
    files that hold a slow test run first: ``make test`` hands whole files to its workers
    in this order, so the quick files, last, fill both workers' ends instead of one worker
    finishing a long file alone."""
    for item in items:
        if FITTING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: file order kept


# Folders that the tools running the tests write into; any other file of the checkout, ignored
# by git or not (runs/, data/ and their caches included), is the tests' to leave alone.
TOOL_FOLDERS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache"}


def checkout_files() -> dict[str, tuple[int, int]]:
    """Every file and folder under the repository root, but in TOOL_FOLDERS, by path: a
    file's (size, mtime in ns), a folder's (-1, -1) (its mtime follows the tools' writes).
    Links are listed, not followed (``data/multi30k`` may link to a corpus)."""
    files = {}
    for folder, subfolders, names in os.walk(REPO_ROOT):
        subfolders[:] = [name for name in subfolders if name not in TOOL_FOLDERS]
        for name in [*names, *subfolders]:
            path = Path(folder, name)
            stat = path.lstat()
            entry = (-1, -1) if path.is_dir() and not path.is_symlink() else None
            files[str(path.relative_to(REPO_ROOT))] = entry or (stat.st_size, stat.st_mtime_ns)
    return files


@pytest.fixture(scope="session", autouse=True)
def checkout_unchanged() -> Iterator[None]:
    """The test session writes only under temporary folders: a file of the checkout that it
    created, changed or removed fails the session (at the teardown of its last test)."""
    before = checkout_files()
    yield
    after = checkout_files()
    changed = sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )
    assert not changed, f"the tests wrote into the checkout ({len(changed)} files): {changed[:20]}"


def child_processes() -> set[int]:
    """The ids of this process's living children (zombies, already ended, left out), read
    from /proc: psutil is not a dependency. Empty where there is no /proc."""
    children = set()
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                children.add(int(pid))
    return children


def left_running(threads_before: set[int], children_before: set[int]) -> list[str]:
    """Threads that are not daemons, calls of seq2seq.common.interruptible that have not
    returned, and child processes, started since the session began and still running."""
    import threading

    from seq2seq.common.interruptible import unfinished_calls

    threads = [
        f"thread {t.name}"
        for t in threading.enumerate()
        if t.ident not in threads_before and not t.daemon and t is not threading.main_thread()
    ]
    calls = [f"unfinished call on thread {name}" for name in unfinished_calls()]
    children = [
        f"child process {pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:120]!r}"
        for pid in sorted(child_processes() - children_before)
        if Path(f"/proc/{pid}").exists()
    ]
    return [*threads, *calls, *children]


@pytest.fixture(scope="session", autouse=True)
def nothing_left_running() -> Iterator[None]:
    """No test leaves a thread or a process running: at the teardown of the session's last
    test (after the other session fixtures', such as the browser's), every thread that is not
    a daemon, call_interruptibly's calls and child processes started during the session have
    ended, within a few seconds' grace. Each xdist worker checks its own; the controller,
    whose children are the workers, checks nothing of them (they are there before)."""
    import threading
    import time

    threads_before = {t.ident for t in threading.enumerate()}
    children_before = child_processes()
    yield
    deadline = time.monotonic() + 10.0
    while (left := left_running(threads_before, children_before)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"still running after the tests: {left}"


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The Multi30k corpus: $MULTI30K_DIR, else ../shared/data/multi30k beside the repo."""
    path = Path(os.environ.get("MULTI30K_DIR", REPO_ROOT.parent / "shared" / "data" / "multi30k"))
    if not (path / "val.en.gz").exists():
        pytest.skip(f"Multi30k not found at {path} (set MULTI30K_DIR to run this test)")
    return path


@pytest.fixture(scope="session")
def alignment_gold_dir() -> Path:
    """Human word-alignment gold and published aligner outputs: $ALIGNMENT_GOLD_DIR, else
    ../shared/data/alignment beside the repo (never committed: their terms forbid it)."""
    default = REPO_ROOT.parent / "shared" / "data" / "alignment"
    path = Path(os.environ.get("ALIGNMENT_GOLD_DIR", default))
    if not (path / "en-fr.hansards-wpt03" / "enfr.gold").exists():
        pytest.skip(f"no alignment gold at {path} (set ALIGNMENT_GOLD_DIR to run this test)")
    return path


@pytest.fixture
def run_here(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., subprocess.CompletedProcess]:
    """``run_here(*args, stdin="")``: `seq2seq ARGS` in this process, its result as
    tiny_run.run_seq2seq gives a child's (exit status, stdout, stderr), without the seconds a
    child takes to import torch and the toolkit."""

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), "utf-8"))
        capsys.readouterr()
        try:
            main(list(args))
            status = 0
        except SystemExit as stop:  # as the interpreter exits: None is 0, a message 1
            status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        printed = capsys.readouterr()
        return subprocess.CompletedProcess(["seq2seq", *args], status, printed.out, printed.err)

    return run


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> dict:
    """`seq2seq fit` once on the tiny corpus; the tests below use its checkpoint."""
    root = tmp_path_factory.mktemp("cli")
    corpus = root / "corpus"
    write_corpus(corpus, seed=3, sizes=SIZES)
    config = write_config(root / "tiny.yaml", tiny_config(root, corpus))
    main(["fit", "--config", str(config)])
    return {
        "root": root,
        "corpus": corpus,
        "config": config,
        "ckpt": root / "run/checkpoints/last.ckpt",
    }


@pytest.fixture(scope="session")
def trained_transformer(trained_run, tmp_path_factory) -> Path:
    """`seq2seq fit` of a one-epoch Transformer (1+2 layers, 2 heads) on the tiny corpus;
    its last checkpoint."""
    root = tmp_path_factory.mktemp("transformer")
    config = tiny_config(root, trained_run["corpus"])
    config["trainer"]["max_epochs"] = 1
    config["model"]["network"] = {
        "class_path": "seq2seq.transformer.Transformer",
        "init_args": {
            "model_size": 16, "num_heads": 2, "ff_size": 32, "encoder_layers": 1,
            "decoder_layers": 2,
        },
    }  # fmt: skip
    main(["fit", "--config", str(write_config(root / "t.yaml", config))])
    return root / "run/checkpoints/last.ckpt"


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium driven by its own chromedriver: nothing is downloaded."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            f"Chromium not found ({CHROMIUM}, {CHROMEDRIVER}): "
            "apt-get install chromium chromium-driver to run the browser test"
        )
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed: pip install -e '.[dev]'"
    )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()
