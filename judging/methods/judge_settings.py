"""The typed judge config: its fields, their defaults and the rules they follow.

`JudgeSettings.model_validate(raw)` alone accepts or refuses a config: its before-validator fills the defaults and
runs every rule below on the raw value, in one pass, so a refusal lists every problem at once and in a fixed order
(pydantic would stop at the first failing before-validator and skip the after-validators once a field fails, which
would hide all but some of them). A config read back from the database skips the rules (`from_stored`): it passed them
when it was saved, and a rule added since must not make a stored version unreadable.

Pure, like the methods that read it: the checks that need the network or the operator's settings (where api_base
and a key may go) are added by `judging.config.validate_config`, the one entry point that builds a config from
untrusted input.

Why one module of this size: the fields and every rule on them are one type; the rules run in one before-validator,
in a fixed order, so they sit beside the fields they check."""

from __future__ import annotations

import math
import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from judging.llm.calls import provider_problem
from judging.methods.factscore_options import FactScoreOptions, validate_options
from judging.methods.metrics import BLEU_TOKENIZERS, METRICS, ja_mecab_missing
from judging.methods.parsing import RegexRejected, compile_user_regex
from judging.methods.prompts import placeholders_in

Method = Literal["single", "reference", "pairwise", "summarize_then_judge", "factscore", "metric", "error_spans"]
OutputFormat = Literal["auto", "json", "regex"]
METHODS: tuple[str, ...] = get_args(Method)
LLM_METHODS = frozenset(METHODS) - {"metric"}
OUTPUT_FORMATS: tuple[str, ...] = get_args(OutputFormat)
# How a score is read from the log-probabilities at the score token: their probability-weighted mean over the
# scale's values (G-Eval), the most probable value, or not at all (the score the text states).
LogprobScoring = Literal["weighted", "top-token", "off"]
LOGPROB_SCORING_MODES: tuple[str, ...] = get_args(LogprobScoring)
BleuTokenizer = Literal["unidic", "ja-mecab"]
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,99}$")
# Key variables must look like keys: a researcher must not be able to point the gateway at
# SECRET_KEY's neighbours such as DATABASE_URL and have them sent as a bearer token.
_KEY_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*(API_KEY|_KEY|_TOKEN)$")
_AWS_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d{1,2}$")
# Every field that names a credential variable; each follows api_key_env's naming rule.
CREDENTIAL_ENV_FIELDS = (
    "api_key_env",
    "aws_access_key_id_env",
    "aws_secret_access_key_env",
    "aws_session_token_env",
    "vertex_credentials_env",
)
_VERTEX_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_VERTEX_LOCATION = re.compile(r"^(global|[a-z]+-[a-z]+\d{1,2})$")
_API_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")


class OutputSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: OutputFormat = "auto"
    regex: str | None = None

    @model_serializer
    def _stored_form(self) -> dict[str, Any]:
        # The stored JSON names a regex only when one was given, as the configs saved before this model did.
        return {"format": self.format, **({"regex": self.regex} if self.regex is not None else {})}


