/*
 * transport_h2.c - the fast transport: HTTP/2 driven directly on nghttp2 over
 * OpenSSL, in one epoll loop on the sender thread (the model is nghttp2's h2load).
 *
 * One loop iteration: wait for a socket, the wake eventfd or the nearest deadline;
 * read what arrived; take new requests from the sender queue into the pending
 * FIFO; end what passed its deadline; move pending requests onto connections
 * while each stays under the server's SETTINGS_MAX_CONCURRENT_STREAMS; write each
 * connection's frames in one batch; close dead connections; open connections when
 * work waits; hand the completions to Swift in one batch.
 *
 * Failure policy: a connection that cannot be set up fails the requests waiting
 * for it with CONNECT_FAILED when no other connection can take them; there is no
 * retry loop here, the Swift layer decides. A connection lost in use ends its
 * streams NOT_PROCESSED; its pending requests wait for another or a new one.
 */
#include "h2_internal.h"

#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define TAKE_BATCH 256
#define SUBMIT_ROUND 32                     /* streams per connection per round-robin turn */
#define PING_ACK_MAX_NS (10LL * 1000000000) /* PING ack wait: the interval, capped here */
#define REOPEN_DELAY_NS (1000000000LL)      /* after a failed setup, while others serve */
#define MS (1000000LL)
/* A turn reads at most this much before it sends: with a thousand answers waiting, new
 * requests leave after each batch of answers, not after all of them (the server idled
 * for ~2 ms while per-event callers' requests waited behind a long read). */
#define READ_BUDGET (16 * 1024)

