"""The judge config form of the admin: a template per method, labelled fields and the JSON view.

The JSON view is the one source the form validates and saves, through `validate_config` like every other entry
point. The labelled fields are an editor of that JSON (static/js/judge_config_form.js keeps the two in sync); the
server ignores what they post and fills them from the JSON, so they can never disagree with what is saved."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils.translation import gettext_lazy as _

from annotations.models import Aspect, Dataset
from annotations.selectors import datasets_for_user
from annotations.text.ascii_numbers import ascii_int
from judging.config import METHODS, ConfigError, JudgeSettings, validate_config
from judging.llm.calls import CONNECTION_KEYS
from judging.methods.judge_settings import LOGPROB_SCORING_MODES, OUTPUT_FORMATS, normalise_config
from judging.methods.metrics import BLEU_TOKENIZERS, METRICS
from judging.models import JudgeConfig

# The labels of the template picker, in the order a newcomer meets the methods.
METHOD_LABELS: dict[str, Any] = {
    "single": _("Single answer, G-Eval scoring"),
    "reference": _("Against the reference answer"),
    "pairwise": _("Pairwise: two answers compared"),
    "summarize_then_judge": _("Summarize, then judge"),
    "factscore": _("FActScore: fact by fact"),
    "metric": _("Metric (BLEU, ROUGE, chrF…), no LLM"),
    "error_spans": _("Error spans (MQM): errors marked by quote, category and severity"),
}
TEMPLATE_MODEL = "openai/gpt-4o-mini"
# What each template sets beyond the config type's own defaults; the rest comes from JudgeSettings.
_TEMPLATE_CHOICES: dict[str, dict[str, Any]] = {
    "single": {"model": TEMPLATE_MODEL, "logprobs": True, "logprob_scoring": "weighted"},
    "reference": {"model": TEMPLATE_MODEL},
    "pairwise": {"model": TEMPLATE_MODEL},
    "summarize_then_judge": {"model": TEMPLATE_MODEL},
    "factscore": {"model": TEMPLATE_MODEL, "factscore": {}},
    "metric": {"metric": "rougeL"},
    "error_spans": {"model": TEMPLATE_MODEL, "parse_retries": 1},
}


def config_template(method: str) -> dict[str, Any]:
    """A complete config for `method` with every default the config type gives, as the JSON view shows it."""
    raw = {"name": f"my-{method.replace('_', '-')}-judge", "method": method, **_TEMPLATE_CHOICES[method]}
    cfg, errors = normalise_config(raw)
    if errors:  # the templates are ours: a rule change that breaks one must fail loudly, in the tests
        raise ConfigError(errors)
    return JudgeSettings.from_normalised(cfg).stored()


def config_templates() -> dict[str, dict[str, Any]]:
    return {method: config_template(method) for method in METHODS}


# Form field name -> (config key, how the editor converts its value). Output's two members get a field each.
EDITOR_FIELDS: dict[str, tuple[str, str]] = {
    "name": ("name", "str"),
    "method": ("method", "str"),
    "model": ("model", "str"),
    "api_base": ("api_base", "str"),
    "api_key_env": ("api_key_env", "str"),
    "api_version": ("api_version", "str"),
    "aws_access_key_id_env": ("aws_access_key_id_env", "str"),
    "aws_secret_access_key_env": ("aws_secret_access_key_env", "str"),
    "aws_session_token_env": ("aws_session_token_env", "str"),
    "aws_region": ("aws_region", "str"),
    "vertex_credentials_env": ("vertex_credentials_env", "str"),
    "vertex_project": ("vertex_project", "str"),
    "vertex_location": ("vertex_location", "str"),
    "aspects": ("aspects", "list"),
    "prompt": ("prompt", "str"),
    "language": ("language", "str"),
    "output_format": ("output.format", "str"),
    "output_regex": ("output.regex", "str"),
    "samples": ("samples", "int"),
    "temperature": ("temperature", "float"),
    "max_tokens": ("max_tokens", "int"),
    "logprobs": ("logprobs", "bool"),
    "top_logprobs": ("top_logprobs", "int"),
    "logprob_scoring": ("logprob_scoring", "str"),
    "fallback_samples": ("fallback_samples", "int"),
    "fallback_temperature": ("fallback_temperature", "float"),
    "parse_retries": ("parse_retries", "int"),
    "summarizer_model": ("summarizer_model", "str"),
    "summarizer_prompt": ("summarizer_prompt", "str"),
    "metric": ("metric", "str"),
    "tokenize": ("tokenize", "str"),
    "pairs": ("pairs", "str"),
    "baseline": ("baseline", "str"),
    "max_concurrency": ("max_concurrency", "int"),
    "rpm": ("rpm", "int"),
    "tpm": ("tpm", "int"),
    "timeout_s": ("timeout_s", "float"),
    "max_retries": ("max_retries", "int"),
    "budget_usd": ("budget_usd", "float"),
    "cache": ("cache", "bool"),
}
_FIELD_OF_KEY = {key: field for field, (key, _kind) in EDITOR_FIELDS.items()}
_KEY_WORD = re.compile(r"[a-z_]+(?:\.[a-z_]+)?")
# Messages that name their field by what it holds rather than by its key.
_FIELD_BY_PREFIX = (
    ("provider ", "model"),
    ("pairs=baseline needs", "baseline"),
    ("the key in ", "api_key_env"),
    ("host ", "api_base"),
)


def error_field(message: str) -> str:
    """The form field a validation message concerns: the first config key it names, else the JSON view."""
    message = message.removeprefix("config.")  # where unstorable text was found: config.<key>...
    for prefix, field in _FIELD_BY_PREFIX:
        if message.startswith(prefix):
            return field
    for match in _KEY_WORD.finditer(message):
        word = match.group(0)
        if word in _FIELD_OF_KEY:
            return _FIELD_OF_KEY[word]
        if "." in word and word.split(".")[0] in _FIELD_OF_KEY:
            return _FIELD_OF_KEY[word.split(".")[0]]
    return "config_json"


def _choices(values: tuple[str, ...], blank: Any = None) -> list[tuple[str, Any]]:
    return ([("", blank)] if blank is not None else []) + [(v, v) for v in values]


def _int(label: Any, help_text: Any = "") -> forms.IntegerField:
    return forms.IntegerField(label=label, help_text=help_text, required=False)


def _float(label: Any, help_text: Any = "") -> forms.FloatField:
    return forms.FloatField(label=label, help_text=help_text, required=False)


def _text(label: Any, help_text: Any = "", rows: int = 0) -> forms.CharField:
    widget = forms.Textarea(attrs={"rows": rows, "cols": 90, "spellcheck": "false"}) if rows else None
    return forms.CharField(label=label, help_text=help_text, required=False, widget=widget)


def _config_of(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


class JudgeConfigForm(forms.ModelForm):
    # The fields a change of template keeps (the page's script reads them): the model and how it is reached.
    kept_keys = ("model", *CONNECTION_KEYS)
    template = forms.ChoiceField(
        label=_("Start from a template"),
        required=False,
        choices=[("", "—"), *METHOD_LABELS.items()],
        help_text=_("Fills every field with the method's defaults; the name and the model you typed are kept."),
    )
    dataset = forms.ModelChoiceField(
        label=_("Dataset"),
        queryset=Dataset.objects.none(),
        required=False,
        help_text=_("Not saved with the config: it offers its rubric's aspects and the item to preview."),
    )
    preview_item = forms.IntegerField(
        label=_("Item to preview"),
        required=False,
        min_value=1,
        initial=1,
        help_text=_("The item's number in the dataset (1 is the first)."),
    )
    name = _text(_("Name"), _("Saving a config with an existing name stores its next version."))
    method = forms.ChoiceField(label=_("Method"), required=False, choices=_choices(METHODS, "—"))
    model = _text(_("Model"), _("A litellm model string such as openai/gpt-4o-mini (not used by the metric method)."))
    api_base = _text(_("Provider URL (api_base)"), _("Empty: the provider's own URL."))
    api_key_env = _text(
        _("Key variable (api_key_env)"),
        _("The environment variable holding the key, ending in _API_KEY, _KEY or _TOKEN. Keys are never stored."),
    )
    api_version = _text(
        _("Azure api-version (api_version)"),
        _("Azure OpenAI only, and required there: the api-version every request names, such as 2024-10-21."),
    )
    aws_access_key_id_env = _text(
        _("AWS access key variable (aws_access_key_id_env)"),
        _("Bedrock only: the environment variable holding the access key id, ending in _KEY or _TOKEN."),
    )
    aws_secret_access_key_env = _text(
        _("AWS secret key variable (aws_secret_access_key_env)"),
        _("Bedrock only: the environment variable holding the secret access key."),
    )
    aws_session_token_env = _text(
        _("AWS session token variable (aws_session_token_env)"),
        _("Bedrock only, optional: the environment variable holding a session token."),
    )
    aws_region = _text(_("AWS region (aws_region)"), _("Bedrock only: the region, such as us-east-1."))
    vertex_credentials_env = _text(
        _("Service account variable (vertex_credentials_env)"),
        _("Vertex AI only: the environment variable holding the service account's JSON key, ending in _KEY."),
    )
    vertex_project = _text(_("Vertex AI project (vertex_project)"), _("Vertex AI only: the Google Cloud project id."))
    vertex_location = _text(
        _("Vertex AI location (vertex_location)"), _("Vertex AI only: the location, such as us-central1 or global.")
    )
    aspects = forms.MultipleChoiceField(
        label=_("Aspects"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("From the chosen dataset's rubric; none ticked judges every aspect."),
    )
    prompt = _text(
        _("Prompt"),
        _(
            "Empty: the built-in prompt. A template needs {answer} (pairwise: {answer_a} and {answer_b}; "
            "summarize-then-judge: {summary})."
        ),
        rows=8,
    )
    language = forms.ChoiceField(
        label=_("Language"), required=False, choices=_choices(("auto", "per_item", "en", "ja"))
    )
    output_format = forms.ChoiceField(label=_("Output format"), required=False, choices=_choices(OUTPUT_FORMATS))
    output_regex = _text(_("Output regex"), _("With the regex format: RE2, a group named score or the first group."))
    samples = _int(_("Samples"), _("Judgments per answer and aspect; more than one needs a temperature above 0."))
    temperature = _float(_("Temperature"))
    max_tokens = _int(_("Max tokens"), _("Empty: the provider's limit."))
    logprobs = forms.BooleanField(label=_("Log-probabilities (logprobs)"), required=False)
    top_logprobs = _int(_("Alternatives per token (top_logprobs)"))
    logprob_scoring = forms.ChoiceField(
        label=_("Logprob mode (logprob_scoring)"),
        required=False,
        choices=_choices(LOGPROB_SCORING_MODES, _("default: weighted with logprobs, else off")),
    )
    fallback_samples = _int(_("Fallback samples"), _("Replies sampled when the provider gives no log-probabilities."))
    fallback_temperature = _float(_("Fallback temperature"))
    parse_retries = _int(_("Parse retries"), _("Re-asks when no score could be read (0 to 3)."))
    summarizer_model = _text(_("Summarizer model"), _("Summarize-then-judge; empty: the model above."))
    summarizer_prompt = _text(_("Summarizer prompt"), _("Empty: the built-in one; needs {answer}."), rows=4)
    metric = forms.ChoiceField(label=_("Metric"), required=False, choices=_choices(METRICS, "—"))
    tokenize = forms.ChoiceField(label=_("BLEU tokenizer"), required=False, choices=_choices(BLEU_TOKENIZERS))
    pairs = forms.ChoiceField(label=_("Pairs"), required=False, choices=_choices(("all", "baseline")))
    baseline = _text(_("Baseline system"), _("With pairs = baseline: the system key every pair includes."))
    max_concurrency = _int(_("Max concurrency"), _("Provider calls in flight at once, across all workers."))
    rpm = _int(_("Requests per minute (rpm)"))
    tpm = _int(_("Tokens per minute (tpm)"))
    timeout_s = _float(_("Timeout per call (seconds)"))
    max_retries = _int(_("Retries per call"))
    budget_usd = _float(_("Budget (USD)"), _("The run stops when its known cost reaches it."))
    cache = forms.BooleanField(label=_("Answer identical requests from the cache"), required=False)
    config_json = forms.CharField(
        label=_("Config (JSON)"),
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "spellcheck": "false"}),
        help_text=_(
            "The whole config as JSON: this is what is validated and saved, and the fields above edit it. "
            "FActScore's options are edited here."
        ),
    )

    class Meta:
        model = JudgeConfig
        fields: list[str] = []

    def __init__(self, *args: Any, user: AbstractBaseUser | AnonymousUser | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        datasets = datasets_for_user(user) if user is not None else Dataset.objects.none()
        dataset_field = self.fields["dataset"]
        assert isinstance(dataset_field, forms.ModelChoiceField)
        dataset_field.queryset = datasets.order_by("name", "pk")
        if self.instance and self.instance.pk and not self.initial.get("config_json"):
            self.initial["config_json"] = json.dumps(self.instance.config, indent=2, ensure_ascii=False)
        self.fields["config_json"].initial = self.initial.get("config_json")
        shown = _config_of(self.data.get("config_json") if self.is_bound else self.initial.get("config_json")) or {}
        chosen = self._chosen_dataset(datasets)
        self.dataset_aspects = {
            str(pk): [[name, label or name] for name, label in pairs] for pk, pairs in _aspects_by_dataset(datasets)
        }
        rubric = self.dataset_aspects.get(str(chosen.pk), []) if chosen else []
        listed = _editor_value(shown, "aspects", "list")
        extra = [[a, a] for a in listed if a not in {n for n, _label in rubric}]
        aspects_field = self.fields["aspects"]
        assert isinstance(aspects_field, forms.MultipleChoiceField)
        aspects_field.choices = [(name, label) for name, label in [*rubric, *extra]]
        if chosen is not None:
            dataset_field.initial = chosen.pk
        for field_name, (key, kind) in EDITOR_FIELDS.items():
            field = self.fields[field_name]
            # The JSON view is what is saved: the editor's own posts are ignored, and the script enables it.
            field.disabled = True
            field.widget.attrs.update({"data-config-key": key, "data-config-kind": kind})
            field.initial = _editor_value(shown, key, kind)
        self.config_templates = config_templates()

    def _chosen_dataset(self, datasets: Any) -> Dataset | None:
        raw = self.data.get("dataset") if self.is_bound else self.initial.get("dataset")
        if raw:
            pk = ascii_int(str(raw))
            found = None if pk is None else datasets.filter(pk=pk).first()
            if found is not None:
                return found  # type: ignore[no-any-return]
        return datasets.order_by("name", "pk").first()  # type: ignore[no-any-return]

    def clean_config_json(self) -> JudgeSettings:
        raw = _posted_json(self.cleaned_data["config_json"])
        try:
            return validate_config(raw)
        except ConfigError as exc:
            by_field: dict[str, list[str]] = {}
            for message in exc.errors:
                by_field.setdefault(error_field(message), []).append(message)
            json_errors = by_field.pop("config_json", [])
            for field_name, messages in by_field.items():
                self.add_error(field_name, messages)
            raise forms.ValidationError(
                json_errors or [_("The config has problems; each is shown at its field above.")]
            ) from None


def _posted_json(text: str) -> Any:
    """The config as the JSON view posted it, parsed; a form error when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise forms.ValidationError(_("not valid JSON: %(problem)s"), params={"problem": exc}) from None


