"""Emulated RDMA NICs. Vendor-neutral: roce.py (RoCEv2 frames: headers, ICRC), wire.py (the UDP wire between model
instances: loopback sockets, the GID table, fault injection), rc.py (the RC transport every QP runs), port.py (a NIC's
Ethernet port: routing, PHY loopback, ingress checks, the QPs it serves), function.py (the PCI function every NIC model
builds on: lock, log, persistent state, MAC, host memory, port), txflow.py (transmit flows in C, armed by one rule). A
NIC model decodes its own command, queue and key formats and plugs its QPs into a port. Vendor models: bnxt/ (Broadcom
BCM57508, "Thor"), mlx5/ (NVIDIA ConnectX-6 Dx)."""
