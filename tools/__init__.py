"""Command-line tools: hcq_smi (device listing, kernel modules, reset, lock holders)."""