class ExemplarSettings(BaseModel):
    """A rated example in the judge's prompt: an answer the human raters agreed on and their consensus score. The
    answer is never judged by a config that shows it (the launch leaves it out)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    response_id: int
    aspect: str
    question: str
    answer: str
    label: float


MAX_EXEMPLARS = 100


class JudgeSettings(BaseModel):
    """A validated judge config. Untrusted input becomes one through `judging.config.validate_config`; a config
    already stored is read back with `JudgeSettings.from_stored`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    method: Method
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    api_version: str | None = None  # Azure OpenAI only: the api-version every request names
    # AWS Bedrock only: the variables holding the access key pair (and a session token), and the region.
    aws_access_key_id_env: str | None = None
    aws_secret_access_key_env: str | None = None
    aws_session_token_env: str | None = None
    aws_region: str | None = None
    # Vertex AI only: the variable holding the service account's JSON key, the project and the location.
    vertex_credentials_env: str | None = None
    vertex_project: str | None = None
    vertex_location: str | None = None
    aspects: tuple[str, ...] | None = None  # None: every aspect of the dataset's rubric
    prompt: str | None = None
    language: Literal["auto", "per_item", "en", "ja"] = "auto"
    output: OutputSettings = OutputSettings()
    samples: int = 1
    temperature: float = 0.0
    logprobs: bool = False
    top_logprobs: int = 5
    logprob_scoring: LogprobScoring | None = None  # None: "weighted" with logprobs, "off" without
    # Without log-probabilities from the provider, a logprob score is estimated from this many replies sampled at
    # this temperature instead.
    fallback_samples: int = 3
    fallback_temperature: float = 1.0
    max_tokens: int | None = None
    summarizer_model: str | None = None
    summarizer_prompt: str | None = None
    metric: str | None = None
    tokenize: BleuTokenizer = "unidic"
    pairs: Literal["all", "baseline"] = "all"
    baseline: str | None = None
    parse_retries: int = 0
    max_concurrency: int = 32
    rpm: int | None = None
    tpm: int | None = None
    timeout_s: float = 60.0
    max_retries: int = 6
    budget_usd: float | None = None
    cache: bool = True
    factscore: FactScoreOptions | None = None
    exemplars: tuple[ExemplarSettings, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _check_raw(cls, data: Any, info: ValidationInfo) -> Any:
        if info.context and info.context.get(_STORED):
            # Configs stored before logprob_scoring existed read back as what they did then: weighted when
            # logprobs were on.
            if isinstance(data, dict) and data.get("logprob_scoring") is None:
                return {**data, "logprob_scoring": default_logprob_scoring(data.get("logprobs"))}
            return data
        if not isinstance(data, dict):
            raise _refusal([_NOT_AN_OBJECT], {})
        cfg, errors = _apply_rules(data)
        if errors:
            # The partly normalised config travels with the problems: the network checks read it to add theirs.
            raise _refusal(errors, cfg)
        return cfg

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> JudgeSettings:
        """A config saved after validation (a JudgeConfig row or a run's snapshot), without re-running the
        rules and the network checks."""
        return cls.model_validate(stored, context={_STORED: True})

    @classmethod
    def from_normalised(cls, cfg: dict[str, Any]) -> JudgeSettings:
        """The typed form of a config `normalise_config` found no problem in (and the network checks may have
        normalised further, such as api_base)."""
        try:
            return cls.model_validate(cfg, context={_STORED: True})
        except ValidationError as exc:  # a rule should have caught it first; still report it as a config problem
            raise ConfigError(_type_problems(exc)) from None

    def stored(self) -> dict[str, Any]:
        """The JSON form the database keeps; a config without rated examples is stored as it was before configs
        could carry them."""
        stored = self.model_dump(mode="json")
        if not stored["exemplars"]:
            del stored["exemplars"]
        return stored

    @property
    def uses_llm(self) -> bool:
        return self.method in LLM_METHODS


KNOWN_KEYS = frozenset(JudgeSettings.model_fields)
_STORED = "stored"
_NOT_AN_OBJECT = "the config must be a JSON object"


def default_logprob_scoring(logprobs: Any) -> str:
    return "weighted" if logprobs is True else "off"


class ConfigError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _int(cfg: dict[str, Any], key: str, lo: int, hi: int, errors: list[str], nullable: bool = False) -> None:
    value = cfg.get(key)
    if value is None and nullable:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        errors.append(f"{key} must be an integer from {lo} to {hi}{' or null' if nullable else ''}")


def _number(cfg: dict[str, Any], key: str, lo: float, hi: float, errors: list[str], nullable: bool = False) -> None:
    value = cfg.get(key)
    if value is None and nullable:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(float(value))
        or not lo <= float(value) <= hi
    ):
        errors.append(f"{key} must be a number from {lo:g} to {hi:g}{' or null' if nullable else ''}")


def _optional_string(cfg: dict[str, Any], key: str, errors: list[str]) -> None:
    if cfg[key] is not None and not isinstance(cfg[key], str):
        errors.append(f"{key} must be a string")


def is_key_env_name(value: Any) -> bool:
    return isinstance(value, str) and bool(_ENV_NAME.match(value)) and bool(_KEY_ENV_NAME.match(value))


def _check_prompts(cfg: dict[str, Any], method: Any, errors: list[str]) -> None:
    prompt = cfg["prompt"]
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > 20_000:
            errors.append("prompt must be a template string of at most 20,000 characters")
        else:
            if method == "pairwise" and not {"answer_a", "answer_b"} <= placeholders_in(prompt):
                errors.append("a pairwise prompt needs {answer_a} and {answer_b}")
            elif method == "summarize_then_judge" and "summary" not in placeholders_in(prompt):
                errors.append("a summarize_then_judge prompt needs {summary}")
            elif method in ("single", "reference", "error_spans") and "answer" not in placeholders_in(prompt):
                errors.append("the prompt needs the {answer} placeholder")
    if cfg["summarizer_prompt"] is not None and (
        not isinstance(cfg["summarizer_prompt"], str) or "answer" not in placeholders_in(cfg["summarizer_prompt"])
    ):
        errors.append("summarizer_prompt must be a template with {answer}")
    if cfg["language"] not in ("auto", "per_item", "en", "ja"):
        errors.append("language must be auto, per_item, en or ja")