def _editor_value(config: dict[str, Any], key: str, kind: str) -> Any:
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if kind == "list":
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    if kind == "bool":
        return value is True
    return value


def _aspects_by_dataset(datasets: Any) -> list[tuple[int, list[tuple[str, str]]]]:
    grouped: dict[int, list[tuple[str, str]]] = {}
    rows = Aspect.objects.filter(dataset__in=datasets).order_by("dataset_id", "position", "id")
    for dataset_id, name, label in rows.values_list("dataset_id", "name", "label"):
        grouped.setdefault(dataset_id, []).append((name, label))
    return list(grouped.items())


class PreviewForm(forms.Form):
    """What the preview reads from the config form's post: the JSON view, the dataset and the item number."""

    config_json = forms.CharField()
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none())
    preview_item = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args: Any, user: AbstractBaseUser | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        dataset_field = self.fields["dataset"]
        assert isinstance(dataset_field, forms.ModelChoiceField)
        dataset_field.queryset = datasets_for_user(user)

    def clean_config_json(self) -> JudgeSettings:
        raw = _posted_json(self.cleaned_data["config_json"])
        try:
            # Nothing is sent while previewing, so where the requests would go is checked on save, not here.
            return validate_config(raw, check_network=False)
        except ConfigError as exc:
            raise forms.ValidationError(exc.errors) from None


def preview_context(data: Any, *, user: AbstractBaseUser | AnonymousUser) -> dict[str, Any]:
    """What a preview page shows for a config form's post, for the admin and the research area alike: the form, and
    the item with the prompts a run would send for it, or the reason there are none. Writes and sends nothing.
    Raises Http404 for a dataset the user may not see."""
    from django.http import Http404  # noqa: PLC0415 - only a preview needs it

    from judging import run_plans, services  # noqa: PLC0415 - the engine's imports wait for a preview

    form = PreviewForm(data, user=user)
    context: dict[str, Any] = {"form": form, "previews": None, "item": None, "error": ""}
    if form.is_valid():
        dataset = form.cleaned_data["dataset"]
        try:
            item, previews = run_plans.prompt_preview(
                dataset=dataset,
                cfg=form.cleaned_data["config_json"],
                item_number=form.cleaned_data["preview_item"] or 1,
            )
        except services.LaunchError as exc:
            context["error"] = str(exc)
        else:
            context.update(item=item, previews=previews, dataset=dataset)
    elif "dataset" in form.errors and data.get("dataset"):
        raise Http404("no such dataset")
    return context
