/*
 * fuzz_mock_judge.c - the mock's request handling (Sources/CAPNsMock/judge.c:
 * header capture, the verdict, recording, the answer) behind a real nghttp2
 * server session, without a socket: bytes go in with nghttp2_session_mem_recv
 * exactly as conn.c feeds them after TLS.
 *
 * Two input forms, chosen by the first byte:
 *   'R' + bytes      raw HTTP/2 frames after the client preface: hostile
 *                    framing, HPACK garbage, tiny frames, huge headers.
 *   anything else    requests as text, encoded by an nghttp2 client session:
 *                        :method: POST
 *                        :path: /3/device/<token>
 *                        authorization: @JWT@
 *                        apns-topic: com.mendmyi.repairminder
 *                        <blank line>
 *                        {"aps":{}}
 *                    requests separated by a line "--"; a value "@JWT@" becomes
 *                    "bearer <a valid token>", so the checks after the
 *                    provider token are reached.
 */
#include "capns.h"
#include "mock_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REQUESTS 8
#define ROUNDS 32

/* ------------------------------------------------------- server side */

static mock_conn *conn_open(capns_mock *m)
{
    mock_conn *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->loop = &m->loops[0];
    c->state = C_OPEN;
    c->team = -1;
    c->id = 1;
    c->rng = 1;
    c->loop->now_ns = mock__now_ns();
    if (nghttp2_session_server_new2(&c->h2, m->callbacks, c, m->h2_options) != 0)
        abort();
    /* As conn.c's start_session: one stream until the first success. */
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, m->cfg.initial_streams}};
    c->advertised = m->cfg.initial_streams;
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 1);
    return c;
}

/* As mock__conn_close, minus the socket: nghttp2 does not report stream
 * closes on delete, so the streams go back to the loop's free list here. */
static void conn_close(mock_conn *c)
{
    while (c->streams) {
        mock_stream *s = c->streams;
        c->streams = s->next;
        mock__stream_free(c->loop, s);
    }
    nghttp2_session_del(c->h2);
    free(c->jwt);
    free(c);
}

/* The server's pending output, handed to the client (or dropped when NULL). */
static size_t pump(nghttp2_session *from, nghttp2_session *to)
{
    size_t moved = 0;
    for (;;) {
        const uint8_t *out;
        ssize_t n = nghttp2_session_mem_send(from, &out);
        if (n <= 0)
            return moved;
        moved += (size_t)n;
        if (to && nghttp2_session_mem_recv(to, out, (size_t)n) < 0)
            return moved;
    }
}

static void raw(capns_mock *m, const uint8_t *data, size_t size)
{
    mock_conn *c = conn_open(m);
    static const char preface[] = NGHTTP2_CLIENT_MAGIC;
    if (nghttp2_session_mem_recv(c->h2, (const uint8_t *)preface, sizeof preface - 1) >= 0 &&
        nghttp2_session_mem_recv(c->h2, data, size) >= 0)
        pump(c->h2, NULL);
    conn_close(c);
}

/* ---------------------------------------------------- text requests */


/* Headers up to a blank line, then the body up to a "--" line or the end. */
static void parse_request(const uint8_t **p, const uint8_t *end, fixture_text_request *r, char *bearer, size_t blen)
{
    const uint8_t *line;
    size_t len;
    while (fixture_next_line(p, end, &line, &len) && len > 0) {
        nghttp2_nv *nv = fixture_add_header(r, line, len);
        if (!nv)
            continue;
        if (nv->valuelen == 5 && memcmp(nv->value, "@JWT@", 5) == 0) {
            nv->value = (uint8_t *)bearer;
            nv->valuelen = blen;
        }
    }
    r->body = *p;
    const uint8_t *sep = memmem(*p, (size_t)(end - *p), "\n--\n", 4);
    r->body_len = (size_t)((sep ? sep : end) - *p);
    *p = sep ? sep + 4 : end;
}

static void text(capns_mock *m, const uint8_t *data, size_t size)
{
    char bearer[CAPNS_JWT_MAX + 8];
    int blen = snprintf(bearer, sizeof bearer, "bearer %s", fixture_jwt());
    fixture_text_request reqs[MAX_REQUESTS];
    size_t n = 0;
    for (const uint8_t *p = data, *end = data + size; p < end && n < MAX_REQUESTS; n++) {
        memset(&reqs[n], 0, sizeof reqs[n]);
        parse_request(&p, end, &reqs[n], bearer, (size_t)blen);
    }

    nghttp2_session_callbacks *cbs;
    nghttp2_session *client;
    if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_session_client_new(&client, cbs, NULL) != 0)
        abort();
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, NULL, 0);
    for (size_t i = 0; i < n; i++) {
        nghttp2_data_provider body = {.source.ptr = &reqs[i], .read_callback = fixture_read_body};
        nghttp2_submit_request(client, NULL, reqs[i].nv, reqs[i].n, reqs[i].body_len ? &body : NULL, NULL);
    }

    mock_conn *c = conn_open(m);
    for (int round = 0; round < ROUNDS; round++) {
        c->loop->now_ns = mock__now_ns();
        if (pump(client, c->h2) + pump(c->h2, client) == 0)
            break;
    }
    conn_close(c);
    nghttp2_session_del(client);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    capns_mock *m = fixture_mock();
    if (size > 0 && data[0] == 'R')
        raw(m, data + 1, size - 1);
    else
        text(m, data, size);
    return 0;
}
