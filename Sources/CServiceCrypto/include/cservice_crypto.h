#ifndef CSERVICE_CRYPTO_H
#define CSERVICE_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/// HMAC-SHA256 of `data` under `key` into `out` (32 bytes). Returns 0, or -1 when
/// OpenSSL fails (only memory can make it).
int cservice_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t data_len,
                         uint8_t out[32]);

/// 1 when the two buffers of `len` bytes are equal, 0 otherwise, in time that does
/// not depend on where they differ (OpenSSL's CRYPTO_memcmp).
int cservice_equal(const uint8_t *a, const uint8_t *b, size_t len);

#endif
