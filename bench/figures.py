"""Shared by the bench scripts: best-of-N timing and the one-JSON-line-per-figure output."""
import json, time


def best(fn, rounds: int = 5) -> float:
  """The fastest of `rounds` runs of fn(), in seconds (the least disturbed by other load on the machine)."""
  return best_with(fn, rounds)[0]


def best_with(fn, rounds: int = 5) -> tuple[float, object]:
  """best(), and what the last run of fn() returned."""
  times, out = [], None
  for _ in range(rounds):
    t0 = time.perf_counter()
    out = fn()
    times.append(time.perf_counter() - t0)
  return min(times), out


def host_cpu(fn, dev) -> float:
  """CPU seconds this thread spends in fn() (not time it waits for an emulator's threads or other processes), then
  waits for `dev` to finish what fn() submitted."""
  t0 = time.thread_time()
  fn()
  t = time.thread_time() - t0
  dev.synchronize()
  return t


def emit(bench: str, value: float, unit: str, **extra) -> None:
  print(json.dumps({"bench": bench, **extra, "value": round(value, 3), "unit": unit}), flush=True)


def skipped(bench: str, reason: str, **extra) -> None:
  print(json.dumps({"bench": bench, **extra, "skipped": reason}), flush=True)
