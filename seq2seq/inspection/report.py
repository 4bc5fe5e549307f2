"""A self-contained HTML report for exploring attention in a browser.

One file, no network: the styles and the script are inline and the attention travels as
JSON inside the page (every ``/`` and ``<`` in it escaped, so no URL or closing tag can
appear, whatever the sentences hold). For every sentence the page shows its source and
target pieces and a heatmap drawn as a table; hovering a target piece (in the sentence
or in the heatmap) shades each source piece by the attention it receives and outlines
those with at least half the row's peak. For multi-head attention a selector switches
between the heads, each layer's mean over heads and the mean over everything; local
attention's windows are outlined in the heatmap and ``p_t`` is marked with a dot.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from seq2seq.common.atomic import write_atomically
from seq2seq.inspection.collect import SentenceAttention
from seq2seq.inspection.maps import as_layers_heads, check_layer

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
section { border-top: 1px solid #ccc; padding: 0.8em 0; }
.text { margin: 0.2em 0; }
.tokens { margin: 0.4em 0; line-height: 2; }
.tok { padding: 0.15em 0.25em; margin: 0 1px; border: 2px solid transparent; border-radius: 3px;
       font-family: ui-monospace, monospace; cursor: default; }
.src .tok.hl { border-color: #d62728; }
.tgt .tok.active, tr.active th { background: #ffd54f; }
table.heatmap { border-collapse: collapse; margin-top: 0.5em; }
table.heatmap th { font: 12px ui-monospace, monospace; padding: 0 4px; white-space: nowrap; }
table.heatmap thead th { writing-mode: vertical-rl; text-align: left; vertical-align: bottom; }
table.heatmap tbody th { text-align: right; cursor: default; }
table.heatmap td { width: 16px; height: 16px; padding: 0; text-align: center; font-size: 10px;
                   color: #d62728; }
table.heatmap td.win { box-shadow: inset 0 0 0 1px #ff7f0e; }
.links { font-family: ui-monospace, monospace; color: #555; }
.label { color: #777; font-size: 0.85em; display: inline-block; width: 4.5em; }
"""

SCRIPT = """
const data = JSON.parse(document.getElementById("data").textContent);
const view = document.getElementById("view");
const sections = [];

function element(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function mapOf(s) {
  const heads = data.views[Number(view.value)].heads;
  return s.w.map(row => row[0].map((_, k) =>
    heads.reduce((sum, g) => sum + row[g][k], 0) / (1000 * heads.length)));
}

function highlight(sec, t) {
  const row = sec.map[t];
  const peak = Math.max(...row);
  sec.srcTokens.forEach((tok, k) => {
    tok.style.backgroundColor = "rgba(33, 113, 181, " + row[k].toFixed(3) + ")";
    tok.classList.toggle("hl", row[k] > 0 && row[k] >= 0.5 * peak);
    tok.title = "attention " + row[k].toFixed(3);
  });
  sec.tgtTokens.forEach((tok, k) => tok.classList.toggle("active", k === t));
  sec.rows.forEach((tr, k) => tr.classList.toggle("active", k === t));
}

function clear(sec) {
  sec.srcTokens.forEach(tok => { tok.style.backgroundColor = ""; tok.classList.remove("hl"); });
  sec.tgtTokens.forEach(tok => tok.classList.remove("active"));
  sec.rows.forEach(tr => tr.classList.remove("active"));
}

function hoverable(node, sec, t) {
  node.addEventListener("mouseenter", () => highlight(sec, t));
  node.addEventListener("mouseleave", () => clear(sec));
}

function drawHeatmap(sec) {
  const s = sec.data;
  sec.map = mapOf(s);
  sec.table.replaceChildren();
  const head = element("tr");
  head.appendChild(element("th"));
  s.src.forEach(p => head.appendChild(element("th", "", p)));
  sec.table.appendChild(element("thead")).appendChild(head);
  const body = sec.table.appendChild(element("tbody"));
  sec.rows = s.tgt.map((p, t) => {
    const tr = body.appendChild(element("tr"));
    hoverable(tr.appendChild(element("th", "", p)), sec, t);
    sec.map[t].forEach((w, k) => {
      const td = tr.appendChild(element("td"));
      td.style.backgroundColor = "rgba(8, 48, 107, " + w.toFixed(3) + ")";
      td.title = p + " \\u2192 " + s.src[k] + ": " + w.toFixed(3);
      if (s.windows && k >= s.windows[t][0] && k <= s.windows[t][1]) td.classList.add("win");
      if (s.centers && Math.round(s.centers[t]) === k) td.textContent = "\\u2022";
    });
    return tr;
  });
}

data.views.forEach((v, k) => {
  const option = view.appendChild(element("option", "", v.label));
  option.value = String(k);
});
view.value = String(data.defaultView);
document.getElementById("view-label").hidden = data.views.length < 2;

function addSentence(s) {
  const node = document.getElementById("sentences").appendChild(element("section"));
  node.id = "sentence-" + s.index;
  node.appendChild(element("h2", "", "Sentence " + s.index));
  node.appendChild(element("p", "text", "source: " + s.source));
  node.appendChild(element("p", "text", "target: " + s.target));
  const sec = {data: s};
  const src = node.appendChild(element("div", "tokens src"));
  src.appendChild(element("span", "label", "source"));
  sec.srcTokens = s.src.map(p => src.appendChild(element("span", "tok", p)));
  const tgt = node.appendChild(element("div", "tokens tgt"));
  tgt.appendChild(element("span", "label", "target"));
  sec.tgtTokens = s.tgt.map((p, t) => {
    const tok = tgt.appendChild(element("span", "tok", p));
    hoverable(tok, sec, t);
    return tok;
  });
  sec.table = node.appendChild(element("table", "heatmap"));
  node.appendChild(element("p", "links", "word alignment (source-target): " + (s.links || "none")));
  sections.push(sec);
  drawHeatmap(sec);
}

data.sentences.forEach(addSentence);
view.addEventListener("change", () => sections.forEach(sec => { clear(sec); drawHeatmap(sec); }));
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>{title}</h1>
{above}<p>Hover a target piece to see the source pieces it attends to (shaded by weight,
outlined at half the peak or more).</p>
<label id="view-label">Attention shown: <select id="view"></select></label>
<div id="sentences"></div>
<script type="application/json" id="data">{data}</script>
<script>{script}</script>
{below}</body>
</html>
"""


