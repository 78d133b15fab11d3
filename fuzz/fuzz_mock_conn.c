/*
 * fuzz_mock_conn.c - the mock's connection layer (Sources/CAPNsMock/conn.c:
 * accept, the TLS handshake with ALPN h2, reads into the nghttp2 server session,
 * batched writes, GOAWAY and reset closes, lingering) with judge.c behind it,
 * over a real loopback TCP connection and real TLS, one connection per input.
 * The harness is the client and plays the loop thread: it calls
 * mock__conn_accept and mock__conn_io as loop_main would, fires the loop's
 * timers (delayed answers, idle checks, linger) with a clock it moves forward,
 * and applies runtime stream limits with server.c's own mock__loop_apply_limits, after the events.
 *
 * Every fault option has a mock of its own, picked by the input's first byte:
 * none, goaway_after, reset_after, settings drop and restore, idle timeout,
 * stall, latency + jitter + idle 500 + failure rates, expire_first_token and
 * no_ping_ack. Two teams with a key each, so token rotation
 * (TooManyProviderTokenUpdates), team switches and expiry are all reachable.
 *
 * Input: byte 0 the fault mode (% MODES); byte 1 flags: bit 0 raw, bit 1 raise the
 * stream limit at runtime mid-way, bit 2 the client closes gracefully (else RST);
 * then as fuzz_mock_judge.c: raw HTTP/2 frames after the preface, or requests as
 * text ("name: value" lines, a blank line, the body; "--" between requests), where
 * a value "@JWT@" is a valid token for team 1, "@JWT2@" another valid one for team 1
 * (a rotation), "@JWT3@" one for team 2 (a team switch), "@OLD@" an expired one.
 */
#include "capns.h"
#include "mock_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MODES 9
#define MAX_REQUESTS 8
#define ROUNDS 48
#define STEP_NS (5LL * 1000000)     /* the harness's clock moves 5 ms per round */

static void tweak(capns_mock_config *cfg, void *arg)
{
    switch ((int)(intptr_t)arg) {
    case 1: cfg->goaway_after = 2; break;
    case 2: cfg->reset_after = 2; break;
    case 3: cfg->settings_drop_after = 1; cfg->settings_drop_to = 1; cfg->settings_restore_after = 2; break;
    case 4: cfg->idle_timeout_ms = 10; break;
    case 5: cfg->stall = 1; break;
    case 6:
        cfg->latency_us = 7000; cfg->jitter_us = 5000; cfg->idle_500_after_ms = 10;
        cfg->rate_429 = 0.2; cfg->rate_500 = 0.1; cfg->rate_503 = 0.1; cfg->sandbox = 1;
        break;
    case 7: cfg->expire_first_token = 1; cfg->expire_first_token_after = 1; break;
    case 8: cfg->no_ping_ack = 1; cfg->initial_streams = 4; cfg->token_update_interval_s = -1; break;
    }
}

typedef struct {
    capns_mock *mock;
    char jwt[4][CAPNS_JWT_MAX + 8];      /* "bearer ..." */
} mode_state;

static mode_state modes[MODES];
static SSL_CTX *client_tls;

/* FUZZ_CONN_STATS=1: each mode's statistics at exit, to see what a corpus reaches. */
static void dump_stats(void)
{
    static char json[16384];
    for (int i = 0; i < MODES; i++) {
        capns_mock_stats_json(modes[i].mock, json, sizeof json);
        fprintf(stderr, "mode %d: %s\n", i, json);
    }
}

static void setup(void)
{
    if (client_tls)
        return;
    if (getenv("FUZZ_CONN_STATS"))
        atexit(dump_stats);
    /* conn.c writes to sockets the client reset; the loop thread blocks SIGPIPE,
     * and this harness is that thread. */
    signal(SIGPIPE, SIG_IGN);
    char jwt[CAPNS_JWT_MAX];
    static const struct { const char *key, *team; int64_t age; } tokens[4] = {
        {FIXTURE_KEY_ID, FIXTURE_TEAM_ID, 0}, {FIXTURE_KEY_ID, FIXTURE_TEAM_ID, 30},
        {FIXTURE_KEY2_ID, FIXTURE_TEAM2_ID, 0}, {FIXTURE_KEY_ID, FIXTURE_TEAM_ID, 7200},
    };
    for (int i = 0; i < MODES; i++) {
        modes[i].mock = fixture_mock_with(tweak, (void *)(intptr_t)i);
        for (int k = 0; k < 4; k++) {
            fixture_jwt_for(tokens[k].key, tokens[k].team, tokens[k].age, jwt);
            snprintf(modes[i].jwt[k], sizeof modes[i].jwt[k], "bearer %s", jwt);
        }
    }
    client_tls = SSL_CTX_new(TLS_client_method());
    static const unsigned char alpn[] = "\x02h2";
    SSL_CTX_set_alpn_protos(client_tls, alpn, sizeof alpn - 1);
    SSL_CTX_set_verify(client_tls, SSL_VERIFY_NONE, NULL);   /* the server's side is under test */
}

