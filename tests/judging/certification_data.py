"""Rated datasets and a judge that reads the true score, for the certification tests."""

import re
from collections.abc import Callable
from typing import Any

from annotations.models import Rater, Rating, RatingOrigin, Response
from judging import services
from judging.models import JudgeRun, RunStatus
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider
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


WORKER_ENV = {"JUDGE_API_BASE_ALLOWLIST": "127.0.0.1", "JUDGE_RETRY_BASE_MS": "20", "JUDGE_RETRY_CAP_S": "1"}


def versioned_run_on_workers(
    fake_provider: FakeProvider, celery_worker_factory: Any, *, name: str, content_fn: Callable[..., Any]
) -> tuple[Any, JudgeRun]:
    """A rated dataset judged on real worker processes by a single-score judge that the provider serves as SNAPSHOT,
    once its run has ended with a version."""
    fake_provider.script(default={"served_model": SNAPSHOT})
    fake_provider.content_fn = content_fn
    dataset = rated_dataset()
    celery_worker_factory(extra_env=WORKER_ENV)
    config = {
        "name": name,
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake_provider.base_url,
        "max_concurrency": 8,
        "timeout_s": 5,
        "max_retries": 3,
    }
    run = services.judge_run_launch(dataset=dataset, config=config, launched_by=None)

    def run_versioned() -> bool:
        run.refresh_from_db()
        return run.status not in (RunStatus.QUEUED, RunStatus.RUNNING) and run.version_id is not None

    wait_for(run_versioned, timeout=120, message="the judge run to end with a version")
    return dataset, run


def versioned_run_in_process(
    dataset: Any, fake: FakeProvider, capture: Any, *, name: str, content_fn: Callable[..., Any]
) -> JudgeRun:
    """The dataset judged in this process (its tasks run on commit) by a single-score judge that the provider serves
    as SNAPSHOT; the run has ended with a version."""
    fake.script(default={"served_model": SNAPSHOT})
    fake.content_fn = content_fn
    config = {
        "name": name,
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        "timeout_s": 5,
        "max_retries": 2,
    }
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=config, launched_by=None)
    run.refresh_from_db()
    assert run.version is not None
    return run
