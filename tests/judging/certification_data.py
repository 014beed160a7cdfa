"""Rated datasets and a judge that reads the true score, for the certification tests."""

import re
from typing import Any

from annotations.models import Rater, Rating, RatingOrigin, Response
from tests.judging.factories import make_dataset

SNAPSHOT = "gpt-4o-mini-2024-07-18"
TRUE_SCORE = re.compile(r"true quality (\d)")


def true_score(response_id: int) -> int:
    return 1 + response_id % 5


def rated_dataset(items: int = 40) -> Any:
    """One answer per item, its true quality written in the answer, one rater exact, two
    others off by at most one point."""
    dataset = make_dataset(items=items, systems=1)
    aspect = dataset.aspects.get(name="overall")
    raters = [Rater.objects.create(dataset=dataset, pseudonym=f"rater-{r}", external_id=f"r{r}") for r in range(3)]
    for response in Response.objects.filter(turn__item__dataset=dataset):
        truth = true_score(response.pk)
        response.text = f"{response.text} (true quality {truth})"
        response.save(update_fields=["text"])
        for offset, rater in enumerate(raters):
            noise = ((response.pk + offset) % 3) - 1 if offset else 0
            value = min(5, max(1, truth + noise))
            Rating.objects.create(
                response=response, aspect=aspect, rater=rater, value=value, raw=value, origin=RatingOrigin.IMPORT
            )
    return dataset


def answer_with_truth(shift: int = 0) -> Any:
    def content(body: dict[str, Any]) -> str:
        found = TRUE_SCORE.search(body["messages"][-1]["content"])
        score = int(found.group(1)) if found else 3
        return f"The answer is as good as it says. Score: {min(5, max(1, score + shift))}"

    return content
