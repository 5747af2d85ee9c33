"""Fixtures of the RDMA tests over GPU memory."""
import pytest

from drivers.hcq.staging import Staging


@pytest.fixture
def staged(monkeypatch):
  """Every staging copy (drivers/hcq/staging.py) made from here on, as (what, bytes)."""
  copies = []
  real = Staging._copy
  def counted(self, dest_va, src_va, size, what):
    copies.append((what, size))
    return real(self, dest_va, src_va, size, what)
  monkeypatch.setattr(Staging, "_copy", counted)
  return copies
