/*
 * h2_session.c - one connection's nghttp2 client session: requests out as
 * HEADERS (+ DATA), responses in, and the bytes between nghttp2 and OpenSSL.
 *
 * Writes are batched: nghttp2's send callback only appends to the connection's
 * 64 KiB buffer, which then goes out in one SSL_write (one TLS record run per
 * many requests). Reads take 64 KiB at a time until the socket is drained, as
 * the loop's epoll is edge-triggered.
 *
 * A stream closed by nghttp2 ends its request here (on_stream_close), unless
 * the transport already ended it (a deadline); never with an RST_STREAM of
 * ours after a normal completion, which APNs counts toward rapid reset.
 */
#include "h2_internal.h"

#include <errno.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------- requests */

#define NV_STATIC (NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)

static size_t add_nv(nghttp2_nv *nv, size_t n, const char *name, size_t namelen,
                     const char *value, size_t valuelen, uint8_t flags)
{
    nv[n] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, namelen, valuelen, flags};
    return n + 1;
}

#define ADD_LIT(nv, n, name, value, vlen, flags) \
    add_nv(nv, n, name, sizeof name - 1, value, vlen, flags)

/* Values that outlive the stream are not copied: the slot's path and apns-id, the
 * message's strings (the slot holds a message reference until nghttp2 lets go) and
 * the authority. Per-request values are never indexed: they would only push the
 * lasting ones (topic, push type) out of the HPACK table. The one exception is a
 * connection's first apns-id: once its entry is in the table, every later apns-id
 * names its header by that entry's index (one byte) instead of spelling "apns-id",
 * and its value still goes unindexed. nghttp2 never indexes authorization, whatever
 * the flags. The authorization is copied because a new token may replace the buffer
 * while a request is queued. */
static size_t build_headers(h2_conn *c, h2_stream *st)
{
    const h2_transport *t = c->t;
    const capns_message *m = st->req.message;
    const uint8_t once = NV_STATIC | NGHTTP2_NV_FLAG_NO_INDEX;
    nghttp2_nv *nv = st->nv;
    size_t n = 0, toklen = st->req.token_len;

    n = ADD_LIT(nv, n, ":method", "POST", 4, NV_STATIC);
    n = ADD_LIT(nv, n, ":scheme", "https", 5, NV_STATIC);
    n = ADD_LIT(nv, n, ":authority", t->authority, t->authority_len, NV_STATIC);
    if (m->channel_id) {
        /* Broadcast: the message's path, its channel; the bundle id is in the path. */
        n = ADD_LIT(nv, n, ":path", m->path, m->path_len, NV_STATIC);
    } else {
        memcpy(st->path, "/3/device/", 10);
        memcpy(st->path + 10, st->req.token, toklen + 1);
        n = ADD_LIT(nv, n, ":path", st->path, 10 + toklen, once);
    }
    if (t->auth_len)
        n = ADD_LIT(nv, n, "authorization", t->auth, t->auth_len, NGHTTP2_NV_FLAG_NO_COPY_NAME);
    if (m->channel_id)
        n = ADD_LIT(nv, n, "apns-channel-id", m->channel_id, m->channel_id_len, NV_STATIC);
    else if (m->topic[0])
        n = ADD_LIT(nv, n, "apns-topic", m->topic, m->topic_len, NV_STATIC);
    if (m->push_type)
        n = ADD_LIT(nv, n, "apns-push-type", m->push_type, m->push_type_len, NV_STATIC);
    if (st->req.apns_id[0] && m->channel_id)
        n = ADD_LIT(nv, n, "apns-request-id", st->req.apns_id, st->req.apns_id_len, once);
    else if (st->req.apns_id[0]) {
        n = ADD_LIT(nv, n, "apns-id", st->req.apns_id, st->req.apns_id_len, c->apns_id_named ? once : NV_STATIC);
        c->apns_id_named = true;
    }
    if (m->priority[0])
        n = ADD_LIT(nv, n, "apns-priority", m->priority, m->priority_len, NV_STATIC);
    if (m->expiration[0])
        n = ADD_LIT(nv, n, "apns-expiration", m->expiration, m->expiration_len, NV_STATIC);
    if (m->collapse_id)
        n = ADD_LIT(nv, n, "apns-collapse-id", m->collapse_id, m->collapse_id_len, NV_STATIC);
    n = ADD_LIT(nv, n, "content-length", m->content_length, m->content_length_len, NV_STATIC);
    return n;
}

