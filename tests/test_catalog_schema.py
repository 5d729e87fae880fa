"""Each unit's catalog has the right shape, checked without a kernel (seconds, not the catalog run's minutes)."""
import copy
import types

import pytest

from attncourse.grading.authoring.variants import catalog_problems, load_catalog, source_notebook

from conftest import ROOT, UNITS


@pytest.mark.parametrize("unit", UNITS)
def test_catalog_shape(unit):
    catalog = load_catalog(ROOT, unit)
    assert catalog_problems(catalog, source_notebook(ROOT, unit, catalog)) == []


def _broken(unit, change):
    catalog = load_catalog(ROOT, unit)
    fake = types.SimpleNamespace(**{k: copy.deepcopy(getattr(catalog, k)) for k in
                                    ("NOTEBOOK", "LECTURER", "ALSO_CORRECT", "VARIANTS", "DECK", "MISCONCEPTIONS",
                                     "FIXES", "TWINS", "__file__")})
    change(fake)
    return catalog_problems(fake, source_notebook(ROOT, unit, catalog))


@pytest.mark.parametrize("change, words", [
    (lambda c: c.VARIANTS.append(dict(c.VARIANTS[0])), "used twice"),
    (lambda c: c.VARIANTS[0].update(caught_by={"test_nonexistent"}), "not a test cell"),
    (lambda c: c.VARIANTS[0].update(edits={next(iter(c.LECTURER)): [("this text is not in the cell", "x")]}),
     "occurs 0 times"),
    (lambda c: c.VARIANTS[0].update(cells={"no_such_answer": "pass"}), "not an answer cell"),
    (lambda c: setattr(c, "LECTURER", {}), "LECTURER"),
    (lambda c: c.ALSO_CORRECT.pop("deck"), "deck"),
    (lambda c: setattr(c, "VARIANTS", c.VARIANTS[:3]), "at least 8"),
    (lambda c: setattr(c, "VARIANTS", [v for v in c.VARIANTS if len(v["caught_by"]) != 1]), "only it catches"),
    (lambda c: c.MISCONCEPTIONS.update(ms_fill_zero=("填了 0", "见讲义", "没有这一页")), "no slide title"),
    (lambda c: c.MISCONCEPTIONS.update(ms_fill_zero=("填了 0", "改成 return F.softmax(X, dim=-1)  # 被掩蔽位置的 exp 下溢为 0",
                                                      "掩蔽 softmax 的做法")), "quotes the answer"),
    (lambda c: c.MISCONCEPTIONS.update(no_such_variant=("x", "y", "掩蔽 softmax 的做法")), "no variant has this id"),
    (lambda c: c.TWINS.pop("ms_fill_zero"), "TWINS has no answer"),
    (lambda c: c.FIXES.pop("ms_fill_zero"), "FIXES['ms_fill_zero']"),
    (lambda c: c.MISCONCEPTIONS.update(ms_fill_zero=(c.MISCONCEPTIONS["ms_fill_zero"][0],
                                                      "被掩蔽的分数要换成 " + c.FIXES["ms_fill_zero"],
                                                      c.MISCONCEPTIONS["ms_fill_zero"][2])), "gives the fix"),
])
def test_the_schema_check_can_fail(change, words):
    problems = _broken(UNITS[0], change)
    assert any(words in p for p in problems), problems
