"""Annotation campaigns, one concern per module. Their writes: `setup` (campaigns, their tasks and slots, the
pool), `claims` (handing out tasks, gold among them, and skips), `drafts`, `submissions` (the first answer to a
task), `corrections` (a changed answer to a submitted task), `ratings` (the Rating rows an answer becomes),
`answers` (the answer's checks and values, no writes) and `errors`; their reads: `selectors` (a campaign for its
annotators), `tasks` (an annotator's leases, drafts and candidates), `progress` (the annotator's counter and the
researcher's tables); and `settings` (a campaign's settings as one typed value); their admin is
annotations.admin.campaigns.

Why a campaign cannot be over-filled belongs to the slot engine (annotations.slots), which fact review shares; its
docstring gives the guarantees. These modules add what is particular to rating answers. The slot pool
(annotations.slots.campaign_slots) and the scales and task sheet (annotations.rubrics.task_sheet) sit below the
package, because gold, adjudication and recruitment, which the writes use, read them too: inside it they would close
a circle.
"""
