// HS256 needs two things that must not leak timing: the MAC and its comparison.
// OpenSSL already links into this project (CAPNs), so no second crypto library
// (swift-crypto's BoringSSL) is built for them.
#include "cservice_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

int cservice_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t data_len,
                         uint8_t out[32]) {
    unsigned int n = 0;
    static const uint8_t empty = 0;
    if (HMAC(EVP_sha256(), key_len ? key : &empty, (int)key_len, data_len ? data : &empty, data_len, out, &n) == NULL)
        return -1;
    return n == 32 ? 0 : -1;
}

int cservice_equal(const uint8_t *a, const uint8_t *b, size_t len) {
    return CRYPTO_memcmp(a, b, len) == 0;
}