def _check_exemplars(cfg: dict[str, Any], method: Any, errors: list[str]) -> None:
    exemplars = cfg["exemplars"]
    if exemplars in ((), []):
        return
    if method not in ("single", "reference", "summarize_then_judge"):
        errors.append("exemplars are shown only by the single, reference and summarize_then_judge methods")
        return
    if not isinstance(exemplars, list | tuple) or len(exemplars) > MAX_EXEMPLARS:
        errors.append(f"exemplars must be a list of at most {MAX_EXEMPLARS} rated examples")
        return
    for number, exemplar in enumerate(exemplars, start=1):
        try:
            ExemplarSettings.model_validate(exemplar)
        except ValidationError as exc:
            where = ", ".join(".".join(map(str, e["loc"])) or "value" for e in exc.errors())
            errors.append(
                f"exemplar {number} must have response_id, aspect, question, answer and label (problem at {where})"
            )


def _check_output(cfg: dict[str, Any], errors: list[str]) -> None:
    output = cfg["output"]
    if not isinstance(output, dict) or output.get("format", "auto") not in OUTPUT_FORMATS:
        errors.append("output.format must be auto, json or regex")
    else:
        output = {"format": output.get("format", "auto"), **({"regex": output["regex"]} if "regex" in output else {})}
        cfg["output"] = output
        if output["format"] == "regex":
            try:
                compile_user_regex(output.get("regex", ""))
            except RegexRejected as exc:
                errors.append(str(exc))
        elif "regex" in output and not isinstance(output["regex"], str):
            errors.append("output.regex must be a string")


def _check_numbers(cfg: dict[str, Any], errors: list[str]) -> None:
    _int(cfg, "samples", 1, 20, errors)
    _number(cfg, "temperature", 0, 2, errors)
    if not isinstance(cfg["logprobs"], bool):
        errors.append("logprobs must be true or false")
    _int(cfg, "top_logprobs", 1, 20, errors)
    if cfg["logprob_scoring"] is None:
        cfg["logprob_scoring"] = default_logprob_scoring(cfg["logprobs"])
    elif cfg["logprob_scoring"] not in LOGPROB_SCORING_MODES:
        errors.append(f"logprob_scoring must be one of {', '.join(LOGPROB_SCORING_MODES)}")
    elif cfg["logprob_scoring"] != "off" and cfg["logprobs"] is not True:
        errors.append(f"logprob_scoring {cfg['logprob_scoring']} needs logprobs: true")
    _int(cfg, "fallback_samples", 1, 20, errors)
    fallback_temperature = cfg["fallback_temperature"]
    if (
        isinstance(fallback_temperature, bool)
        or not isinstance(fallback_temperature, int | float)
        or not math.isfinite(float(fallback_temperature))
        or not 0 < float(fallback_temperature) <= 2
    ):
        errors.append(
            "fallback_temperature must be a number above 0 and at most 2: samples at temperature 0 would all be "
            "the same reply"
        )
    _int(cfg, "max_tokens", 1, 32_000, errors, nullable=True)
    _int(cfg, "parse_retries", 0, 3, errors)
    _int(cfg, "max_concurrency", 1, 1024, errors)
    _int(cfg, "rpm", 1, 1_000_000, errors, nullable=True)
    _int(cfg, "tpm", 1, 1_000_000_000, errors, nullable=True)
    _number(cfg, "timeout_s", 1, 3600, errors)
    _int(cfg, "max_retries", 0, 20, errors)
    _number(cfg, "budget_usd", 0, 1_000_000, errors, nullable=True)
    if not isinstance(cfg["cache"], bool):
        errors.append("cache must be true or false")


def _check_tokenize(cfg: dict[str, Any], method: Any, errors: list[str]) -> None:
    tokenize = cfg["tokenize"]
    if tokenize not in BLEU_TOKENIZERS:
        errors.append(f"tokenize must be one of {', '.join(BLEU_TOKENIZERS)}")
    elif tokenize != "unidic" and not (method == "metric" and cfg["metric"] == "bleu"):
        errors.append(f"tokenize {tokenize} is only used by the metric method's bleu")
    elif tokenize == "ja-mecab":
        missing = ja_mecab_missing()
        if missing:
            errors.append(
                f"tokenize ja-mecab needs {' and '.join(missing)} (sacreBLEU's Japanese tokenizer: MeCab with the "
                "IPA dictionary), which this installation does not have; use unidic or install them"
            )


