/*
 * conn.c - one client connection on a loop thread: accept, TLS handshake
 * with ALPN h2, the nghttp2 server session, reads and batched writes.
 *
 * Reads go straight from SSL_read into nghttp2_session_mem_recv, one TLS
 * record a turn, and that record's answers leave before the next is read.
 * Writes collect nghttp2_session_mem_send's chunks into one buffer and hand it
 * to SSL_write in one call, so a burst of answers is a few TLS records, not one
 * per answer.
 *
 * Invariant: a connection is freed only when it is closed and no timer holds
 * it (refs == 0); closing twice is harmless.
 */
#include "mock_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define OUT_FLUSH_AT (1 << 16)      /* hand the batch to TLS once this much is queued */
/* How long a closing connection waits for the client's FIN. The close that ends the
 * wait sends RST when the client's late requests are still unread, and a RST makes
 * the client's kernel discard the answers still waiting in its receive buffer: so
 * the wait must outlast a client that is slow to read (a loaded machine), or answers
 * already given are lost and their requests sent again. */
#define LINGER_NS (10000LL * 1000000)

static void close_gracefully(mock_conn *c);

static void set_events(mock_conn *c, bool want_out)
{
    if (c->want_out == want_out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want_out;
}

static void conn_free(mock_conn *c)
{
    free(c->jwt);
    mock__client_cert_free(&c->cert);
    free(c->out);
    free(c);
}

void mock__conn_release(mock_conn *c)
{
    if (--c->refs == 0 && c->state == C_CLOSED)
        conn_free(c);
}

void mock__conn_close(mock_conn *c, bool reset)
{
    if (c->state == C_CLOSED)
        return;
    capns_mock *m = c->loop->mock;
    if (reset) {
        /* SO_LINGER 0: close sends RST instead of FIN, as a crashed peer would. */
        struct linger lg = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        MOCK_ADD(m, resets_done, 1);
        if (m->cfg.record_cap)
            mock__records_reset(&m->records, c->id);
    }
    epoll_ctl(c->loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    SSL_free(c->ssl);
    /* nghttp2_session_del does not report stream closes: free ours here. */
    while (c->streams) {
        mock_stream *s = c->streams;
        c->streams = s->next;
        mock__stream_free(c->loop, s);
    }
    nghttp2_session_del(c->h2);
    c->h2 = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->loop->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->state != C_LINGER)   /* a lingering one no longer counts */
        atomic_fetch_sub_explicit(&m->counters.connections_current, 1, memory_order_relaxed);
    c->state = C_CLOSED;
    if (c->refs == 0)
        conn_free(c);
}

/* ------------------------------------------------------------- accept */

void mock__conn_accept(mock_loop *loop)
{
    capns_mock *m = loop->mock;
    for (;;) {
        int fd = accept4(loop->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;             /* EAGAIN, or a transient error: the next event retries */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        mock_conn *c = calloc(1, sizeof *c);
        SSL *ssl = c ? SSL_new(m->tls) : NULL;
        if (!ssl) {
            free(c);
            close(fd);
            continue;
        }
        SSL_set_fd(ssl, fd);
        SSL_set_accept_state(ssl);
        c->loop = loop;
        c->fd = fd;
        c->ssl = ssl;
        c->state = C_HANDSHAKE;
        c->team = -1;
        c->key = -1;
        c->id = atomic_fetch_add(&m->next_conn_id, 1) + 1;
        /* Each connection its own stream of choices, fixed by seed and accept order. */
        uint64_t k = c->id * 0xd1b54a32d192ed03ull;
        c->rng = m->cfg.seed ^ mock__rng_next(&k);
        c->last_read_ns = loop->now_ns;
        c->next = loop->conns;
        if (loop->conns)
            loop->conns->prev = c;
        loop->conns = c;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev);
        MOCK_ADD(m, connections_accepted, 1);
        MOCK_ADD(m, connections_current, 1);
    }
}

/* ---------------------------------------------------------- handshake */

static bool start_session(mock_conn *c)
{
    capns_mock *m = c->loop->mock;
    const unsigned char *alpn = NULL;
    unsigned alpn_len = 0;
    SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
    if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0)
        return false;           /* no ALPN at all: the select callback never ran */
    if (nghttp2_session_server_new2(&c->h2, m->callbacks, c, m->h2_options) != 0)
        return false;
    /* APNs with token auth: one stream until the first success. */
    /* No RFC 7540 priority tree: APNs has no use for it, and with a thousand
     * sibling streams its upkeep costs more than the rest of a request. */
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, m->cfg.initial_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    c->advertised = m->cfg.initial_streams;
    mock__client_cert_read(c);
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 3);
    c->settings_out = 1;
    /* A thousand streams of payload in flight outgrow the 64 KiB default. */
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 1 << 24);
    c->state = C_OPEN;
    if (m->cfg.idle_timeout_ms > 0) {
        mock_timer t = {c->loop->now_ns + m->cfg.idle_timeout_ms * 1000000, c, 0, T_IDLE};
        if (mock__timer_push(&c->loop->timers, t) == 0)
            c->refs++;
    }
    return true;
}

