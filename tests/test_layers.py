"""The package's layers (pyproject's ``[tool.importlinter]`` contracts, docs/design.md):
commands over serving over the Python API over training and inspection over inference over
data; the model core imports none of them (nor any speed trick), text none of the model
core, common nothing else of seq2seq; inference never the training stack; translate and
serve never matplotlib; the scripts nothing of seq2seq but its public API, its model core
and the internals the last contract names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    written = Path(ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert f"{written} kept, 0 broken" in result.stdout
