"""Rater quality: per-rater measures and flags, recorded exclusions from the statistics, reopened slots."""
