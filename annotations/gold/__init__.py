"""Gold items and attention checks: items with expected values, mixed into every annotator's queue and scored,
never counted as ratings of the dataset."""