/* Iterates the connections; the body may close (free) the current one. */
#define FOR_EACH_CONN(t, c)                                                          \
    for (h2_conn *c = conn_at(t, (t)->conns.next), *c##_next = conn_at_next(t, c); c; \
         c = c##_next, c##_next = conn_at_next(t, c))

static h2_conn *conn_at(h2_transport *t, h2_link *l)
{
    return l == &t->conns ? NULL : H2_CONTAINER(l, h2_conn, link);
}

static h2_conn *conn_at_next(h2_transport *t, h2_conn *c)
{
    return c ? conn_at(t, c->link.next) : NULL;
}

/* ---------------------------------------------------------------- slots */

capns_completion *h2_stream_complete(h2_transport *t, h2_stream *st, capns_outcome outcome)
{
    h2_link_remove(&st->age);
    st->done = true;
    return capns__complete(t->s, &st->req, outcome);
}

capns_completion *h2_stream_fail(h2_transport *t, h2_stream *st, capns_outcome outcome,
                                 const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    h2_link_remove(&st->age);
    st->done = true;
    return capns__fail(t->s, &st->req, outcome, "%s", why);
}

void h2_stream_free(h2_transport *t, h2_stream *st)
{
    h2_link_remove(&st->link);
    if (st->req.message)        /* kept by abandon() for nghttp2's sake */
        capns_message_release(st->req.message);
    st->req.message = NULL;
    h2_link_push(&t->free, &st->link);
    t->nfree++;
}

static h2_stream *slot_get(h2_transport *t)
{
    h2_stream *st;
    if (!h2_link_empty(&t->free)) {
        st = H2_CONTAINER(t->free.next, h2_stream, link);
        h2_link_remove(&st->link);
    } else {
        st = &t->slots[t->fresh++];
        h2_link_init(&st->link);
        h2_link_init(&st->age);
    }
    t->nfree--;
    return st;
}

/* Ends the request of a stream nghttp2 still holds. nghttp2 may yet read the
 * message body and header strings, so the slot keeps a message reference until
 * the stream closes (h2_stream_free releases it). */
static void abandon(h2_transport *t, h2_stream *st, capns_outcome outcome, const char *why)
{
    capns_message *m = st->req.message;
    capns_message_retain(m);
    h2_stream_fail(t, st, outcome, "%s", why);
    st->req.message = m;
}

/* The age list stays in submit order whatever the take order: a resend taken ahead
 * of older requests (capns_sender_resubmit) goes behind them here, or its later
 * deadline would hide theirs from expire_requests, which reads only the head. */
static void age_insert(h2_transport *t, h2_stream *st)
{
    h2_link *at = t->age.prev;
    while (at != &t->age && H2_CONTAINER(at, h2_stream, age)->req.submitted_ns > st->req.submitted_ns)
        at = at->prev;
    h2_link_push(at->next, &st->age);     /* right after at */
}

/* Only as many as there are free slots: the slots bound what we hold. Resends
 * go ahead of the pending requests not sent yet, in their order. */
static void take_requests(h2_transport *t)
{
    capns_queued batch[TAKE_BATCH];
    h2_link *ahead = &t->pending;   /* the last resend placed */
    while (t->nfree) {
        size_t want = t->nfree < TAKE_BATCH ? t->nfree : TAKE_BATCH;
        size_t n = capns__take(t->s, batch, want);
        for (size_t i = 0; i < n; i++) {
            h2_stream *st = slot_get(t);
            st->req = batch[i];
            st->conn = NULL;
            st->done = false;
            if (st->req.resend) {
                h2_link_push(ahead->next, &st->link);
                ahead = &st->link;
            } else {
                h2_link_push(&t->pending, &st->link);
            }
            age_insert(t, st);
        }
        if (n < want)
            break;
    }
}

static void fail_pending(h2_transport *t, capns_outcome outcome, const char *why)
{
    while (!h2_link_empty(&t->pending)) {
        h2_stream *st = H2_CONTAINER(t->pending.next, h2_stream, link);
        h2_stream_fail(t, st, outcome, "%s", why);
        h2_stream_free(t, st);
    }
}

/* ---------------------------------------------------------- connections */

static bool usable(const h2_conn *c)
{
    return c->state != H2_DEAD && !c->draining;
}

static int usable_count(h2_transport *t)
{
    int n = 0;
    FOR_EACH_CONN(t, c) n += usable(c);
    return n;
}

static void conn_dead(h2_conn *c, bool lost)
{
    c->state = H2_DEAD;
    c->lost = lost;
}

static void conn_watch(h2_conn *c)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
    if (epoll_ctl(c->t->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        snprintf(c->error, sizeof c->error, "epoll: cannot watch the socket");
        conn_dead(c, false);
    }
}

/* A new socket is connecting to c->addr: watch it, and give it an equal share of
 * the connect time left, so that one address that never answers cannot spend it
 * all before the others are tried (curl splits its timeout the same way). */
static void conn_connecting(h2_conn *c)
{
    conn_watch(c);
    c->addr_deadline_ns = 0;
    if (!c->connect_deadline_ns)
        return;
    int64_t n = 0;
    for (const struct addrinfo *a = c->addr; a; a = a->ai_next)
        n++;
    if (n > 1)
        c->addr_deadline_ns = c->t->now_ns + (c->connect_deadline_ns - c->t->now_ns) / n;
}

static h2_conn *conn_open(h2_transport *t)
{
    const capns_sender_config *cfg = &t->s->cfg;
    h2_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->t = t;
    c->fd = -1;
    c->goaway_last_id = -1;
    h2_link_init(&c->streams);
    h2_link_push(&t->conns, &c->link);
    c->state = H2_CONNECTING;
    if (cfg->connect_timeout_ms > 0)
        c->connect_deadline_ns = t->now_ns + cfg->connect_timeout_ms * MS;
    c->wbuf = malloc(H2_WBUF_SIZE);
    if (!c->wbuf) {
        snprintf(c->error, sizeof c->error, "out of memory");
        conn_dead(c, false);
    } else if (t->proxy && !(c->tunnel = proxy_tunnel_new(t->proxy))) {
        snprintf(c->error, sizeof c->error, "out of memory");
        conn_dead(c, false);
    } else if (h2_tcp_start(c, t->proxy ? t->proxy->host : cfg->host, t->proxy ? t->proxy->port : cfg->port) != 0) {
        conn_dead(c, false);
    } else {
        conn_connecting(c);
    }
    return c;
}

/* Ends whatever is still live on c with outcome, then frees c. */
static void conn_close(h2_transport *t, h2_conn *c, capns_outcome outcome)
{
    if (c->opened && c->lost)
        CAPNS_STAT_ADD(t->s, connections_lost, 1);
    nghttp2_session_del(c->session);    /* calls no callbacks: the slots are ours to end */
    while (!h2_link_empty(&c->streams)) {
        h2_stream *st = H2_CONTAINER(c->streams.next, h2_stream, link);
        if (!st->done) {
            h2_stream_fail(t, st, outcome, "connection lost: %s", c->error);
            if (outcome == CAPNS_NOT_PROCESSED)     /* sent; the server may have acted */
                CAPNS_STAT_ADD(t->s, lost_in_flight, 1);
        }
        h2_stream_free(t, st);
    }
    SSL_free(c->ssl);
    proxy_tunnel_free(c->tunnel);
    if (c->fd >= 0)
        close(c->fd);
    if (c->addrs)
        freeaddrinfo(c->addrs);
    free(c->wbuf);
    h2_link_remove(&c->link);
    free(c);
}

/* Socket events: connect, then (with a proxy) CONNECT through it, then handshake,
 * then reads. */
static void conn_event(h2_transport *t, h2_conn *c)
{
    if (c->state == H2_CONNECTING) {
        int rv = h2_tcp_finish(c);
        if (rv == 2)
            conn_connecting(c);         /* refused: on to the next address */
        if (rv != 1) {
            if (rv < 0)
                conn_dead(c, false);
            return;
        }
        c->state = H2_TUNNELING;        /* passed straight through without a proxy */
    }
    if (c->state == H2_TUNNELING) {
        int rv = c->tunnel ? proxy_tunnel_step(c->tunnel, c->fd, c->error, sizeof c->error) : 1;
        if (rv == 0)
            return;
        if (rv < 0) {
            conn_dead(c, false);
            return;
        }
        proxy_tunnel_free(c->tunnel);   /* the socket is the tunnel now: TLS with the host */
        c->tunnel = NULL;
        if (h2_tls_start(c, t->s->cfg.host) != 0) {
            conn_dead(c, false);
            return;
        }
        c->state = H2_HANDSHAKING;
    }
    if (c->state == H2_HANDSHAKING) {
        int rv = h2_tls_handshake(c);
        if (rv == 0)
            return;
        if (rv < 0 || h2_session_start(c) != 0) {
            conn_dead(c, false);
            return;
        }
        c->state = H2_READY;
        c->opened = true;
        c->last_read_ns = t->now_ns;
        CAPNS_STAT_ADD(t->s, connections_opened, 1);
        /* fall through: the server's SETTINGS may already sit in OpenSSL's buffer */
    }
    /* A close after GOAWAY, once our streams below its last-stream-id are done, is orderly. */
    if (c->state != H2_READY)
        return;
    c->read_turn = t->turn;
    int rv = h2_session_read(c, READ_BUDGET);
    c->read_more = rv > 0;
    if (rv < 0)
        conn_dead(c, !(c->draining && c->in_flight == 0));
}

/* Closes dead connections. One that never served (setup failed, or closed before
 * any answer) fails the pending requests when no other connection can take them:
 * reconnecting for them is the Swift layer's call, not a loop in here. */
static void reap(h2_transport *t)
{
    FOR_EACH_CONN(t, c) {
        if (c->state != H2_DEAD)
            continue;
        bool failed_setup = !c->answered;
        char why[200];
        snprintf(why, sizeof why, "%s%s", c->opened ? "connection closed before any answer: " : "",
                 c->error);
        /* Died on the way to the proxy (resolve, refused, timed out): say which hop. */
        if (c->tunnel && strncmp(c->error, "proxy ", 6) != 0)
            snprintf(why, sizeof why, "proxy %s: %s", t->proxy->label, c->error);
        conn_close(t, c, CAPNS_NOT_PROCESSED);
        if (failed_setup) {
            t->next_open_ns = t->now_ns + REOPEN_DELAY_NS;
            if (!usable_count(t))
                fail_pending(t, CAPNS_CONNECT_FAILED, why);
        }
    }
}

/* Connections are opened lazily, when requests wait, up to cfg.connections usable. */
static void ensure_connections(h2_transport *t)
{
    while (!h2_link_empty(&t->pending)) {
        int n = usable_count(t);
        if (n >= t->s->cfg.connections || (n && t->now_ns < t->next_open_ns))
            return;
        h2_conn *c = conn_open(t);
        if (!c) {
            fail_pending(t, CAPNS_CONNECT_FAILED, "out of memory");
            return;
        }
        if (c->state == H2_DEAD)
            reap(t);
    }
}

/* -------------------------------------------------------------- sending */

static void refresh_authorization(h2_transport *t)
{
    if (capns__authorization_generation(t->s) == t->auth_gen)
        return;
    t->auth_gen = capns__authorization(t->s, t->auth, sizeof t->auth);
    t->auth_len = strlen(t->auth);
}

/* Up to max pending requests onto c while it stays under the server's limit. */
static size_t submit_some(h2_transport *t, h2_conn *c, size_t max)
{
    size_t n = 0;
    uint32_t limit = h2_session_max_streams(c);
    if (t->s->cfg.max_streams > 0 && (uint32_t)t->s->cfg.max_streams < limit)
        limit = (uint32_t)t->s->cfg.max_streams;
    while (n < max && !c->draining && c->in_flight < limit && !h2_link_empty(&t->pending)) {
        h2_stream *st = H2_CONTAINER(t->pending.next, h2_stream, link);
        int rv = h2_session_submit(c, st);
        if (rv == 0) {
            n++;
        } else if (!c->draining) {
            h2_stream_fail(t, st, CAPNS_NOT_PROCESSED, "cannot start a stream: %s",
                           nghttp2_strerror(rv));
            h2_stream_free(t, st);
        }
    }
    return n;
}

/* Round-robin, so that several connections share a burst. */
static void distribute(h2_transport *t)
{
    size_t moved = 1;
    while (moved && !h2_link_empty(&t->pending)) {
        moved = 0;
        FOR_EACH_CONN(t, c) {
            if (c->state == H2_READY)
                moved += submit_some(t, c, SUBMIT_ROUND);
        }
    }
}

/* A write failed: the server has closed. Answers it sent before closing (all of
 * them, after its GOAWAY) may still wait in the socket; reading them first keeps
 * them from being counted lost and sent twice. The write's error stays the reason. */
static void salvage_answers(h2_conn *c)
{
    char why[sizeof c->error];
    memcpy(why, c->error, sizeof why);
    h2_session_read(c, 0);
    memcpy(c->error, why, sizeof why);
}

static void pump(h2_transport *t)
{
    refresh_authorization(t);
    distribute(t);
    FOR_EACH_CONN(t, c) {
        if (c->state != H2_READY)
            continue;
        if (h2_session_write(c) < 0) {
            salvage_answers(c);
            conn_dead(c, true);
        } else if (c->draining && c->in_flight == 0 && c->woff == c->wlen) {
            if (!c->error[0])
                snprintf(c->error, sizeof c->error, "closed after GOAWAY");
            conn_dead(c, false);
        } else if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session)) {
            snprintf(c->error, sizeof c->error, "HTTP/2 session ended");
            conn_dead(c, true);
        }
    }
}

