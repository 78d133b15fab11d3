/*
 * fuzz_h2_client.c - the nghttp2 transport's client session (Sources/CAPNs/
 * h2_session.c: header and body capture, GOAWAY, REFUSED_STREAM and reset
 * handling, the answer) fed a hostile server's byte stream, without a socket:
 * the fuzzer's bytes go into nghttp2_session_mem_recv exactly as h2_session_read
 * hands them over after TLS, and what the session writes is dropped.
 *
 * The slots, lists and completion path are the transport's own (h2_stream_fail,
 * h2_stream_free, capns__complete); the loop around them is a small copy of
 * transport_h2.c's: submit while under the server's stream limit, abandon a
 * request at its "deadline" (RST_STREAM, slot kept until nghttp2 closes the
 * stream), and close the connection at the end as conn_close does.
 *
 * The invariant checked: every request completes exactly once, whatever the
 * server sent (SETTINGS, odd pseudo-headers, huge or duplicate headers, DATA past
 * content-length, GOAWAY and RST_STREAM in every state, PING floods). ASan and
 * UBSan watch the memory: nghttp2 reads a slot's header strings and body until
 * the stream closes.
 *
 * Input: byte 0 picks how many requests (1..16); then operations, one byte each
 * (low 2 bits the kind), some followed by operands:
 *   0 feed  n = next byte + 1: that many bytes (or what is left) as server output
 *   1 pump  submit what fits, then let the session write (into the void)
 *   2 expire  next byte % requests: that request's deadline passes
 *   3 check  a session that wants neither to read nor write is dead: end here
 */
#include "h2_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REQUESTS 16

static uint8_t completed[MAX_REQUESTS];

static void on_complete(void *ctx, const capns_completion *batch, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (batch[i].tag >= MAX_REQUESTS || completed[batch[i].tag]++) {
            fprintf(stderr, "request %llu completed twice\n", (unsigned long long)batch[i].tag);
            abort();
        }
    }
}

