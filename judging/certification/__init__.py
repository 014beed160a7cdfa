"""Judge versions, their certification against a frozen set of human ratings, and the watch for drift."""
