"""hcq drivers: the queue API (drivers.hcq), the hardware boundary (drivers.system) and one package per vendor."""
