"""Hybrid campaigns, the annotations side: closing a task's slots when a certified judge rates it."""
