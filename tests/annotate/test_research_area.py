"""The research area: import with a preview, the campaign builder, annotator invitations and management, the item
browser and gold marking from an item's page. Each page: success, wrong method, no access."""

import io
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.importing import dataset_import
from annotations.models import (
    AnnotatorInvite,
    Aspect,
    Campaign,
    Dataset,
    GoldItem,
    GoldKind,
    Item,
    Rater,
    RecruitmentLink,
    Response,
    Task,
)
from annotations.research.selectors import invite_token_hash
from annotations.roles import researcher_grant
from tests.annotate.factories import lfqa_lines, make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db


def signed_in(user: User) -> Client:
    if user.is_staff:
        researcher_grant(user=user)
    client = Client()
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


def jsonl(lines: list[dict]) -> bytes:
    return "\n".join(json.dumps(line) for line in lines).encode()


def rated_lines() -> list[dict]:
    lines = lfqa_lines(3, systems=2)
    lines[1]["turns"][0]["prompt"] = "Why is the sky blue at noon?"
    for line in lines:
        for answer in line["turns"][0]["responses"].values():
            answer["human_evals"] = {"factuality": [1, 1]}
    # Item q2's first answer: the raters disagree by 3 points, and the judge (0.5) is 2 points from their mean 2.5.
    first = next(iter(lines[2]["turns"][0]["responses"].values()))
    first["human_evals"] = {"factuality": [1, 4]}
    return lines


# --- access -----------------------------------------------------------------------------------------------------


GET_PAGES: list[tuple[str, list[int]]] = [
    ("research-home", []),
    ("research-import", []),
    ("research-campaign-new", []),
    ("research-annotators", []),
]


@pytest.mark.parametrize(("name", "args"), GET_PAGES)
def test_pages_ask_for_a_sign_in_refuse_annotators_and_wrong_methods(name, args, researcher, annotator1):
    url = reverse(name, args=args)
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]
    assert signed_in(annotator1).get(url).status_code == 403
    client = signed_in(researcher)
    assert client.get(url).status_code == 200
    assert client.put(url).status_code == 405


def test_post_only_views_refuse_get_and_annotators(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=1, systems=2)
    item = Item.objects.get(dataset=dataset)
    urls = [
        reverse("research-annotator-invite"),
        reverse("research-annotator-pool-add"),
        reverse("research-annotator-deactivate", args=[annotator1.pk]),
        reverse("research-item-gold", args=[dataset.pk, item.pk]),
        reverse("research-item-gold-remove", args=[dataset.pk, item.pk]),
    ]
    client = signed_in(researcher)
    annotator = signed_in(annotator1)
    for url in (reverse("research-items", args=[dataset.pk]), reverse("research-item", args=[dataset.pk, item.pk])):
        assert client.post(url).status_code == 405, url
        assert annotator.get(url).status_code == 403, url
        assert Client().get(url).status_code == 302, url
    for url in urls:
        assert client.get(url).status_code == 405, url
        assert annotator.post(url).status_code == 403, url
        assert Client().post(url).status_code == 302, url


def test_the_menu_links_the_research_area_for_researchers_only(researcher, annotator1):
    home = reverse("research-home")
    assert f'href="{home}"' in signed_in(researcher).get(reverse("help-index")).content.decode()
    assert f'href="{home}"' not in signed_in(annotator1).get(reverse("help-index")).content.decode()


def test_a_researcher_sees_only_their_own_datasets(researcher, other_researcher):
    theirs = make_dataset("theirs", owner=other_researcher, items=1, systems=2)
    item = Item.objects.get(dataset=theirs)
    client = signed_in(researcher)
    assert "theirs" not in client.get(reverse("research-home")).content.decode()
    assert client.get(reverse("research-items", args=[theirs.pk])).status_code == 404
    assert client.get(reverse("research-item", args=[theirs.pk, item.pk])).status_code == 404
    assert client.get(reverse("research-campaign-new"), {"dataset": theirs.pk}).status_code == 404
    gold = {"gold-1-1": "2", "kind": "gold", "tolerance": "0"}
    assert client.post(reverse("research-item-gold", args=[theirs.pk, item.pk]), gold).status_code == 404
    assert not GoldItem.objects.exists()


# --- import -----------------------------------------------------------------------------------------------------