/* ------------------------------------------------------------ deadlines */

static int64_t ping_ack_ns(const h2_transport *t)
{
    int64_t ns = t->s->cfg.ping_interval_ms * MS;
    return ns < PING_ACK_MAX_NS ? ns : PING_ACK_MAX_NS;
}

static void expire_requests(h2_transport *t)
{
    int ms = t->s->cfg.request_timeout_ms;
    while (ms > 0 && !h2_link_empty(&t->age)) {
        h2_stream *st = H2_CONTAINER(t->age.next, h2_stream, age);
        if (st->req.submitted_ns + ms * MS > t->now_ns)
            return;
        char why[96];
        snprintf(why, sizeof why, "no answer within %d ms", ms);
        if (!st->conn) {
            h2_stream_fail(t, st, CAPNS_TIMED_OUT, "%s (still waiting for a stream)", why);
            h2_stream_free(t, st);
            continue;
        }
        abandon(t, st, CAPNS_TIMED_OUT, why);
        nghttp2_submit_rst_stream(st->conn->session, NGHTTP2_FLAG_NONE, st->stream_id, NGHTTP2_CANCEL);
    }
}

/* With every slot held, requests wait in the sender's queue, where no slot's
 * deadline watches them. */
static void expire_queued(h2_transport *t)
{
    int ms = t->s->cfg.request_timeout_ms;
    if (ms > 0 && t->nfree == 0)
        capns__expire_queued(t->s, t->now_ns - ms * MS);
}

