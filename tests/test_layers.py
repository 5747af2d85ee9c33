"""The layer rules (README, "Layout") that imports can break: emu/ (the hardware models) imports only autogen/, common/
and itself, never the drivers that are its clients; common/ imports nothing of the repository; drivers/system is the
only importer of emu/, and only once a model is opened. Every import counts, module- or function-level."""
import ast, collections, subprocess, sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("autogen", "common", "emu", "drivers", "compute", "tools")


def imports(path: Path) -> list[tuple[str, int]]:
  """(module, line) of every absolute import of a repo package in `path`."""
  out = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
    out += [(n, node.lineno) for n in names if n.split(".")[0] in PACKAGES]
  return out


def test_emu_imports_only_autogen_and_emu():
  files = sorted((REPO / "emu").rglob("*.py"))
  assert len(files) > 50
  assert [f"{p.relative_to(REPO)}:{line}: {m}" for p in files for m, line in imports(p)
          if m.split(".")[0] not in ("autogen", "common", "emu")] == []


def test_common_imports_nothing_of_the_repository():
  files = sorted((REPO / "common").rglob("*.py"))
  assert len(files) >= 3
  assert [f"{p.relative_to(REPO)}:{line}: {m}" for p in files for m, line in imports(p) if m.split(".")[0] != "common"] == []


def test_the_shared_driver_layers_load_no_model():
  """Importing every module of drivers/system, drivers/hcq and drivers/rdma loads nothing of emu/: models are imported
  when one is opened."""
  mods = [f"drivers.{top}.{p.stem}" for top in ("system", "hcq", "rdma") for p in sorted((REPO / "drivers" / top).glob("*.py"))]
  code = f"import sys\nfor m in {mods!r}: __import__(m)\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'emu'))"
  out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
  assert out.strip() == "[]"


def test_only_drivers_system_imports_emu():
  files = [p for top in ("drivers", "compute", "tools") for p in sorted((REPO / top).rglob("*.py"))
           if not p.is_relative_to(REPO / "drivers" / "system")]
  assert len(files) > 50
  assert [f"{p.relative_to(REPO)}:{line}: {m}" for p in files for m, line in imports(p) if m.split(".")[0] == "emu"] == []


def test_test_modules_have_unique_basenames():
  """pytest imports test modules by basename (rootdir import mode, no packages): a second test_x.py anywhere under tests/
  stops the whole run at collection ("import file mismatch")."""
  names = collections.Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
  assert [n for n, k in names.items() if k > 1] == []
