"""The RDMA side of bench/rdma_bw.py and bench/rdma_lat.py: two processes, each with an emulated NIC (`nic`: bnxt, the
NetXtreme-E brought up by drivers/bnxt, or mlx5, the ConnectX by drivers/mlx5), over the NIC models' wire.

  write_bw(size, nic)   MB/s of RDMA WRITE payload, `hcq-rdma connect --local` (DEPTH WRITEs in flight, as ib_write_bw)
  write_lat(size, nic)  (p50, p99, CPU) one-way latency in microseconds as `ib_write_lat --write_with_imm` measures it: half the
                   round trip of a WRITE with immediate answered by one, each side waiting on its CQ for the other's
                   (the NIC models run in these processes: polling memory would hold the interpreter their threads
                   need, while CQ.wait sleeps on the CQ's completion notification), then checking the last byte
Run as `python bench/rdma_common.py peer NIC BUS IP` it is write_lat's other process.
"""
import json, os, subprocess, sys, time
from pathlib import Path

BIN = Path(sys.executable).parent
BENCH = Path(__file__).resolve().parent
DEPTH = 16
RECVS = 16                               # receive requests posted for the peer's WRITEs with immediate (refilled half at a time)
SIGNAL_EVERY = 8                         # one WRITE in this many asks for a completion (as perftest's --cq-mod): the rest
                                         # retire with it, and the waiting side wakes once per message, for the peer's


def nic_option(args: list[str]) -> tuple[str, list[str]]:
  """(nic, the rest) from a leading `--nic NIC`: a registered RDMA NIC vendor (drivers.rdma.rdma_vendors), by default the first."""
  from drivers.rdma import rdma_vendors
  nics = list(rdma_vendors())
  nic = next(iter(nics), "")
  if args[:1] == ["--nic"]: nic, args = args[1], args[2:]
  if nic not in nics: sys.exit(f"--nic {nic}: one of {', '.join(nics) or 'none (no RDMA NIC vendor is registered)'}")
  return nic, args


