"""A dataset with a span aspect rated by three raters, and error-span judges that read the true error count.

Each answer ends in "(true errors K)", K = response id mod 4. A rater's rating of an answer is a number of minor
errors (its MQM score under the test scheme, where minor weighs 1): the first error is placed on the word "Answer"
(characters 0..6) by raters 0 and 2, on "Ans" (0..3) in another category by rater 1, and the rest are unplaced.
Rater 0 gives K, raters 1 and 2 K moved by at most one. The judge reports K errors: the first quotes "Answer"
(placed, characters 0..6), the others quote text that is not in the answer.
"""

import json
import re
from typing import Any

from annotations.models import Rater, Response
from judging import services
from judging.models import JudgeRun
from tests.factories import ErrorSpanFactory, RatingFactory, SpanAspectFactory
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

TRUE_ERRORS = re.compile(r"\(true errors (\d)\)")
SNAPSHOT = "gpt-4o-mini-2024-07-18"


def true_errors(response_id: int) -> int:
    return response_id % 4


def rater_errors(response_id: int, rater: int) -> int:
    truth = true_errors(response_id)
    if rater == 0:
        return truth
    return max(0, truth + ((response_id + rater) % 3) - 1)


def span_rated_dataset(*, items: int = 40, owner: Any = None) -> Any:
    dataset = make_dataset(items=items, systems=1, owner=owner)
    aspect = SpanAspectFactory(dataset=dataset, name="errors", label="Errors", position=1)
    raters = [Rater.objects.create(dataset=dataset, pseudonym=f"rater-{r}", external_id=f"r{r}") for r in range(3)]
    for response in Response.objects.filter(turn__item__dataset=dataset):
        response.text = f"{response.text} (true errors {true_errors(response.pk)})"
        response.save(update_fields=["text"])
        for number, rater in enumerate(raters):
            count = rater_errors(response.pk, number)
            rating = RatingFactory(response=response, aspect=aspect, rater=rater, value=count, raw=count)
            for position in range(count):
                placed = position == 0
                ErrorSpanFactory(
                    rating=rating,
                    position=position,
                    start=0 if placed else None,
                    end=(3 if number == 1 else 6) if placed else None,
                    category="Fluency/Grammar" if number == 1 else "Accuracy/Mistranslation",
                    severity="minor",
                )
    return dataset


def judge_reading_truth(shift: int = 0) -> Any:
    """The judge's reply: K (+ shift, where K > 0) minor errors, the first quoting "Answer"."""

    def content(body: dict[str, Any]) -> str:
        found = TRUE_ERRORS.search(body["messages"][-1]["content"])
        count = int(found.group(1)) if found else 0
        if count:
            count = max(0, count + shift)
        errors = [
            {
                "quote": "Answer" if number == 0 else f"missing words {number}",
                "category": "Accuracy/Mistranslation",
                "severity": "minor",
            }
            for number in range(count)
        ]
        return "Checked.\n" + json.dumps({"errors": errors})

    return content


def span_judge_config(fake: FakeProvider, name: str, **overrides: Any) -> dict[str, Any]:
    return {
        "name": name,
        "method": "error_spans",
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        "max_concurrency": 8,
        "timeout_s": 5,
        "max_retries": 2,
        **overrides,
    }


def run_span_judge(dataset: Any, fake: FakeProvider, capture: Any, *, name: str, shift: int = 0) -> JudgeRun:
    """A judge that shifts the error count sends no cached request: its replies differ from the exact judge's."""
    fake.script(default={"served_model": SNAPSHOT})
    fake.content_fn = judge_reading_truth(shift)
    cfg = span_judge_config(fake, name, cache=shift == 0)
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=cfg, launched_by=None)
    run.refresh_from_db()
    return run
