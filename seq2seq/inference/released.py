"""Released models: trained models that ship under ``models/NAME/`` and load by name.

A released model's folder holds the model (``model.ckpt``: a checkpoint with its weights in
half precision, its vocabulary and its config), the tables it needs (``casing.de.json``,
when it writes lowercase that is recased), its card (``README.md``), the card's figures as a
benchmark measured them (``results.json``) and ``manifest.json``: its languages and the
sha256 of every file it loads, which is checked on every load, so that a truncated or
altered file is refused before any of it is read.

Names resolve in the ``models/`` folder beside the package (a checkout installed as the
README installs it), or in the folder ``$SEQ2SEQ_MODELS`` names. ``resolve`` is the one
resolver: ``seq2seq.load(NAME)``, every command's ``--model NAME`` and ``seq2seq models``
all read through it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq.common.errors import CheckpointError, Seq2SeqError

MODELS_ENV = "SEQ2SEQ_MODELS"
MANIFEST = "manifest.json"
RESULTS = "results.json"
CARD = "README.md"
MODEL_FILE = "model.ckpt"
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")  # what a released model's name looks like


def models_folder() -> Path:
    """Where released models are found: ``$SEQ2SEQ_MODELS``, else ``models/`` beside the
    package (the repository's, for a checkout installed in place)."""
    if folder := os.environ.get(MODELS_ENV):
        return Path(folder)
    return Path(__file__).resolve().parents[2] / "models"


def released_names(folder: Path | None = None) -> list[str]:
    """The names of the released models in ``folder`` (default: ``models_folder()``)."""
    folder = folder or models_folder()
    if not folder.is_dir():
        return []
    return sorted(path.parent.name for path in folder.glob(f"*/{MANIFEST}"))


def looks_like_a_name(text: str | Path) -> bool:
    """Whether ``text`` is a model's name rather than a path: no folder, no file there,
    and the shape of a name (``multi30k-en-de``)."""
    text = str(text)
    return bool(NAME.match(text)) and not text.endswith(".ckpt") and not Path(text).exists()


def sha256(path: Path) -> str:
    """The file's SHA-256, in hexadecimal."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Released:
    """A released model's folder and manifest."""

    name: str
    folder: Path
    manifest: dict[str, Any]

    @property
    def src_lang(self) -> str:
        return self.manifest["src_lang"]

    @property
    def tgt_lang(self) -> str:
        return self.manifest["tgt_lang"]

    @property
    def results(self) -> dict[str, Any]:
        """The card's figures (``results.json``; empty before the benchmark wrote them)."""
        path = self.folder / RESULTS
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def verified(self, file: str) -> Path:
        """``file`` of the folder, once its sha256 is the manifest's; else a one-line
        refusal naming the file and how to get it back."""
        path = self.folder / file
        recorded = self.manifest["files"].get(file, {}).get("sha256")
        restore = (
            f"restore it (`git checkout -- {path}` in a checkout) or point {MODELS_ENV} at "
            "an intact models folder"
        )
        if recorded is None:
            raise CheckpointError(f"{path} is not listed in {self.folder / MANIFEST}")
        if not path.is_file():
            raise CheckpointError(f"the released model {self.name} lacks {path}: {restore}")
        if sha256(path) != recorded:
            raise CheckpointError(
                f"{path} is not the file released as {self.name} (its sha256 differs from "
                f"the one in {MANIFEST}: altered or truncated); {restore}"
            )
        return path

    @property
    def checkpoint(self) -> Path:
        """The model's checkpoint, verified."""
        return self.verified(MODEL_FILE)

    @property
    def alignment(self) -> dict[str, Any] | None:
        """How its word links are best read, as the manifest records it (``layer``,
        ``head``, ``shift``, ``method``: chosen on held-out gold alignments); None: the mean over
        layers and heads."""
        return self.manifest.get("alignment") or None

    @property
    def casing(self) -> Path | None:
        """The casing table that recases its lowercase output, verified (None: it writes
        cased text itself)."""
        table = self.manifest.get("casing")
        return self.verified(table) if table else None


def resolve(name: str, folder: Path | None = None) -> Released:
    """The released model called ``name``; an error listing the names there are."""
    folder = folder or models_folder()
    manifest = folder / name / MANIFEST
    if not manifest.is_file():
        names = released_names(folder)
        there = f"released models: {', '.join(names)}" if names else f"no models in {folder}"
        hint = "" if names else f" (set {MODELS_ENV} to a models folder)"
        raise Seq2SeqError(f"no released model called {name!r} ({there}){hint}")
    return Released(name, folder / name, json.loads(manifest.read_text(encoding="utf-8")))


KEPT_PAYLOAD = (
    "vocab",
    "config",
    "search",
    "precision",
)  # what translating needs, and how it trained


def without_machine_paths(config: Any) -> Any:
    """A run config with every absolute path (the run's checkpoint folders, caches) set to
    None: where one machine kept its files is nobody else's business."""
    if isinstance(config, dict):
        return {key: without_machine_paths(value) for key, value in config.items()}
    if isinstance(config, list):
        return [without_machine_paths(value) for value in config]
    return None if isinstance(config, str) and config.startswith("/") else config


def half_precision(checkpoint: dict[str, Any], search: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint to release from a trained one: its weights in float16 (tied weights
    still one tensor), its payload without the run's random states and file paths, and
    ``search`` (the search chosen on val) as the model's own."""
    import torch
    import yaml

    from seq2seq.inference.checkpoint import CHECKPOINT_KEY, tie_like

    weights = checkpoint["state_dict"]
    state = {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()}
    tie_like(state, weights)
    payload = {key: checkpoint[CHECKPOINT_KEY][key] for key in KEPT_PAYLOAD
               if key in checkpoint[CHECKPOINT_KEY]}  # fmt: skip
    config = without_machine_paths(yaml.safe_load(payload["config"]))
    payload["config"] = yaml.safe_dump(config, sort_keys=False)
    payload["search"] = search
    return {"state_dict": state, CHECKPOINT_KEY: payload}


def write_manifest(folder: Path, manifest: dict[str, Any], files: list[str]) -> Path:
    """``manifest`` with the sha256 and size of each of ``files`` (of ``folder``), written
    as the folder's ``manifest.json``."""
    manifest = {**manifest, "files": {
        file: {"sha256": sha256(folder / file), "bytes": (folder / file).stat().st_size}
        for file in files
    }}  # fmt: skip
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


FIGURES_START = "<!-- figures: written by scripts/bench/bench_models.py from results.json -->"
FIGURES_END = "<!-- end of figures -->"


def card_figures(results: dict[str, Any]) -> str:
    """The figures block of a model card, from its ``results.json``: what the card shows
    between ``FIGURES_START`` and ``FIGURES_END`` (a test holds the two to each other)."""
    test = results["test_2016_flickr"]
    sacre = f"{test['bleu']:.2f}" if test["cased"] else "(lowercase output)"
    rows = [
        ("parameters", results["parameters"]),
        ("file (float16)", f"{results['file_mib']:.1f} MiB"),
        ("test_2016 literature BLEU", f"{test['bleu_literature']:.2f}"),
        ("test_2016 sacreBLEU" + (" (recased)" if results.get("recased") else ""), sacre),
        ("test_2016 chrF", f"{test['chrf']:.2f}"),
        ("beam 5, sentences/s", f"{results['beam5_sentences_per_sec']:.1f}"),
        ("measured on", f"{results['cpu']}, {results['threads']} threads"),
    ]
    full = results.get("full_precision")
    if full:
        rows.append(("literature BLEU of the float32 checkpoint", f"{full['bleu_literature']:.2f}"))
        rows.append(("translations equal to the float32 checkpoint's",
                     f"{full['equal_lines']} of {full['lines']}"))  # fmt: skip
    rows += _outside_rows(results.get("outside", {}))
    lines = ["| figure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join([FIGURES_START, *lines, FIGURES_END])


def _outside_rows(outside: dict[str, Any]) -> list[tuple[str, str]]:
    """The card's rows of the model exported to transformers and to CTranslate2
    (``scripts/bench/bench_outside.py``), where it was measured."""
    rows = []
    if hf := outside.get("in_transformers"):
        config = hf["generation_config"]
        rows += [
            (f"transformers {hf['transformers']} (no seq2seq installed): beam-"
             f"{config['num_beams']} translations equal to seq2seq's, length penalty 0 in both",
             f"{hf['equal_lines']} of {hf['lines']}"),
            (f"transformers, the export's generation config (length penalty "
             f"{config['length_penalty']}): literature BLEU / sacreBLEU",
             f"{hf['defaults']['bleu_literature']:.2f} / {hf['defaults']['bleu']:.2f}"),
        ]  # fmt: skip
    if ct2 := outside.get("in_ctranslate2"):
        engines = ct2["engines"]
        for quantization in ("float32", "int8"):
            engine = engines[f"ct2-{quantization}"]
            rows.append((
                f"CTranslate2 {ct2['ctranslate2']} {quantization}: literature BLEU / beam-5 "
                f"sentences/s (x seq2seq's {engines['seq2seq-fp32']['sentences_per_s']:.1f})",
                f"{engine['bleu_literature']:.2f} / {engine['sentences_per_s']:.1f} "
                f"({engine['speed_ratio']:.2f}x)",
            ))  # fmt: skip
    return rows
