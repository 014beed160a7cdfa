"""Admin: corpus upload (atomic, scoped) and opening a fact review from a factscore run."""

import io

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.urls import reverse

from judging import services as engine
from judging.factscore.models import FactReviewAssignment, FactReviewCampaign, KnowledgeCorpus, Passage
from tests.conftest import CAST_PASSWORD, login
from tests.factories import UserFactory
from tests.factscore.corpora import ENGLISH_DOCUMENTS, as_jsonl
from tests.factscore.factories import factscore_config, make_fact_dataset, script_world
from tests.security.html_checks import offered

pytestmark = pytest.mark.django_db


def jsonl_file(text: str, name: str = "wiki.jsonl") -> io.BytesIO:
    upload = io.BytesIO(text.encode())
    upload.name = name
    return upload


def test_models_are_registered() -> None:
    assert KnowledgeCorpus in admin.site._registry and FactReviewCampaign in admin.site._registry


def test_researcher_uploads_a_corpus_from_the_admin(researcher, settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings.VAR_DIR = tmp_path
    dataset = make_fact_dataset(owner=researcher, with_corpus=False)
    client = login(researcher)
    url = reverse("admin:judging_knowledgecorpus_add")
    form = client.get(url)
    assert form.status_code == 200 and 'type="file"' in form.content.decode()
    created = client.post(
        url,
        {"dataset": dataset.pk, "name": "wiki", "passage_tokens": 64, "file": jsonl_file(as_jsonl(ENGLISH_DOCUMENTS))},
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    corpus = KnowledgeCorpus.objects.get(dataset=dataset, name="wiki")
    assert corpus.n_documents == 3 and corpus.uploaded_by == researcher
    assert Passage.objects.filter(corpus=corpus).count() == corpus.n_passages
    refused = client.post(
        url, {"dataset": dataset.pk, "name": "broken", "passage_tokens": 64, "file": jsonl_file("{not json\n")}
    )
    assert (
        refused.status_code == 200
        and "line 1" in refused.content.decode()
        and "nothing was stored" in refused.content.decode()
    )
    assert not KnowledgeCorpus.objects.filter(name="broken").exists()
    assert client.get(reverse("admin:judging_knowledgecorpus_changelist")).status_code == 200


def test_corpus_admin_is_scoped_to_my_datasets(researcher) -> None:  # type: ignore[no-untyped-def]
    other = UserFactory(username="someone-else", is_staff=True, is_superuser=False)
    other.set_password(CAST_PASSWORD)
    other.save()
    from django.contrib.auth.models import Permission

    other.user_permissions.set(Permission.objects.filter(content_type__app_label="judging"))
    researcher.user_permissions.set(Permission.objects.filter(content_type__app_label="judging"))
    dataset = make_fact_dataset(owner=researcher)
    corpus = KnowledgeCorpus.objects.get(dataset=dataset)
    change = reverse("admin:judging_knowledgecorpus_change", args=[corpus.pk])
    assert login(other).get(change).status_code in (302, 404)
    listing = login(other).get(reverse("admin:judging_knowledgecorpus_changelist"))
    assert listing.status_code == 200 and "wiki" not in listing.content.decode()
    # Their upload form does not offer my dataset.
    form = login(other).get(reverse("admin:judging_knowledgecorpus_add")).content.decode()
    assert str(dataset.pk) not in offered(form, "dataset")


def test_review_campaign_is_opened_from_the_admin(
    world, world_provider, eager, django_capture_on_commit_callbacks, researcher, annotator1, annotator2
) -> None:  # type: ignore[no-untyped-def]
    script_world(world)
    dataset = make_fact_dataset(owner=researcher)
    with django_capture_on_commit_callbacks(execute=True):
        run = engine.judge_run_launch(dataset=dataset, config=factscore_config(world_provider), launched_by=None)
    # An operator's group puts the annotators in the researcher's pool (docs/security.md, admin user pickers).
    Group.objects.create(name="fact-lab").user_set.add(researcher, annotator1, annotator2)
    client = login(researcher)
    url = reverse("admin:judging_factreviewcampaign_add")
    assert client.get(url).status_code == 200
    created = client.post(
        url,
        {
            "name": "Admin review",
            "run": run.pk,
            "raters_per_answer": 2,
            "annotators": [annotator1.pk, annotator2.pk],
            "lease_minutes": 30,
            "show_evidence": "on",
            "guidelines": "",
        },
    )
    assert created.status_code == 302, created.content.decode()[:3000]
    campaign = FactReviewCampaign.objects.get(name="Admin review")
    assert set(campaign.annotators.all()) == {annotator1, annotator2}
    assert FactReviewAssignment.objects.filter(campaign=campaign).count() == 10
    assert campaign.created_by == researcher
    changelist = client.get(reverse("admin:judging_factreviewcampaign_changelist")).content.decode()
    assert reverse("factscore:report", args=[run.pk]) in changelist
