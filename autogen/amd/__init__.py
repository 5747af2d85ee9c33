"""AMD GPU bindings generated from linux-source-6.12 amdgpu headers (gfx1100 / Navi31 IP set)."""
