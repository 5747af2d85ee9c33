"""The layer rules (README, "Layout") that imports can break: emu/ (the hardware models) imports only autogen/ and
itself, never the drivers that are its clients; drivers/system is the only importer of emu/. Every import counts,
module- or function-level."""
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("autogen", "emu", "drivers", "compute", "tools")


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
          if m.split(".")[0] not in ("autogen", "emu")] == []


def test_only_drivers_system_imports_emu():
  files = [p for top in ("drivers", "compute", "tools") for p in sorted((REPO / top).rglob("*.py"))
           if not p.is_relative_to(REPO / "drivers" / "system")]
  assert len(files) > 50
  assert [f"{p.relative_to(REPO)}:{line}: {m}" for p in files for m, line in imports(p) if m.split(".")[0] == "emu"] == []
