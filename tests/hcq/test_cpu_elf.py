"""The CPU device checks a kernel library before the dynamic loader maps it (drivers/cpu/elf.py): a truncated or
damaged one is a clear error instead of SIGBUS in the loader, and no temporary hcq-*.so file is left in TMPDIR."""
import os, struct, subprocess, sys
import pytest
from drivers.cpu.elf import SharedObjectError
from tests.hcq.conftest import VADD_SRC

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PT_LOAD, P_FILESZ = 1, 32   # Elf64_Phdr: p_type at 0, p_filesz at 32 (ELF gABI, "Program Header")

# in a child process: a library the loader would crash on must not end the test run with it
SWEEP = r"""
import os, struct
from drivers.cpu import CPUDevice
from tests.hcq.conftest import VADD_SRC
dev = CPUDevice()
lib = dev.compiler.compile(VADD_SRC)
cases = {f"cut at {n}": lib[:n] for n in sorted({0, 3, 63, 64, 100, len(lib) - 1, *range(0, len(lib), len(lib) // 40)})}
phoff, phentsize, phnum = struct.unpack_from("<Q", lib, 32)[0], *struct.unpack_from("<HH", lib, 54)
load = next(phoff + i * phentsize for i in range(phnum) if struct.unpack_from("<I", lib, phoff + i * phentsize)[0] == 1)
grown = bytearray(lib)
struct.pack_into("<Q", grown, load + 32, len(lib) + 65536)   # the first PT_LOAD claims 64 KiB past the end of the file
cases["PT_LOAD past the end"] = bytes(grown)
for what, bad in cases.items():
  try: dev.program("vadd", bad)
  except ValueError as e: print(f"{what}: {type(e).__name__}: {e}")
  else: print(f"{what}: loaded")
dev.program("vadd", lib)
dev.close()
print("left in TMPDIR:", sorted(f for f in os.listdir(os.environ["TMPDIR"]) if f.startswith("hcq-")))
"""


def test_every_truncation_of_a_kernel_library_is_refused_without_killing_the_process_or_leaving_files(tmp_path):
  r = subprocess.run([sys.executable, "-c", SWEEP], capture_output=True, text=True, timeout=120, cwd=ROOT,
                     env=dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path)))
  assert r.returncode == 0, f"the child died (rc {r.returncode}): {r.stdout}{r.stderr}"
  *cases, left = r.stdout.splitlines()
  assert len(cases) > 40 and left == "left in TMPDIR: []", r.stdout
  for line in cases:
    what, _, result = line.partition(": ")
    if what == "cut at 0": assert "it is not an ELF file (it starts with b'')" in result, line
    elif what == "cut at 3": assert "it is not an ELF file (it starts with b'\\x7fEL')" in result, line
    elif what == "PT_LOAD past the end": assert "its segment " in result and "(PT_LOAD)" in result and "ends past the end" in result, line
    else: assert result.startswith("SharedObjectError: the CPU kernel library for vadd cannot be loaded: ") and "it is truncated" in result, line


def _patched(lib: bytes, offset: int, fmt: str, value: int) -> bytes:
  out = bytearray(lib)
  struct.pack_into(fmt, out, offset, value)
  return bytes(out)


@pytest.fixture
def vadd_lib(cpu) -> bytes: return cpu.compiler.compile(VADD_SRC)


def test_a_library_for_another_machine_is_refused_naming_both(cpu, vadd_lib):
  host = struct.unpack_from("<H", vadd_lib, 18)[0]             # e_machine
  other, name = (183, "EM_AARCH64") if host == 62 else (62, "EM_X86_64")
  with pytest.raises(SharedObjectError, match=rf"cannot be loaded: it is for {name}, this host is EM_"):
    cpu.program("vadd", _patched(vadd_lib, 18, "<H", other))


def test_an_executable_is_not_a_shared_object(cpu, vadd_lib):
  with pytest.raises(SharedObjectError, match=r"it is of type ET_EXEC, not a shared object \(ET_DYN\)"):
    cpu.program("vadd", _patched(vadd_lib, 16, "<H", 2))       # e_type = ET_EXEC


def test_loading_and_closing_leave_no_temporary_file(cpu, vadd_lib, tmp_path):
  assert os.environ["TMPDIR"] == str(tmp_path)                  # tests/conftest.py: TMPDIR is the test's own
  prg = cpu.program("vadd", vadd_lib)
  with pytest.raises(SharedObjectError): cpu.program("vadd", vadd_lib[:len(vadd_lib) // 2])
  del prg
  cpu.close()
  assert [f for f in os.listdir(tmp_path) if f.startswith("hcq-")] == []
