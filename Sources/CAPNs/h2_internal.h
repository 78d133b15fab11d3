/*
 * h2_internal.h - the nghttp2-over-OpenSSL transport, shared by its three files:
 *   transport_h2.c  the epoll loop on the sender thread: connections, deadlines, ops
 *   h2_tls.c        non-blocking TCP connect and the TLS client (verification always on, ALPN h2)
 *   h2_session.c    the nghttp2 client session: requests out, responses in, bytes over TLS
 *   h2_mem.c        the sessions' allocator: small blocks reused from free lists
 *
 * Ownership invariant: every request the transport took sits in exactly one
 * h2_stream slot, and a used slot is on exactly one list: the pending FIFO (taken,
 * not on a connection yet) or its connection's stream list (submitted to
 * nghttp2). A slot whose request already completed (timed out) stays on its
 * connection's list marked `done` until nghttp2 closes the stream, because
 * nghttp2 may still read the slot's header strings and the message body.
 * Live (not done) slots are also on the age list, oldest first, for deadlines.
 */
#ifndef CAPNS_H2_INTERNAL_H
#define CAPNS_H2_INTERNAL_H

#include "proxy_tunnel.h"
#include "sender_internal.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <stddef.h>
#include <sys/socket.h>

#define H2_WBUF_SIZE (64 * 1024)    /* one SSL_write per fill: many requests per record */
#define H2_RBUF_SIZE (64 * 1024)
#define H2_BODY_MAX 512             /* APNs error bodies are ~40 bytes */
#define H2_NV_MAX 13
#define H2_STREAM_WINDOW (1 << 20)
#define H2_CONN_WINDOW (16 << 20)

/* ------------------------------------------------ intrusive circular lists */

typedef struct h2_link {
    struct h2_link *prev, *next;
} h2_link;

#define H2_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void h2_link_init(h2_link *l) { l->prev = l->next = l; }
static inline int h2_link_empty(const h2_link *head) { return head->next == head; }

