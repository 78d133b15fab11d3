/*
 * h2_tls.c - getting one connection of the nghttp2 transport to a verified TLS
 * session that speaks h2: non-blocking TCP connect, then the OpenSSL handshake.
 *
 * Verification is never turned off: the peer must chain to the system's roots or
 * to cfg.ca_file, and its certificate must name the host (DNS name or IP literal).
 * The system's roots are read when a chain first needs them.
 * With certificate auth (cfg.identity) the context also carries the client
 * certificate, presented when the server asks for one.
 * Errors land in c->error as one line without the endpoint (capns__fail adds it).
 */
#include "h2_internal.h"
#include "identity_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const unsigned char alpn_h2[] = "\x02h2";

/* The system's roots are added to a context's store at its first miss, not when the
 * context is made. Parsing the whole system bundle costs more than the rest of a
 * start, and a chain that ca_file completes (a private CA, a mock) never needs it.
 * The trust is the same as SSL_CTX_set_default_verify_paths gives: its file and
 * directory (SSL_CERT_FILE, SSL_CERT_DIR or OpenSSL's built-in paths), on top of
 * ca_file. A store is used by one sender thread, the one its context belongs to. */
static int roots_index = -1;   /* the store's ex_data slot: set once its roots are in */
static pthread_once_t roots_once = PTHREAD_ONCE_INIT;

