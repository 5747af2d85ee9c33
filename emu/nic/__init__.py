"""Emulated RDMA NICs. Vendor-neutral: roce.py (RoCEv2 frames: headers, ICRC), wire.py (the UDP wire between model
instances, GID table, fault injection), rc.py (the RC transport every QP runs). Vendor models: bnxt/ (Broadcom
BCM57508, "Thor")."""
