"""Reproducibility: regenerating from the installed header packages gives the committed modules byte for byte."""
import difflib, pathlib, re
import pytest
import autogen
from autogen.__main__ import GENERATORS
from autogen.gen import headers
from autogen.gen.asic_reg import AsicRegModule
from autogen.gen.cmodule import CModule
from autogen.gen.mlx5_ifc import BitLayoutModule

# the generators that read Debian header packages (others, e.g. LLVM-driven tables, test their own regeneration)
HEADER_GENERATORS = sorted(n for n, g in GENERATORS.items() if isinstance(g, (CModule, AsicRegModule, BitLayoutModule)))

AUTOGEN = pathlib.Path(autogen.__file__).parent
_SRC_LINE = re.compile(r"^# source package: Debian (\S+) (\S+)$", re.M)


@pytest.mark.parametrize("name", HEADER_GENERATORS)
def test_regeneration_is_byte_identical(name, tmp_path):
  try: paths = GENERATORS[name](tmp_path)
  except headers.HeadersMissing as e: pytest.skip(f"header packages not available ({e})")
  for new in paths:
    rel = new.relative_to(tmp_path)
    old = AUTOGEN / rel
    assert old.exists(), f"autogen/{rel} is generated but not committed: run python -m autogen {name}"
    a, b = old.read_text(), new.read_text()
    if a == b: continue
    was, now = _SRC_LINE.search(a), _SRC_LINE.search(b)
    if was and now and was.groups() != now.groups():  # the archive moved on: not a generator fault
      pytest.skip(f"autogen/{rel} was generated from {' '.join(was.groups())} but {' '.join(now.groups())} is installed; "
                  f"run `python -m autogen {name}` and commit to move to it")
    diff = "".join(list(difflib.unified_diff(a.splitlines(True), b.splitlines(True), f"committed/{rel}", f"regenerated/{rel}"))[:40])
    pytest.fail(f"autogen/{rel} differs from a fresh `python -m autogen {name}`:\n{diff}")