/* ------------------------------------------------------- the loop's part */

static mock_conn *find(mock_loop *loop, mock_conn *c)
{
    for (mock_conn *x = loop->conns; x; x = x->next)
        if (x == c)
            return x;
    return NULL;
}

/* Loopback is not synchronous everywhere (gVisor's netstack hands bytes over on a
 * goroutine, milliseconds later on a busy machine): wait for what the other side
 * just wrote, returning as soon as it is there. */
static void wait_readable(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    poll(&pfd, 1, ms);
}

/* One wakeup of the loop for c, if it is still on the loop; wait (a little) for
 * the client's bytes first when it just wrote some. */
static void serve(mock_loop *loop, mock_conn *c, bool client_wrote)
{
    if (find(loop, c)) {
        if (client_wrote)
            wait_readable(c->fd, 50);
        mock__conn_io(c, EPOLLIN | EPOLLOUT);
    }
    mock__loop_fire_timers(loop);
}

/* --------------------------------------------------------- the client */


static void parse_request(const uint8_t **p, const uint8_t *end, fixture_text_request *r, mode_state *ms)
{
    static const char *const names[4] = {"@JWT@", "@JWT2@", "@JWT3@", "@OLD@"};
    const uint8_t *line;
    size_t len;
    while (fixture_next_line(p, end, &line, &len) && len > 0) {
        nghttp2_nv *nv = fixture_add_header(r, line, len);
        if (!nv)
            continue;
        for (int k = 0; k < 4; k++) {
            if (nv->valuelen == strlen(names[k]) && memcmp(nv->value, names[k], nv->valuelen) == 0) {
                nv->value = (uint8_t *)ms->jwt[k];
                nv->valuelen = strlen(ms->jwt[k]);
            }
        }
    }
    r->body = *p;
    const uint8_t *sep = memmem(*p, (size_t)(end - *p), "\n--\n", 4);
    r->body_len = (size_t)((sep ? sep : end) - *p);
    *p = sep ? sep + 4 : end;
}

static size_t client_written;       /* bytes, this input */

