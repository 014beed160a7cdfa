"""The dataset side of the annotations app: datasets, their rubrics and aspects, items with their turns, systems and
their responses, and the raters with their ratings."""

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from annotations.models.parts import at_least, known_choice, unique_per_owner, user_or_null, within
from annotations.spans.schemes import SpanScheme


class MeasurementLevel(models.TextChoices):
    NOMINAL = "nominal"
    ORDINAL = "ordinal"
    INTERVAL = "interval"
    RATIO = "ratio"


class AspectKind(models.TextChoices):
    """A scale aspect takes one number per answer; a span aspect takes error spans, scored by its scheme."""

    SCALE = "scale", _("Scale")
    SPANS = "spans", _("Error spans")


class AnswerFormat(models.TextChoices):
    """How the site shows a dataset's answers to raters and researchers. Plain text by default: a model's line
    breaks are part of what raters judge (structure, fluency), and Markdown would join lines into one paragraph."""

    PLAIN = "plain", _("Plain text, line breaks kept")
    MARKDOWN = "markdown", _("Markdown, line breaks kept")


class Dataset(models.Model):
    name = models.CharField(max_length=200)
    owner = user_or_null("owned_datasets")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="shared_datasets")
    notice = models.TextField(blank=True, help_text="What the import inferred or assumed, shown to researchers.")
    answer_format = models.CharField(
        max_length=10,
        choices=AnswerFormat.choices,
        default=AnswerFormat.PLAIN,
        help_text="How answers are shown: as plain text, or rendered as Markdown; line breaks are kept in both.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("dataset")
        verbose_name_plural = _("datasets")
        ordering = ["name"]
        constraints = [
            *unique_per_owner(
                ["name"], per_owner="dataset_name_unique_per_owner", without_owner="dataset_name_unique_without_owner"
            ),
            known_choice("answer_format", AnswerFormat.values, "dataset_answer_format_known"),
        ]

    def __str__(self) -> str:
        return self.name


class Rubric(models.Model):
    dataset = models.OneToOneField(Dataset, on_delete=models.CASCADE, related_name="rubric")
    source = models.CharField(max_length=100, help_text='"preset:<name>", "file" or "inferred"')
    systems = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("rubric")
        verbose_name_plural = _("rubrics")

    def __str__(self) -> str:
        return f"rubric of {self.dataset}"


class Aspect(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="aspects")
    name = models.CharField(max_length=200)
    label = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    min_value = models.FloatField()
    max_value = models.FloatField()
    ideal = models.FloatField()
    level = models.CharField(max_length=10, choices=MeasurementLevel.choices, default=MeasurementLevel.ORDINAL)
    labels = models.JSONField(default=dict, blank=True)
    missing = models.JSONField(default=list, blank=True)
    position = models.PositiveIntegerField(default=0)
    translations = models.JSONField(
        default=dict, blank=True, help_text='Label, description and value labels in other languages: {"ja": {...}}.'
    )
    kind = models.CharField(max_length=10, choices=AspectKind.choices, default=AspectKind.SCALE)
    span_scheme = models.JSONField(
        default=dict, blank=True, help_text="Categories, severities with weights and normalisation of a span aspect."
    )

    class Meta:
        verbose_name = _("aspect")
        verbose_name_plural = _("aspects")
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "name"], name="aspect_name_unique_per_dataset"),
            models.CheckConstraint(condition=Q(min_value__lt=models.F("max_value")), name="aspect_min_below_max"),
            models.CheckConstraint(
                condition=within("ideal", models.F("min_value"), models.F("max_value")),
                name="aspect_ideal_within_range",
            ),
            known_choice("kind", AspectKind.values, "aspect_kind_known"),
            # A span aspect without categories and severities could take no span; a scale aspect has no scheme.
            models.CheckConstraint(
                condition=(Q(kind=AspectKind.SCALE) & Q(span_scheme={}))
                | (Q(kind=AspectKind.SPANS) & Q(span_scheme__has_keys=["categories", "severities"])),
                name="aspect_span_scheme_matches_kind",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def _translated(self, key: str) -> Any:
        language = (get_language() or "").split("-")[0]
        return (self.translations or {}).get(language, {}).get(key)

    @property
    def display_label(self) -> str:
        """The label in the active language, else the default text, else the name."""
        return self._translated("label") or self.label or self.name

    @property
    def display_description(self) -> str:
        return self._translated("description") or self.description

    def display_value_labels(self) -> dict[str, str]:
        return {**(self.labels or {}), **(self._translated("labels") or {})}

    @property
    def span(self) -> float:
        return self.max_value - self.min_value

    @property
    def is_spans(self) -> bool:
        return self.kind == AspectKind.SPANS

    @property
    def scheme(self) -> SpanScheme:
        """The typed span scheme; only a span aspect has one."""
        if not self.is_spans:
            raise ValueError(f"aspect {self.name!r} is a scale, not a span aspect")
        return SpanScheme.from_json(self.span_scheme)


class System(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="systems")
    key = models.CharField(max_length=200)
    model_name = models.CharField(max_length=300, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = _("system")
        verbose_name_plural = _("systems")
        ordering = ["dataset", "position"]
        constraints = [models.UniqueConstraint(fields=["dataset", "key"], name="system_key_unique_per_dataset")]

    def __str__(self) -> str:
        return self.key


class Item(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=500)
    position = models.PositiveIntegerField()
    # The item's own JSON minus "turns", kept verbatim so export reproduces every field, known or not.
    source = models.JSONField(default=dict)

    class Meta:
        verbose_name = _("item")
        verbose_name_plural = _("items")
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "external_id"], name="item_id_unique_per_dataset"),
            models.UniqueConstraint(fields=["dataset", "position"], name="item_position_unique_per_dataset"),
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def meta(self) -> object:
        return self.source.get("meta")


