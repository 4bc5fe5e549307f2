"""The benchmark's page, its tables and its picture, from what ``bench_align`` measured."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from scripts.bench.alignment.gold import SETS
from scripts.bench.benchkit import figure, markdown_table


def trial_choice(choice: dict[str, Any], what: str) -> str:
    """A sentence: how the trial set chose to join ``what``, with each way's trial AER."""
    tried = ", ".join(f"{how} {100 * aer:.1f}" for how, aer in choice["trial_aer"].items())
    return f"the trial set joins {what} by **{choice['chosen']}** (trial AER %: {tried})."


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def table(record: dict[str, Any]) -> list[str]:
    """One row per system: AER [interval], precision, recall, against eflomal."""
    rows = []
    for name, r in record["systems"].items():
        low, high = r["aer_interval"]
        versus = r.get("vs_eflomal")
        rows.append(
            [
                name,
                f"{percent(r['aer'])} [{percent(low)}, {percent(high)}]",
                percent(r["precision"]),
                percent(r["recall"]),
                f"{100 * versus[0]:+.1f} to {100 * versus[1]:+.1f}" if versus else "—",
            ]
        )
    return markdown_table(
        ["system", "AER % [95% interval]", "precision %", "recall %", "AER − eflomal's (95%)"], rows
    )