static ssize_t read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    h2_stream *st = source->ptr;
    const capns_message *m = st->req.message;
    size_t n = m->payload_len - st->body_sent;
    if (n > length)
        n = length;
    memcpy(buf, m->payload + st->body_sent, n);
    st->body_sent += n;
    if (st->body_sent == m->payload_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

int h2_session_submit(h2_conn *c, h2_stream *st)
{
    size_t n = build_headers(c, st);
    nghttp2_data_provider body = {.source.ptr = st, .read_callback = read_body};
    st->body_sent = 0;
    int32_t id = nghttp2_submit_request(c->session, NULL, st->nv, n,
                                        st->req.message->payload_len ? &body : NULL, st);
    if (id < 0) {
        if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE)
            c->draining = true;
        return id;
    }
    st->stream_id = id;
    st->conn = c;
    st->status = 0;
    st->body_len = 0;
    st->response_complete = false;
    st->apns_id[0] = st->unique_id[0] = '\0';
    h2_link_remove(&st->link);
    h2_link_push(&c->streams, &st->link);
    c->in_flight++;
    CAPNS_STAT_ADD(c->t->s, requests_started, 1);
    CAPNS_STAT_MAX(c->t->s, peak_streams, (uint32_t)c->in_flight);
    return 0;
}

uint32_t h2_session_max_streams(h2_conn *c)
{
    return nghttp2_session_get_remote_settings(c->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

/* ------------------------------------------------------------ responses */

static h2_stream *live_stream(nghttp2_session *session, int32_t stream_id)
{
    h2_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
    return st && !st->done ? st : NULL;
}

static void copy_id(char *dst, const uint8_t *value, size_t len)
{
    if (len > CAPNS_UUID_LEN)
        len = CAPNS_UUID_LEN;
    memcpy(dst, value, len);
    dst[len] = '\0';
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    h2_stream *st = frame->hd.type == NGHTTP2_HEADERS ? live_stream(session, frame->hd.stream_id) : NULL;
    if (!st)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0 && valuelen == 3)
        st->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
    else if (namelen == 7 && memcmp(name, "apns-id", 7) == 0)
        copy_id(st->apns_id, value, valuelen);
    else if (namelen == 15 && memcmp(name, "apns-request-id", 15) == 0)
        copy_id(st->apns_id, value, valuelen);      /* a broadcast's id */
    else if (namelen == 14 && memcmp(name, "apns-unique-id", 14) == 0)
        copy_id(st->unique_id, value, valuelen);
    return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data,
                   size_t len, void *user_data)
{
    h2_stream *st = live_stream(session, stream_id);
    if (!st)
        return 0;
    size_t room = sizeof st->body - st->body_len;
    if (len > room)
        len = room;     /* a reason fits well within; the rest is not ours to keep */
    memcpy(st->body + st->body_len, data, len);
    st->body_len += len;
    return 0;
}

static void on_goaway(h2_conn *c, const nghttp2_goaway *g)
{
    c->draining = true;
    c->goaway_last_id = g->last_stream_id;
    capns_completion tmp = {.reason = ""};
    capns__parse_error_body((const char *)g->opaque_data, g->opaque_data_len, &tmp);
    snprintf(c->goaway_reason, sizeof c->goaway_reason, "%s", tmp.reason);
    CAPNS_STAT_ADD(c->t->s, goaways_received, 1);
}

static int on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    h2_conn *c = user_data;
    switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            CAPNS_STAT_SET(c->t->s, server_max_streams, h2_session_max_streams(c));
        break;
    case NGHTTP2_GOAWAY:
        on_goaway(c, &frame->goaway);
        break;
    case NGHTTP2_PING:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK)
            c->ping_sent_ns = 0;
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            h2_stream *st = live_stream(session, frame->hd.stream_id);
            if (st)
                st->response_complete = true;
        }
        break;
    }
    return 0;
}

/* Answers that say this connection will not serve the retry: TooManyProviderTokenUpdates
 * (it keeps its old provider token, and every request with the new one would get the
 * same answer; a fresh connection takes the new one as its first), UnrelatedKeyIdInToken
 * (it belongs to the key of its first push; a fresh connection takes this key) and
 * Shutdown. No new streams go here; it closes once the ones in flight are answered. */
static void retire_if_told(h2_conn *c, const char *reason)
{
    if (c->draining || (strcmp(reason, "TooManyProviderTokenUpdates") != 0 &&
                        strcmp(reason, "UnrelatedKeyIdInToken") != 0 && strcmp(reason, "Shutdown") != 0))
        return;
    c->draining = true;
    snprintf(c->error, sizeof c->error, "closed after %s", reason);
}

static void answer(h2_conn *c, h2_stream *st)
{
    capns_completion *r = h2_stream_complete(c->t, st, CAPNS_ANSWERED);
    r->status = st->status;
    memcpy(r->apns_id, st->apns_id, sizeof r->apns_id);
    memcpy(r->unique_id, st->unique_id, sizeof r->unique_id);
    if (st->body_len) {
        capns__parse_error_body(st->body, st->body_len, r);
        retire_if_told(c, r->reason);
    }
    c->answered = true;
}

/* No complete answer. REFUSED_STREAM (also how nghttp2 closes streams above a
 * GOAWAY's last-stream-id) says the server did not act on the request. Any other
 * reset says nothing of the kind: the server may have acted and lost its answer.
 * Both end NOT_PROCESSED, for the Swift layer to send again; the second kind is
 * counted (lost_in_flight), as its resend may deliver twice. The resend carries the
 * same apns-id, which keeps such a duplicate traceable. */