static void expire_connections(h2_transport *t)
{
    const capns_sender_config *cfg = &t->s->cfg;
    FOR_EACH_CONN(t, c) {
        if (c->state == H2_CONNECTING && c->addr_deadline_ns && t->now_ns >= c->addr_deadline_ns &&
            t->now_ns < c->connect_deadline_ns) {
            snprintf(c->error, sizeof c->error, "connect: no answer from an address within its share of %d ms",
                     cfg->connect_timeout_ms);
            if (h2_tcp_next(c) == 0)
                conn_connecting(c);
            else
                conn_dead(c, false);
        } else if (c->state < H2_READY && c->connect_deadline_ns && t->now_ns >= c->connect_deadline_ns) {
            if (c->state == H2_TUNNELING)
                snprintf(c->error, sizeof c->error, "proxy %s did not answer CONNECT within %d ms",
                         t->proxy->label, cfg->connect_timeout_ms);
            else
                snprintf(c->error, sizeof c->error, "connect timed out after %d ms", cfg->connect_timeout_ms);
            conn_dead(c, false);
        } else if (c->state == H2_READY && cfg->ping_interval_ms > 0) {
            /* The ACK comes back in order behind whatever the server sent before it,
             * and a PING goes out only after a read-idle interval, so a server that
             * still has not acknowledged by the deadline is not merely busy: it reads
             * but does not answer (or the path lost it). Replace the connection. Other
             * frames read meanwhile do not excuse it: they once kept ping_sent_ns set
             * past its deadline, and next_timeout_ms() at 0, the loop spinning. */
            if (c->ping_sent_ns && t->now_ns >= c->ping_sent_ns + ping_ack_ns(t)) {
                snprintf(c->error, sizeof c->error, "PING not acknowledged within %lld ms",
                         (long long)(ping_ack_ns(t) / MS));
                conn_dead(c, true);
            } else if (!c->ping_sent_ns && t->now_ns >= c->last_read_ns + cfg->ping_interval_ms * MS) {
                nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, NULL);
                c->ping_sent_ns = t->now_ns;
            }
        }
    }
}

