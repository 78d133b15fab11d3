/*
 * fuzz_error_body.c - the sender's reader of APNs error bodies,
 * capns__parse_error_body (Sources/CAPNs/sender.c), on arbitrary bytes: what
 * a hostile or broken server may send back.
 *
 * Checked: no read past the body, reason always NUL-terminated inside its
 * buffer, and no signed overflow on a long "timestamp" (UBSan).
 */
#include "sender_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *body = malloc(size ? size : 1);
    if (!body)
        return 0;
    memcpy(body, data, size);

    capns_completion c;
    memset(&c, 0x55, sizeof c);         /* garbage, as a reused batch slot holds */
    c.reason[0] = '\0';
    c.timestamp_ms = -1;
    capns__parse_error_body(body, size, &c);
    if (!memchr(c.reason, '\0', sizeof c.reason))
        abort();
    if (c.timestamp_ms < -1)
        abort();                        /* digits only: never negative */
    free(body);
    return 0;
}