def head_views(layers: int, heads: int, layer: int | None) -> tuple[list[dict], int]:
    """The selector's choices (label and the flat head indices l * H + h they average) and
    the default: the mean over ``layer``'s heads, or over everything when None."""
    everything = list(range(layers * heads))
    if layers * heads == 1:
        return [{"label": "attention", "heads": everything}], 0
    views = [{"label": "mean over all layers and heads", "heads": everything}] if layers > 1 else []
    for l_index in range(layers):
        mine = [l_index * heads + h for h in range(heads)]
        views.append({"label": f"layer {l_index + 1}: mean over heads", "heads": mine})
        views += [
            {"label": f"layer {l_index + 1}, head {h + 1}", "heads": [g]}
            for h, g in enumerate(mine)
        ]
    if layer is None or layers == 1:
        return views, 0
    default = f"layer {check_layer(layer, layers) + 1}: mean over heads"
    return views, next(k for k, v in enumerate(views) if v["label"] == default)


def _sentence_data(sentence: SentenceAttention, links: str) -> dict:
    grid = as_layers_heads(sentence.weights)  # [T, L, H, S]
    T, L, H, S = grid.shape
    per_mille = (grid.reshape(T, L * H, S) * 1000).round().int()
    record = {
        "index": sentence.index,
        "source": sentence.source,
        "target": sentence.target,
        "src": sentence.src_pieces,
        "tgt": sentence.tgt_pieces,
        "w": per_mille.tolist(),  # [T][G][S], weights x 1000
        "links": links,
    }
    if sentence.centers is not None and sentence.windows is not None:
        record["centers"] = [round(c, 2) for c in sentence.centers.tolist()]
        record["windows"] = sentence.windows.tolist()
    return record


def page_html(title: str, data: dict, style: str = STYLE, above: str = "", below: str = "") -> str:
    """The report's page: ``data`` (``views``, ``defaultView``, ``sentences``) drawn by
    ``SCRIPT``; ``above``: HTML between the title and the heatmaps, ``below``: HTML after
    the report's script (the live page puts its form and its own script there)."""
    return PAGE.format(
        title=html.escape(title),
        style=style,
        above=above,
        data=json_for_script(data),
        script=SCRIPT,
        below=below,
    )


def json_for_script(data: object) -> str:
    """JSON that cannot end the script element or spell a URL: ``<`` and ``/`` escaped."""
    return json.dumps(data, ensure_ascii=False).replace("<", "\\u003c").replace("/", "\\/")


def write_report(
    sentences: Sequence[SentenceAttention],
    links: Mapping[int, str],
    path: str | Path,
    title: str = "Attention",
    layer: int | None = None,
) -> Path:
    """Write the report of ``sentences`` (in the order given) with their Pharaoh ``links``
    (by sentence index) to ``path``. ``layer`` picks the default view as in ``summary_map``."""
    layers, heads = (as_layers_heads(sentences[0].weights).shape[1:3]) if sentences else (1, 1)
    views, default = head_views(layers, heads, layer)
    data = {
        "views": views,
        "defaultView": default,
        "sentences": [_sentence_data(s, links.get(s.index, "")) for s in sentences],
    }
    page = page_html(title, data)
    return write_atomically(path, lambda file: file.write(page.encode("utf-8")))
