"""The process group: this rank's place in the job (from OpenMPI's environment), its GPU and NIC, and the bootstrap
that connects every pair of ranks (one mpi4py allgather of each rank's QP numbers, GID, MAC and landing MR).

- Rank, world size and local rank: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (set by
  mpirun for each process it starts). Without them the job is one rank, and needs no MPI.
- The GPU: DEV, the rank's own index appended when DEV names none (each rank on a host takes its own GPU, as
  LOCAL_RANK does for torch); by default the emulated GPU with the rank's local index.
- The NIC: HCQ_NIC=<vendor>[:BUS] (bnxt or mlx5, a PCI bus or mock-<n>); by default the emulated NIC of the first
  RDMA vendor with the rank's local index. Its GID is the IPv4-mapped 10.100.0.0/16 address of the rank.
- Memory the NIC reaches: buffers in the GPU's memory, which the NIC writes peer to peer through the GPU's BAR,
  where the GPU's interface gives their bus addresses; else host-visible buffers of the GPU (the staging path:
  a collective then copies its input in and its result out, counted in `stats`).

MPI only launches and bootstraps: after init() no MPI call is made (the communicator's errors return instead of
aborting, so a rank that dies later does not take the others down with MPI; mpirun's --enable-recovery keeps them
running to report it)."""
from __future__ import annotations
import ipaddress, math, os, secrets
from dataclasses import dataclass
from typing import Any

from drivers.hcq import Buffer as HCQBuffer, Device as HCQDevice, parse_device
from drivers.hcq.devspec import openable_vendors
from drivers.rdma import MR, Access, Context, Endpoint, ProtocolError, QPCap, RemoteMR, open_context, rdma_vendors
from drivers.rdma.exchange import MAC, GID, MTU, TEXT, U24, U32, U64, check
from compute.runtime import Device
from compute.distributed.fold import MIN_KERNEL, Folder
from compute.distributed.ring import CHUNK, RECVS, SENDS, SLOTS, DistributedError, Engine, Link

TIMEOUT_S = float(os.environ.get("HCQ_DIST_TIMEOUT_S", 60.0))   # no progress for this long fails a collective
RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE
BASE_IP = int(ipaddress.IPv4Address("10.100.0.1"))


def ack_timeout(timeout_s: float) -> int:
  """The QPs' local ACK timeout exponent (4.096 us * 2^t per retry, IBA 9.7.6.1.3): the 8 tries of retry_cnt 7 span
  at most about `timeout_s`, between 0.27 s and 2.1 s each. A peer busy for a moment (a kernel compiling, a loaded host)
  is no dead peer; one that stays silent that long is reported (its retries run out)."""
  return min(19, max(16, math.floor(math.log2(timeout_s / 8 / 4.096e-6))))


@dataclass(frozen=True)
class Place:
  rank: int
  world_size: int
  local_rank: int


def _env_int(name: str) -> int | None:
  if (v := os.environ.get(name)) is None: return None
  try: return int(v)
  except ValueError: raise DistributedError(f"{name}={v!r} is not an integer (mpirun sets it)") from None


def place() -> Place:
  """Where this process is in the job, from the variables mpirun sets; a process not started by mpirun is a job of one."""
  rank, size, local = (_env_int(f"OMPI_COMM_WORLD_{n}") for n in ("RANK", "SIZE", "LOCAL_RANK"))
  if rank is None and size is None: return Place(0, 1, 0)
  if rank is None or size is None or not 0 <= rank < size:
    raise DistributedError(f"OMPI_COMM_WORLD_RANK={rank} and OMPI_COMM_WORLD_SIZE={size} do not make a rank of a job: "
                           "launch with `mpirun -np N python script.py`")
  return Place(rank, size, rank if local is None else local)


def gpu_name(local_rank: int) -> str:
  """DEV (with the local rank as its index when it names none), else the emulated GPU with the local rank's index."""
  name = os.environ.get("DEV") or next((v.emulated for v in openable_vendors() if v.emulated), "CPU")
  spec = parse_device(name)
  if ":" not in name and local_rank and not next(v for v in openable_vendors() if v.name == spec.vendor).single:
    name = f"{name}:{local_rank}"
  return Device.canonicalize(name)


def nic_name(local_rank: int) -> tuple[str, str]:
  """(vendor, bus) from HCQ_NIC=<vendor>[:BUS]; by default the first RDMA vendor's emulated NIC mock-<local rank>."""
  vendors = rdma_vendors()
  value = os.environ.get("HCQ_NIC") or next(iter(vendors), "")
  vendor, _, bus = value.partition(":")
  if vendor.lower() not in vendors:
    raise DistributedError(f"HCQ_NIC={value!r}: no RDMA NIC vendor {vendor!r}; available: {', '.join(vendors) or 'none'} "
                           "(HCQ_NIC=<vendor>[:<PCI bus or mock-N>])")
  return vendor.lower(), bus or f"mock-{local_rank}"


def _qpns(v) -> list[int]:
  if not isinstance(v, list): raise ValueError(f"must be a list of QP numbers, got {v!r}")
  return [U24(q) for q in v]


HELLO = {"rank": U32, "nic": TEXT, "qpns": _qpns, "psn": U24, "gid": GID, "mac": MAC, "mtu": MTU, "addr": U64, "rkey": U32,
         "size": U64}