def write_bw(size: int, nic: str, pci: str = "mock-0", remote_pci: str = "mock-1") -> float:
  iters = max(16, min(2000, (256 << 20) // size))      # 256 MiB (or 2000 messages): long enough to average the load out
  r = subprocess.run([str(BIN / "hcq-rdma"), "connect", "--nic", nic, "--pci", pci, "--local", "--remote-pci", remote_pci,
                      "--size", str(size), "--iters", str(iters), "--depth", str(DEPTH), "--json"],
                     capture_output=True, text=True, timeout=600)
  if r.returncode: raise RuntimeError(f"hcq-rdma connect failed: {r.stderr.strip()}")
  return json.loads(r.stdout.splitlines()[-1])["gbytes_per_s"] * 1e3


class Side:
  """One process's end of the ping-pong: a QP, its buffer, and the peer's buffer."""
  def __init__(self, nic: str, pci: str, ip: str, size: int):
    from drivers.rdma import Access, RecvWR, SendFlags, SendWR, WROpcode, open_context
    self.SendWR = SendWR                                   # (what send uses, looked up once: send is the measured path)
    self.flags = {True: SendFlags.SIGNALED, False: SendFlags(0)}
    self.opcode = WROpcode.RDMA_WRITE_WITH_IMM
    self.ctx = open_context(nic, pci, ip=ip)
    self.pd, self.cq = self.ctx.alloc_pd(), self.ctx.create_cq(64)
    self.qp, self.size = self.pd.create_qp(self.cq), size
    self.buf = self.pd.reg_mr(self.ctx.alloc(size), Access.LOCAL_WRITE | Access.REMOTE_WRITE, size)
    self.out = self.pd.reg_mr(self.ctx.alloc(size), Access.LOCAL_WRITE, size)
    self.sg_list = [self.out.sge()]        # every WRITE sends the whole buffer (the verbs and drivers only read the list)
    self.recv = RecvWR(0)                  # a WRITE with immediate consumes a receive request and writes no data there
    self.used = 0                          # receive requests consumed since the last refill
    self.sent = 0

  def hello(self) -> dict:
    from drivers.rdma import RemoteMR
    return {**self.qp.endpoint(psn=0).to_json(), **RemoteMR(self.buf.addr, self.buf.rkey, self.size).to_json()}

  def connect(self, peer: dict) -> None:
    from drivers.rdma import Endpoint, RemoteMR
    from drivers.rdma.exchange import check
    f = check({"type": "hello", **peer}, {**Endpoint.FIELDS, **RemoteMR.FIELDS}, "the peer")
    self.qp.connect(Endpoint.from_fields(f), psn=0)
    self.qp.post_recv([self.recv] * RECVS)
    self.remote = RemoteMR.from_fields(f, "the peer")

  def send(self, mark: int) -> None:
    self.out.view[-1] = mark
    self.sent += 1
    self.qp.post_send(self.SendWR(mark, self.opcode, self.sg_list, self.flags[self.sent % SIGNAL_EVERY == 0], mark,
                                  self.remote.addr, self.remote.rkey))

  def wait_for(self, mark: int, timeout_s: float = 30.0) -> None:
    """Until the peer's WRITE carrying `mark` has landed (its receive completion); our own completions are reaped as
    they come."""
    got = False
    while not got:
      for wc in self.cq.wait(1, timeout_s):
        if wc.imm_data is None: continue                  # one of ours (the peer's ACK came before its answer)
        if wc.imm_data != mark or self.buf.view[-1] != mark:
          raise RuntimeError(f"the peer's WRITE {wc.imm_data} left byte {self.buf.view[-1]} where WRITE {mark} was due")
        else:
          got, self.used = True, self.used + 1
          if self.used == RECVS // 2:        # one doorbell for half the queue
            self.qp.post_recv([self.recv] * self.used)
            self.used = 0


def peer(nic: str, pci: str, ip: str) -> None:
  size = int(sys.stdin.readline())
  side = Side(nic, pci, ip, size)
  print(json.dumps(side.hello()), flush=True)
  side.connect(json.loads(sys.stdin.readline()))
  print("ready", flush=True)
  mark = 1
  while sys.stdin.readline().strip() == "go":
    for _ in range(int(sys.stdin.readline())):
      side.wait_for(mark)
      side.send(mark)
      mark = mark % 255 + 1
  side.ctx.close()


def write_lat(size: int, nic: str, iters: int = 200, pci: str = "mock-0", remote_pci: str = "mock-1") -> tuple[float, float, float]:
  """(p50, p99, CPU): one-way latencies in microseconds, and the CPU time this process (its driver and its NIC model's
  thread) spent per round trip, in microseconds: the part of the latency that is work rather than waiting."""
  p = subprocess.Popen([sys.executable, str(BENCH / "rdma_common.py"), "peer", nic, remote_pci, "10.0.0.2"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True)
  try:
    p.stdin.write(f"{size}\n")
    p.stdin.flush()
    side = Side(nic, pci, "10.0.0.1", size)
    side.connect(json.loads(p.stdout.readline()))
    p.stdin.write(json.dumps(side.hello()) + "\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "ready"
    p.stdin.write(f"go\n{iters}\n")
    p.stdin.flush()
    rtts, mark, cpu = [], 1, time.process_time()
    for _ in range(iters):
      t0 = time.perf_counter()
      side.send(mark)
      side.wait_for(mark)
      rtts.append(time.perf_counter() - t0)
      mark = mark % 255 + 1
    cpu = time.process_time() - cpu
    p.stdin.write("stop\n")
    p.stdin.flush()
    side.ctx.close()
    p.wait(60)
  finally:
    if p.poll() is None: p.kill()
  rtts.sort()
  return rtts[len(rtts) // 2] / 2 * 1e6, rtts[len(rtts) * 99 // 100] / 2 * 1e6, cpu / iters * 1e6


if __name__ == "__main__" and sys.argv[1:2] == ["peer"]:
  os.environ.setdefault("PYTHONUNBUFFERED", "1")
  peer(sys.argv[2], sys.argv[3], sys.argv[4])