/* The parts of a capns_sender and an h2_transport the session code touches. */
static capns_sender *sender_new(size_t nslots)
{
    capns_sender *s = calloc(1, sizeof *s);
    s->cfg.max_outstanding = (int)nslots;
    s->cfg.on_complete = on_complete;
    s->cfg.host = "127.0.0.1";
    s->batch = calloc(256, sizeof *s->batch);
    snprintf(s->endpoint, sizeof s->endpoint, "fuzz:443");
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

static h2_transport *transport_new(capns_sender *s, size_t nslots)
{
    h2_transport *t = calloc(1, sizeof *t);
    t->s = s;
    h2_link_init(&t->free);
    h2_link_init(&t->pending);
    h2_link_init(&t->age);
    h2_link_init(&t->conns);
    t->nslots = nslots;
    t->slots = calloc(nslots, sizeof *t->slots);
    snprintf(t->authority, sizeof t->authority, "api.push.apple.com");
    t->authority_len = strlen(t->authority);
    snprintf(t->auth, sizeof t->auth, "bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln");
    t->auth_len = strlen(t->auth);
    if (!h2_session_setup(t))
        abort();
    return t;
}

/* As transport_h2.c's abandon(): the request ends, nghttp2 keeps the slot. */
static void abandon(h2_transport *t, h2_stream *st)
{
    capns_message *m = st->req.message;
    capns_message_retain(m);
    h2_stream_fail(t, st, CAPNS_TIMED_OUT, "deadline");
    st->req.message = m;
}

/* Writes what nghttp2 has into the connection's buffer and drops it. */
static int drain(h2_conn *c)
{
    for (int rounds = 0; rounds < 64; rounds++) {
        c->woff = c->wlen = 0;
        if (nghttp2_session_send(c->session) != 0)
            return -1;
        if (!c->wlen)
            return 0;
    }
    return 0;
}

static void submit_some(h2_transport *t, h2_conn *c)
{
    uint32_t limit = h2_session_max_streams(c);
    while (!c->draining && c->in_flight < limit && !h2_link_empty(&t->pending)) {
        h2_stream *st = H2_CONTAINER(t->pending.next, h2_stream, link);
        int rv = h2_session_submit(c, st);
        if (rv != 0 && !c->draining) {
            h2_stream_fail(t, st, CAPNS_NOT_PROCESSED, "cannot start a stream");
            h2_stream_free(t, st);
        } else if (rv != 0) {
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = 1 + data[0] % MAX_REQUESTS;
    const uint8_t *p = data + 1, *end = data + size;
    memset(completed, 0, sizeof completed);

    capns_sender *s = sender_new(n);
    h2_transport *t = transport_new(s, n);
    static const uint8_t payload[] = "{\"aps\":{\"alert\":\"hi\"}}";
    capns_message_spec spec = {.topic = "com.example.app", .push_type = "alert", .priority = 10,
                               .expiration = -1, .collapse_id = "c1",
                               .payload = payload, .payload_len = sizeof payload - 1};
    capns_message *m = capns_message_create(&spec);
    if (!m)
        abort();
    for (size_t i = 0; i < n; i++) {
        h2_stream *st = &t->slots[i];
        h2_link_init(&st->link);
        h2_link_init(&st->age);
        st->req = (capns_queued){.tag = i, .message = m, .submitted_ns = (int64_t)i};
        capns_message_retain(m);
        st->req.token_len = (uint16_t)snprintf(st->req.token, sizeof st->req.token, "%064zx", i);
        st->req.apns_id_len =
            (uint16_t)snprintf(st->req.apns_id, sizeof st->req.apns_id, "00000000-0000-4000-8000-%012zx", i);
        h2_link_push(&t->pending, &st->link);
        h2_link_push(&t->age, &st->age);
    }
    t->nfree = 0;

    h2_conn *c = calloc(1, sizeof *c);
    c->t = t;
    c->fd = -1;
    c->goaway_last_id = -1;
    c->wbuf = malloc(H2_WBUF_SIZE);
    h2_link_init(&c->streams);
    h2_link_push(&t->conns, &c->link);
    if (h2_session_start(c) != 0)
        abort();
    submit_some(t, c);
    bool dead = drain(c) != 0;

    while (!dead && p < end) {
        uint8_t op = *p++;
        switch (op & 3) {
        case 0: {
            size_t len = p < end ? (size_t)*p++ + 1 : 0;
            if (len > (size_t)(end - p))
                len = (size_t)(end - p);
            /* one read: h2_session_read hands nghttp2 whatever SSL_read returned */
            dead = nghttp2_session_mem_recv(c->session, p, len) < 0;
            p += len;
            break;
        }
        case 1:
            submit_some(t, c);
            dead = drain(c) != 0;
            break;
        case 2: {
            size_t k = p < end ? *p++ % n : 0;
            h2_stream *st = &t->slots[k];
            if (st->done || !st->req.message)
                break;          /* ended already */
            if (!st->conn) {
                h2_stream_fail(t, st, CAPNS_TIMED_OUT, "deadline, still pending");
                h2_stream_free(t, st);
            } else {
                abandon(t, st);
                nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->stream_id, NGHTTP2_CANCEL);
            }
            break;
        }
        case 3:
            dead = !nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session);
            break;
        }
        capns__flush(s);
    }

    /* conn_close: nghttp2 reports no more closes; the slots are ours to end. */
    nghttp2_session_del(c->session);
    while (!h2_link_empty(&c->streams)) {
        h2_stream *st = H2_CONTAINER(c->streams.next, h2_stream, link);
        if (!st->done)
            h2_stream_fail(t, st, CAPNS_NOT_PROCESSED, "connection lost");
        h2_stream_free(t, st);
    }
    while (!h2_link_empty(&t->pending)) {
        h2_stream *st = H2_CONTAINER(t->pending.next, h2_stream, link);
        h2_stream_fail(t, st, CAPNS_CONNECT_FAILED, "no connection");
        h2_stream_free(t, st);
    }
    capns__flush(s);
    for (size_t i = 0; i < n; i++) {
        if (completed[i] != 1) {
            fprintf(stderr, "request %zu completed %d times\n", i, completed[i]);
            abort();
        }
    }

    capns_message_release(m);
    free(c->wbuf);
    free(c);
    nghttp2_session_callbacks_del(t->callbacks);
    nghttp2_option_del(t->option);
    free(t->slots);
    free(t);
    pthread_mutex_destroy(&s->lock);
    free(s->batch);
    free(s);
    return 0;
}
