/*
 * proxy_tunnel.h - HTTP CONNECT through a forward proxy (RFC 9110 §9.3.6), shared by
 * the transports: the nghttp2 transport runs the tunnel itself (proxy_tunnel_step on
 * its non-blocking socket), libcurl runs its own but words a refusal the same way.
 *
 * A proxy_spec is the sender's proxy, copied out of capns_sender_config at create
 * (the config's strings are the caller's and gone afterwards): its label "host:port"
 * for error lines and the CONNECT request, rendered once. The request holds the
 * Basic credentials, so the spec is wiped when freed; nothing here ever writes the
 * credentials into an error line.
 */
#ifndef CAPNS_PROXY_TUNNEL_H
#define CAPNS_PROXY_TUNNEL_H

#include "capns.h"

#include <stdbool.h>
#include <stddef.h>

/* The largest answer header block a proxy may send to CONNECT; a longer one is an
 * error, not a reason to keep reading. */
#define PROXY_ANSWER_MAX 8192

typedef struct proxy_spec {
    char *host;                 /* the proxy's, to connect to */
    uint16_t port;
    char label[300];            /* "host:port" ("[v6]:port"), for error lines */
    char *username, *password;  /* NULL = no credentials; for libcurl */
    char *request;              /* "CONNECT host:port HTTP/1.1\r\n...\r\n\r\n" */
    size_t request_len;
} proxy_spec;

/* True when cfg names a proxy (proxy_host set and not empty). */
bool proxy_configured(const capns_sender_config *cfg);

/* Checks cfg's proxy fields and copies them; NULL with one line in err (never the
 * password) when a field is unusable: no port, a control character in a field that
 * goes into a header (host, username, password: header injection), a ':' in the
 * username (Basic cannot carry one), or out of memory. */
proxy_spec *proxy_spec_new(const capns_sender_config *cfg, char *err, size_t errlen);
void proxy_spec_free(proxy_spec *spec);

/* The one wording of a refused tunnel, for both transports:
 * "proxy 127.0.0.1:8888 refused CONNECT: 407 Proxy Authentication Required". */
void proxy_refused(char *out, size_t outlen, const proxy_spec *spec, int status, const char *reason);

/* One connection's CONNECT exchange. */
typedef struct proxy_tunnel proxy_tunnel;

proxy_tunnel *proxy_tunnel_new(const proxy_spec *spec);
void proxy_tunnel_free(proxy_tunnel *pt);

/* Drives the exchange on fd, a connected non-blocking socket to the proxy, as far as
 * it goes without blocking: 1 the proxy answered 2xx and fd is a tunnel to the host
 * (start TLS on it), 0 wait for the socket, -1 failed with one line in err naming
 * the proxy. Call again on every socket event until it returns 1 or -1. */
int proxy_tunnel_step(proxy_tunnel *pt, int fd, char *err, size_t errlen);

#endif