static ssize_t client_send(nghttp2_session *h2, const uint8_t *data, size_t len, int flags, void *ud)
{
    SSL *ssl = ud;
    ERR_clear_error();
    int n = SSL_write(ssl, data, (int)len);
    if (n > 0) {
        client_written += (size_t)n;
        return n;
    }
    int e = SSL_get_error(ssl, n);
    return e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ ? NGHTTP2_ERR_WOULDBLOCK
                                                                 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

/* Reads what the server sent; into the client session when there is one. */
static bool client_read(SSL *ssl, nghttp2_session *h2)
{
    uint8_t buf[16384];
    for (;;) {
        ERR_clear_error();
        int n = SSL_read(ssl, buf, sizeof buf);
        if (n <= 0) {
            int e = SSL_get_error(ssl, n);
            return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
        }
        if (h2 && nghttp2_session_mem_recv(h2, buf, (size_t)n) < 0)
            return false;
    }
}

/* Raw bytes out, as far as the socket takes them now. */
static void client_write_raw(SSL *ssl, const uint8_t **p, const uint8_t *end)
{
    while (*p < end) {
        size_t chunk = (size_t)(end - *p) < 4096 ? (size_t)(end - *p) : 4096;
        ERR_clear_error();
        int n = SSL_write(ssl, *p, (int)chunk);
        if (n <= 0)
            return;
        *p += n;
        client_written += (size_t)n;
    }
}

/* ----------------------------------------------------------- one input */

static int connect_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("fuzz_mock_conn: connect");
        abort();
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    setup();
    int mode = data[0] % MODES;
    uint8_t flags = data[1];
    const uint8_t *p = data + 2, *end = data + size;
    mode_state *ms = &modes[mode];
    client_written = 0;
    capns_mock *m = ms->mock;
    mock_loop *loop = &m->loops[0];
    loop->now_ns = mock__now_ns();

    int fd = connect_to(capns_mock_port(m));
    mock__conn_accept(loop);
    mock_conn *c = loop->conns;             /* accept puts the new one first */
    if (!c)
        abort();
    SSL *ssl = SSL_new(client_tls);
    SSL_set_fd(ssl, fd);
    SSL_set_connect_state(ssl);
    for (int i = 0; i < 20; i++) {
        ERR_clear_error();
        if (SSL_do_handshake(ssl) == 1)
            break;
        serve(loop, c, true);
        wait_readable(fd, 2);
    }

    nghttp2_session *client = NULL;
    fixture_text_request reqs[MAX_REQUESTS];
    size_t nreqs = 0;
    static const uint8_t preface[] = NGHTTP2_CLIENT_MAGIC;
    const uint8_t *pre = preface, *pre_end = preface + sizeof preface - 1;
    if (!(flags & 1)) {
        size_t n = 0;
        for (const uint8_t *q = p; q < end && n < MAX_REQUESTS; n++) {
            memset(&reqs[n], 0, sizeof reqs[n]);
            parse_request(&q, end, &reqs[n], ms);
        }
        nghttp2_session_callbacks *cbs;
        if (nghttp2_session_callbacks_new(&cbs) != 0)
            abort();
        nghttp2_session_callbacks_set_send_callback(cbs, client_send);
        if (nghttp2_session_client_new(&client, cbs, ssl) != 0)
            abort();
        nghttp2_session_callbacks_del(cbs);
        nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, NULL, 0);
        nreqs = n;
    }

    for (int round = 0; round < ROUNDS; round++) {
        /* One request every few rounds: a first success can raise the one-stream
         * limit before the next, and a token change comes after the first token. */
        if (client && round % 4 == 0 && (size_t)(round / 4) < nreqs) {
            fixture_text_request *r = &reqs[round / 4];
            nghttp2_data_provider body = {.source.ptr = r, .read_callback = fixture_read_body};
            nghttp2_submit_request(client, NULL, r->nv, r->n, r->body_len ? &body : NULL, NULL);
        }
        size_t wrote = client_written;
        uint64_t out = atomic_load(&m->counters.bytes_out);
        if (client) {
            nghttp2_session_send(client);
        } else {
            client_write_raw(ssl, &pre, pre_end);
            if (pre == pre_end)
                client_write_raw(ssl, &p, end);
        }
        loop->now_ns += STEP_NS;
        serve(loop, c, client_written != wrote);
        if ((flags & 2) && round == ROUNDS / 3) {
            capns_mock_set_max_streams(m, 2 + (uint32_t)(flags >> 4));
            mock__loop_apply_limits(loop);
        }
        bool server_wrote = atomic_load(&m->counters.bytes_out) != out;
        if (server_wrote)
            wait_readable(fd, 50);
        if (!client_read(ssl, client) && !find(loop, c))
            break;
        /* Done when nothing moved, nothing is left to send and no timer waits. */
        if (!server_wrote && client_written == wrote && loop->timers.count == 0 &&
            (size_t)(round / 4) >= nreqs && (!client || !nghttp2_session_want_write(client)) &&
            (client || p == end))
            break;
    }

    /* The client leaves: an RST (no TIME_WAIT piling up over a run) or a close_notify
     * and FIN. Then the loop sees it, and every timer still held runs out. */
    if (flags & 4) {
        SSL_shutdown(ssl);
    } else {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(fd);
    SSL_free(ssl);
    if (client)
        nghttp2_session_del(client);
    for (int i = 0; i < 4 && find(loop, c); i++)
        serve(loop, c, true);
    loop->now_ns = INT64_MAX / 2;
    mock__loop_fire_timers(loop);
    while (loop->conns)
        mock__conn_close(loop->conns, false);
    mock_timer t;
    while (mock__timer_pop_due(&loop->timers, INT64_MAX, &t))
        mock__conn_release(t.conn);
    return 0;
}
