"""Small datasets for judge tests, built from the shared factories."""

from typing import Any

from annotations.models import Dataset
from judging import services
from judging.models import JudgeRun
from tests.factories import AspectFactory, DatasetFactory, ItemFactory, ResponseFactory, SystemFactory, TurnFactory


def make_dataset(
    *,
    items: int = 3,
    systems: int = 2,
    aspects: tuple[tuple[str, float, float], ...] = (("overall", 1, 5),),
    owner: Any = None,
    reference: bool = True,
    japanese: bool = False,
    name: str | None = None,
) -> Dataset:
    kwargs: dict[str, Any] = {"owner": owner}
    if name:
        kwargs["name"] = name
    dataset = DatasetFactory(**kwargs)
    for position, (aspect, lo, hi) in enumerate(aspects):
        AspectFactory(
            dataset=dataset,
            name=aspect,
            label=aspect.title(),
            description=f"How good the answer is on {aspect}.",
            min_value=lo,
            max_value=hi,
            ideal=hi,
            position=position,
        )
    system_rows = [SystemFactory(dataset=dataset, key=f"llm_{chr(97 + s)}", position=s) for s in range(systems)]
    for i in range(items):
        item = ItemFactory(dataset=dataset, external_id=f"item-{i}", position=i)
        prompt = f"日本の首都について説明してください。({i})" if japanese else f"Explain topic number {i}."
        ref = ("東京は日本の首都です。" if japanese else f"Topic {i} is explained like this.") if reference else None
        turn = TurnFactory(item=item, index=0, prompt=prompt, reference=ref)
        for s, system in enumerate(system_rows):
            text = (
                f"東京が首都です。回答{i}-{s}" if japanese else f"Answer {i} from system {s}: topic {i} is explained."
            )
            ResponseFactory(turn=turn, system=system, position=s, text=text)
    return dataset


def judge_config(fake: Any, *, name: str, **settings: Any) -> dict[str, Any]:
    """A single-method judge config sending to the local fake provider `fake`, with the test's own settings."""
    return {
        "name": name,
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        "timeout_s": 5,
        **settings,
    }


def launch(dataset: Dataset, cfg: dict[str, Any], capture: Any, launched_by: Any = None, **kwargs: Any) -> JudgeRun:
    """Launch a run with its on-commit enqueue executed (`capture` is django_capture_on_commit_callbacks), and
    return it as stored once the eager tasks are done."""
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=cfg, launched_by=launched_by, **kwargs)
    run.refresh_from_db()
    return run
