"""The likely-mistake engine (run/diagnosis.py) in this process, without a kernel: a twin is named, a mistake no
misconception explains is not, a failure before anything came back is not, and a catalog that cannot be read
never stops grading."""
import threading

from attncourse.grading.catalogs import load_catalog, source_notebook, with_code
from attncourse.grading.run import diagnosis

from conftest import ROOT

A1, A2 = "a1_scoring", "a2_multihead"


def _failed(nb, unit):
    """{failed test: the variant named or None} of a notebook run as the grader runs it."""
    found = {}
    for test in ("test_masked_softmax_basic", "test_masked_softmax_2d"):
        passed, returned = diagnosis.run_test(nb, test)
        if not passed:
            named = unit.diagnose(test, returned)
            found[test] = named.variant if named else None
    return found


def test_a_twin_is_named_and_the_reference_fails_nothing():
    catalog = load_catalog(ROOT, A1)
    src, unit = source_notebook(ROOT, A1, catalog), diagnosis.unit(ROOT, A1)
    assert _failed(src, unit) == {}
    found = _failed(with_code(src, catalog.TWINS["ms_fill_zero"]), unit)
    assert found and set(found.values()) == {"ms_fill_zero"}
    label, hint, slide = catalog.MISCONCEPTIONS["ms_fill_zero"]
    text = unit.diagnose("test_masked_softmax_basic", diagnosis.run_test(
        with_code(src, catalog.TWINS["ms_fill_zero"]), "test_masked_softmax_basic")[1]).text()
    assert label in text and hint in text and slide in text and "def " not in text


def test_a_mistake_nothing_in_the_catalog_explains_is_not_named():
    catalog = load_catalog(ROOT, A1)
    src, unit = source_notebook(ROOT, A1, catalog), diagnosis.unit(ROOT, A1)
    uniform = "def masked_softmax(X, valid_lens):\n    return torch.full_like(X, 1.0 / X.shape[-1])\n"
    found = _failed(with_code(src, {"masked_softmax": uniform}), unit)
    assert found and set(found.values()) == {None}
    assert unit.diagnose("test_masked_softmax_basic", []) is None  # it failed before returning anything


def test_a_catalog_that_cannot_be_read_gives_no_diagnosis(tmp_path):
    (tmp_path / "catalog").mkdir()
    assert diagnosis.unit(tmp_path, A1) is None  # no catalog for it
    (tmp_path / "catalog" / f"{A1}.py").write_text("raise RuntimeError('broken')\n")
    assert diagnosis.unit(tmp_path, A1) is None


def test_a_catalogued_answer_runs_with_torchs_generator_alone():
    """Grading threads draw from torch's global generator in test cells; a diagnosis run seeds it and must draw
    the same numbers each time: it waits for the test cells under way, and new ones wait for it."""
    shared = diagnosis._SharedRandom()
    order, entered = [], threading.Event()

    def run_alone():
        with shared.alone():
            order.append("alone")
            entered.set()

    with shared.drawing():
        alone = threading.Thread(target=run_alone)
        alone.start()
        assert not entered.wait(0.3), "a diagnosis ran while a test cell was drawing"
        order.append("test cell done")
    alone.join(5)
    assert order == ["test cell done", "alone"]

    def draw():
        with shared.drawing():
            order.append("drew")

    with shared.alone():
        drew = threading.Thread(target=draw)
        drew.start()
        drew.join(0.3)
        assert "drew" not in order, "a test cell drew while a diagnosis had the generator alone"
    drew.join(5)
    assert order[-1] == "drew"


def test_a_run_prepares_what_diagnosing_a_failed_test_runs_before_any_test_fails():
    """The steps a run takes while its preloading process imports run the catalogued misconceptions through the
    tests that catch them, the assignments in turn; a diagnosis then finds them done."""
    units = [diagnosis.unit(ROOT, a) for a in (A1, A2)]
    before = [set(unit._runs) for unit in units]
    steps = diagnosis.preparation(ROOT, [A1, A2])
    for _ in range(2):
        next(steps)()
    made = [set(unit._runs) - seen for unit, seen in zip(units, before, strict=True)]
    assert all(len(new) <= 1 for new in made) and sum(map(len, made)) >= 1, made  # one of each (or already there)
    for unit, new in zip(units, made, strict=True):
        for variant, test in new:
            assert variant in unit.misconceptions and any(
                v["id"] == variant and test in v["caught_by"] for v in unit.variants), (variant, test)
