"""The judge config form of the admin: templates per method, per-field errors, rubric aspects and the preview."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from judging.admin_forms import EDITOR_FIELDS, JudgeConfigForm, config_template, error_field
from judging.config import METHODS, validate_config
from judging.methods.judge_settings import KNOWN_KEYS
from judging.models import CachedCompletion, JudgeConfig, JudgeRun
from tests.conftest import client_for
from tests.factories import SpanAspectFactory
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/judging/judgeconfig/add/"
PREVIEW_URL = "/admin/judging/judgeconfig/preview/"


def test_the_preview_url_is_the_named_admin_route() -> None:
    assert reverse("admin:judging_judgeconfig_preview") == PREVIEW_URL


@pytest.mark.parametrize("method", METHODS)
def test_every_template_validates_and_holds_the_config_types_defaults(method: str) -> None:
    template = config_template(method)
    assert template["method"] == method
    # Derived from the config type: every field is there, so the JSON view shows each default (but the rated
    # examples, which teaching writes and a config without them does not store).
    assert set(template) == KNOWN_KEYS - {"exemplars"}
    assert validate_config(template).stored() == template


@pytest.mark.parametrize("method", METHODS)
def test_every_template_saves_through_the_form(researcher: User, method: str) -> None:
    response = client_for(researcher).post(ADD_URL, {"config_json": json.dumps(config_template(method))})
    assert response.status_code == 302, response.content.decode()[:3000]
    saved = JudgeConfig.objects.get(name=config_template(method)["name"])
    assert saved.config == config_template(method) and saved.owner == researcher


def test_a_template_link_opens_the_form_filled_from_it(researcher: User) -> None:
    page = client_for(researcher).get(ADD_URL, {"template": "pairwise"})
    assert page.status_code == 200
    form = page.context["adminform"].form
    assert json.loads(form.initial["config_json"]) == config_template("pairwise")
    assert form["method"].initial == "pairwise" and form["pairs"].initial == "all"
    body = page.content.decode()
    assert 'href="?template=factscore"' in body and "/help/judge-config/" in body
    assert 'id="judge-config-template-data"' in body and "js/judge_config_form.js" in body


def test_the_editor_fields_cover_every_key_but_factscores_options_and_the_taught_examples() -> None:
    keys = {key.split(".")[0] for key, _kind in EDITOR_FIELDS.values()}
    assert keys == KNOWN_KEYS - {"factscore", "exemplars"}


def test_the_editor_fields_are_filled_from_the_saved_config_and_their_posts_ignored(researcher: User) -> None:
    config = validate_config({"name": "shown", "method": "metric", "metric": "chrf", "rpm": 30})
    row = JudgeConfig.objects.create(name="shown", version=1, config=config.stored(), owner=researcher)
    client = client_for(researcher)
    form = client.get(reverse("admin:judging_judgeconfig_change", args=[row.pk])).context["adminform"].form
    assert form["metric"].initial == "chrf" and form["rpm"].initial == 30 and form["cache"].initial is True
    # A post of the fields alone changes nothing: the JSON view is what is saved.
    response = client.post(
        reverse("admin:judging_judgeconfig_change", args=[row.pk]),
        {"config_json": json.dumps(config.stored()), "metric": "bleu", "rpm": "99"},
    )
    assert response.status_code == 302
    latest = JudgeConfig.objects.filter(name="shown").order_by("-version").first()
    assert latest is not None and latest.config["metric"] == "chrf" and latest.config["rpm"] == 30


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"samples": 3}, "samples"),  # three samples at temperature 0
        ({"samples": 0}, "samples"),
        ({"temperature": 9}, "temperature"),
        ({"fallback_temperature": 0}, "fallback_temperature"),
        ({"model": "nope"}, "model"),
        ({"model": "acme/some-model"}, "model"),
        ({"api_key_env": "DATABASE_URL"}, "api_key_env"),
        ({"prompt": "no placeholder"}, "prompt"),
        ({"summarizer_prompt": "x"}, "summarizer_prompt"),
        ({"logprob_scoring": "weighted", "logprobs": False}, "logprob_scoring"),
        ({"output": {"format": "xml"}}, "output_format"),
        ({"output": {"format": "regex", "regex": "("}}, "output_regex"),
        ({"metric": "bleu"}, "metric"),
        ({"tokenize": "ja-mecab"}, "tokenize"),
        ({"method": "pairwise", "pairs": "baseline"}, "baseline"),
        ({"pairs": "some"}, "pairs"),
        ({"aspects": []}, "aspects"),
        ({"name": ""}, "name"),
        ({"method": "vibes"}, "method"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"budget_usd": -1}, "budget_usd"),
        ({"cache": "yes"}, "cache"),
        ({"surprise": 1}, "config_json"),
        ({"factscore": {"k": 1}}, "config_json"),
    ],
)
def test_each_problem_is_named_at_its_field(researcher: User, change: dict[str, Any], field: str) -> None:
    raw = {**config_template("single"), "logprobs": False, "logprob_scoring": "off", **change}
    if "output" in change and change["output"].get("format") == "regex":
        raw["output"] = change["output"]
    response = client_for(researcher).post(ADD_URL, {"config_json": json.dumps(raw)})
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors.get(field), (field, form.errors)
    assert JudgeConfig.objects.count() == 0


def test_error_messages_map_onto_fields() -> None:
    assert error_field("samples 3 at temperature 0 refused: ...") == "samples"
    assert error_field("fallback_temperature must be a number above 0") == "fallback_temperature"
    assert error_field("a pairwise prompt needs {answer_a} and {answer_b}") == "prompt"
    assert error_field("tokenize ja-mecab is only used by the metric method's bleu") == "tokenize"
    assert error_field("provider 'acme' (model 'acme/x') is not supported") == "model"
    assert error_field("the key in OPENAI_API_KEY may not be sent to 'x'") == "api_key_env"
    assert error_field("api_base refused: host 'x' resolves to no address") == "api_base"
    assert error_field("config.prompt: a NUL character cannot be stored") == "prompt"
    assert error_field("unknown field(s): surprise") == "config_json"


def test_invalid_json_is_named_at_the_json_view(researcher: User) -> None:
    response = client_for(researcher).post(ADD_URL, {"config_json": "{not json"})
    form = response.context["adminform"].form
    assert "not valid JSON" in str(form.errors["config_json"])
    assert JudgeConfig.objects.count() == 0


def test_aspects_are_offered_from_the_chosen_datasets_rubric(researcher: User, other_researcher: User) -> None:
    mine = make_dataset(owner=researcher, aspects=(("fluency", 1, 5), ("accuracy", 0, 3)), name="mine")
    theirs = make_dataset(owner=other_researcher, aspects=(("secret_aspect", 1, 5),), name="theirs")
    client = client_for(researcher)
    form = client.get(ADD_URL, {"dataset": mine.pk}).context["adminform"].form
    assert [value for value, _label in form.fields["aspects"].choices] == ["fluency", "accuracy"]
    assert list(form.fields["dataset"].queryset) == [mine]
    assert form.dataset_aspects == {str(mine.pk): [["fluency", "Fluency"], ["accuracy", "Accuracy"]]}
    # Another researcher's dataset is neither offered nor used for its rubric.
    page = client.get(ADD_URL, {"dataset": theirs.pk})
    assert b"secret_aspect" not in page.content and b"theirs" not in page.content


def test_a_form_without_a_user_offers_no_dataset() -> None:
    assert list(JudgeConfigForm().fields["dataset"].queryset) == []


def _preview_body(dataset_pk: int, config: dict[str, Any], item: int = 1) -> dict[str, str]:
    return {"config_json": json.dumps(config), "dataset": str(dataset_pk), "preview_item": str(item)}


def _counts() -> tuple[int, int, int]:
    return JudgeConfig.objects.count(), JudgeRun.objects.count(), CachedCompletion.objects.count()


def test_preview_renders_the_prompt_on_a_real_item(researcher: User, fake_provider: FakeProvider) -> None:
    dataset = make_dataset(owner=researcher, items=3, aspects=(("fluency", 1, 5), ("accuracy", 0, 3)))
    config = {**config_template("reference"), "api_base": fake_provider.base_url, "aspects": ["accuracy"]}
    before = _counts()
    response = client_for(researcher, csrf=False).post(
        PREVIEW_URL, _preview_body(dataset.pk, config, item=2), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    body = response.content.decode()
    # The second item's question, reference and first answer, inside the built-in reference prompt.
    assert "Explain topic number 1." in body and "Topic 1 is explained like this." in body
    assert "Answer 1 from system 0: topic 1 is explained." in body
    assert "Reference answer:" in body and "Accuracy" in body and "fluency" not in body.lower()
    assert "<html" not in body  # the htmx partial
    assert _counts() == before and fake_provider.stats.calls == 0


def test_preview_of_a_custom_prompt_fills_it_without_evaluating_data(researcher: User) -> None:
    dataset = make_dataset(owner=researcher, items=1)
    config = {**config_template("single"), "prompt": "Grade {aspect} of {answer} from {scale_min} to {scale_max}."}
    response = client_for(researcher).post(PREVIEW_URL, _preview_body(dataset.pk, config))
    body = response.content.decode()
    assert response.status_code == 200 and "<html" in body  # the page without htmx
    assert "Grade Overall of &lt;answer-" in body and "Answer 0 from system 0" in body and "from 1 to 5." in body


def test_preview_of_pairwise_shows_both_answers_and_metric_sends_nothing(researcher: User) -> None:
    dataset = make_dataset(owner=researcher, items=1, systems=2)
    client = client_for(researcher)
    pairwise = client.post(PREVIEW_URL, _preview_body(dataset.pk, config_template("pairwise"))).content.decode()
    assert "Answer A:" in pairwise and "Answer 0 from system 0" in pairwise and "Answer 0 from system 1" in pairwise
    metric = client.post(PREVIEW_URL, _preview_body(dataset.pk, config_template("metric"))).content.decode()
    assert "sends no prompt" in metric


def test_preview_names_the_problems_of_an_invalid_config_or_item(researcher: User) -> None:
    dataset = make_dataset(owner=researcher, items=1)
    client = client_for(researcher)
    bad = client.post(PREVIEW_URL, _preview_body(dataset.pk, {**config_template("single"), "samples": 0}))
    assert bad.status_code == 200 and "samples must be an integer from 1 to 20" in bad.content.decode()
    missing = client.post(PREVIEW_URL, _preview_body(dataset.pk, config_template("single"), item=5))
    assert "the dataset has no item number 5" in missing.content.decode()


def test_preview_is_refused_outside_the_researchers_datasets(
    researcher: User, other_researcher: User, annotator1: User
) -> None:
    theirs = make_dataset(owner=other_researcher, items=1)
    body = _preview_body(theirs.pk, config_template("single"))
    assert client_for(researcher).post(PREVIEW_URL, body).status_code == 404
    # Annotators and anonymous visitors are sent to the admin's login form; nothing of the item reaches them.
    for client in (client_for(annotator1), Client()):
        response = client.post(PREVIEW_URL, body)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_preview_needs_a_post_with_a_csrf_token(researcher: User) -> None:
    dataset = make_dataset(owner=researcher, items=1)
    body = _preview_body(dataset.pk, config_template("single"))
    get = client_for(researcher).get(PREVIEW_URL)
    assert get.status_code == 302 and get["Location"] == ADD_URL
    assert client_for(researcher).put(PREVIEW_URL).status_code == 405
    assert client_for(researcher, csrf=True).post(PREVIEW_URL, body).status_code == 403


def test_the_references_example_per_method_validates(settings) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    settings.JUDGE_API_KEY_HOSTS = {"LAB_LLM_API_KEY": ["llm.example.org"]}
    text = (Path(settings.BASE_DIR) / "docs" / "judge-config.md").read_text(encoding="utf-8")
    section = text.split("## An example per method", 1)[1].split("\n## ", 1)[0]
    examples = [json.loads(block.split("```")[0]) for block in section.split("```json\n")[1:]]
    # The example host is not resolved here: where requests may go is the operator's setting, not the document's.
    methods = [validate_config(example, check_network=False).method for example in examples]
    assert sorted(methods) == sorted(METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_every_templates_preview_renders(researcher: User, method: str) -> None:
    dataset = make_dataset(owner=researcher, items=1, systems=2)
    if method == "error_spans":  # it marks errors on span aspects only
        SpanAspectFactory(dataset=dataset, name="errors", position=1)
    response = client_for(researcher).post(
        PREVIEW_URL, _preview_body(dataset.pk, config_template(method)), HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200 and "errornote" not in body, body[:2000]
    if method == "metric":
        assert "sends no prompt" in body
    elif method == "error_spans":
        assert "Error categories" in body and "Accuracy/Mistranslation" in body and "(weight 5)" in body
    else:
        # Each LLM method's first request carries the item's first answer (FActScore decomposes it into facts).
        assert "Answer 0 from system 0: topic 0 is explained." in body


def test_the_form_speaks_japanese(researcher: User) -> None:
    client = client_for(researcher)
    client.cookies["django_language"] = "ja"
    body = client.get(ADD_URL, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert "テンプレートから始める" in body and "プロンプトをプレビュー" in body
    assert "ジャッジ設定リファレンス" in body and "/help/judge-config/" in body