/* Returns true once the session is up; false while the handshake goes on or
 * when it failed (then c may be freed already). */
static bool handshake(mock_conn *c)
{
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1 && start_session(c))
        return true;
    int e = r == 1 ? SSL_ERROR_SSL : SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        set_events(c, e == SSL_ERROR_WANT_WRITE);
        return false;
    }
    MOCK_ADD(c->loop->mock, handshakes_failed, 1);
    mock__conn_close(c, false);
    return false;
}

/* ------------------------------------------------------------ reading */

/* One TLS record (at most 16 KiB, some fifty requests) a call, then its answers
 * leave (mock__conn_io flushes) before the next is read: APNs answers each request
 * as it is done, and a mock that read on while a thousand requests waited held
 * every answer back until the last was read, leaving the client idle for
 * milliseconds at a time. Returns false when the connection is finished (peer
 * closed or error). */
static bool read_some(mock_conn *c)
{
    capns_mock *m = c->loop->mock;
    ERR_clear_error();
    int n = SSL_read(c->ssl, c->loop->rbuf, sizeof c->loop->rbuf);
    if (n <= 0) {
        int e = SSL_get_error(c->ssl, n);
        return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
    }
    MOCK_ADD(m, bytes_in, (uint64_t)n);
    c->last_read_ns = c->loop->now_ns;
    if (nghttp2_session_mem_recv(c->h2, c->loop->rbuf, (size_t)n) < 0)
        return false;
    return true;                /* more may be waiting: level-triggered epoll calls again */
}

/* ------------------------------------------------------------ writing */

static bool out_reserve(mock_conn *c, size_t more)
{
    if (c->out_len + more <= c->out_cap)
        return true;
    size_t cap = c->out_cap ? c->out_cap : OUT_FLUSH_AT * 2;
    while (cap < c->out_len + more)
        cap *= 2;
    uint8_t *p = realloc(c->out, cap);
    if (!p)
        return false;
    c->out = p;
    c->out_cap = cap;
    return true;
}

/* Collects nghttp2's frames into the batch buffer; false on error. */
static bool fill(mock_conn *c)
{
    while (c->out_len < OUT_FLUSH_AT) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0)
            return false;
        if (n == 0)
            break;
        if (!out_reserve(c, (size_t)n))
            return false;
        memcpy(c->out + c->out_len, data, (size_t)n);
        c->out_len += (size_t)n;
    }
    return true;
}

/* SSL_write the batch; true when it all went, false when TLS wants to wait
 * (*dead set on error). */
static bool drain(mock_conn *c, bool *dead)
{
    while (c->out_off < c->out_len) {
        ERR_clear_error();
        int n = SSL_write(c->ssl, c->out + c->out_off, (int)(c->out_len - c->out_off));
        if (n <= 0) {
            int e = SSL_get_error(c->ssl, n);
            *dead = !(e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ);
            return false;
        }
        c->out_off += (size_t)n;
        MOCK_ADD(c->loop->mock, bytes_out, (uint64_t)n);
    }
    c->out_off = c->out_len = 0;
    return true;
}

