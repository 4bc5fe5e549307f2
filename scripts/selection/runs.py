"""Training a recipe's seed and scoring its final models: the parts of the protocol that run
``seq2seq fit`` and ``evaluate``, and find which checkpoint a member of an ensemble or a
teacher is."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import (
    averaged,
    best_checkpoint,
    fit_command,
    last_checkpoint,
    load_json,
    recent_checkpoints,
    run,
    save_json,
)
from scripts.bench.benchkit import evaluate as evaluate_command
from scripts.selection.records import (
    AVERAGES,
    LENGTH_PENALTIES,
    METRICS,
    Scores,
    Setting,
    chosen_setting,
    ensemble_choice,
    scores_joined_pieces,
    seed_scores,
)


def evaluate(
    checkpoint: Path | list[Path], src: Path, ref: Path, folder: Path, beam: int, lp: float,
    weights: list[float] | None = None, recase: Path | None = None, remove_bpe: bool = False,
) -> dict[str, float]:  # fmt: skip
    """The scores of one checkpoint (several: an ensemble, weighted by ``weights``, default
    equally) under one length penalty, its translations recased by the table ``recase`` if
    given, their subword-nmt pieces joined with the references' if ``remove_bpe``; the
    hypotheses are kept in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    members = [str(c) for c in checkpoint] if isinstance(checkpoint, list) else str(checkpoint)
    scores = evaluate_command(
        members, src, ref, folder, beam, length_penalty=lp, ensemble_weights=weights,
        recase=recase, remove_bpe=remove_bpe,
    )  # fmt: skip
    return {metric: scores[metric] for metric in METRICS}


def final_models(run_dir: Path, folder: Path) -> dict[str, Path]:
    """A run's candidate final models by name: ``last-K`` for every K of AVERAGES it kept
    enough recent epochs for (``last-1``: its last.ckpt when it kept none), and ``best``
    when a checkpoint was chosen by validation BLEU. A run trained on another machine may
    bring back its averages alone (``folder/last-K.ckpt``, no ``run_dir``): those are its
    candidates."""
    if not run_dir.exists():
        brought = {f"last-{k}": folder / f"last-{k}.ckpt" for k in AVERAGES}
        return {name: path for name, path in brought.items() if path.exists()}
    last, state = last_checkpoint(run_dir)
    recent = recent_checkpoints(run_dir)
    models = {"last-1": recent[-1] if recent else last}
    for k in AVERAGES:
        if k > 1 and len(recent) >= k:
            models[f"last-{k}"] = averaged(recent[-k:], folder / f"last-{k}.ckpt")
    if (best := best_checkpoint(last, state)) != last:
        models["best"] = best
    return models


def fit(args: argparse.Namespace, seed: int, folder: Path) -> dict[str, Any]:
    """Train the recipe with one seed (or find it trained); the fit's time and memory. A
    stopped fit (a last.ckpt but no train.json) continues; the time of each part that stopped
    is kept (stopped.json) and counted in the record of the fit it continues into, which says
    in how many parts the fit ran, and ``resumed`` if its first counted part continued one
    whose time was lost (a part killed with this script): its time is then that of the
    counted parts alone."""
    done, stopped = folder / "train.json", folder / "stopped.json"
    if done.exists():
        return load_json(done)
    resumed = (folder / "run" / "checkpoints" / "last.ckpt").exists()
    seeds = ["--seed_everything", str(seed), "--data.seed", str(seed)]
    command = fit_command(args.config, args.data, folder / "run", *seeds, *args.override)
    command += ["--ckpt_path", "last"] if resumed else []
    print(f"[{args.name} seed {seed}] {' '.join(command[2:])}", flush=True)
    usage = run(command, folder / "fit.out", folder / "fit.log")
    part = {"seconds": usage.seconds, "peak_rss_mb": usage.peak_rss_mb, "resumed": resumed}
    parts = [*(load_json(stopped, []) if resumed else []), part]  # a fresh fit starts anew
    if usage.status != 0:
        save_json(stopped, parts)
        raise RuntimeError(f"training failed (exit {usage.status}), see {folder / 'fit.log'}")
    record = {"seconds": sum(p["seconds"] for p in parts)}
    record |= {"peak_rss_mb": max(p["peak_rss_mb"] for p in parts), "seed": seed}
    record |= {"parts": len(parts), "resumed": parts[0]["resumed"]}
    save_json(done, record)
    stopped.unlink(missing_ok=True)  # counted: train.json holds the parts now
    return record


def score_on_val(
    folder: Path, models: dict[str, tuple[Path | list[Path], list[float] | None]],
    val: tuple[Path, Path], beam: int, remove_bpe: bool = False,
) -> Scores:  # fmt: skip
    """The val scores of every model (its checkpoints and ensemble weights) under every length
    penalty, kept in ``folder``/val.json: a setting scored already is not scored again;
    ``remove_bpe`` as ``evaluate``'s."""
    done = folder / "val.json"
    scores = load_json(done)
    for model, (checkpoint, weights) in models.items():
        for lp in LENGTH_PENALTIES:
            if (key := Setting(model, lp).key) not in scores:
                scratch = folder / "val" / key
                scores[key] = evaluate(
                    checkpoint, *val, scratch, beam, lp, weights, remove_bpe=remove_bpe
                )
                save_json(done, scores)
    return scores


def member_model(out: Path, member: str) -> tuple[Path, Setting]:
    """The model of ``member`` (``recipe:seed``) and its recipe's val-chosen setting, which
    names that model in the seed's run."""
    recipe, _, seed = member.partition(":")
    if scores_joined_pieces(out / recipe):
        sys.exit(f"{recipe} is scored on joined subword-nmt pieces (train --remove-bpe): it "
                 "cannot be an ensemble's member or a teacher")  # fmt: skip
    per_seed = seed_scores(out / recipe)
    if not seed.isdigit() or int(seed) not in per_seed:
        sys.exit(f"no val-scored seed {seed!r} of {recipe!r} in {out} (members are recipe:seed)")
    folder = out / recipe / f"seed{seed}"
    setting = chosen_setting(per_seed)
    return final_models(folder / "run", folder)[setting.model], setting


def teacher_model(out: Path, teacher: str) -> tuple[list[Path], Setting]:
    """The checkpoints of ``teacher`` (``recipe:seed``: one; an ensemble's name: its members)
    and the setting val chose for it (its length penalty; an ensemble's weights)."""
    if ":" in teacher:
        model, setting = member_model(out, teacher)
        return [model], setting
    folder = out / teacher
    if not (folder / "ensemble.json").exists() or not (folder / "val.json").exists():
        sys.exit(f"--teacher {teacher}: neither recipe:seed nor a val-scored ensemble in {out}")
    members = load_json(folder / "ensemble.json")["members"]
    return [member_model(out, member)[0] for member in members], ensemble_choice(folder)[0]
