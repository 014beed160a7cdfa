"""A certified judge that is sure (and right) on answers of true quality 1 to 4 and hesitant (and one point low) on
those of quality 5, for the hybrid campaign tests."""

from typing import Any

from annotations.models import Campaign, SamplingStratum
from judging.hybrid import services as hybrid
from tests.fakeprovider import FakeProvider
from tests.judging import factories
from tests.judging.certification_data import SNAPSHOT

SURE, HESITANT = 0.95, 0.55


def script_judge(fake: FakeProvider, served_model: str = SNAPSHOT) -> None:
    rules = [
        {
            "match": f"true quality {truth}",
            "behaviour": {
                "content": f"The answer is as good as it says. Score: {truth}",
                "logprobs": {str(truth): SURE, str(truth % 5 + 1): 1 - SURE},
                "served_model": served_model,
            },
        }
        for truth in range(1, 5)
    ]
    rules.append(
        {
            "match": "true quality 5",
            "behaviour": {
                "content": "Almost perfect. Score: 4",
                "logprobs": {"4": HESITANT, "5": 1 - HESITANT},
                "served_model": served_model,
            },
        }
    )
    fake.script(default={"served_model": served_model}, rules=rules)


def judge_config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    settings = {"max_concurrency": 8, "max_retries": 2, "logprobs": True, "logprob_scoring": "top-token"}
    return factories.judge_config(fake, name="hybrid-judge", **settings) | overrides


def sampling_and_stopping_set(campaign: Campaign, **chosen: Any) -> None:
    """campaign_sampling_set with everything not chosen left at "no policy, no rule" (and half the tasks for humans
    once a policy is chosen)."""
    fields: dict[str, Any] = {
        "human_sampling": "",
        "human_share": 0.5,
        "sampling_stratum": SamplingStratum.SYSTEM,
        "stop_rule": "",
        "stop_aspect_id": None,
        "stop_first": "",
        "stop_second": "",
        "stop_width": None,
    }
    hybrid.campaign_sampling_set(campaign=campaign, **(fields | chosen))
