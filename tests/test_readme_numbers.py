"""The front page cannot drift: README.md is at most 200 lines, its generated blocks are what
the generator writes from the JSONs, and every figure in its prose (a decimal number or a
percentage, outside code and generated blocks) is found in a JSON its paragraph cites."""

import json
import re
from pathlib import Path

from unified.eval.experiments import results_table as rt

REPO = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?![\w.])|\d+(?:\.\d+)? ?%")
CITED = re.compile(r"([\w.-]+\.json)")


def prose(text: str) -> list[str]:
    """Paragraphs outside fenced code and generated blocks, inline code removed."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for begin, end, _ in rt.BLOCKS:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), "", text, flags=re.S)
    return [re.sub(r"`[^`]*`", "", p) for p in text.split("\n\n")]


def numbers(body) -> set[float]:
    if isinstance(body, dict):
        return set().union(*(numbers(v) for v in body.values())) if body else set()
    if isinstance(body, list):
        return set().union(*(numbers(v) for v in body)) if body else set()
    return {float(body)} if isinstance(body, (int, float)) and not isinstance(body, bool) else set()


def unchecked(text: str, results: Path) -> list[str]:
    """Every figure in prose that no JSON cited in its paragraph holds (at the figure's precision)."""
    found = []
    for paragraph in prose(text):
        cited = [results / name for name in CITED.findall(paragraph) if (results / name).exists()]
        held = set().union(*(numbers(json.loads(p.read_text())) for p in cited)) if cited else set()
        for figure in FIGURE.findall(paragraph):
            value = figure.replace("%", "").strip()
            places = len(value.split(".")[1]) if "." in value else 0
            scale = 100 if "%" in figure else 1
            if not any(round(x * scale, places) == float(value) for x in held):
                found.append(f"{figure!r} in: {paragraph.strip()[:80]}...")
    return found


def test_readme_is_short_and_its_figures_come_from_json():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert unchecked(text, REPO / "docs" / "results") == []
    for begin, end, make in rt.BLOCKS:
        if begin in text:
            assert rt.check(REPO / "README.md", make(REPO / "docs" / "results"), begin, end) == ""


def test_a_typed_figure_is_caught(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"gain": 0.077, "p": [0.0063]}))
    text = (
        "The mix gained 0.077 (`r.json`: r.json), p 0.0063.\n\nIt was 0.19 somewhere.\n\n"
        "Code `0.5` is no figure.\n\n<!-- headline -->\n| 0.3 |\n<!-- /headline -->\n"
    )
    assert unchecked(text, tmp_path) == ["'0.19' in: It was 0.19 somewhere...."]