class Turn(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    prompt = models.TextField()
    reference = models.TextField(null=True, blank=True)
    context = models.JSONField(null=True, blank=True)
    # The turn's JSON minus "responses", kept verbatim for a lossless export.
    source = models.JSONField(default=dict)

    class Meta:
        verbose_name = _("turn")
        verbose_name_plural = _("turns")
        ordering = ["item", "index"]
        constraints = [models.UniqueConstraint(fields=["item", "index"], name="turn_index_unique_per_item")]

    def __str__(self) -> str:
        return f"{self.item.external_id} turn {self.index + 1}"

    @property
    def context_passages(self) -> list[str]:
        if self.context is None:
            return []
        if isinstance(self.context, str):
            return [self.context]
        return [str(passage) for passage in self.context]


class Response(models.Model):
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="responses")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="responses")
    position = models.PositiveIntegerField()
    text = models.TextField()
    # The answer's JSON minus "human_evals" (rebuilt from Rating rows on export).
    source = models.JSONField(default=dict)
    # Aspect names in the order the import listed them under human_evals, including empty lists.
    eval_aspects = models.JSONField(default=list)
    has_human_evals = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("response")
        verbose_name_plural = _("responses")
        ordering = ["turn", "position"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "system"], name="response_unique_per_turn_and_system"),
        ]

    def __str__(self) -> str:
        return f"{self.turn} / {self.system.key}"


class Rater(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="raters")
    external_id = models.CharField(max_length=200, null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="rater_profiles"
    )
    pseudonym = models.CharField(max_length=200)
    # True when the import had no "raters" list: the id is a list position, not a person.
    is_positional = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("rater")
        verbose_name_plural = _("raters")
        constraints = [
            models.UniqueConstraint(fields=["dataset", "external_id"], name="rater_external_id_unique_per_dataset"),
            models.UniqueConstraint(fields=["dataset", "user"], name="rater_user_unique_per_dataset"),
            models.UniqueConstraint(fields=["dataset", "pseudonym"], name="rater_pseudonym_unique_per_dataset"),
            models.CheckConstraint(
                condition=(Q(external_id__isnull=False) & Q(user__isnull=True))
                | (Q(external_id__isnull=True) & Q(user__isnull=False)),
                name="rater_is_imported_xor_app_user",
            ),
        ]

    def __str__(self) -> str:
        return self.pseudonym


class RatingOrigin(models.TextChoices):
    IMPORT = "import"
    APP = "app"


class Rating(models.Model):
    # No single-column indexes on response and aspect: the unique (response, aspect, rater) constraint and the
    # (aspect, response) index lead with them, and each index is written again for every rating a submit inserts.
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="ratings", db_index=False)
    aspect = models.ForeignKey(Aspect, on_delete=models.CASCADE, related_name="ratings", db_index=False)
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="ratings")
    position = models.PositiveIntegerField(default=0)
    raw = models.JSONField(null=True, blank=True, help_text="The token exactly as imported or entered.")
    value = models.FloatField(null=True, blank=True)
    is_missing = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)
    comment = models.TextField(blank=True)
    seconds_spent = models.FloatField(null=True, blank=True)
    origin = models.CharField(max_length=10, choices=RatingOrigin.choices, default=RatingOrigin.IMPORT)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("rating")
        verbose_name_plural = _("ratings")
        ordering = ["response", "aspect", "position"]
        constraints = [
            models.UniqueConstraint(fields=["response", "aspect", "rater"], name="one_rating_per_rater_answer_aspect"),
            models.CheckConstraint(
                condition=Q(is_missing=True) | Q(value__isnull=False), name="rating_value_present_unless_missing"
            ),
            at_least("seconds_spent", 0, "rating_seconds_non_negative", nullable=True),
        ]
        indexes = [models.Index(fields=["aspect", "response"])]

    def __str__(self) -> str:
        return f"{self.rater} on {self.response_id}/{self.aspect_id}: {self.raw!r}"
