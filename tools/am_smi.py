"""am_smi: a live monitor of the GPUs the AM userspace driver runs (real and emulated).

`am_smi` refreshes every second; `--list` prints once; `--dev BUS` watches one device; `--pids` shows the owning
processes and `--pids --kill` kills them. Everything comes from drivers/amd/smi.py (the SMU metrics table
read through the driver), never from raw offsets here.
"""
from __future__ import annotations
import argparse, sys, time

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from drivers.amd.smi import GPUStatus, devices, status
from drivers.system.lock import lock_path
from tools.cli import UserError, add_version, run
from tools.hcq_smi import Host, SmiError, free_lock

HOT, CRITICAL = 80, 87          # degrees C: yellow, red
LABEL, BAR = 6, 32              # the bar rows' label and bar widths: with the figures they fit an 80-column terminal


def _bar(label: str, value: float, total: float, text: str) -> Table:
  row = Table.grid(padding=(0, 1))
  row.add_column(width=LABEL, no_wrap=True); row.add_column(width=BAR); row.add_column(no_wrap=True)
  row.add_row(label, ProgressBar(total=max(total, 1), completed=min(value, total), width=BAR), text)
  return row


def _temp(c: int) -> Text: return Text(f"{c} °C", style="red" if c >= CRITICAL else "yellow" if c >= HOT else "green")


def _owner(pid: int | None) -> str:
  if pid is None: return "no process"
  return f"pid {pid}" if pid > 0 else "pid not visible (another user's)"


def panel(st: GPUStatus) -> Panel:
  title = f"{st.bus}  {st.name}  {_owner(st.pid)}"
  if st.error: return Panel(Text(st.error, style="yellow"), title=title)
  gib = 1 << 30
  act = lambda pct: "-" if st.stale else f"{pct}%"
  bars = [_bar("GFX", st.gfx_activity, 100, act(st.gfx_activity)), _bar("MEM", st.mem_activity, 100, act(st.mem_activity)),
          _bar("VRAM", st.vram_used, st.vram_total, f"{st.vram_used / gib:.2f} / {st.vram_total / gib:.2f} GiB"),
          _bar("Power", st.power_w, st.power_limit_w, f"{st.power_w} / {st.power_limit_w} W")]
  if st.stale: bars.append(Text(f"Activity {st.stale}", style="yellow"))
  detail = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
  for i, col in enumerate(("Temps", "", "Clocks", "", "Voltages", "", "Fan", "")):
    detail.add_column(col, no_wrap=True, justify="right" if i % 2 else "left")
  temps, clocks, volts = list(st.temps.items()), list(st.clocks.items()), list(st.voltages.items())
  fan = [("rpm", str(st.fan_rpm)), ("pwm", f"{st.fan_pwm}%")]
  for i in range(max(len(temps), len(clocks), len(volts), len(fan))):
    cell = lambda xs, fmt: (xs[i][0], fmt(xs[i][1])) if i < len(xs) else ("", "")
    detail.add_row(*cell(temps, _temp), *cell(clocks, lambda v: f"{v} MHz"), *cell(volts, lambda v: f"{v} mV"), *cell(fan, str))
  throttle = Text("Throttle: ") + (Text(", ".join(st.throttle), style="red") if st.throttle else Text("None", style="green"))
  return Panel(Group(*bars, throttle, detail), title=title)


def render(bus: str | None, last: dict[str, GPUStatus] | None = None) -> Group:
  """One frame; `last` (bus -> the previous frame's reading, updated here) lets a reading tell that the metrics did not
  update since."""
  found = devices(bus)
  if not found: return Group(Text("No AM-driven AMD GPUs found (no supported AMD function free of amdgpu, and no emulated device)"))
  last = {} if last is None else last
  for d in found: last[d.bus] = status(d, last.get(d.bus))
  return Group(Text("AM Monitor", style="bold"), *(panel(last[d.bus]) for d in found))


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="am_smi", description="Monitor the GPUs the AM userspace driver runs.")
  add_version(p)
  p.add_argument("--list", action="store_true", help="print once and exit")
  p.add_argument("--dev", metavar="BUS", help="only the device whose bus id starts with BUS (0000:03:00.0, mock-0)")
  p.add_argument("--pids", action="store_true", help="print the process owning each device")
  p.add_argument("--kill", action="store_true", help="with --pids: kill those processes")
  args = p.parse_args(argv)
  if args.kill and not args.pids: p.error("--kill needs --pids")
  return run("am_smi", lambda: _monitor(args), failures=(SmiError,))


def _monitor(args: argparse.Namespace) -> int:
  if args.dev is not None and not devices(args.dev):
    raise UserError(f"no AM-driven GPU matches --dev {args.dev}; `am_smi --list` shows them")
  console = Console()
  if args.pids:
    failed = 0
    for d in devices(args.dev):
      st = status(d) if not args.kill else None
      pid = st.pid if st else None
      if args.kill:
        try: free_lock(Host(), d.bus, lock_path("am", d.bus), sudoless=True)
        except SmiError as e:
          print(f"am_smi: {e}", file=sys.stderr)
          failed += 1
      else: print(f"{d.bus}: " + (_owner(pid) if pid else "No processes found using this device"))
    return 1 if failed else 0
  if args.list:
    console.print(render(args.dev))
    return 0
  try:
    last: dict[str, GPUStatus] = {}
    with Live(render(args.dev, last), console=console, refresh_per_second=1, screen=False) as live:
      while True:
        time.sleep(1)
        live.update(render(args.dev, last))
  except KeyboardInterrupt: return 0


if __name__ == "__main__":
  sys.exit(main())
