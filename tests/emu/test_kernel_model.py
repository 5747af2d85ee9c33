"""The kernel-driver model base (emu/kernel_model.py): a toy driver that declares only its files and ioctls gets the fd
table, ioctl decoding, each size rule, errno failures and the call log. Reference numbers: asm-generic/ioctl.h's
encoding and ioctl numbers as the kernel headers define them."""
import ctypes, errno
import pytest

from autogen import kfd, vfio
from drivers.system.kernel import ModelKernel
from emu.kernel_model import (ARGSZ, AT_LEAST, COPY_IN, EXACT, IOC_NONE, IOC_READ, IOC_WRITE, RAW, Ioctl, Ioctls, KernelDriverModel, ioc,
                              ioc_dir, ioc_nr, ioc_size, ioc_type)

T = ord("T")


class Pair(ctypes.Structure):
  _fields_ = [("a", ctypes.c_uint32), ("b", ctypes.c_uint32)]


class Sum(ctypes.Structure):
  _fields_ = [("a", ctypes.c_uint64), ("b", ctypes.c_uint64), ("sum", ctypes.c_uint64)]


class Wide(ctypes.Structure):             # a later, larger layout of Pair
  _fields_ = [("a", ctypes.c_uint32), ("b", ctypes.c_uint32), ("c", ctypes.c_uint32), ("d", ctypes.c_uint32)]