def _check_error_spans(cfg: dict[str, Any], method: Any, errors: list[str]) -> None:
    """The error-span judge reads a JSON list of errors from the reply text: no score token, no score format."""
    if method != "error_spans":
        return
    if cfg["logprobs"] is True:
        errors.append("the error_spans method reads no log-probabilities; set logprobs to false")
    if isinstance(cfg["output"], dict) and cfg["output"].get("format", "auto") != "auto":
        errors.append("the error_spans method reads its own JSON list of errors; leave output.format at auto")


def _check_samples(cfg: dict[str, Any], method: Any, errors: list[str]) -> None:
    samples, temperature = cfg["samples"], cfg["temperature"]
    if (
        method in LLM_METHODS
        and isinstance(samples, int)
        and samples > 1
        and isinstance(temperature, int | float)
        and temperature == 0
    ):
        errors.append(
            f"samples {samples} at temperature 0 refused: several samples at temperature 0 are identical requests; "
            "raise temperature or use one sample"
        )


def _check_method_fields(cfg: dict[str, Any], method: Any, model: Any, errors: list[str]) -> None:
    """Fields that only some methods use: filled in for those, refused for the others."""
    if method == "summarize_then_judge":
        summarizer = cfg["summarizer_model"] or model
        if not isinstance(summarizer, str) or not _MODEL.match(summarizer):
            errors.append("summarizer_model must be a litellm model string")
        elif summarizer != model and (problem := provider_problem(summarizer)):
            errors.append(f"summarizer_model: {problem}")
        cfg["summarizer_model"] = summarizer
    else:
        _optional_string(cfg, "summarizer_model", errors)
    if method == "metric":
        if cfg["metric"] not in METRICS:
            errors.append(f"metric must be one of {', '.join(METRICS)}")
        cfg["samples"] = 1
    elif cfg["metric"] is not None:
        errors.append("metric is only used by the metric method")
    _check_tokenize(cfg, method, errors)
    if cfg["pairs"] not in ("all", "baseline"):
        errors.append("pairs must be all or baseline")
    elif (
        method == "pairwise"
        and cfg["pairs"] == "baseline"
        and not (isinstance(cfg["baseline"], str) and cfg["baseline"])
    ):
        errors.append("pairs=baseline needs baseline (a system key)")
    _optional_string(cfg, "baseline", errors)
    if method == "factscore":
        cfg["factscore"], factscore_errors = validate_options(cfg["factscore"])
        errors.extend(factscore_errors)
    elif cfg["factscore"] is not None:
        errors.append("factscore options are only used by the factscore method")


def _check_provider_fields(cfg: dict[str, Any], method: Any, errors: list[str]) -> None:
    """What each provider needs besides the model: Azure OpenAI has no default endpoint and no default api-version
    (the SDK would take them from AZURE_OPENAI_ENDPOINT and OPENAI_API_VERSION)."""
    models = [m for m in (cfg.get("model"), cfg.get("summarizer_model")) if isinstance(m, str)]
    azure = method in LLM_METHODS and any(m.startswith("azure/") for m in models)
    version = cfg["api_version"]
    if version is not None and (not isinstance(version, str) or not _API_VERSION.match(version)):
        errors.append("api_version must be an Azure OpenAI api-version such as 2024-10-21")
    elif version is not None and not azure:
        errors.append("api_version is only used by azure/ models")
    bedrock = method in LLM_METHODS and any(m.startswith("bedrock/") for m in models)
    aws_fields = ("aws_access_key_id_env", "aws_secret_access_key_env", "aws_session_token_env", "aws_region")
    for name in aws_fields[:3]:
        if cfg[name] is not None and not is_key_env_name(cfg[name]):
            errors.append(f"{name} must name an environment variable ending in _API_KEY, _KEY or _TOKEN")
    region = cfg["aws_region"]
    if region is not None and (not isinstance(region, str) or not _AWS_REGION.match(region)):
        errors.append("aws_region must be an AWS region such as us-east-1")
    if bedrock:
        for name in aws_fields:
            if name != "aws_session_token_env" and cfg[name] is None:
                errors.append(f"bedrock/ models need {name}")
        if cfg["api_key_env"] is not None:
            errors.append("bedrock/ models are signed with the AWS key pair, not api_key_env")
    else:
        for name in aws_fields:
            if cfg[name] is not None:
                errors.append(f"{name} is only used by bedrock/ models")
    _check_vertex_fields(cfg, method in LLM_METHODS and any(m.startswith("vertex_ai/") for m in models), errors)
    if azure:
        if version is None:
            errors.append("azure/ models need api_version (the Azure OpenAI api-version, such as 2024-10-21)")
        if cfg["api_base"] is None:
            errors.append("azure/ models need api_base: the resource's endpoint, https://<resource>.openai.azure.com")


