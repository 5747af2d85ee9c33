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


HARDWARE = {"amd": "/dev/kfd", "nv": "/dev/nvidiactl"}


def pytest_collection_modifyitems(config, items):
  """@pytest.mark.hardware("amd") tests run only where that vendor's hardware (its kernel device) exists."""
  for item in items:
    for m in item.iter_markers("hardware"):
      vendor = m.args[0]
      if not os.path.exists(HARDWARE[vendor]):
        item.add_marker(pytest.mark.skip(reason=f"needs real {vendor} hardware ({HARDWARE[vendor]} is absent)"))