class Group:
  """This rank's devices, its connections to every other rank, and the buffers its collectives use."""
  def __init__(self, timeout_s: float | None = None):
    self.place = p = place()
    self.rank, self.world_size = p.rank, p.world_size
    self.timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
    self.device_name = gpu_name(p.local_rank)
    self.device: HCQDevice = Device[self.device_name]
    self.ctx: Context | None = None
    self.landing: HCQBuffer | None = None
    self.scratch: HCQBuffer | None = None
    self.work: HCQBuffer | None = None
    self.work_mr: MR | None = None
    self.landing_mr: MR | None = None
    self.engine: Engine | None = None
    self.comm: Any = None
    self.staging = self._staging()
    self.scratch = self.device.alloc(MIN_KERNEL * 8)
    self.folder = Folder(self.device_name, self.device, self.scratch)
    if self.world_size > 1:
      try: self._connect()
      except BaseException:
        self.close()
        raise

  def _staging(self) -> bool:
    """Whether the NIC reaches this GPU's memory only through host-visible buffers (no bus addresses for peers)."""
    probe = self.device.alloc(4096)
    try:
      if probe.host or self.device.host_addressed: return False
      try: probe.bus_pages()
      except NotImplementedError: return True
      return False
    finally: probe.free()

  def alloc(self, size: int) -> HCQBuffer:
    """GPU memory the NIC reaches: VRAM peer to peer, else host-visible memory of the GPU (staging)."""
    return self.device.alloc(size, host=True) if self.staging else self.device.alloc(size)

  def _connect(self) -> None:
    from mpi4py import MPI
    self.comm = comm = MPI.COMM_WORLD
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    vendor, bus = nic_name(self.place.local_rank)
    ip = str(ipaddress.IPv4Address(BASE_IP + self.rank))
    self.ctx = ctx = open_context(vendor, bus, ip=ip)
    pd = ctx.alloc_pd()
    peers = [r for r in range(self.world_size) if r != self.rank]
    self.cq = cq = ctx.create_cq(len(peers) * (2 * SENDS + RECVS))
    qps = {r: pd.create_qp(cq, cap=QPCap(max_send_wr=2 * SENDS, max_recv_wr=RECVS)) for r in peers}
    span = SLOTS * CHUNK
    self.landing = self.alloc(len(peers) * span)
    self.landing_mr = landing_mr = pd.reg_mr(self.landing, RW)
    self.pd, psn = pd, secrets.randbits(24)
    me = qps[peers[0]].endpoint(psn)
    hello = {"rank": self.rank, "nic": ctx.name, "qpns": [qps[r].qp_num if r in qps else 0 for r in range(self.world_size)],
             "psn": psn, "gid": me.gid.hex(), "mac": me.mac.hex(), "mtu": me.mtu, "addr": landing_mr.addr,
             "rkey": landing_mr.rkey, "size": landing_mr.length}
    got = comm.allgather({"type": "hello", **hello})
    links = {}
    for r in peers:
      source = f"rank {r}"
      try:
        if not isinstance(got[r], dict) or got[r].get("type") != "hello": raise ProtocolError(f"{source} sent {got[r]!r}")
        h = check(got[r], HELLO, source)
        if h["rank"] != r or len(h["qpns"]) != self.world_size:
          raise ProtocolError(f"{source} says it is rank {h['rank']} of {len(h['qpns'])}")
        theirs = RemoteMR.from_fields(h, source)
      except ProtocolError as e: raise DistributedError(f"bootstrap on rank {self.rank}: {e}") from None
      if theirs.size != span * len(peers):
        raise DistributedError(f"bootstrap on rank {self.rank}: rank {r} opened {theirs.size} bytes of landing slots, not "
                               f"{span * len(peers)} (another version of compute.distributed?)")
      mine_there = self.rank if self.rank < r else self.rank - 1    # our slots among the peer's peers
      qps[r].connect(Endpoint(h["qpns"][self.rank], h["psn"], h["gid"], h["mac"], h["mtu"]), psn,
                     timeout=ack_timeout(self.timeout_s))
      index = peers.index(r)
      links[r] = Link(r, qps[r], theirs.addr + mine_there * span, theirs.rkey, self.landing.view(index * span, span))
    self.engine = Engine(self.rank, links, cq, self.timeout_s, self.device)   # posts the receives
    comm.Barrier()   # every QP is ready to receive before any rank sends

  def work_buffer(self, nbytes: int):
    """The registered work buffer, at least `nbytes` + one chunk (kernels read whole chunk-sized pieces); grown (and
    registered again) when a collective needs more."""
    need = nbytes + CHUNK
    if self.work is None or self.work.size < need:
      if self.work_mr is not None: self.work_mr.dereg()
      if self.work is not None: self.work.free()
      self.work = self.work_mr = None
      self.work = self.alloc(1 << (need - 1).bit_length())
      if self.ctx is not None: self.work_mr = self.pd.reg_mr(self.work, RW)   # (a job of one has no NIC)
    return self.work, self.work_mr

  def close(self) -> None:
    """Destroy the QPs, deregister and free the buffers, close the NIC (each step even if one before it failed)."""
    steps = []
    if self.engine is not None: steps += [self.engine.goodbye] + [l.qp.destroy for l in self.engine.links.values()]
    steps += [m.dereg for m in (self.work_mr, self.landing_mr) if m is not None]
    steps += [b.free for b in (self.work, self.landing, self.scratch) if b is not None and not self.device.closed]
    if self.ctx is not None: steps.append(self.ctx.close)
    self.engine = self.work_mr = self.landing_mr = self.work = self.landing = self.scratch = None
    self.ctx, errors = None, []
    for step in steps:
      try: step()
      except Exception as e: errors.append(e)
    if errors: raise errors[0]
