/*
 * identity_internal.h - what the transports need of a capns_identity (not Swift).
 */
#ifndef CAPNS_IDENTITY_INTERNAL_H
#define CAPNS_IDENTITY_INTERNAL_H

#include "capns.h"
#include <openssl/ssl.h>
#include <stdbool.h>

/* Puts the certificate, its key and its chain on ctx, for every connection made
 * from it. Returns 0, or -1 with one line in err. */
int capns__identity_apply(const capns_identity *id, SSL_CTX *ctx, char *err, size_t errlen);

#endif