def _check_vertex_fields(cfg: dict[str, Any], vertex: bool, errors: list[str]) -> None:
    fields = ("vertex_credentials_env", "vertex_project", "vertex_location")
    if cfg["vertex_credentials_env"] is not None and not is_key_env_name(cfg["vertex_credentials_env"]):
        errors.append("vertex_credentials_env must name an environment variable ending in _API_KEY, _KEY or _TOKEN")
    project, location = cfg["vertex_project"], cfg["vertex_location"]
    if project is not None and (not isinstance(project, str) or not _VERTEX_PROJECT.match(project)):
        errors.append("vertex_project must be a Google Cloud project id")
    if location is not None and (not isinstance(location, str) or not _VERTEX_LOCATION.match(location)):
        errors.append("vertex_location must be a Vertex AI location such as us-central1 or global")
    if vertex:
        errors.extend(f"vertex_ai/ models need {name}" for name in fields if cfg[name] is None)
        if cfg["api_key_env"] is not None:
            errors.append("vertex_ai/ models are authorised by the service account, not api_key_env")
    else:
        errors.extend(f"{name} is only used by vertex_ai/ models" for name in fields if cfg[name] is not None)


def normalise_config(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The config with defaults filled in and every problem `JudgeSettings` finds (none of them needs the network),
    in the order its rules report them."""
    try:
        settings = JudgeSettings.model_validate(raw)
    except ValidationError as exc:
        for error in exc.errors():
            if error["type"] == "judge_config":
                return dict(error["ctx"]["normalised"]), list(error["ctx"]["problems"])
        return dict(raw), _type_problems(exc)
    return settings.model_dump(), []


def _refusal(problems: list[str], normalised: dict[str, Any]) -> PydanticCustomError:
    return PydanticCustomError(
        "judge_config",
        "{summary}",
        {"summary": "; ".join(problems), "problems": tuple(problems), "normalised": normalised},
    )


def _type_problems(exc: ValidationError) -> list[str]:
    return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]


def _apply_rules(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The raw config with defaults filled in, and every rule's problem with it."""
    errors: list[str] = []
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        errors.append(f"unknown field(s): {', '.join(unknown)}")
    defaults = {name: field.default for name, field in JudgeSettings.model_fields.items() if not field.is_required()}
    cfg: dict[str, Any] = {
        **defaults,
        "output": {"format": "auto"},
        **{k: v for k, v in raw.items() if k in KNOWN_KEYS},
    }

    name = cfg.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 150:
        errors.append("name is required (1 to 150 characters)")
    else:
        cfg["name"] = name.strip()
    method = cfg.get("method")
    if method not in METHODS:
        errors.append(f"method must be one of {', '.join(METHODS)}")
    model = cfg.get("model")
    if method in LLM_METHODS:
        if not isinstance(model, str) or not _MODEL.match(model):
            errors.append("model must be a litellm model string such as openai/gpt-4o-mini")
        elif problem := provider_problem(model):
            errors.append(problem)
    elif model is not None and not isinstance(model, str):
        errors.append("model must be a string")
    if cfg["api_base"] is not None and not isinstance(cfg["api_base"], str):
        errors.append("api_base must be a URL string")
    if cfg["api_key_env"] is not None and not is_key_env_name(cfg["api_key_env"]):
        errors.append("api_key_env must name an environment variable ending in _API_KEY, _KEY or _TOKEN")
    _check_provider_fields(cfg, method, errors)

    aspects = cfg["aspects"]
    if aspects is not None and (
        not isinstance(aspects, list)
        or not aspects
        or not all(isinstance(a, str) and a.strip() and len(a) <= 200 for a in aspects)
        or len(set(aspects)) != len(aspects)
    ):
        errors.append("aspects must be a non-empty list of distinct aspect names, or null for every aspect")

    _check_prompts(cfg, method, errors)
    _check_exemplars(cfg, method, errors)
    _check_output(cfg, errors)
    _check_numbers(cfg, errors)
    _check_method_fields(cfg, method, model, errors)
    _check_error_spans(cfg, method, errors)
    _check_samples(cfg, method, errors)
    return cfg, errors
