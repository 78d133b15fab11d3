/*
 * fuzz_key_pem.c - loading a provider key, capns_key_load_pem
 * (Sources/CAPNs/jwt.c), from arbitrary bytes: a truncated, mangled or wrong
 * .p8 must be refused with a reason, never crash or leak.
 *
 * When a key does load, it must sign: a loaded key that cannot make a JWT
 * would fail later, far from its cause.
 */
#include "capns.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;               /* the file loader caps keys far below this */
    char err[CAPNS_ERR_MAX] = "";
    capns_key *key = capns_key_load_pem((const char *)data, size, err, sizeof err);
    if (!key) {
        if (!err[0] || !memchr(err, '\0', sizeof err))
            abort();            /* refused without saying why */
        return 0;
    }
    char jwt[CAPNS_JWT_MAX];
    if (capns_jwt_sign(key, "FUZZKEY001", "FUZZTEAM01", 1700000000, jwt, sizeof jwt, err, sizeof err) < 0)
        abort();
    capns_key_free(key);
    return 0;
}