void mock__conn_flush(mock_conn *c)
{
    if (c->state != C_OPEN)
        return;
    bool dead = false;
    for (;;) {
        if (!drain(c, &dead)) {
            if (dead)
                mock__conn_close(c, false);
            else
                set_events(c, true);
            return;
        }
        if (!fill(c)) {
            mock__conn_close(c, false);
            return;
        }
        if (c->out_len == 0)
            break;
    }
    set_events(c, false);
    if (c->reset_pending)
        mock__conn_close(c, true);
    else if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))
        close_gracefully(c);            /* after a GOAWAY, every stream answered */
}

/* ------------------------------------------------------------ closing */

/* Every stream answered after our GOAWAY: close as a server should. A plain
 * close() with the client's late requests still unread sends RST, and a client
 * that meets the reset while writing can lose answers already on their way (and
 * send them again). So: close_notify and FIN now, then drop whatever still
 * comes until the client closes too, or LINGER_NS passes. */
static void close_gracefully(mock_conn *c)
{
    mock_timer t = {c->loop->now_ns + LINGER_NS, c, 0, T_LINGER};
    if (mock__timer_push(&c->loop->timers, t) != 0) {
        mock__conn_close(c, false);
        return;
    }
    c->refs++;
    ERR_clear_error();
    SSL_shutdown(c->ssl);       /* best effort: a full socket buffer just skips it */
    shutdown(c->fd, SHUT_WR);
    c->state = C_LINGER;
    set_events(c, false);
    atomic_fetch_sub_explicit(&c->loop->mock->counters.connections_current, 1, memory_order_relaxed);
}

static void drop_input(mock_conn *c)
{
    uint8_t *buf = c->loop->rbuf;
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof c->loop->rbuf, 0);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        mock__conn_close(c, false);     /* the client's FIN, or its reset */
        return;
    }
}

/* ---------------------------------------------------------------- I/O */

void mock__conn_io(mock_conn *c, uint32_t events)
{
    if (c->state == C_LINGER) {
        drop_input(c);
        return;
    }
    if (c->state == C_HANDSHAKE && !handshake(c))
        return;
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !read_some(c)) {
        mock__conn_close(c, false);
        return;
    }
    mock__conn_flush(c);
}

/* ------------------------------------------------------- limits, idle */

void mock__conn_apply_limit(mock_conn *c)
{
    capns_mock *m = c->loop->mock;
    uint32_t limit = !c->raised ? m->cfg.initial_streams
                   : c->dropped ? m->cfg.settings_drop_to
                   : atomic_load(&m->max_streams);
    if (limit == c->advertised || c->state != C_OPEN)
        return;
    nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limit};
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, &iv, 1) == 0) {
        c->advertised = limit;
        c->settings_out++;
        MOCK_ADD(m, settings_sent, 1);
    }
}

void mock__conn_idle_check(mock_conn *c)
{
    capns_mock *m = c->loop->mock;
    if (c->state != C_OPEN || c->goaway_sent)
        return;
    int64_t idle_ns = m->cfg.idle_timeout_ms * 1000000;
    int64_t due = c->last_read_ns + idle_ns;
    if (c->loop->now_ns < due) {
        mock_timer t = {due, c, 0, T_IDLE};
        if (mock__timer_push(&c->loop->timers, t) == 0)
            c->refs++;
        return;
    }
    static const char debug[] = "{\"reason\":\"IdleTimeout\"}";
    int32_t last = nghttp2_session_get_last_proc_stream_id(c->h2);
    nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR, (const uint8_t *)debug,
                          sizeof debug - 1);
    c->goaway_sent = true;
    c->goaway_last = last;
    MOCK_ADD(m, goaways_sent, 1);
    mock__conn_flush(c);
}
