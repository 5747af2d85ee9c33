"""Digits MLP training: wall time and test accuracy per device (default: the emulated AMD GPU, MOCKPCI+AMD).

Usage: python bench/compute_digits.py [device ...] [--epochs N]   (prints one JSON line per figure)"""
import json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from digits import train
from compute import Device


def main() -> None:
  args = sys.argv[1:]
  epochs = int(args[args.index("--epochs") + 1]) if "--epochs" in args else 6
  devices = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--epochs")] or ["MOCKPCI+AMD"]
  for dev in devices:
    try: Device[dev]
    except Exception as e:
      print(json.dumps({"bench": "compute/digits_train", "device": dev, "skipped": str(e)}))
      continue
    acc, wall = train(epochs, device=dev, quiet=True)
    print(json.dumps({"bench": "compute/digits_train_wall_s", "device": dev, "epochs": epochs, "value": round(wall, 2), "unit": "s"}))
    print(json.dumps({"bench": "compute/digits_test_accuracy", "device": dev, "epochs": epochs, "value": round(acc, 4), "unit": "fraction"}))


if __name__ == "__main__":
  main()