def test_import_previews_the_rubric_and_first_items_without_writing_then_imports(researcher):
    client = signed_in(researcher)
    url = reverse("research-import")
    body = jsonl(rated_lines())
    preview = client.post(
        url, {"name": "study", "file": SimpleUploadedFile("d.jsonl", body), "preview": "1"}, follow=False
    )
    html = preview.content.decode()
    assert preview.status_code == 200, html[:2000]
    assert "factuality" in html and "Why is the sky blue at noon?" in html and "q0" in html
    assert not Dataset.objects.filter(name="study").exists()
    done = client.post(url, {"name": "study", "file": SimpleUploadedFile("d.jsonl", body), "import": "1"})
    dataset = Dataset.objects.get(name="study", owner=researcher)
    assert done.status_code == 302 and done["Location"] == reverse("research-items", args=[dataset.pk])
    assert dataset.items.count() == 3


def test_a_bad_file_is_refused_with_its_problem_and_nothing_is_written(researcher):
    client = signed_in(researcher)
    response = client.post(
        reverse("research-import"),
        {"name": "broken", "file": SimpleUploadedFile("d.jsonl", b'{"id": "x"}\nnot json'), "import": "1"},
    )
    assert response.status_code == 400
    assert "nothing was imported" in response.content.decode()
    assert not Dataset.objects.filter(name="broken").exists()


# --- campaign builder -------------------------------------------------------------------------------------------


def test_the_builder_offers_only_the_chosen_datasets_aspects(researcher, annotator1):
    first = make_dataset("first", owner=researcher, items=2, systems=2)
    make_dataset("second", owner=researcher, items=2, systems=2)
    client = signed_in(researcher)
    chooser = client.get(reverse("research-campaign-new")).content.decode()
    assert "first" in chooser and "second" in chooser
    html = client.get(reverse("research-campaign-new"), {"dataset": first.pk}).content.decode()
    own = set(Aspect.objects.filter(dataset=first).values_list("pk", flat=True))
    offered = {int(pk) for pk in re.findall(r'name="aspects" value="(\d+)"', html)}
    assert offered == own and len(offered) == 2
    assert html.count("Factuality") == 1


def builder_post(dataset: Dataset, annotator: User, **extra: str) -> dict:
    if not Campaign.objects.filter(annotators=annotator, dataset__owner=dataset.owner).exists():
        make_campaign(make_dataset("pool-source", owner=dataset.owner, items=1, systems=1), [annotator], name="pool")
    aspects = list(Aspect.objects.filter(dataset=dataset).values_list("pk", flat=True))
    return {
        "dataset": str(dataset.pk),
        "name": "pilot",
        "aspects": [str(pk) for pk in aspects],
        "raters_per_item": "2",
        "gold_rate": "0",
        "lease_minutes": "30",
        "show_context": "on",
        "ask_preference": "on",
        "rationale_required": "on",
        "allow_revisit": "on",
        "annotators": [str(annotator.pk)],
        **extra,
    }


