"""``GET /``: a page where a person types a sentence and sees its translation, the heatmap
of the attention and the word alignment, live.

It is the HTML report of ``seq2seq attention`` (``alignment.report``: its styles, its
heatmap and hover script, its layer and head selector) with a form in front: the page
posts the sentence to ``/translate`` with ``attention`` and ``alignment`` on and hands the
answer to the report's ``addSentence``. Self-contained: no external script, style or font.
"""

from __future__ import annotations

from seq2seq.inspection.report import STYLE, head_views, page_html

FORM_STYLE = """
form { display: flex; gap: 0.5em; margin: 1em 0; }
form input[type=text] { flex: 1; font-size: 1.1em; padding: 0.3em; }
#status { color: #b00; }
"""

LIVE_SCRIPT = """
const form = document.getElementById("ask");
const status = document.getElementById("status");

function record(source, hyp) {
  const a = hyp.attention;  // heads [L][H][T][S] -> w [T][L*H][S], weights x 1000
  const groups = a.heads.flat();
  const w = a.target.map((_, t) => groups.map(g => g[t].map(x => Math.round(1000 * x))));
  return {index: 0, source: source, target: hyp.text, src: a.source, tgt: a.target, w: w,
          links: hyp.alignment};
}

form.addEventListener("submit", async event => {
  event.preventDefault();
  const source = document.getElementById("source").value;
  const beam = Number(document.getElementById("beam").value);
  status.textContent = "translating\\u2026";
  const answer = await fetch("translate", {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({text: [source], beam: beam, alignment: true, attention: true}),
  });
  const body = await answer.json();
  if (!answer.ok) { status.textContent = body.error; return; }
  status.textContent = "";
  const hyp = body.results[0].translations[0];
  document.getElementById("translation").textContent = hyp.text;
  document.getElementById("sentences").replaceChildren();
  sections.length = 0;
  if (hyp.attention) addSentence(record(source, hyp));
});
"""

FORM = """<form id="ask">
<input type="text" id="source" placeholder="a sentence to translate" autofocus>
<label>beam <input type="number" id="beam" min="1" max="{max_beam}" value="{beam}"></label>
<button type="submit">Translate</button>
</form>
<p id="status"></p>
<p>Translation: <strong id="translation"></strong></p>
"""


def live_page(title: str, layers: int, heads: int, beam: int, max_beam: int) -> str:
    """The page for a model whose attention has ``layers`` x ``heads`` maps."""
    views, default = head_views(layers, heads, None)
    data = {"views": views, "defaultView": default, "sentences": []}
    return page_html(
        title,
        data,
        style=STYLE + FORM_STYLE,
        above=FORM.format(beam=beam, max_beam=max_beam),
        below=f"<script>{LIVE_SCRIPT}</script>\n",
    )
