"""Emulated RDMA NICs. Vendor-neutral: roce.py (RoCEv2 frames: headers, ICRC), wire.py (the UDP wire between model
instances: loopback sockets, the GID table, fault injection), rc.py (the RC transport every QP runs), port.py (a NIC's
Ethernet port: routing, PHY loopback, ingress checks, the QPs it serves). A NIC model decodes its own command, queue
and key formats and plugs its QPs into a port. Vendor models: bnxt/ (Broadcom BCM57508, "Thor")."""
