"""Pure agreement statistics (no ORM): fed by selectors, shared by CLI, API and dashboard."""

from annotations.stats.agreement import (
    Ratings,
    agreement_summary,
    alpha_bootstrap_ci,
    fleiss_kappa,
    gwet_ac1,
    intraclass_correlations,
    krippendorff_alpha,
    percent_agreement,
    rater_statistics,
    ratings_from_long,
    ratings_from_matrix,
)
from annotations.stats.results import Interval, Stat, defined, undefined

__all__ = [
    "Interval",
    "Ratings",
    "Stat",
    "agreement_summary",
    "alpha_bootstrap_ci",
    "defined",
    "fleiss_kappa",
    "gwet_ac1",
    "intraclass_correlations",
    "krippendorff_alpha",
    "percent_agreement",
    "rater_statistics",
    "ratings_from_long",
    "ratings_from_matrix",
    "undefined",
]
