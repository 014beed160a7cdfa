"""Crowd recruitment: entry links per campaign (Prolific, MTurk ExternalQuestion, signed invites), pseudonymous
worker identities bound to a platform id, sessions, quotas and completion."""
