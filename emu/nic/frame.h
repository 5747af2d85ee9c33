/* What the parts of the NIC models' C datapath share (emu/nic/fastpath.c, the transmit flows of emu/nic/txflow.h):
   frame constants (emu/nic/roce.py's layout), the ICRC's CRC-32 and big-endian reads. */
#include <stdint.h>
#include <string.h>

#define BTH_LEN 12
#define ICRC_LEN 4
#define BATCH 32
#define MAX_HEAD 64

/* CRC-32 (the Ethernet polynomial, reflected, as zlib computes it): zlib's own crc32 when the loader hands it over
   (crc_use; it is several times faster than this table), else slicing by 8 */
typedef unsigned long (*zcrc_t)(unsigned long, const unsigned char *, unsigned int);
static zcrc_t zcrc;
static uint32_t T[8][256];

void crc_use(zcrc_t f) { zcrc = f; }

void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    T[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) T[t][i] = (T[t - 1][i] >> 8) ^ T[0][T[t - 1][i] & 0xFF];
}

uint32_t crc32_update(uint32_t crc, const uint8_t *p, uint64_t n) {
  if (zcrc && n < (1u << 30)) return (uint32_t)zcrc(crc, p, (unsigned)n);
  uint32_t c = ~crc;
  while (n && ((uintptr_t)p & 7)) { c = T[0][(c ^ *p++) & 0xFF] ^ (c >> 8); n--; }
  while (n >= 8) {
    uint32_t a, b;
    memcpy(&a, p, 4);
    memcpy(&b, p + 4, 4);
    a ^= c;
    c = T[7][a & 0xFF] ^ T[6][(a >> 8) & 0xFF] ^ T[5][(a >> 16) & 0xFF] ^ T[4][a >> 24] ^
        T[3][b & 0xFF] ^ T[2][(b >> 8) & 0xFF] ^ T[1][(b >> 16) & 0xFF] ^ T[0][b >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = T[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
  return ~c;
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint64_t be64(const uint8_t *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }
