"""The persistent model state (emu/state.py) every emulated device keeps under $TMPDIR/hcq-emu: where it lives, a state
written whole and read back, a layout of another magic or version taken for none, and the listing of saved devices."""
import ctypes, os

from emu import state

MAGIC, VERSION = 0x594F5421, 2


class Layout(ctypes.Structure):
  _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint32), ("count", ctypes.c_uint64)]


def test_state_lives_under_tmpdir_per_kind_and_index(tmp_path):
  assert state.state_dir("toy", 3) == os.path.join(tmp_path, "hcq-emu", "toy-3") and state.emu_dir("wire") == str(tmp_path / "hcq-emu" / "wire")


def test_a_saved_state_reads_back_and_another_layout_reads_as_none():
  path = state.state_dir("toy", 0)
  new = state.load_or_new(path, Layout, MAGIC, VERSION)                       # nothing saved: a new one
  assert (new.magic, new.version, new.count) == (MAGIC, VERSION, 0) and state.load(path, Layout, MAGIC, VERSION) is None
  new.count = 41
  state.save(path, new)
  assert os.listdir(path) == ["state"]                                        # the temporary file was renamed over it
  assert state.load_or_new(path, Layout, MAGIC, VERSION).count == 41 and state.load_or_new(None, Layout, MAGIC, VERSION).count == 0
  assert state.load(path, Layout, MAGIC, VERSION + 1) is None and state.load(path, Layout, MAGIC ^ 1, VERSION) is None
  with open(os.path.join(path, f"state.{os.getpid() + 1}"), "wb") as f:   # a writer killed before its rename
    f.write(bytes(Layout(MAGIC, VERSION, 7)))
  assert state.load(path, Layout, MAGIC, VERSION).count == 41


def test_saved_lists_the_indexes_of_valid_states_of_that_kind_only():
  for index, layout in ((0, Layout(MAGIC, VERSION, 1)), (5, Layout(MAGIC, VERSION, 2)), (2, Layout(MAGIC, VERSION + 1, 3))):
    state.save(state.state_dir("toy", index), layout)
  state.save(state.state_dir("toyfn", 1), Layout(MAGIC, VERSION, 4))         # another kind whose name starts alike
  os.makedirs(state.emu_dir("toy-x"))
  os.makedirs(state.state_dir("toy", 7))                                       # a directory with no state in it
  with open(os.path.join(state.state_dir("toy", 7), "state"), "wb") as f: f.write(b"\1\2")   # nor a whole one
  assert state.saved("toy", Layout, MAGIC, VERSION) == [0, 5] and state.saved("none", Layout, MAGIC, VERSION) == []
