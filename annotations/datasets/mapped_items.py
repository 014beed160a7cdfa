"""Grouping a mapped table's rows into items in the import format (``build_items``): what each row adds to its
answer (ratings in wide, long or nested layout, exclusion marks, judge scores, preferences as pairs or as a choice
among K candidates), then the items with the row each part came from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotations.datasets.exporting import JUDGE_FILLED_KEY, RATER_EXCLUDED_KEY
from annotations.datasets.mapped_rows import (
    TRUE_MARKS,
    AnswerPart,
    BuiltItems,
    ItemPart,
    RowReader,
    is_blank,
    mark_value,
    score_value,
)
from annotations.datasets.mapping import JUDGE_FILLED, Mapping, RatingBlock
from annotations.errors import DatasetImportError
from annotations.text.storable import NUL, unstorable_character


class _Builder(RowReader):
    """What a row adds to its answer: ratings, exclusion marks, judge scores and preferences; then the items."""

    def add(self, row: int, values: dict[str, Any]) -> None:
        if not self.header_checked:
            self.check_columns(row, values)
        self.rows += 1
        mapping = self.mapping
        present = {c for c in mapping.columns() if c in values}
        for column in present:
            value = values[column]
            bad = unstorable_character(value) if isinstance(value, str) else None
            if bad == NUL:
                raise self.fail(
                    row, f"NUL character in column {column!r}", expected="text without U+0000", found="U+0000"
                )
            if bad:
                raise self.fail(
                    row,
                    f"unpaired surrogate in column {column!r}",
                    expected="text without unpaired surrogates",
                    found=bad,
                )
        prompt = self.text(row, values, mapping.prompt, "prompt") if mapping.prompt in present else None
        turn_number = 1
        if mapping.turn in present:
            raw_turn = score_value(values[mapping.turn])
            if not isinstance(raw_turn, int) or isinstance(raw_turn, bool) or raw_turn < 1:
                raise self.fail(row, "invalid turn", expected="a turn number from 1", found=values[mapping.turn])
            turn_number = raw_turn
        preference = mapping.preferences
        conversations = self.conversations(row, values, present)
        if conversations:
            if mapping.turn not in present:
                turn_number = len(conversations["a"])
            if prompt is None and turn_number <= len(conversations["a"]):
                prompt = conversations["a"][turn_number - 1][0]
        if prompt is None and mapping.prompt in mapping.optional and mapping.item in present:
            prompt = self.text(row, values, mapping.item, "item id")  # no prompt in the file: the item id stands in
        item = self.item_for(row, values, prompt)
        index = turn_number - 1
        for earlier in range(len(conversations.get("a", []))):
            self.turn_for(row, item, earlier, conversations["a"][earlier][0])
        turn = self.turn_for(row, item, index, prompt)
        if mapping.reference in present and not is_blank(values[mapping.reference]):
            turn.reference = self.reference(row, values)
        system = ""
        if mapping.system in present:
            system = self.text(row, values, mapping.system, "system")
        elif mapping.system_by_position:
            system = f"{mapping.system_by_position}{len(turn.answers) + 1}"
        if system:
            text = self.text(row, values, mapping.answer, "answer") if mapping.answer in present else None
            answer = self.answer_for(row, turn, system, text, item)
            self.add_ratings(row, values, present, answer, item, system)
            self.add_judges(row, values, present, answer)
        if preference is not None:
            self.add_preference(row, values, present, item, conversations, index)

    def conversations(self, row: int, values: dict[str, Any], present: set[str]) -> dict[str, list[tuple[str, str]]]:
        block = self.mapping.preferences
        if block is None or not block.conversation_a or block.conversation_a not in present:
            return {}
        found = {
            "a": self.conversation(row, values, block.conversation_a),
            "b": self.conversation(row, values, block.conversation_b),
        }
        if [p for p, _ in found["a"]] != [p for p, _ in found["b"]]:
            raise self.fail(
                row, "conversations differ", expected="the same user messages in both conversations", found="not"
            )
        return found

    def reference(self, row: int, values: dict[str, Any]) -> str:
        reference = self.cell(values, self.mapping.reference)
        if isinstance(reference, list) and reference:
            reference = reference[0]  # several references: the first is the original one
        if not isinstance(reference, str):
            raise self.fail(row, "invalid reference", expected="text", found=reference)
        return reference

    def rate(
        self, row: int, answer: AnswerPart, aspect: str, rater: str, score: Any, item: ItemPart, system: str
    ) -> None:
        by_rater = answer.scores.setdefault(aspect, {})
        if rater in by_rater:
            raise self.fail(
                row,
                "duplicate rating",
                expected=f"one score per rater; rater {rater!r} already rated {aspect!r} of system {system!r} on "
                f"item {item.external_id!r} in {self.unit} {by_rater[rater][1]}",
                found=score,
            )
        if rater not in answer.raters:
            answer.raters.append(rater)
        by_rater[rater] = (score, row)

    def add_ratings(
        self, row: int, values: dict[str, Any], present: set[str], answer: AnswerPart, item: ItemPart, system: str
    ) -> None:
        for block in self.mapping.ratings:
            if block.layout == "nested":
                if block.column not in present or is_blank(values[block.column]):
                    continue
                entries = self.cell(values, block.column)
                if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                    raise self.fail(
                        row, "invalid ratings", expected=f"a list of objects in column {block.column!r}", found=entries
                    )
                for number, entry in enumerate(entries, start=1):
                    keys = block.aspects or {name: name for name in entry}
                    for aspect, key in keys.items():
                        if key in entry:
                            rater = f"{block.rater_prefix}{number}"
                            self.rate(row, answer, aspect, rater, score_value(entry[key]), item, system)
                continue
            if block.rater:
                if block.rater not in present:
                    continue
                rater = self.text(row, values, block.rater, "rater")
            else:
                rater = block.rater_name
            if block.filled_by and block.filled_by in present and values[block.filled_by] == JUDGE_FILLED:
                self.add_judge_filled(row, values, present, block, answer, rater)
                continue
            if block.rater_excluded and block.rater_excluded in present:
                self.mark_excluded(row, answer, rater, values[block.rater_excluded])
            if block.layout == "wide":
                for aspect, column in block.aspects.items():
                    if column in present:
                        self.rate(row, answer, aspect, rater, score_value(self.cell(values, column)), item, system)
            elif block.aspect in present and block.score in present:
                aspect = self.text(row, values, block.aspect, "aspect")
                self.rate(row, answer, aspect, rater, score_value(self.cell(values, block.score)), item, system)

    def mark_excluded(self, row: int, answer: AnswerPart, rater: str, value: Any) -> None:
        """The answer's JSONL carries one mark per rater, so every row of the rater on this answer must agree; the
        JSONL import then checks the marks across the whole dataset."""
        mark = mark_value(value)
        if mark is None:
            return
        earlier = answer.exclusion_marks.setdefault(rater, (mark, row))
        if earlier[0] != mark:
            raise self.fail(
                row,
                "rater marked both excluded and not excluded",
                expected=f"the same mark for rater {rater!r} as in {self.unit} {earlier[1]}",
                found=value,
            )

    def add_judge_filled(
        self, row: int, values: dict[str, Any], present: set[str], block: RatingBlock, answer: AnswerPart, judge: str
    ) -> None:
        """A judge's ratings in a hybrid campaign, as the JSONL export lists them under the answer's judge_filled."""
        if block.layout == "wide":
            scores = [
                (aspect, self.cell(values, column)) for aspect, column in block.aspects.items() if column in present
            ]
        elif block.aspect in present and block.score in present:
            scores = [(self.text(row, values, block.aspect, "aspect"), self.cell(values, block.score))]
        else:
            scores = []
        described = {
            key: self.cell(values, column) if column in present else None
            for key, column in (("judge_version", block.judge_version), ("campaign", block.campaign))
            if column
        }
        for aspect, score in scores:
            entry = {"aspect": aspect, "value": score_value(score), "filled_by": JUDGE_FILLED, "judge": judge}
            answer.judge_filled.append((entry | described, row))

    def add_judges(self, row: int, values: dict[str, Any], present: set[str], answer: AnswerPart) -> None:
        for judge, by_aspect in self.mapping.judges.items():
            for aspect, column in by_aspect.items():
                if column not in present:
                    continue
                score = score_value(values[column])
                if score is None:
                    continue
                answer.judges.setdefault(judge, {})[aspect] = (score, row)

    def add_preference(
        self,
        row: int,
        values: dict[str, Any],
        present: set[str],
        item: ItemPart,
        conversations: dict[str, list[tuple[str, str]]],
        turn_index: int,
    ) -> None:
        block = self.mapping.preferences
        assert block is not None
        entry: dict[str, Any] = {}
        if block.rater and block.rater in present:
            entry["rater"] = self.text(row, values, block.rater, "rater")
        elif block.rater_name:
            entry["rater"] = block.rater_name
        mark = (
            mark_value(values[block.rater_excluded])
            if block.rater_excluded and block.rater_excluded in present
            else None
        )
        # An entry without a rater excludes no one: its false mark is dropped, any other is left for the import to
        # refuse.
        if mark is not None and (mark is not False or entry.get("rater") is not None):
            entry[RATER_EXCLUDED_KEY] = mark
        if block.layout == "pair":
            if block.winner not in present:
                return
            entry.update(self.pair_entry(row, values, present, item, conversations, turn_index))
        else:
            if block.candidates not in present or is_blank(values[block.candidates]):
                return  # a row that only rates
            entry.update(self.choice_entry(row, values, present))
        for key, column in (("reason", block.reason), ("campaign", block.campaign)):
            if column and column in present and isinstance(values[column], str) and values[column]:
                entry[key] = values[column]
        turn = item.turns[turn_index]
        for system in entry["candidates"]:
            if system not in turn.answers:
                raise self.fail(
                    row,
                    "candidate without an answer",
                    expected=f"an answer of system {system!r} on turn {turn_index + 1} of item {item.external_id!r}",
                    found="none",
                )
        if entry.get("rater") in block.judges:
            self.judge_verdicts.append(self.judge_verdict(row, entry, item, turn_index))
            return
        turn.preferences.append((entry, row))
        self.preferences += 1

    def judge_verdict(
        self, row: int, entry: dict[str, Any], item: ItemPart, turn_index: int
    ) -> tuple[ItemPart, int, str, str, str, float, int]:
        """A judge's vote on two answers, as its outcome for the first."""
        if len(entry["candidates"]) != 2:
            raise self.fail(
                row, "judge verdict on more than two answers", expected="two candidates", found=entry["candidates"]
            )
        first, second = entry["candidates"]
        preferred = entry.get("preferred")
        if entry.get("tie"):
            outcome = 0.5
        elif preferred in (first, second):
            outcome = 1.0 if preferred == first else 0.0
        else:
            raise self.fail(row, "judge verdict without a choice", expected="a winner or a tie", found=preferred)
        return item, turn_index, str(entry["rater"]), first, second, outcome, row

    def pair_entry(
        self,
        row: int,
        values: dict[str, Any],
        present: set[str],
        item: ItemPart,
        conversations: dict[str, list[tuple[str, str]]],
        turn_index: int,
    ) -> dict[str, Any]:
        """A pair with a winner: the two answers (from the conversations or answer columns) and the vote."""
        pairs = self.mapping.preferences
        assert pairs is not None
        system_a = self.text(row, values, pairs.system_a, "system")
        system_b = self.text(row, values, pairs.system_b, "system")
        if system_a == system_b:
            raise self.fail(row, "a system compared with itself", expected="two different systems", found=system_a)
        for side, system, column in (("a", system_a, pairs.answer_a), ("b", system_b, pairs.answer_b)):
            if side in conversations:
                for index, (_prompt, text) in enumerate(conversations[side]):
                    self.answer_for(row, item.turns[index], system, text, item)
            elif column and column in present:
                text = self.text(row, values, column, "answer")
                self.answer_for(row, item.turns[turn_index], system, text, item)
        winner = self.cell(values, pairs.winner)
        entry: dict[str, Any] = {"candidates": [system_a, system_b]}
        if winner in pairs.a_wins:
            entry["preferred"] = system_a
        elif winner in pairs.b_wins:
            entry["preferred"] = system_b
        elif winner in pairs.ties or winner in pairs.both_bad:
            entry["preferred"] = None
            entry["tie"] = True
            if winner in pairs.both_bad:
                entry["none_appropriate"] = True
        else:
            accepted = [*pairs.a_wins, *pairs.b_wins, *pairs.ties, *pairs.both_bad]
            raise self.fail(row, "unknown winner", expected=f"one of {', '.join(map(repr, accepted))}", found=winner)
        return entry

    def choice_entry(self, row: int, values: dict[str, Any], present: set[str]) -> dict[str, Any]:
        """A choice among K candidates, or a tie."""
        choice = self.mapping.preferences
        assert choice is not None
        candidates = self.cell(values, choice.candidates)
        if isinstance(candidates, str):
            candidates = [c.strip() for c in candidates.split("|") if c.strip()]
        preferred = self.cell(values, choice.preferred)
        # A row that chooses nothing may carry only a reason, on a task that showed one answer (as evalsite's own
        # export writes it); a choice needs two candidates at least.
        fewest = 1 if is_blank(preferred) else 2
        listed = isinstance(candidates, list) and all(isinstance(c, str) for c in candidates)
        if not listed or len(candidates) < fewest:
            raise self.fail(
                row,
                "invalid candidates",
                expected=(
                    'at least two system keys (a list, or text separated by "|")'
                    if fewest == 2
                    else 'a system key at least (a list, or text separated by "|")'
                ),
                found=candidates,
            )
        entry: dict[str, Any] = {"candidates": list(candidates)}
        if choice.tie and choice.tie in present:
            is_tie = values[choice.tie] in TRUE_MARKS
        else:
            is_tie = preferred in choice.ties or (is_blank(preferred) and "" in choice.ties)
        if is_tie:
            entry["preferred"] = None
            entry["tie"] = True
        elif is_blank(preferred):
            entry["preferred"] = None  # no choice asked: kept, and left out of the statistics
        elif preferred in candidates:
            entry["preferred"] = preferred
        else:
            raise self.fail(row, "preferred system not among the candidates", expected=str(candidates), found=preferred)
        if (
            choice.none_appropriate
            and choice.none_appropriate in present
            and values[choice.none_appropriate] in TRUE_MARKS
        ):
            entry["none_appropriate"] = True  # a table cannot tell false from absent: only true is written
        return entry

    @staticmethod
    def answer_body(answer: AnswerPart, where: str, paths: dict[str, int]) -> dict[str, Any]:
        """One answer in the import format, noting in paths the row behind each of its parts."""
        body: dict[str, Any] = {"response": answer.text}
        if answer.scores:
            body["human_evals"] = {}
            for aspect, by_rater in answer.scores.items():
                scores = []
                for position, rater in enumerate(answer.raters):
                    score, score_row = by_rater.get(rater, (None, answer.row))
                    paths[f"{where}.human_evals.{aspect}[{position}]"] = score_row
                    scores.append(score)
                body["human_evals"][aspect] = scores
            body["raters"] = list(answer.raters)
            if answer.exclusion_marks:
                # A rater without a mark on this answer is not excluded here, as an unmarked JSONL rater.
                marks = []
                for position, rater in enumerate(answer.raters):
                    mark, mark_row = answer.exclusion_marks.get(rater, (False, answer.row))
                    paths[f"{where}.{RATER_EXCLUDED_KEY}[{position}]"] = mark_row
                    marks.append(mark)
                body[RATER_EXCLUDED_KEY] = marks
        if answer.judge_filled:
            body[JUDGE_FILLED_KEY] = []
            for position, (entry, entry_row) in enumerate(answer.judge_filled):
                paths[f"{where}.{JUDGE_FILLED_KEY}[{position}]"] = entry_row
                body[JUDGE_FILLED_KEY].append(entry)
        if answer.judges:
            body["auto_evals"] = {}
            for judge, by_aspect in answer.judges.items():
                body["auto_evals"][judge] = {}
                for aspect, (score, score_row) in by_aspect.items():
                    paths[f"{where}.auto_evals.{judge}"] = score_row
                    body["auto_evals"][judge][aspect] = score
        return body

    def finish(self) -> BuiltItems:
        items: list[dict[str, Any]] = []
        provenance: list[dict[str, int]] = []
        for item in self.items.values():
            paths: dict[str, int] = {"": item.row}
            turns = []
            for index in range(max(item.turns) + 1):
                turn = item.turns.get(index)
                if turn is None:
                    later = item.turns[min(i for i in item.turns if i > index)]
                    raise self.fail(
                        later.row,
                        "missing turn",
                        expected=f"turn {index + 1} of item {item.external_id!r} before turn {index + 2}",
                        found="no row for it",
                    )
                here = f"turns[{index}]"
                paths[here] = turn.row
                out: dict[str, Any] = {"prompt": turn.prompt}
                if turn.reference is not None:
                    out["reference"] = turn.reference
                responses: dict[str, Any] = {}
                for system, answer in turn.answers.items():
                    where = f"{here}.responses.{system}"
                    paths[where] = answer.row
                    responses[system] = self.answer_body(answer, where, paths)
                out["responses"] = responses
                if turn.preferences:
                    out["preferences"] = []
                    for position, (entry, entry_row) in enumerate(turn.preferences):
                        paths[f"{here}.preferences[{position}]"] = entry_row
                        out["preferences"].append(entry)
                turns.append(out)
            items.append({"id": item.external_id, "turns": turns})
            provenance.append(paths)
        index_of = {id(item): index for index, item in enumerate(self.items.values())}
        verdicts = [
            (index_of[id(item)], turn, judge, first, second, outcome, row)
            for item, turn, judge, first, second, outcome, row in self.judge_verdicts
        ]
        return BuiltItems(
            items=items, provenance=provenance, rows=self.rows, preferences=self.preferences, judge_verdicts=verdicts
        )