class Sized(ctypes.Structure):
  _fields_ = [("argsz", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("value", ctypes.c_uint64)]


ADD = ioc(IOC_READ | IOC_WRITE, T, 1, ctypes.sizeof(Sum))
SWAP = ioc(IOC_READ | IOC_WRITE, T, 2, ctypes.sizeof(Pair))
FILL = ioc(IOC_READ | IOC_WRITE, T, 3, ctypes.sizeof(Pair))   # one Pair or more
INFO = ioc(IOC_NONE, T, 4, 0)                            # argsz-style
SHIFT = ioc(IOC_NONE, T, 5, 0)                           # an integer argument
SET = ioc(IOC_WRITE, ord("U"), 1, ctypes.sizeof(Wide))   # copy-in, by number, on the control file only
PLAIN = 0x30000001                                       # a plain number: it encodes no size
GET = ioc(IOC_READ, ord("U"), 2, ctypes.sizeof(Wide))


class ToyModel(KernelDriverModel):
  """/dev/toy0 takes T ioctls (whole requests), /dev/toy1 the same by number, /dev/toy2 one plain-number ioctl,
  /dev/toyctl U ioctls (by number, copied in as a kernel would); closing the last /dev/toy0 resets the stored value."""
  name, first_fd = "toy model", 100

  def __init__(self):
    super().__init__(0x7000_0000_0000, 0x7001_0000_0000)
    self.devices, self.files = ("/dev/toy0", "/dev/toy1", "/dev/toy2", "/dev/toyctl"), {"/sys/toy/version": "1\n"}
    self.value, self.closed = 0, []
    toy = (Ioctl(ADD, "ADD", self._add, Sum, EXACT), Ioctl(SWAP, "SWAP", self._swap, Pair, files=("/dev/toy0",)),
           Ioctl(FILL, "FILL", self._fill, Pair, AT_LEAST), Ioctl(INFO, "INFO", self._info, Sized, ARGSZ),
           Ioctl(SHIFT, "SHIFT", self._shift, size=RAW))
    ctl = Ioctls((Ioctl(SET, "SET", self._set, Wide, COPY_IN, detail=lambda w: f"{w.a:#x}"), Ioctl(GET, "GET", self._get, Wide, COPY_IN)),
                 by_nr=True, type=ord("U"))
    self.ioctls = {"/dev/toy0": Ioctls(toy), "/dev/toy1": Ioctls(toy, by_nr=True, type=T, direction=IOC_READ | IOC_WRITE),
                   "/dev/toy2": Ioctls([Ioctl(PLAIN, "PLAIN", self._swap, Pair)], sized=False), "/dev/toyctl": ctl}

  def _closed(self, fd: int, path: str) -> None: self.closed.append(fd)
  def _last_closed(self, path: str) -> None:
    if path == "/dev/toy0": self.value = 0

  def _add(self, fd: int, s) -> None:
    if s.a + s.b >= 1 << 64: raise self._fail(errno.EOVERFLOW, f"{s.a} + {s.b} does not fit 64 bits")
    s.sum = s.a + s.b

  def _swap(self, fd: int, p) -> None: p.a, p.b = p.b, p.a
  def _fill(self, fd: int, pairs) -> None:
    for i, p in enumerate(pairs): p.a, p.b = i, len(pairs)

  def _info(self, fd: int, s) -> None: s.value = self.value
  def _shift(self, fd: int, n) -> int: return self.value << n
  def _set(self, fd: int, w) -> None: self.value = w.a | w.b << 32 | w.c << 64 | w.d << 96
  def _get(self, fd: int, w) -> None: w.a, w.b, w.c, w.d = (self.value >> s & 0xFFFFFFFF for s in (0, 32, 64, 96))


def fails(code: int, fn, *args) -> str:
  with pytest.raises(OSError) as e: fn(*args)
  assert e.value.errno == code, e.value
  return str(e.value)


@pytest.fixture
def toy():
  return ToyModel()


# --- ioctl numbers (asm-generic/ioctl.h)
@pytest.mark.parametrize("number, fields", [
  (0x80086601, (IOC_READ, ord("f"), 1, 8)),                  # FS_IOC_GETFLAGS = _IOR('f', 1, long) on 64-bit
  (0x40086602, (IOC_WRITE, ord("f"), 2, 8)),                 # FS_IOC_SETFLAGS = _IOW('f', 2, long)
  (kfd.AMDKFD_IOC_GET_VERSION, (IOC_READ, ord("K"), 0x01, 8)),   # AMDKFD_IOR(0x01, struct kfd_ioctl_get_version_args)
  (kfd.AMDKFD_IOC_CREATE_QUEUE, (IOC_READ | IOC_WRITE, ord("K"), 0x02, ctypes.sizeof(kfd.kfd_ioctl_create_queue_args))),
  (vfio.VFIO_GET_API_VERSION, (IOC_NONE, ord(";"), 100, 0)),    # _IO(VFIO_TYPE, VFIO_BASE + 0)
])
def test_ioctl_numbers_decode_into_the_fields_the_header_encodes(number, fields):
  assert (ioc_dir(number), ioc_type(number), ioc_nr(number), ioc_size(number)) == fields
  assert ioc(*fields) == number


# --- files
def test_open_close_and_ebadf_on_fds_that_are_not_open(toy):
  assert "toy model: no device file /dev/toy9" in fails(errno.ENOENT, toy.open, "/dev/toy9")
  a, b = toy.open("/dev/toy0"), toy.open("/dev/toy0")
  assert (a, b) == (100, 101) and toy.fds == {100: "/dev/toy0", 101: "/dev/toy0"}
  toy.close(a)
  assert "close of fd 100, which is not open" in fails(errno.EBADF, toy.close, a)
  assert "ioctl on fd 100, which is not open" in fails(errno.EBADF, toy.ioctl, a, ADD, Sum())
  assert "ioctl on fd 7, which is not open" in fails(errno.EBADF, toy.ioctl, 7, ADD, Sum())
  toy.close(b)
  assert toy.fds == {} and toy.closed == [a, b]


def test_the_last_close_of_a_path_runs_its_hook_once(toy):
  ctl, a, b, other = toy.open("/dev/toyctl"), toy.open("/dev/toy0"), toy.open("/dev/toy0"), toy.open("/dev/toy1")
  toy.ioctl(ctl, SET, Wide(a=5))
  toy.close(a)
  toy.close(other)                                           # another path's last file: not /dev/toy0's
  assert toy.value == 5
  toy.close(b)
  assert toy.value == 0


def test_sysfs_text_files_and_directories(toy):
  assert toy.read_text("/sys/toy/version") == "1\n" and toy.listdir("/sys/toy") == ["version"]
  assert toy.exists("/sys/toy") and toy.exists("/dev/toy1") and not toy.exists("/sys/toy/other")
  assert "toy model: no such file /sys/toy/other" in fails(errno.ENOENT, toy.read_text, "/sys/toy/other")
  fails(errno.ENOENT, toy.listdir, "/sys/other")


def test_the_model_is_a_kernel_interface(toy):
  """Through drivers/system's ModelKernel, as a driver uses it: the declarations alone make a working device."""
  k = ModelKernel(toy)
  fd = k.open("/dev/toy1")
  s = Sum(a=40, b=2)
  assert k.ioctl(fd, ADD, s) == 0 and s.sum == 42
  addr, mem = k.anon(4096)
  mem.write32(0, 7)
  assert ctypes.c_uint32.from_address(addr).value == 7 and toy.space.holds(addr, 4096)
  k.close(fd)


# --- dispatch and size rules
def test_exact_structures_are_handled_in_place(toy):
  fd = toy.open("/dev/toy0")
  p, s = Pair(1, 2), Sum(a=40, b=2)
  toy.ioctl(fd, SWAP, p)
  toy.ioctl(fd, ADD, s)
  assert (p.a, p.b, s.sum) == (2, 1, 42)
  # a whole-request table: ADD's number with another size is another request, which the driver does not know
  assert "ioctl 0xc0105401 (type 0x54, nr 0x1, 16 bytes) on /dev/toy0 is not one this model implements" in \
    fails(errno.ENOTTY, toy.ioctl, fd, ioc(IOC_READ | IOC_WRITE, T, 1, 16), Sum())
  assert "ADD: the argument is not 24 bytes of memory, as the request says" in fails(errno.EFAULT, toy.ioctl, fd, ADD, Pair())
  assert "ADD: the argument is not 24 bytes of memory" in fails(errno.EFAULT, toy.ioctl, fd, ADD, 5)


def test_by_number_tables_size_check_each_structure(toy):
  fd = toy.open("/dev/toy1")
  assert "ADD with a 16-byte argument: the argument structure is 24 bytes (Sum)" in \
    fails(errno.EINVAL, toy.ioctl, fd, ioc(IOC_READ | IOC_WRITE, T, 1, 16), Sum())
  assert "is not one this model implements" in fails(errno.ENOTTY, toy.ioctl, fd, ioc(IOC_READ | IOC_WRITE, ord("V"), 1, 24), Sum())
  assert "is not one this model implements" in fails(errno.ENOTTY, toy.ioctl, fd, ioc(IOC_WRITE, T, 1, 24), Sum())   # another direction
  assert "SWAP is for /dev/toy0 only, not /dev/toy1" in fails(errno.EINVAL, toy.ioctl, fd, SWAP, Pair())
  pairs = (Pair * 3)()
  toy.ioctl(fd, ioc(IOC_READ | IOC_WRITE, T, 3, ctypes.sizeof(pairs)), pairs)      # AT_LEAST: as many entries as the size holds
  assert [(p.a, p.b) for p in pairs] == [(0, 3), (1, 3), (2, 3)]
  assert "FILL with a 4-byte argument: the argument structure is at least 8 bytes (Pair)" in \
    fails(errno.EINVAL, toy.ioctl, fd, ioc(IOC_READ | IOC_WRITE, T, 3, 4), pairs)


def test_plain_numbers_take_the_structure_exactly(toy):
  fd = toy.open("/dev/toy2")
  p = Pair(3, 4)
  toy.ioctl(fd, PLAIN, p)
  assert (p.a, p.b) == (4, 3)
  assert "PLAIN with a 24-byte argument: the argument structure is 8 bytes (Pair)" in fails(errno.EINVAL, toy.ioctl, fd, PLAIN, Sum())
  assert "PLAIN: the argument is a int, not memory" in fails(errno.EFAULT, toy.ioctl, fd, PLAIN, 3)


def test_copy_in_copies_the_callers_size_in_and_out_as_the_kernel_does(toy):
  fd = toy.open("/dev/toyctl")
  toy.ioctl(fd, SET, Wide(1, 2, 3, 4))
  assert toy.value == 1 | 2 << 32 | 3 << 64 | 4 << 96
  resize = lambda request, n: (request & ~(0x3FFF << 16)) | n << 16
  toy.ioctl(fd, resize(SET, 8), Wide(5, 6, 7, 8))            # the older 8-byte layout: the kernel copy is zero past it
  assert toy.value == 5 | 6 << 32
  w = Wide(0xAA, 0xBB, 0xCC, 0xDD)
  toy.ioctl(fd, resize(GET, 8), w)                           # only 8 bytes go back out
  assert (w.a, w.b, w.c, w.d) == (5, 6, 0xCC, 0xDD)
  toy.ioctl(fd, SET, Wide(9, 0, 0, 0))                       # _IOW: nothing comes back
  big = (ctypes.c_uint32 * 8)(*[1] * 8)
  toy.ioctl(fd, resize(GET, 32), big)                        # a larger caller: the kernel's 16 bytes, the rest untouched
  assert list(big) == [9, 0, 0, 0, 1, 1, 1, 1]
  assert toy.calls == ["SET 0x1", "SET 0x5", "GET", "SET 0x9", "GET"]


def test_argsz_must_cover_the_structure_and_lie_within_the_buffer(toy):
  fd = toy.open("/dev/toy0")
  toy.ioctl(toy.open("/dev/toyctl"), SET, Wide(a=77))
  buf = (ctypes.c_uint8 * 32)()
  s = Sized.from_buffer(buf)
  for argsz in (8, 33):
    s.argsz = argsz
    assert f"Sized.argsz = {argsz}: must cover the structure (16 bytes) and lie within the buffer passed (32 bytes)" in \
      fails(errno.EINVAL, toy.ioctl, fd, INFO, buf)
  s.argsz = 32
  toy.ioctl(fd, INFO, buf)
  assert s.value == 77
  assert "a Sized argument expected, got a c_ubyte_Array_8 of 8 bytes" in fails(errno.EFAULT, toy.ioctl, fd, INFO, (ctypes.c_uint8 * 8)())


def test_raw_arguments_and_return_values_pass_through(toy):
  fd = toy.open("/dev/toy0")
  toy.ioctl(toy.open("/dev/toyctl"), SET, Wide(a=3))
  assert toy.ioctl(fd, SHIFT, 4) == 48


def test_calls_and_last_error(toy):
  fd = toy.open("/dev/toy0")
  toy.ioctl(fd, ADD, Sum(a=1, b=1))
  fails(errno.ENOTTY, toy.ioctl, fd, ioc(IOC_READ, T, 9, 8), Pair())   # refused before any handler: not a call
  assert "toy model: 18446744073709551615 + 1 does not fit 64 bits" in fails(errno.EOVERFLOW, toy.ioctl, fd, ADD, Sum(a=(1 << 64) - 1, b=1))
  assert toy.calls == ["ADD", "ADD"] and toy.last_error == "toy model: 18446744073709551615 + 1 does not fit 64 bits"
