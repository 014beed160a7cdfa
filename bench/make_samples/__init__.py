"""Writes the demo datasets in annotations/sample_data/ (run: python -m bench.make_samples).

Every prompt, reference and answer in the JSON files beside this module was written for this project. Ratings are
synthetic: each answer has a hand-assigned quality per aspect, and raters score it with seeded noise, so agreement
and judge-vs-human statistics on the sample are meaningful but not perfect. A few llm-jp scores are "NA" (aspect not
applicable) or 0 (the rater skipped it), as in llm-human-eval-jp.
"""

import json
from pathlib import Path
from typing import Any

from bench.make_samples.lfqa import build_lfqa_sample
from bench.make_samples.llm_jp import build_llm_jp_sample

OUT_DIR = Path(__file__).resolve().parents[2] / "annotations" / "sample_data"
HERE = Path(__file__).resolve().parent


def read_data(name: str) -> Any:
    """One of the hand-written JSON files beside this module."""
    return json.loads((HERE / name).read_text(encoding="utf-8"))


def _write_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for line in lines:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _write_jsonl(OUT_DIR / "llm_jp_sample.jsonl", build_llm_jp_sample(read_data("llm_jp_prompts.json")))
    _write_jsonl(OUT_DIR / "lfqa_sample.jsonl", build_lfqa_sample(read_data("lfqa_questions.json")))
    rubric = read_data("lfqa_rubric.json")
    (OUT_DIR / "lfqa_rubric.json").write_text(json.dumps(rubric, ensure_ascii=False, indent=2) + "\n")
    print(f"wrote {OUT_DIR}")