def build_items(tables: list[tuple[str, str, Iterator[tuple[int, dict[str, Any]]]]], mapping: Mapping) -> BuiltItems:
    """Groups the rows of one or more tables (label, unit of its row numbers, rows) into items. Every error names the
    table and row."""
    builder: _Builder | None = None
    seen_columns: set[str] = set()
    for label, unit, rows in tables:
        builder_for_table = _Builder(mapping, unit)
        if builder is not None:
            # Later tables extend the items of earlier ones (an answers table, then ratings, then preferences).
            builder_for_table.items = builder.items
            builder_for_table.by_prompt = builder.by_prompt
            builder_for_table.rows = builder.rows
            builder_for_table.preferences = builder.preferences
            builder_for_table.judge_verdicts = builder.judge_verdicts
        builder = builder_for_table
        multiple = len(tables) > 1
        builder.header_checked = multiple  # several tables: each holds some of the mapped columns
        try:
            for number, values in rows:
                if multiple and not seen_columns.issuperset(values):
                    seen_columns.update(values)
                builder.add(number, values)
        except DatasetImportError as exc:
            raise exc.in_file(label) if multiple else exc from None
    if builder is None or not builder.items:
        raise DatasetImportError("empty file", expected="at least one data row", found="no rows")
    absent = sorted(mapping.columns() - seen_columns - mapping.optional) if len(tables) > 1 else []
    if absent:
        raise DatasetImportError("column in none of the files", expected=f"a column named {absent[0]!r}", found="none")
    return builder.finish()