def draw(results: dict[str, Any], path: Path) -> None:
    """One sentence of the first set, aligned by each system beside the gold."""
    record = results["sets"][SETS[0].name]
    left, right = record["picture_words"]
    sure = {tuple(link) for link in record["picture_gold"]["sure"]}
    possible = {tuple(link) for link in record["picture_gold"]["possible"]} | sure
    names = record["picture_systems"]
    columns = min(3, len(names) + 1)
    rows = -(-(len(names) + 1) // columns)
    with figure(
        path, figsize=(5.2 * columns, 4.6 * rows), nrows=rows, ncols=columns, squeeze=False
    ) as axes:
        panels = [
            ("gold (■ sure, □ possible)", None),
            *((n, record["picture_links"][n]) for n in names),
        ]
        for ax, (title, links) in zip(axes.flat, panels, strict=False):
            for i, j in possible:
                ax.add_patch(_square(i, j, filled=(i, j) in sure))
            if links is not None:
                links = {tuple(link) for link in links}
                hits = [(i, j) for i, j in links if (i, j) in possible]
                misses = [(i, j) for i, j in links if (i, j) not in possible]
                for points, colour in [(hits, "tab:green"), (misses, "tab:red")]:
                    if points:
                        ax.scatter(
                            [i for i, _ in points],
                            [j for _, j in points],
                            s=40,
                            color=colour,
                            zorder=3,
                        )
            ax.set_xlim(-0.5, len(left) - 0.5)
            ax.set_ylim(len(right) - 0.5, -0.5)
            ax.set_xticks(range(len(left)), left, rotation=60, ha="right", fontsize=8)
            ax.set_yticks(range(len(right)), right, fontsize=8)
            ax.set_title(textwrap.fill(title, 48), fontsize=9)
            ax.set_aspect("equal")
        for ax in list(axes.flat)[len(panels) :]:
            ax.axis("off")
        axes.flat[0].figure.suptitle("One Hansards sentence: links on gold (green), off it (red)")


def _square(i: int, j: int, filled: bool) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle(
        (i - 0.45, j - 0.45), 0.9, 0.9, facecolor="0.75" if filled else "none", edgecolor="0.45"
    )


def training_seconds(results: dict[str, Any]) -> float:
    """The seconds of everything the benchmark trains, over every set: the fine-tunes, the
    guided twins, the model of the other direction, and eflomal's and fast_align's runs."""
    total = 0.0
    for record in results["sets"].values():
        total += sum(
            record.get(key, 0)
            for key in ("finetune_seconds", "guided_finetune_seconds", "reverse_guided_seconds")
        )
        total += sum(record.get("aligner_seconds", {}).values())
        total += sum(twin["fit_seconds"] for twin in record.get("twins", {}).values())
        total += record.get("reverse", {}).get("fit_seconds", 0)
    return total


def write_doc(results: dict[str, Any], doc: Path, picture: Path, command: str) -> None:
    """The markdown page: one table per set, the trial's choice, the picture."""
    lines = [
        "# Word alignments on human gold",
        "",
        "Written by `scripts/bench/bench_align.py` (`make bench-align`) on "
        f"{results['cpu']}, {results['date']}:",
        "",
        f"    {command}",
        "",
    ]
    lines += [
        "Every system is trained on the same data: Multi30k's 29,000 training pairs of the "
        "language pair (image captions). The gold is parliamentary text, so these AERs are far "
        "from the published ones of systems trained on a million in-domain pairs (below), and "
        "only the rows of one table compare. eflomal and fast_align also see the gold's "
        "sentence pairs (never their links), as unsupervised aligners are run; the released "
        "models do not, and the fine-tuned rows are those models trained further on the same "
        "sentence pairs (never their links) with `configs/finetune.yaml`.",
        "",
        "A model's rows name the attention its links are read from as `seq2seq.Extraction` "
        "does, in the words of `translate --alignment`'s options: the mean over layers and "
        "heads or `layer L head H` (`--alignment-layer`, `--alignment-head`; -2: the layer "
        "before last), `+ shift` for Shift-Att (`--alignment-shift`: a word's links read at "
        "the step that has it as input, Chen et al. 2020), and the rule when it is not argmax "
        "(`, mutual-argmax`: only pairs that are each other's best match).",
        "",
    ]
    for name, record in results["sets"].items():
        unseen = ", ".join(f"{lang} {100 * share:.0f}%" for lang, share in record["unseen"].items())
        lines += [
            f"## {name}: {record['pairs']} pairs",
            "",
            f"Words never seen in Multi30k's training text: {unseen}.",
            "",
        ]
        lines += table(record)
        lines.append("")
        for label, model in record["models"].items():
            if "chosen" in model:
                lines += [
                    f"{label}: the trial set ({record['trial_pairs']} pairs) chose "
                    f"**{model['chosen']}** among {len(model['trial_candidates'])} "
                    "extractions.",
                    "",
                ]
        for system, choice in record.get("aligner_choice", {}).items():
            if choice["trial_aer"]:
                lines += [f"{system}: {trial_choice(choice, 'its two directions')}", ""]
        for joined, choice in record.get("joined_choice", {}).items():
            lines += [f"{joined}: {trial_choice(choice, 'the two models')}", ""]
        for system, why in record.get("not_run", {}).items():
            lines += [f"{system}: {why}.", ""]
        first = next(iter(record["models"].values()))
        lines += [
            f"The model's links of the {record['pairs']} pairs took {first['seconds']} s "
            "(forced decoding and the mean's extraction, one process, the model loaded).",
            "",
        ]
        if "twins" in record:
            guide = record.get("twin_guide", {})
            lines += [
                "The guided-alignment twins (trained alike but for the guided head; each "
                "chosen on Multi30k's val), on Multi30k's test_2016. The guided head learns "
                f"eflomal's {guide.get('eflomal', 'grow-diag-final')} links of the text "
                "eflomal aligned above (the trial set's choice), moved from its tokens to the "
                "words of Multi30k as written"
                + (
                    f" ({guide['unmapped_lines']} training pairs left without links: their "
                    "tokens do not spell their words)"
                    if guide.get("unmapped_lines")
                    else ""
                )
                + ":",
                "",
            ]
            lines += markdown_table(
                ["twin", "literature BLEU", "sacreBLEU", "chrF", "fit"],
                [
                    [
                        label,
                        *(
                            f"{twin['test_2016'][k]:.2f}"
                            for k in ("bleu_literature", "bleu", "chrf")
                        ),
                        f"{twin['fit_seconds'] / 60:.1f} min",
                    ]
                    for label, twin in record["twins"].items()
                ],
            )
            lines.append("")
        if "finetune_seconds" in record:
            lines += [
                f"Its fine-tuning on the gold's pairs took {record['finetune_seconds']} s.",
                "",
            ]
        if "reverse" in record:
            reverse = record["reverse"]
            limit = reverse.get("max_minutes")
            lines += [
                "The model of the other direction was trained here, once, on Multi30k alone by "
                f"the released model's recipe ({', '.join(f'`{c}`' for c in reverse['recipe'])}"
                ", the languages swapped"
                + (f", `--trainer.max_time` {limit} min" if limit else "")
                + f"): {reverse['fit_seconds'] / 60:.0f} min on "
                f"{reverse['cpu']}. The symmetrized rows join its trial choice with a forward "
                "model's, as eflomal's two directions are joined.",
                "",
            ]
        if "guided_finetune_seconds" in record:
            guide = record.get("aligner_choice", {}).get("eflomal", {}).get("chosen")
            lines += [
                "The guided twin trained further on the gold's pairs learns, in its guided "
                f"head, eflomal's {guide or 'grow-diag-final'} links of those pairs (eflomal's "
                "output in the rows above, never the gold's links"
                + (", symmetrized as the trial set chose" if guide else "")
                + f"), at a weight of {record['guided_finetune_weight']:g}; this "
                f"took {record['guided_finetune_seconds']} s.",
                "",
            ]
        if "reverse_guided_seconds" in record:
            lines += [
                "The model of the other direction learns the same links turned round, on the "
                "same pairs, by the same updates and weight, starting from its Multi30k "
                f"checkpoint: {record['reverse_guided_seconds']} s. The last symmetrized rows "
                "join the two guided models' trial choices.",
                "",
            ]
    lines += [
        f"Everything this page trains (the fits and the aligners above) took "
        f"{training_seconds(results) / 60:.0f} min on {results['cpu']}.",
        "",
        f"![One sentence aligned by each system]({picture.name})",
        "",
        "## Published AERs on the En-Fr Hansards (not comparable: other training data)",
        "",
    ]
    lines += markdown_table(
        ["system", "AER %", "trained on"],
        [
            ["fast_align, grow-diag", "10.5", "1.1 M in-domain pairs"],
            ["GIZA++, grow-diag", "5.9", "1.1 M in-domain pairs"],
            ["eflomal", "8.2", "1.1 M in-domain pairs"],
            ["Shift-AET (Chen et al. 2020)", "4.7", "1.1 M in-domain pairs"],
        ],
    )
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