static void not_answered(h2_conn *c, h2_stream *st, uint32_t error_code)
{
    h2_transport *t = c->t;
    if (c->goaway_last_id >= 0 && st->stream_id > c->goaway_last_id)
        h2_stream_fail(t, st, CAPNS_NOT_PROCESSED, "not processed: above GOAWAY last-stream-id %d%s%s",
                       c->goaway_last_id, c->goaway_reason[0] ? ", " : "", c->goaway_reason);
    else if (error_code == NGHTTP2_REFUSED_STREAM)
        h2_stream_fail(t, st, CAPNS_NOT_PROCESSED, "not processed: stream refused (REFUSED_STREAM)");
    else {
        h2_stream_fail(t, st, CAPNS_NOT_PROCESSED, "stream reset without an answer (%s); it may have been processed",
                       nghttp2_http2_strerror(error_code));
        CAPNS_STAT_ADD(t->s, lost_in_flight, 1);
    }
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data)
{
    h2_conn *c = user_data;
    h2_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!st)
        return 0;
    c->in_flight--;
    if (!st->done) {
        if (st->response_complete && st->status > 0)
            answer(c, st);
        else
            not_answered(c, st, error_code);
    }
    h2_stream_free(c->t, st);
    return 0;
}

/* ------------------------------------------------------------ the bytes */

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t len, int flags,
                       void *user_data)
{
    h2_conn *c = user_data;
    size_t room = H2_WBUF_SIZE - c->wlen;
    if (!room)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (len > room)
        len = room;
    memcpy(c->wbuf + c->wlen, data, len);
    c->wlen += len;
    return (ssize_t)len;
}

/* 0 when the socket would block, -1 with c->error when the connection is gone. */
static int io_error(h2_conn *c, int rv, const char *what)
{
    int code = SSL_get_error(c->ssl, rv);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE)
        return 0;
    unsigned long e = ERR_peek_error();
    if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && !e && !errno)) {
        snprintf(c->error, sizeof c->error, "connection closed by the server");
    } else if (code == SSL_ERROR_SYSCALL && !e) {
        snprintf(c->error, sizeof c->error, "%s: %s", what, strerror(errno));
    } else {
        char buf[120];
        ERR_error_string_n(e, buf, sizeof buf);
        snprintf(c->error, sizeof c->error, "TLS %s: %s", what, buf);
    }
    ERR_clear_error();
    return -1;
}

int h2_session_read(h2_conn *c, size_t budget)
{
    h2_transport *t = c->t;
    for (size_t taken = 0;;) {
        if (budget && taken >= budget)
            return 1;
        ERR_clear_error();
        errno = 0;
        int n = SSL_read(c->ssl, t->rbuf, sizeof t->rbuf);
        if (n <= 0)
            return io_error(c, n, "read");
        CAPNS_STAT_ADD(t->s, bytes_received, (uint64_t)n);
        taken += (size_t)n;
        c->last_read_ns = t->now_ns;
        ssize_t rv = nghttp2_session_mem_recv(c->session, t->rbuf, (size_t)n);
        if (rv < 0) {
            snprintf(c->error, sizeof c->error, "HTTP/2: %s", nghttp2_strerror((int)rv));
            return -1;
        }
    }
}

int h2_session_write(h2_conn *c)
{
    for (;;) {
        if (c->woff == c->wlen) {
            c->woff = c->wlen = 0;
            int rv = nghttp2_session_send(c->session);
            if (rv != 0) {
                snprintf(c->error, sizeof c->error, "HTTP/2: %s", nghttp2_strerror(rv));
                return -1;
            }
            if (!c->wlen)
                return 0;
        }
        ERR_clear_error();
        errno = 0;
        int n = SSL_write(c->ssl, c->wbuf + c->woff, (int)(c->wlen - c->woff));
        if (n <= 0)
            return io_error(c, n, "write");
        c->woff += (size_t)n;
        CAPNS_STAT_ADD(c->t->s, bytes_sent, (uint64_t)n);
    }
}

/* ------------------------------------------------------------- sessions */

bool h2_session_setup(h2_transport *t)
{
    if (nghttp2_session_callbacks_new(&t->callbacks) != 0 || nghttp2_option_new(&t->option) != 0)
        return false;
    nghttp2_session_callbacks *cb = t->callbacks;
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    /* Until the server's SETTINGS arrive, assume APNs's opening limit of one stream. */
    nghttp2_option_set_peer_max_concurrent_streams(t->option, 1);
    return true;
}

int h2_session_start(h2_conn *c)
{
    if (nghttp2_session_client_new3(&c->session, c->t->callbacks, c, c->t->option, c->t->mem) != 0) {
        snprintf(c->error, sizeof c->error, "HTTP/2: cannot create a session");
        return -1;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
    };
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW) != 0) {
        snprintf(c->error, sizeof c->error, "HTTP/2: cannot send SETTINGS");
        return -1;
    }
    return 0;
}
