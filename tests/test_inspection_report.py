"""The HTML report: self-contained, and hovering a target token in a real browser (headless
Chromium) highlights the source tokens it attends to."""

from __future__ import annotations

import json
import re

import pytest
import torch

from seq2seq.inspection.collect import SentenceAttention
from seq2seq.inspection.report import head_views, write_report


def hand_made_sentence(text: str = "a b c") -> SentenceAttention:
    """2 layers x 2 heads over source "a b c" for target "x y".

    Target x: three heads on "a", layer 2 head 2 on "c" (so the mean over everything
    favors "a", layer 2's mean is split between "a" and "c"). Target y: every head half
    on "b", half on EOS. Target EOS: every head on EOS.
    """
    weights = torch.zeros(3, 2, 2, 4)  # [T, L, H, S]
    weights[0, :, :, 0] = 1.0
    weights[0, 1, 1] = torch.tensor([0.0, 0.0, 1.0, 0.0])
    weights[1, :, :, 1] = weights[1, :, :, 3] = 0.5
    weights[2, :, :, 3] = 1.0
    return SentenceAttention(
        index=0,
        source=text,
        target="x y",
        src_pieces=["▁a", "▁b", "▁c", "</s>"],
        tgt_pieces=["▁x", "▁y", "</s>"],
        weights=weights,
    )


def test_the_report_is_one_file_without_any_network_reference(tmp_path):
    sneaky = 'see https://example.org/x.js and http://a.b </script><script src="//c.d">'
    path = write_report([hand_made_sentence(sneaky)], {0: "0-0 1-1"}, tmp_path / "r.html")
    page = path.read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(script|img|link|iframe)[^>]*\b(src|href)=", page)
    assert "@import" not in page and "url(" not in page
    assert page.count("</script>") == 2  # the data block and the inline script, nothing else
    data = page.split('<script type="application/json" id="data">')[1].split("</script>")[0]
    assert json.loads(data)["sentences"][0]["source"] == sneaky  # the text survives intact


def test_selector_views_of_layers_and_heads():
    views, default = head_views(layers=2, heads=2, layer=None)
    assert [v["label"] for v in views] == [
        "mean over all layers and heads",
        "layer 1: mean over heads", "layer 1, head 1", "layer 1, head 2",
        "layer 2: mean over heads", "layer 2, head 1", "layer 2, head 2",
    ]  # fmt: skip
    assert views[default]["heads"] == [0, 1, 2, 3]
    views, default = head_views(layers=2, heads=2, layer=-1)
    assert views[default]["label"] == "layer 2: mean over heads"
    assert head_views(layers=1, heads=1, layer=None) == ([{"label": "attention", "heads": [0]}], 0)


def highlighted(driver) -> list[str]:
    """The source tokens the page outlines as attended to."""
    from selenium.webdriver.common.by import By

    return [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#sentence-0 .src .tok.hl")]


@pytest.mark.slow  # a headless browser
def test_hovering_a_target_token_highlights_its_source_tokens(browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    path = write_report([hand_made_sentence()], {0: "0-0 1-1"}, tmp_path / "report.html")
    browser.get(path.resolve().as_uri())
    targets = browser.find_elements(By.CSS_SELECTOR, "#sentence-0 .tgt .tok")
    assert [t.text for t in targets] == ["▁x", "▁y", "</s>"]
    selector = Select(browser.find_element(By.ID, "view"))
    assert selector.first_selected_option.text == "mean over all layers and heads"
    assert highlighted(browser) == []

    hover = ActionChains(browser)
    hover.move_to_element(targets[0]).perform()
    assert highlighted(browser) == ["▁a"]  # 0.75 on a, 0.25 on c: under half the peak
    assert "active" in targets[0].get_attribute("class")
    hover.move_to_element(targets[1]).perform()
    assert highlighted(browser) == ["▁b", "</s>"]
    hover.move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    assert highlighted(browser) == []  # leaving the token clears the highlight

    selector.select_by_visible_text("layer 2, head 2")
    hover.move_to_element(targets[0]).perform()
    assert highlighted(browser) == ["▁c"]

    selector.select_by_visible_text("layer 2: mean over heads")
    row_label = browser.find_elements(By.CSS_SELECTOR, "#sentence-0 table.heatmap tbody th")[0]
    hover.move_to_element(row_label).perform()  # the heatmap's row labels hover too
    assert highlighted(browser) == ["▁a", "▁c"]
    cells = browser.find_elements(By.CSS_SELECTOR, "#sentence-0 table.heatmap tbody tr")
    assert len(cells) == 3 and len(cells[0].find_elements(By.TAG_NAME, "td")) == 4