static inline void h2_link_push(h2_link *head, h2_link *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

static inline void h2_link_push_front(h2_link *head, h2_link *n) { h2_link_push(head->next, n); }

static inline void h2_link_remove(h2_link *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    h2_link_init(n);
}

/* ------------------------------------------------------------------ types */

#define H2_MEM_STEP 64              /* size classes of 64 bytes ... */
#define H2_MEM_CLASSES 16           /* ... up to 1 KiB; larger blocks are malloc's */
#define H2_MEM_KEEP_MAX (16u << 20) /* free bytes kept at most */

typedef struct h2_mem_pool {
    nghttp2_mem mem;
    struct h2_mem_free *free[H2_MEM_CLASSES];
    size_t kept;                /* bytes on the free lists */
} h2_mem_pool;

struct h2_conn;

typedef struct h2_stream {
    h2_link link;               /* free list, pending FIFO, or its connection's streams */
    h2_link age;                /* the age list while the request is live */
    capns_queued req;
    struct h2_conn *conn;       /* NULL while pending */
    int32_t stream_id;
    bool done;                  /* completed already; waiting for nghttp2 to let go */
    bool response_complete;     /* the server's END_STREAM arrived */
    int status;
    size_t body_sent, body_len;
    char apns_id[CAPNS_UUID_LEN + 1];
    char unique_id[CAPNS_UUID_LEN + 1];
    char path[sizeof "/3/device/" + CAPNS_TOKEN_MAX];
    char body[H2_BODY_MAX];
    nghttp2_nv nv[H2_NV_MAX];
} h2_stream;

/* TUNNELING: through the proxy's CONNECT (only with a proxy); the connect deadline
 * covers every state before READY. */
typedef enum { H2_CONNECTING, H2_TUNNELING, H2_HANDSHAKING, H2_READY, H2_DEAD } h2_conn_state;

typedef struct h2_transport h2_transport;

typedef struct h2_conn {
    h2_transport *t;
    h2_link link;               /* the transport's connections */
    h2_conn_state state;
    int fd;
    SSL *ssl;
    nghttp2_session *session;
    struct addrinfo *addrs, *addr;   /* resolved list, the one being tried */
    proxy_tunnel *tunnel;       /* with a proxy, until its CONNECT succeeded; then NULL */
    h2_link streams;
    size_t in_flight;           /* submitted to nghttp2 and not closed yet, done ones included */
    bool read_more;             /* the last read stopped at its budget: read again at once */
    uint64_t read_turn;         /* the loop turn of the last read */
    bool draining;              /* GOAWAY, stream ids used up, or retired after an answer
                                   (TooManyProviderTokenUpdates, Shutdown): no new streams here */
    bool lost;                  /* died by an error or the peer, not by our choice */
    bool answered;              /* at least one response came back */
    int64_t connect_deadline_ns;
    int64_t addr_deadline_ns;   /* this address's share of the connect timeout; 0 = none */
    int64_t last_read_ns;
    int64_t ping_sent_ns;       /* 0 = no PING outstanding */
    int32_t goaway_last_id;     /* -1 until a GOAWAY arrives */
    bool opened;                /* reached READY once */
    bool apns_id_named;         /* a request asked HPACK to index an apns-id (build_headers) */
    uint8_t *wbuf;
    size_t woff, wlen;
    char goaway_reason[64];
    char error[160];            /* why it died (without the endpoint) */
} h2_conn;

struct h2_transport {
    capns_sender *s;
    SSL_CTX *ssl_ctx;
    proxy_spec *proxy;          /* NULL = connect directly */
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *option;
    nghttp2_mem *mem;           /* the sessions' allocator; NULL = malloc */
    h2_mem_pool pool;
    int epfd, wakefd;
    atomic_bool wake_armed;     /* an eventfd write is already on its way */
    h2_stream *slots;
    size_t nslots, nfree, fresh;     /* slots[fresh..] never used yet: pages untouched */
    int64_t next_open_ns;       /* no new connection before this while another is usable */
    struct sockaddr_storage good_addr;  /* the address the last connection reached */
    socklen_t good_addrlen;             /* 0 = none yet */
    h2_link free, pending, age, conns;
    int64_t now_ns;             /* taken once per loop iteration */
    uint64_t turn;              /* loop iterations */
    char authority[320];
    size_t authority_len;
    char auth[CAPNS_JWT_MAX + 8];    /* "bearer <jwt>", "" when none was set */
    size_t auth_len;
    uint64_t auth_gen;
    uint8_t rbuf[H2_RBUF_SIZE];
};

/* ---------------------------------------------------------------- h2_tls.c */

SSL_CTX *h2_tls_ctx_new(const char *ca_file, const capns_identity *identity, char *err, size_t errlen);
/* Resolves and starts a non-blocking connect, from the address that last served (if
 * resolved again) then in getaddrinfo's order; -1 with c->error on failure. */
int h2_tcp_start(h2_conn *c, const char *host, uint16_t port);
/* After the socket turned writable: 1 connected, 0 still connecting, 2 that address
 * failed and a new socket is connecting to a later one, -1 every address failed.
 * Whenever a new socket is made (h2_tcp_start, 2 here, h2_tcp_next) it must be
 * added to epoll: it may carry the closed one's number, but not its registration. */
int h2_tcp_finish(h2_conn *c);
/* Gives up on the address being tried (its share of the connect timeout ran out)
 * for the next one: 0 a new socket is connecting, -1 no address left. */
int h2_tcp_next(h2_conn *c);
int h2_tls_start(h2_conn *c, const char *host);
/* 1 handshake done and h2 negotiated, 0 in progress, -1 failed with c->error. */
int h2_tls_handshake(h2_conn *c);

/* ---------------------------------------------------------------- h2_mem.c */

/* An empty pool; returns the allocator to give nghttp2 (NULL under AddressSanitizer:
 * malloc itself). Single-threaded: every session using it lives on one thread. */
nghttp2_mem *h2_mem_init(h2_mem_pool *p);
/* Frees the kept blocks; no session may use the pool any more. */
void h2_mem_release(h2_mem_pool *p);

/* ------------------------------------------------------------ h2_session.c */

/* The callbacks and options every session of the transport shares; false when out of memory. */
bool h2_session_setup(h2_transport *t);
int h2_session_start(h2_conn *c);
/* Opens a stream for st and moves it onto c's list; a negative nghttp2 error leaves
 * st where it was (NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE also marks c draining). */
int h2_session_submit(h2_conn *c, h2_stream *st);
/* Reads until the socket is drained (0), or until budget bytes were read when budget
 * is not 0 (1: more may wait); -1 on EOF or error (c->error set). */
int h2_session_read(h2_conn *c, size_t budget);
/* Writes what nghttp2 has to send, batched; -1 on error (c->error set). */
int h2_session_write(h2_conn *c);
uint32_t h2_session_max_streams(h2_conn *c);

/* ----------------------------------------------------------- transport_h2.c */

/* Completes a live slot's request (the caller fills in the record) and marks the slot
 * done; the slot stays on its list until h2_stream_free. */
capns_completion *h2_stream_complete(h2_transport *t, h2_stream *st, capns_outcome outcome);
capns_completion *h2_stream_fail(h2_transport *t, h2_stream *st, capns_outcome outcome,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Takes the slot off its list and back to the free list. */
void h2_stream_free(h2_transport *t, h2_stream *st);

#endif
