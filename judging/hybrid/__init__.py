"""Hybrid campaigns: a certified judge rates the tasks where its calibrated confidence clears a threshold."""