def test_the_builder_previews_a_task_as_annotators_see_it_and_writes_nothing(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    client = signed_in(researcher)
    response = client.post(reverse("research-campaign-new"), builder_post(dataset, annotator1, preview="1"))
    html = response.content.decode()
    assert response.status_code == 200, html[:3000]
    assert 'id="task-form"' in html and "Candidate 1" in html and "Candidate 2" in html
    assert "Question 0 turn 0" in html and 'class="scale-buttons"' in html
    assert "secretvendor" not in html and "sys_alpha" not in html
    assert not Campaign.objects.filter(name="pilot").exists()


def test_the_builder_creates_the_campaign_and_its_crowd_link(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    client = signed_in(researcher)
    body = builder_post(dataset, annotator1, create="1", crowd_platform="prolific", tasks_per_session="3")
    response = client.post(reverse("research-campaign-new"), body)
    campaign = Campaign.objects.get(name="pilot")
    assert response.status_code == 302 and response["Location"] == reverse("campaign-progress", args=[campaign.pk])
    assert campaign.raters_per_item == 2 and list(campaign.annotators.all()) == [annotator1]
    assert Task.objects.filter(campaign=campaign).count() == 2
    link = RecruitmentLink.objects.get(campaign=campaign)
    assert (link.platform, link.tasks_per_session) == ("prolific", 3)


def test_the_builder_refuses_another_datasets_aspect_and_writes_nothing(researcher, annotator1):
    dataset = make_dataset("first", owner=researcher, items=2, systems=2)
    other = make_dataset("second", owner=researcher, items=2, systems=2)
    body = builder_post(dataset, annotator1, create="1")
    body["aspects"] = [str(Aspect.objects.filter(dataset=other).values_list("pk", flat=True)[0])]
    response = signed_in(researcher).post(reverse("research-campaign-new"), body)
    assert response.status_code == 400 and not Campaign.objects.filter(name="pilot").exists()


# --- annotators -------------------------------------------------------------------------------------------------


def invite(client: Client, username: str = "newrater", campaign: Campaign | None = None) -> str:
    body = {"username": username, "email": f"{username}@example.test"}
    if campaign is not None:
        body["campaign"] = str(campaign.pk)
    response = client.post(reverse("research-annotator-invite"), body)
    assert response.status_code == 200, response.content.decode()[:2000]
    html = response.content.decode()
    marker = "/research/invite/"
    start = html.index(marker) + len(marker)
    return html[start : html.index("/", start)]


def test_an_invited_annotator_sets_their_password_once_and_signs_in(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    campaign = make_campaign(dataset, [annotator1])
    client = signed_in(researcher)
    token = invite(client, campaign=campaign)
    user = User.objects.get(username="newrater")
    assert not user.has_usable_password() and not user.is_staff
    assert list(user.annotation_campaigns.all()) == [campaign]
    stored = AnnotatorInvite.objects.get(user=user)
    assert stored.token_hash == invite_token_hash(token) and token not in stored.token_hash
    url = reverse("research-invite-accept", args=[token])
    visitor = Client()
    assert visitor.get(url).status_code == 200
    assert visitor.put(url).status_code == 405
    weak = visitor.post(url, {"password1": "123", "password2": "123"})
    assert weak.status_code == 400 and not User.objects.get(pk=user.pk).has_usable_password()
    new_password = "a-long-and-unusual-passphrase-91"
    done = visitor.post(url, {"password1": new_password, "password2": new_password})
    assert done.status_code == 302 and done["Location"] == reverse("login")
    assert Client().login(username="newrater", password=new_password)
    assert visitor.get(url).status_code == 404
    again = Client().post(url, {"password1": "another-passphrase-77x", "password2": "another-passphrase-77x"})
    assert again.status_code == 404 and Client().login(username="newrater", password=new_password)
    page = client.get(reverse("research-annotators")).content.decode()
    assert "newrater" in page and campaign.name in page


def test_an_expired_or_unknown_invitation_is_refused(researcher):
    client = signed_in(researcher)
    token = invite(client)
    now = timezone.now()
    AnnotatorInvite.objects.update(expires_at=now - timedelta(seconds=1), created_at=now - timedelta(days=8))
    assert Client().get(reverse("research-invite-accept", args=[token])).status_code == 404
    assert Client().get(reverse("research-invite-accept", args=["not-a-token"])).status_code == 404


def test_a_taken_user_name_is_refused(researcher, annotator1):
    # annotator1 is none of this researcher's annotators, so the refusal does not say the name exists.
    response = signed_in(researcher).post(reverse("research-annotator-invite"), {"username": annotator1.username})
    assert response.status_code == 400 and "cannot be used" in response.content.decode()
    assert not AnnotatorInvite.objects.exists()


def test_load_pool_and_deactivation(researcher, other_researcher, annotator1, annotator2):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    campaign = make_campaign(dataset, [annotator1], raters_per_item=1)
    client = signed_in(researcher)
    token = invite(client, "pooled")
    assert token
    pooled = User.objects.get(username="pooled")
    added = client.post(
        reverse("research-annotator-pool-add"), {"annotator": str(pooled.pk), "campaign": str(campaign.pk)}
    )
    assert added.status_code == 302 and campaign.annotators.filter(pk=pooled.pk).exists()
    assert assignment_claim(campaign=campaign, user=annotator1) is not None
    page = client.get(reverse("research-annotators")).content.decode()
    row = page[page.index(">annotator1<") :]
    assert '<td class="num">1</td>\n      <td class="num">0</td>' in row[:400]
    # Only the researcher who invited an account may deactivate it.
    assert (
        signed_in(other_researcher).post(reverse("research-annotator-deactivate", args=[pooled.pk])).status_code == 404
    )
    assert client.post(reverse("research-annotator-deactivate", args=[annotator1.pk])).status_code == 404
    done = client.post(reverse("research-annotator-deactivate", args=[pooled.pk]))
    pooled.refresh_from_db()
    assert done.status_code == 302 and not pooled.is_active
    assert not campaign.annotators.filter(pk=pooled.pk).exists()


# --- item browser and item page ---------------------------------------------------------------------------------


@pytest.fixture
def rated(researcher) -> Dataset:
    return dataset_import(stream=io.BytesIO(jsonl(rated_lines())), name="rated", owner=researcher).dataset


def listed(client: Client, dataset: Dataset, **query: str) -> list[str]:
    response = client.get(reverse("research-items", args=[dataset.pk]), query)
    assert response.status_code == 200
    html = response.content.decode()
    return [item.external_id for item in Item.objects.filter(dataset=dataset) if f">{item.external_id}</a>" in html]


def test_the_browser_searches_and_filters(researcher, rated):
    client = signed_in(researcher)
    assert listed(client, rated) == ["q0", "q1", "q2"]
    assert listed(client, rated, q="sky blue") == ["q1"]
    assert listed(client, rated, q="Answer number 1 to 2/0") == ["q2"]
    assert listed(client, rated, system="sys_alpha") == ["q0", "q1", "q2"]
    assert listed(client, rated, system="nope") == []
    assert listed(client, rated, aspect="factuality", value="4") == ["q2"]
    # Spread: 4 - 1 = 3 on q2, 0 elsewhere.
    assert listed(client, rated, spread="3") == ["q2"]
    assert listed(client, rated, spread="0") == ["q0", "q1", "q2"]
    # Gap: judge 0.5 against the human mean; 2.0 on q2's first answer, 0.5 everywhere else.
    assert listed(client, rated, gap="2") == ["q2"]
    assert listed(client, rated, gap="0.5") == ["q0", "q1", "q2"]
    assert listed(client, rated, gap="2.01") == []


def test_the_browser_pages(researcher):
    dataset = make_dataset(owner=researcher, items=27, systems=1)
    client = signed_in(researcher)
    first = client.get(reverse("research-items", args=[dataset.pk])).content.decode()
    assert ">q24</a>" in first and ">q25</a>" not in first and "page=2" in first
    second = client.get(reverse("research-items", args=[dataset.pk]), {"page": "2"}).content.decode()
    assert ">q26</a>" in second and ">q0</a>" not in second


def test_the_item_page_shows_prompt_answers_ratings_judge_scores_and_history(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=1, systems=2)
    campaign = make_campaign(dataset, [annotator1], raters_per_item=1, allow_revisit=True)
    slot = assignment_claim(campaign=campaign, user=annotator1)
    assert slot is not None
    numbers = [c.number for c in task_candidates(assignment=slot, user_id=annotator1.pk)]

    def answer(value: float, reason: str) -> TaskAnswer:
        return TaskAnswer(
            ratings={(n, 1): value for n in numbers} | {(n, 2): 0.0 for n in numbers}, preference=1, rationale=reason
        )

    for key, value, reason in (("first-key-01", 1.0, "first thoughts"), ("second-key-01", 3.0, "second thoughts")):
        submission_create(campaign=campaign, task_id=slot.task_id, user=annotator1, idempotency_key=key,
                          answer=answer(value, reason))  # fmt: skip
    item = Item.objects.get(dataset=dataset)
    html = signed_in(researcher).get(reverse("research-item", args=[dataset.pk, item.pk])).content.decode()
    pseudonym = Rater.objects.get(dataset=dataset, user=annotator1).pseudonym
    assert "Question 0 turn 0" in html and "Answer number 0 to 0/0." in html and "Answer number 1 to 0/0." in html
    assert pseudonym in html and "second thoughts" in html
    assert "unieval" in html and "0.5" in html
    history = html[html.index('id="history"') :]
    assert "first thoughts" in history and "sys_alpha · factuality = 1" in history


# --- gold marking -----------------------------------------------------------------------------------------------


def test_gold_is_marked_with_scale_controls_and_unmarked(researcher):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    item = Item.objects.get(dataset=dataset, position=0)
    client = signed_in(researcher)
    url = reverse("research-item", args=[dataset.pk, item.pk])
    page = client.get(url).content.decode()
    assert 'href="#gold"' in page and "Mark as gold" in page
    assert 'type="radio" name="gold-1-1" value="3"' in page and 'type="radio" name="gold-2-2" value="-1"' in page
    assert "expected" not in page.lower().split('id="gold"')[1].split("</form>")[0].replace("expected value", "")
    response = client.post(
        reverse("research-item-gold", args=[dataset.pk, item.pk]),
        {"gold-1-1": "3", "gold-1-2": "", "gold-2-2": "-1", "kind": "gold", "tolerance": "0.5"},
    )
    assert response.status_code == 302
    gold = GoldItem.objects.get(item=item)
    assert gold.kind == GoldKind.GOLD and gold.tolerance == 0.5 and gold.created_by == researcher
    assert gold.expected == {"sys_alpha": {"factuality": 3}, "sys_beta": {"amount_info": -1}}
    again = client.get(url).content.decode()
    assert 'name="gold-1-1" value="3" data-key="3" checked' in again
    removed = client.post(reverse("research-item-gold-remove", args=[dataset.pk, item.pk]))
    assert removed.status_code == 302 and not GoldItem.objects.exists()


def test_gold_refuses_no_values_and_values_off_the_scale(researcher):
    dataset = make_dataset(owner=researcher, items=1, systems=2)
    item = Item.objects.get(dataset=dataset)
    client = signed_in(researcher)
    url = reverse("research-item-gold", args=[dataset.pk, item.pk])
    empty = client.post(url, {"kind": "gold", "tolerance": "0"})
    assert empty.status_code == 400 and "at least one expected value" in empty.content.decode()
    off = client.post(url, {"gold-1-1": "9", "kind": "gold", "tolerance": "0"})
    assert off.status_code == 400 and "gold-1-1" not in GoldItem.objects.values_list("expected", flat=True)
    assert not GoldItem.objects.exists()
    check = client.post(url, {"gold-1-1": "2", "kind": "attention", "tolerance": "0"})
    assert check.status_code == 400 and not GoldItem.objects.exists()


def test_the_documented_mark_as_gold_link_leads_to_the_item_page(researcher):
    docs = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    assert "mark as gold" in docs.lower() and "research" in docs.lower()
    dataset = make_dataset(owner=researcher, items=1, systems=1)
    item = Item.objects.get(dataset=dataset)
    items = signed_in(researcher).get(reverse("research-items", args=[dataset.pk])).content.decode()
    assert reverse("research-item", args=[dataset.pk, item.pk]) in items
    assert Response.objects.filter(turn__item=item).exists()


def test_pages_render_in_japanese(researcher, rated):
    client = signed_in(researcher)
    client.cookies["django_language"] = "ja"
    item = Item.objects.filter(dataset=rated).order_by("position")[0]
    for url in (
        reverse("research-home"),
        reverse("research-import"),
        reverse("research-annotators"),
        reverse("research-items", args=[rated.pk]),
        reverse("research-item", args=[rated.pk, item.pk]),
        reverse("research-campaign-new") + f"?dataset={rated.pk}",
    ):
        html = client.get(url, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
        assert 'lang="ja"' in html, url
        assert "研究" in html, url


def test_the_item_page_shows_the_judge_runs_rationales(researcher):
    from judging.models import Judge, JudgeKind, JudgeRun, Judgment, JudgmentStatus

    dataset = make_dataset(owner=researcher, items=1, systems=2)
    item = Item.objects.get(dataset=dataset)
    response = Response.objects.filter(turn__item=item).order_by("position")[0]
    judge = Judge.objects.create(dataset=dataset, name="gpt-judge", kind=JudgeKind.RUN, params={"method": "single"})
    run = JudgeRun.objects.create(judge=judge, dataset=dataset, config_snapshot={}, method="single", total=2)
    Judgment.objects.create(
        run=run, response=response, aspect_name="factuality", status=JudgmentStatus.DONE, score=2.0,
        reasoning="The answer states the **bone conduction** effect correctly.",
    )  # fmt: skip
    Judgment.objects.create(
        run=run, response=response, aspect_name="factuality", sample=1, status=JudgmentStatus.FAILED,
        reasoning="a failed call's text is no rationale",
    )  # fmt: skip
    html = signed_in(researcher).get(reverse("research-item", args=[dataset.pk, item.pk])).content.decode()
    assert "1 judge rationale" in html and "<strong>bone conduction</strong>" in html and "gpt-judge" in html
    assert "failed call" not in html
