/* PLACEHOLDER, replaced by the nghttp2 transport work: refuses to start. */
#include "sender_internal.h"
#include <stdio.h>
static void *h2_create(capns_sender *s, char *err, size_t errlen)
{
    snprintf(err, errlen, "the nghttp2 transport is not built yet");
    return NULL;
}
static void h2_run(void *impl) {}
static void h2_wake(void *impl) {}
static void h2_destroy(void *impl) {}
const capns_transport_ops capns_h2_transport = {"nghttp2", h2_create, h2_run, h2_wake, h2_destroy};
