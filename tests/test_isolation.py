"""The sandbox's surroundings: a loud warning where none can be made, a preloading process that comes back."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook


def test_without_a_sandbox_grading_says_so_loudly(monkeypatch):
    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.isolation import sandbox
    from conftest import ROOT
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    said = []
    assert sandbox.for_grading(nbgrader_config(ROOT), said.append) is None
    assert "警告" in said[0] and "bubblewrap" in said[0] and "权限" in said[0]
    cfg = nbgrader_config(ROOT)
    cfg.Sandbox.mode = "required"
    with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap"):
        sandbox.for_grading(cfg, said.append)


@pytest.mark.slow
def test_a_lost_preloading_process_is_started_again(tmp_path):
    from nbclient import NotebookClient

    from attncourse.grading.isolation import preload, sandbox
    settings = sandbox.Sandbox()
    nb = new_notebook(cells=[new_code_cell("import os\nprint(os.getuid())")])
    nbformat.write(nb, tmp_path / "x.ipynb")
    with preload.preloaded_kernels(print, None if settings.problem() else settings):
        zygote = preload.PreloadedProvisioner.zygote
        zygote.proc.kill()
        zygote.proc.wait()
        NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
        assert zygote.proc.poll() is None, "a new preloading process should be running"
    assert nb.cells[0].outputs[0].text.strip().isdigit()
