"""Links into FActScore: the fact review on the annotators' home page, and the report from the judge run admin."""

import pytest
from django.contrib.auth.models import User
from django.template import Context, Template
from django.test import RequestFactory
from django.urls import reverse

from annotations.models import Dataset
from judging.factscore import services
from judging.factscore.models import FactReviewCampaign
from judging.models import Judge, JudgeKind, JudgeRun, RunStatus
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(run: JudgeRun, annotator1: User, annotator2: User) -> FactReviewCampaign:
    return services.fact_review_campaign_create(
        name="Biography facts", run=run, raters_per_answer=2, annotators=[annotator1, annotator2]
    )


def home_html(user: User) -> str:
    page = client_for(user).get(reverse("home"))
    assert page.status_code == 200
    return page.content.decode()


# --- annotators' home page ----------------------------------------------------------------------


def test_home_links_the_fact_review_with_progress(campaign: FactReviewCampaign, annotator1: User) -> None:
    html = home_html(annotator1)
    total = campaign.tasks.count()
    assert 'id="my-fact-reviews"' in html
    assert f'href="{reverse("factscore:review-home")}"' in html
    assert f'action="{reverse("factscore:review-next", args=[campaign.pk])}"' in html
    assert "Biography facts" in html and f"0 of {total} answers reviewed" in html

    assignment = services.fact_review_claim(campaign=campaign, user=annotator1)
    assert assignment is not None
    facts = services.reviewer_facts(assignment)
    services.fact_review_submit(assignment=assignment, user=annotator1, labels={f.pk: "supported" for f in facts})
    assert f"1 of {total} answers reviewed" in home_html(annotator1)


def test_home_shows_no_fact_review_without_a_slot(
    campaign: FactReviewCampaign, annotator3: User, outsider: User, researcher: User
) -> None:
    review_next = reverse("factscore:review-next", args=[campaign.pk])
    for user in (annotator3, outsider, researcher):  # not in the campaign's pool
        html = home_html(user)
        assert 'id="my-fact-reviews"' not in html and review_next not in html and "Biography facts" not in html


def test_inactive_campaign_is_not_linked(campaign: FactReviewCampaign, annotator1: User) -> None:
    FactReviewCampaign.objects.filter(pk=campaign.pk).update(is_active=False)
    html = home_html(annotator1)
    assert 'id="my-fact-reviews"' not in html and "Biography facts" not in html


def test_home_leaks_no_system_judge_or_model_names(campaign: FactReviewCampaign, annotator1: User) -> None:
    html = home_html(annotator1)
    assert "Biography facts" in html  # the fact review is on the page
    secrets = [*campaign.run.dataset.systems.values_list("key", flat=True), campaign.run.judge.name, "gpt-4o-mini"]
    assert secrets == ["alpha", "beta", "fs-test", "gpt-4o-mini"]
    for secret in secrets:
        assert secret not in html
    assert campaign.run.dataset.name not in html


def test_home_view_methods_and_anonymous(campaign: FactReviewCampaign, annotator1: User) -> None:
    assert client_for(annotator1).post(reverse("home")).status_code == 405
    anonymous = client_for(None).get(reverse("home"))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))


def test_tag_renders_nothing_for_anonymous(campaign: FactReviewCampaign) -> None:
    from django.contrib.auth.models import AnonymousUser

    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    rendered = Template("{% load factscore_links %}{% fact_review_links %}").render(Context({"request": request}))
    assert rendered.strip() == ""


# --- judge run admin ----------------------------------------------------------------------------


def direct_run(dataset: Dataset) -> JudgeRun:
    judge = Judge.objects.create(dataset=dataset, name="direct judge", kind=JudgeKind.RUN)
    return JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        method="direct",
        status=RunStatus.SUCCEEDED,
        config_snapshot={"name": "direct judge", "method": "direct", "model": "openai/gpt-4o-mini"},
    )


def test_admin_run_page_links_the_factscore_report(
    run: JudgeRun, researcher: User, annotator1: User, outsider: User
) -> None:
    url = reverse("admin:judging_judgerun_change", args=[run.pk])
    page = client_for(researcher).get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert f'href="{reverse("factscore:report", args=[run.pk])}"' in html
    assert f'href="{reverse("dashboard-judges", args=[run.dataset_id])}?judge=fs-test"' in html
    assert client_for(researcher).post(url).status_code == 405
    for user in (annotator1, outsider, None):  # the admin sends non-staff users to its login page
        refused = client_for(user).get(url)
        assert refused.status_code == 302 and "login" in refused["Location"]


def test_admin_run_page_of_another_method_has_no_factscore_link(run: JudgeRun, researcher: User) -> None:
    other = direct_run(run.dataset)
    html = client_for(researcher).get(reverse("admin:judging_judgerun_change", args=[other.pk])).content.decode()
    assert "Config snapshot" in html
    assert reverse("factscore:report", args=[other.pk]) not in html and "FActScore report" not in html


def test_admin_run_page_of_another_researcher_is_404(run: JudgeRun) -> None:
    stranger = User.objects.create_user(username="stranger-researcher", password="x" * 20, is_staff=True)
    assert client_for(stranger).get(reverse("admin:judging_judgerun_change", args=[run.pk])).status_code == 404