static int64_t earliest(int64_t a, int64_t b)
{
    return b && b < a ? b : a;
}

/* Milliseconds until the nearest deadline, for epoll_wait; -1 when there is none. */
static int next_timeout_ms(h2_transport *t)
{
    const capns_sender_config *cfg = &t->s->cfg;
    int64_t next = INT64_MAX;
    if (cfg->request_timeout_ms > 0 && !h2_link_empty(&t->age))
        next = H2_CONTAINER(t->age.next, h2_stream, age)->req.submitted_ns + cfg->request_timeout_ms * MS;
    if (cfg->request_timeout_ms > 0 && t->nfree == 0) {
        int64_t oldest = capns__oldest_queued_ns(t->s);
        if (oldest != INT64_MAX)
            next = earliest(next, oldest + cfg->request_timeout_ms * MS);
    }
    FOR_EACH_CONN(t, c) {
        if (c->state < H2_READY)
            next = earliest(earliest(next, c->connect_deadline_ns),
                            c->state == H2_CONNECTING ? c->addr_deadline_ns : 0);
        else if (c->state == H2_READY && cfg->ping_interval_ms > 0)
            next = earliest(next, c->ping_sent_ns ? c->ping_sent_ns + ping_ack_ns(t)
                                                  : c->last_read_ns + cfg->ping_interval_ms * MS);
    }
    if (next == INT64_MAX)
        return -1;
    int64_t ms = (next - capns__now_ns() + MS - 1) / MS;
    return ms < 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ------------------------------------------------------------- the loop */

/* Every request still held ends CANCELLED; each connection gets a GOAWAY. */
static void shutdown_all(h2_transport *t)
{
    FOR_EACH_CONN(t, c) {
        for (h2_link *l = c->streams.next; l != &c->streams; l = l->next) {
            h2_stream *st = H2_CONTAINER(l, h2_stream, link);
            if (!st->done)
                abandon(t, st, CAPNS_CANCELLED, "sender shut down before an answer came");
        }
        if (c->state == H2_READY) {
            nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR);
            h2_session_write(c);    /* best effort: the socket is not waited for */
        }
        conn_close(t, c, CAPNS_CANCELLED);
    }
    fail_pending(t, CAPNS_CANCELLED, "sender shut down before the request was sent");
    capns__flush(t->s);
}

/* Read first, disarm second: a wake that lands in between writes nothing (still
 * armed), but its request was queued before it, so the take_requests() that
 * follows sees it. Disarming first would let such a wake's write be swallowed
 * here and leave the flag armed with nothing to read: every later wake lost. */
static void drain_wake(h2_transport *t)
{
    uint64_t v;
    while (read(t->wakefd, &v, sizeof v) > 0) {
    }
    atomic_store(&t->wake_armed, false);
}