static void roots_index_init(void)
{
    roots_index = X509_STORE_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* OpenSSL's own issuer lookup; at the store's first miss, the system's roots are
 * added and the lookup is made again. Returns 1 found, 0 not, -1 an error. */
static int get_issuer_or_load_roots(X509 **issuer, X509_STORE_CTX *vctx, X509 *x)
{
    int found = X509_STORE_CTX_get1_issuer(issuer, vctx, x);
    X509_STORE *store = X509_STORE_CTX_get0_store(vctx);
    if (found != 0 || X509_STORE_get_ex_data(store, roots_index))
        return found;
    X509_STORE_set_ex_data(store, roots_index, store);   /* once, whatever it finds */
    X509_STORE_set_default_paths(store);                 /* a missing file or directory is no error */
    return X509_STORE_CTX_get1_issuer(issuer, vctx, x);
}

SSL_CTX *h2_tls_ctx_new(const char *ca_file, const capns_identity *identity, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(err, errlen, "TLS: cannot create a context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* Partial writes + moving buffer: the write buffer is refilled between retries. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* HTTP/2 frames delimit themselves: a close without close_notify is a plain EOF. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (SSL_CTX_set_alpn_protos(ctx, alpn_h2, sizeof alpn_h2 - 1) != 0 ||
        pthread_once(&roots_once, roots_index_init) != 0 || roots_index < 0) {
        snprintf(err, errlen, "TLS: cannot configure the context");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (ca_file && SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
        snprintf(err, errlen, "TLS: cannot load CA file %s", ca_file);
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    X509_STORE_set_get_issuer(SSL_CTX_get_cert_store(ctx), get_issuer_or_load_roots);
    /* Certificate auth: every connection presents the client certificate. */
    if (identity && capns__identity_apply(identity, ctx, err, errlen) != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* ------------------------------------------------------------------- TCP */

/* Starts connecting to c->addr and the ones after it until one is under way.
 * Every socket made here is new to epoll, even when it reuses the number of the
 * one just closed (close dropped that from the epoll set): callers watch it. */
static int connect_next(h2_conn *c)
{
    for (; c->addr; c->addr = c->addr->ai_next) {
        int fd = socket(c->addr->ai_family, c->addr->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        c->addr->ai_protocol);
        if (fd < 0) {
            snprintf(c->error, sizeof c->error, "socket: %s", strerror(errno));
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, c->addr->ai_addr, c->addr->ai_addrlen) == 0 || errno == EINPROGRESS) {
            c->fd = fd;
            return 0;
        }
        snprintf(c->error, sizeof c->error, "connect: %s", strerror(errno));
        close(fd);
    }
    return -1;
}

/* The address that served last goes first: a reconnect does not pay again for
 * the ones before it that refused (or time out) every time. */
static void prefer(h2_conn *c, const h2_transport *t)
{
    if (!t->good_addrlen)
        return;
    for (struct addrinfo **p = &c->addrs; *p; p = &(*p)->ai_next) {
        struct addrinfo *a = *p;
        if (a->ai_addrlen == t->good_addrlen && memcmp(a->ai_addr, &t->good_addr, a->ai_addrlen) == 0) {
            *p = a->ai_next;
            a->ai_next = c->addrs;
            c->addrs = a;
            return;
        }
    }
}

int h2_tcp_start(h2_conn *c, const char *host, uint16_t port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG};
    char service[8];
    snprintf(service, sizeof service, "%u", (unsigned)port);
    /* Blocks the sender thread for the lookup; a resolver thread is not worth it for
     * one connection per environment (APNs hosts resolve from cache). */
    int rv = getaddrinfo(host, service, &hints, &c->addrs);
    if (rv != 0) {
        snprintf(c->error, sizeof c->error, "resolve: %s", gai_strerror(rv));
        return -1;
    }
    prefer(c, c->t);
    c->addr = c->addrs;
    return connect_next(c);
}

int h2_tcp_next(h2_conn *c)
{
    close(c->fd);
    c->fd = -1;
    c->addr = c->addr->ai_next;
    return connect_next(c);
}

int h2_tcp_finish(h2_conn *c)
{
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        soerr = errno;
    if (soerr == 0) {
        h2_transport *t = c->t;
        if (c->addr->ai_addrlen <= sizeof t->good_addr) {
            memcpy(&t->good_addr, c->addr->ai_addr, c->addr->ai_addrlen);
            t->good_addrlen = c->addr->ai_addrlen;
        }
        return 1;
    }
    if (soerr == EINPROGRESS)
        return 0;
    snprintf(c->error, sizeof c->error, "connect: %s", strerror(soerr));
    return h2_tcp_next(c) == 0 ? 2 : -1;
}

/* ------------------------------------------------------------------- TLS */

static bool is_ip_literal(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

int h2_tls_start(h2_conn *c, const char *host)
{
    c->ssl = SSL_new(c->t->ssl_ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
        snprintf(c->error, sizeof c->error, "TLS: cannot create a session");
        return -1;
    }
    int ok;
    if (is_ip_literal(host)) {
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host);
    } else {
        ok = SSL_set_tlsext_host_name(c->ssl, host) == 1 && SSL_set1_host(c->ssl, host) == 1;
    }
    if (!ok) {
        snprintf(c->error, sizeof c->error, "TLS: cannot set the expected host %s", host);
        return -1;
    }
    SSL_set_connect_state(c->ssl);
    return 0;
}

/* One line for a failed handshake: the verify result when that is what failed. */
static void handshake_error(h2_conn *c, int rv)
{
    int code = SSL_get_error(c->ssl, rv);
    long verify = SSL_get_verify_result(c->ssl);
    unsigned long e = ERR_peek_error();
    if (ERR_GET_REASON(e) == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL) {
        /* a strict server refuses the handshake rather than complete it without h2 */
        snprintf(c->error, sizeof c->error, "server did not negotiate HTTP/2 (ALPN)");
    } else if (verify != X509_V_OK) {
        snprintf(c->error, sizeof c->error, "TLS: certificate verify failed (%s)",
                 X509_verify_cert_error_string(verify));
    } else if (e) {
        char buf[120];
        ERR_error_string_n(e, buf, sizeof buf);
        snprintf(c->error, sizeof c->error, "TLS: %s", buf);
    } else if (code == SSL_ERROR_SYSCALL && errno) {
        snprintf(c->error, sizeof c->error, "TLS: %s", strerror(errno));
    } else {
        snprintf(c->error, sizeof c->error, "TLS: connection closed during the handshake");
    }
    ERR_clear_error();
}

int h2_tls_handshake(h2_conn *c)
{
    ERR_clear_error();
    errno = 0;
    int rv = SSL_do_handshake(c->ssl);
    if (rv != 1) {
        int code = SSL_get_error(c->ssl, rv);
        if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE)
            return 0;
        handshake_error(c, rv);
        return -1;
    }
    const unsigned char *proto = NULL;
    unsigned int len = 0;
    SSL_get0_alpn_selected(c->ssl, &proto, &len);
    if (len != 2 || memcmp(proto, "h2", 2) != 0) {
        snprintf(c->error, sizeof c->error, "server did not negotiate HTTP/2 (ALPN)");
        return -1;
    }
    return 1;
}
