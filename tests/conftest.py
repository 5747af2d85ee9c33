import os, tempfile
import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path, monkeypatch):
  """Each test gets its own lock directory; the compile cache is shared per test session."""
  monkeypatch.setenv("TMPDIR", str(tmp_path))
  tempfile.tempdir = None
  yield
  tempfile.tempdir = None


def pytest_configure(config):
  os.environ.setdefault("XDG_CACHE_HOME", os.path.join(tempfile.gettempdir(), f"hcq-test-cache-{os.getuid()}"))