/* epoll_wait to the nearest deadline; at once while a read stopped at its budget. */
static int wait_events(h2_transport *t, struct epoll_event *events, int max)
{
    FOR_EACH_CONN(t, c) {
        if (c->read_more && c->state == H2_READY)
            return epoll_wait(t->epfd, events, max, 0);
    }
    return epoll_wait(t->epfd, events, max, next_timeout_ms(t));
}

static void h2_run(void *impl)
{
    h2_transport *t = impl;
    struct epoll_event events[64];
    /* OpenSSL writes with write(2): a peer's reset would raise SIGPIPE and kill the
     * process. Blocked on this thread (ours), the write fails with EPIPE instead. */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    for (;;) {
        int n = wait_events(t, events, 64);
        t->now_ns = capns__now_ns();
        t->turn++;
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr)
                conn_event(t, events[i].data.ptr);
            else
                drain_wake(t);
        }
        /* Edge-triggered: a read stopped at its budget gets no new event for what is left. */
        FOR_EACH_CONN(t, c) {
            if (c->read_more && c->read_turn != t->turn)
                conn_event(t, c);
        }
        if (capns__stopping(t->s))
            break;
        take_requests(t);
        expire_requests(t);
        expire_queued(t);
        expire_connections(t);
        pump(t);
        reap(t);
        ensure_connections(t);
        capns__flush(t->s);
        capns__run_posted(t->s);
    }
    shutdown_all(t);
}

/* -------------------------------------------------------------- the ops */

static void h2_wake(void *impl)
{
    h2_transport *t = impl;
    if (!atomic_exchange(&t->wake_armed, true)) {
        uint64_t one = 1;
        ssize_t rv = write(t->wakefd, &one, sizeof one);
        (void)rv;   /* only fails when the counter is full, which is a wake anyway */
    }
}

static void h2_destroy(void *impl)
{
    h2_transport *t = impl;
    if (!t)
        return;
    if (t->epfd >= 0)
        close(t->epfd);
    if (t->wakefd >= 0)
        close(t->wakefd);
    SSL_CTX_free(t->ssl_ctx);
    proxy_spec_free(t->proxy);
    nghttp2_session_callbacks_del(t->callbacks);
    nghttp2_option_del(t->option);
    h2_mem_release(&t->pool);   /* every session was deleted with its connection */
    free(t->slots);
    free(t);
}

/* ":authority": brackets around an IPv6 literal, the port unless it is 443. */
static void set_authority(h2_transport *t, const char *host, uint16_t port)
{
    const char *l = strchr(host, ':') ? "[" : "", *r = *l ? "]" : "";
    if (port == 443)
        snprintf(t->authority, sizeof t->authority, "%s%s%s", l, host, r);
    else
        snprintf(t->authority, sizeof t->authority, "%s%s%s:%u", l, host, r, (unsigned)port);
    t->authority_len = strlen(t->authority);
}

static void *h2_create(capns_sender *s, char *err, size_t errlen)
{
    h2_transport *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->s = s;
    t->epfd = t->wakefd = -1;
    atomic_init(&t->wake_armed, false);
    h2_link_init(&t->free);
    h2_link_init(&t->pending);
    h2_link_init(&t->age);
    h2_link_init(&t->conns);
    set_authority(t, s->cfg.host, s->cfg.port);
    t->mem = h2_mem_init(&t->pool);
    t->nslots = t->nfree = (size_t)s->cfg.max_outstanding;
    t->slots = calloc(t->nslots, sizeof *t->slots);  /* pages touched only as slots get used */
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (!t->slots || !h2_session_setup(t) || t->epfd < 0 || t->wakefd < 0 ||
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->wakefd, &ev) != 0) {
        snprintf(err, errlen, "nghttp2 transport: out of resources");
        h2_destroy(t);
        return NULL;
    }
    t->ssl_ctx = h2_tls_ctx_new(s->cfg.ca_file, s->cfg.identity, err, errlen);
    if (!t->ssl_ctx) {
        h2_destroy(t);
        return NULL;
    }
    if (proxy_configured(&s->cfg) && !(t->proxy = proxy_spec_new(&s->cfg, err, errlen))) {
        h2_destroy(t);
        return NULL;
    }
    return t;
}

const capns_transport_ops capns_h2_transport = {"nghttp2", h2_create, h2_run, h2_wake, h2_destroy};
