"""The writes of annotation campaigns, one concern per module: `setup` (campaigns, their tasks and slots, the
pool), `claims` (handing out tasks, gold among them, and skips), `drafts`, `submissions` (the first answer to a
task), `corrections` (a changed answer to a submitted task), `ratings` (the Rating rows an answer becomes),
`answers` (the answer's checks and values, no writes) and `errors`.

Why a campaign cannot be over-filled belongs to the slot engine (annotations.slots), which fact review shares; its
docstring gives the guarantees. These modules add what is particular to rating answers. Reads live in
annotations.campaign_selectors, the settings type in annotations.campaign_settings.
"""
