"""OpenCL C kernels (compiled by clang-22 for gfx1100) used by the AMD end-to-end tests."""

SRC = r"""
#define GID(d) (__builtin_amdgcn_workgroup_id_##d() * __builtin_amdgcn_workgroup_size_##d() + __builtin_amdgcn_workitem_id_##d())

__kernel void vadd(__global float *out, __global const float *a, __global const float *b, int n) {
  int i = GID(x);
  if (i < n) out[i] = a[i] + b[i];
}

/* per-workgroup sum through LDS with barriers (tree reduction), 256 work-items per group */
__kernel void lds_sum(__global float *out, __global const float *in) {
  __local float tmp[256];
  uint l = __builtin_amdgcn_workitem_id_x();
  tmp[l] = in[GID(x)];
  for (uint s = 128; s > 0; s >>= 1) {
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
    if (l < s) tmp[l] += tmp[l + s];
  }
  if (l == 0) out[__builtin_amdgcn_workgroup_id_x()] = tmp[0];
}

/* histogram with global atomics */
__kernel void histogram(__global int *bins, __global const int *in, int n) {
  int i = GID(x);
  if (i < n) __atomic_fetch_add(&bins[in[i] & 15], 1, __ATOMIC_RELAXED);
}

/* 3-D grid: out[z][y][x] = x + 100*y + 10000*z */
__kernel void grid3d(__global int *out, int nx, int ny) {
  int x = GID(x), y = GID(y), z = GID(z);
  out[(z * ny + y) * nx + x] = x + 100 * y + 10000 * z;
}

/* a private array indexed dynamically lives in scratch */
__kernel void scratch(__global int *out, __global const int *idx) {
  int priv[64];
  int i = GID(x);
  for (int k = 0; k < 64; k++) priv[k] = k * i;
  out[i] = priv[idx[i] & 63];
}

__kernel void add1(__global int *x) { x[GID(x)] += 1; }

__kernel void read_ptr(__global int *out, __global const int *p) { out[0] = *p; }
"""
