"""Progress bars show on a terminal only: never in CI logs or Snakemake log files."""
import io
import sys

from cdfgnn import progress as progress_mod


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_bar_draws_on_a_terminal(monkeypatch):
    out = _Tty()
    monkeypatch.setattr(sys, "stderr", out)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CDFGNN_NO_PROGRESS", raising=False)
    assert list(progress_mod.progress(range(3), desc="epochs")) == [0, 1, 2]
    assert "epochs" in out.getvalue()


def test_bar_is_silent_in_logs_and_ci(monkeypatch):
    out = io.StringIO()  # a log file: not a terminal
    monkeypatch.setattr(sys, "stderr", out)
    monkeypatch.delenv("CI", raising=False)
    assert sum(progress_mod.progress(range(4), desc="x")) == 6
    assert out.getvalue() == ""
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv("CI", "true")
    with progress_mod.progress(total=5, desc="download") as bar:
        bar.update(5)
    assert tty.getvalue() == ""
