"""Grading outcomes, one unit at a time (`pytest -k a1_scoring` grades that unit's catalog only): reference,
lecturer and deck code earn full marks; every catalogued bug loses points exactly in the test cells meant to
catch it; every hidden test catches a bug that only it catches."""
import pytest

from conftest import DECK_ONLY, UNITS, failure_messages, lost_points

pytestmark = pytest.mark.slow


@pytest.fixture(params=UNITS)
def unit(request):
    return request.param


def test_correct_answers_earn_full_marks(catalog_grades, unit):
    """The reference answer, the lecturer's own d2l-style code from the seed decks, the code the deck teaches
    and the other correct answers of each catalog (ALSO_CORRECT), pasted into the answer cells."""
    assert {"reference", "lecturer", "correct_deck"} <= set(catalog_grades["correct"]), unit
    for case in catalog_grades["correct"]:
        outcome = catalog_grades["cases"][case]
        assert outcome.status == "graded", f"{unit}/{case}: {outcome.reason}"
        lost = lost_points(outcome, catalog_grades["tests"])
        assert lost == set(), f"{unit}: {case} loses points\n" + failure_messages(
            catalog_grades["root"], unit, case, lost)
        assert outcome.flags == [], f"{unit}/{case} flagged: {outcome.flags}"


def _cases_of(variant, misconceptions):
    """The graded cases of a catalogued mistake: its own code and, for a misconception, its twin."""
    return [f"bug_{variant['id']}"] + ([f"twin_{variant['id']}"] if variant["id"] in misconceptions else [])


def test_every_bug_loses_points_where_expected(catalog_grades, unit):
    """Each catalogued mistake, and the same misconception written another way (its twin)."""
    assert len(catalog_grades["variants"]) >= 8, f"{unit}: catalog is thin"
    wrong = []
    for v in catalog_grades["variants"]:
        for case in _cases_of(v, catalog_grades["misconceptions"]):
            outcome = catalog_grades["cases"][case]
            got = lost_points(outcome, catalog_grades["tests"]) if outcome.status == "graded" else {outcome.reason}
            if got != set(v["caught_by"]):
                wrong.append(f"{unit}/{case}: lost points in {sorted(got)}, catalog says {sorted(v['caught_by'])}\n"
                             + failure_messages(catalog_grades["root"], unit, case, got - set(v["caught_by"])))
    assert not wrong, "\n".join(wrong)


def test_the_likely_mistake_is_named_only_when_it_is_the_one(catalog_grades, unit):
    """A misconception is named for its own code and for its twin (written differently), in a test it fails;
    no other catalogued mistake gets a name that is not its own, and no correct answer gets any. Mistakes that
    share a label are one misconception: either's id may be named."""
    cases, named = catalog_grades["cases"], catalog_grades["misconceptions"]
    wrong = []
    for case in catalog_grades["correct"]:
        if cases[case].diagnoses:
            wrong.append(f"{unit}/{case} is correct, yet named {cases[case].diagnoses}")
    for v in catalog_grades["variants"]:
        for case in _cases_of(v, named):
            got = {found["label"] for found in cases[case].diagnoses.values()}
            if got != ({named[v["id"]][0]} if v["id"] in named else set()):
                wrong.append(f"{unit}/{case} named {sorted(got)}")
            if not set(cases[case].diagnoses) <= set(v["caught_by"]):
                wrong.append(f"{unit}/{case}: named in tests it passes: {sorted(cases[case].diagnoses)}")
    assert not wrong, "\n".join(wrong)


def test_every_hidden_test_catches_a_bug_only_it_catches(catalog_grades, unit):
    assert catalog_grades["hidden"], f"{unit}: no hidden tests found"
    alone = {tuple(v["caught_by"])[0] for v in catalog_grades["variants"] if len(v["caught_by"]) == 1}
    missing = [cell for cell in catalog_grades["hidden"] if cell not in alone]
    assert not missing, f"{unit}: hidden tests with no bug that only they catch: {missing}"


def test_copying_the_deck_earns_at_most_two_thirds(catalog_grades, unit):
    """At least a third of each assignment's autograded points is for code no deck cell prints."""
    outcome = catalog_grades["cases"][DECK_ONLY]
    assert outcome.status == "graded", f"{unit}: {outcome.reason}"
    tests = catalog_grades["tests"]
    assert tests, f"{unit}: no test cells"
    earned, maximum = (sum(outcome.cells[cell][i] for cell in tests) for i in (0, 1))
    assert 0 < earned <= 2 / 3 * maximum, f"{unit}: the deck's code alone earns {earned} of {maximum} points"
