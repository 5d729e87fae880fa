"""Grading outcomes: reference and lecturer code earn full marks; every catalogued bug loses points
exactly in the test cells meant to catch it; every hidden test catches a bug that only it catches."""
import pytest

from conftest import lost_points

pytestmark = pytest.mark.slow


def test_correct_answers_earn_full_marks(catalog_grades, assignment_ids):
    """The reference answer, the lecturer's own d2l-style code from the seed decks, the code the deck teaches
    and the other correct answers of each catalog (ALSO_CORRECT), pasted into the answer cells."""
    for aid in assignment_ids:
        info = catalog_grades[aid]
        assert {"reference", "lecturer", "correct_deck"} <= set(info["correct"]), aid
        for case in info["correct"]:
            outcome = info["cases"][case]
            assert outcome.status == "graded", f"{aid}/{case}: {outcome.reason}"
            assert lost_points(outcome, info["tests"]) == set(), f"{aid}: {case} loses points"
            assert outcome.flags == [], f"{aid}/{case} flagged: {outcome.flags}"


def test_every_bug_loses_points_where_expected(catalog_grades, assignment_ids):
    wrong = []
    for aid in assignment_ids:
        info = catalog_grades[aid]
        for v in info["variants"]:
            outcome = info["cases"][f"bug_{v['id']}"]
            got = lost_points(outcome, info["tests"]) if outcome.status == "graded" else {outcome.reason}
            if got != set(v["caught_by"]):
                wrong.append(f"{aid}/{v['id']}: lost points in {sorted(got)}, catalog says {sorted(v['caught_by'])}")
    assert not wrong, "\n".join(wrong)


def test_every_hidden_test_catches_a_bug_only_it_catches(catalog_grades, assignment_ids):
    missing = []
    for aid in assignment_ids:
        info = catalog_grades[aid]
        alone = {tuple(v["caught_by"])[0] for v in info["variants"] if len(v["caught_by"]) == 1}
        missing += [f"{aid}/{cell}" for cell in info["hidden"] if cell not in alone]
    assert not missing, f"hidden tests with no bug that only they catch: {missing}"


def test_catalogs_cover_the_common_mistakes(catalog_grades, assignment_ids):
    for aid in assignment_ids:
        assert len(catalog_grades[aid]["variants"]) >= 8, f"{aid}: catalog is thin"
