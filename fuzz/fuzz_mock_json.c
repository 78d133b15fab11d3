/*
 * fuzz_mock_json.c - the mock's JSON syntax check and its flat-object readers
 * (Sources/CAPNsMock/json.c), on arbitrary bytes.
 *
 * Besides "no crash, no out-of-bounds read", two properties are checked:
 * the readers only ever answer for input the syntax check accepts, and a
 * string they return fits the buffer it was given.
 */
#include "mock_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes: ASan then flags any read one past the end. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);

    bool object = mock__json_is_object((const uint8_t *)buf, size);

    static const char *const keys[] = {"alg", "kid", "iss", "iat", "reason", "aps", ""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char out[16];
        int64_t v;
        bool s = mock__json_get_string(buf, size, keys[i], out, sizeof out);
        bool n = mock__json_get_int(buf, size, keys[i], &v);
        if ((s || n) && !object)
            abort();            /* a reader answered for something that is not an object */
        if (s && strlen(out) >= sizeof out)
            abort();
    }
    free(buf);
    return 0;
}
