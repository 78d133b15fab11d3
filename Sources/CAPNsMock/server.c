/*
 * server.c - the mock's life cycle: configuration copy, TLS context, provider
 * keys, listeners, and one epoll loop per thread.
 *
 * Each loop thread has its own listening socket on the same port
 * (SO_REUSEPORT when there are several: the kernel spreads connections), its own epoll set, timer
 * heap and stream pool, so loops never share a connection. An eventfd wakes a
 * loop for stop and for a changed stream limit.
 */
#include "mock_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

int64_t mock__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mock__wall_s(void)
{
    return (int64_t)time(NULL);
}

/* splitmix64: tiny, seedable, good enough to pick faults reproducibly. */
uint64_t mock__rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- TLS */

/* ALPN: h2 or nothing. Refusing here fails the handshake with an alert. */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg)
{
    for (unsigned i = 0; i + 1 <= inlen && i + 1 + in[i] <= inlen; i += 1 + in[i]) {
        if (in[i] == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
            *out = in + i + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static SSL_CTX *make_tls(const char *cert, const char *key, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        fail(err, errlen, "cannot create a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        fail(err, errlen, "cannot load the TLS certificate %s", cert);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        fail(err, errlen, "cannot load the TLS private key %s", key);
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        fail(err, errlen, "the TLS private key %s does not match the certificate %s", key, cert);
    } else {
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

/* A provider key as the mock needs it: any EC P-256 key, private (.p8) or
 * public PEM; only the public half is used. */
static EVP_PKEY *load_provider_key(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fail(err, errlen, "cannot open provider key %s: %s", path, strerror(errno));
        return NULL;
    }
    EVP_PKEY *key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    if (!key) {
        rewind(f);
        key = PEM_read_PUBKEY(f, NULL, NULL, NULL);
    }
    fclose(f);
    ERR_clear_error();
    char group[32] = "";
    size_t glen = 0;
    if (key && EVP_PKEY_is_a(key, "EC") &&
        EVP_PKEY_get_group_name(key, group, sizeof group, &glen) == 1 && strcmp(group, "prime256v1") == 0)
        return key;
    fail(err, errlen, "provider key %s is not an EC P-256 key in PEM", path);
    EVP_PKEY_free(key);
    return NULL;
}

/* ---------------------------------------------------------- listeners */

static bool is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/*
 * SO_REUSEPORT only when several loops share the port: a port-0 bind with it set
 * may be handed a port another reuseport listener of this user already holds
 * (Linux allows that), and then two mocks split one port's connections. For a
 * shared port 0 the port is first chosen by a probe bind without the option.
 */
static int listen_on(const char *host, uint16_t port, bool share, uint16_t *bound, char *err,
                     size_t errlen)
{
    if (share && port == 0) {
        uint16_t free_port = 0;
        int probe = listen_on(host, 0, false, &free_port, err, errlen);
        if (probe < 0)
            return -1;
        close(probe);
        port = free_port;
    }
    struct sockaddr_storage ss = {0};
    socklen_t sslen;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        sslen = sizeof *in4;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        sslen = sizeof *in6;
    } else {
        fail(err, errlen, "host %s is not a numeric IPv4 or IPv6 address", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (share && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 1024) != 0) {
        fail(err, errlen, "cannot listen on %s port %u: %s", host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &sslen);
    *bound = ntohs(ss.ss_family == AF_INET ? in4->sin_port : in6->sin6_port);
    return fd;
}

/* --------------------------------------------------------- the loops */

/* Answers due together leave together: one flush per connection after every due
 * timer has fired, not one SSL_write per answer. A client's requests arrive in
 * bursts (a window refilled at once), so their answers fall due in bursts; a flush
 * each cost ~5 us, and 1000 of them put the last answer of a burst ~5 ms behind
 * its due time (h2load measured 56 ms round trips at --latency 50ms). */
void mock__loop_fire_timers(mock_loop *loop)
{
    mock_timer t;
    bool answered = false;
    while (mock__timer_pop_due(&loop->timers, loop->now_ns, &t)) {
        mock_conn *c = t.conn;
        if (c->state == C_OPEN) {
            if (t.kind == T_ANSWER) {
                mock__judge_answer_due(c, t.stream_id);
                c->answers_due = answered = true;
            } else {
                mock__conn_idle_check(c);
            }
        } else if (c->state == C_LINGER && t.kind == T_LINGER) {
            mock__conn_close(c, false);
        }
        mock__conn_release(c);      /* the timer's reference */
    }
    /* An open connection is on the loop's list (and not freed): flush it there. */
    for (mock_conn *c = loop->conns, *next; answered && c; c = next) {
        next = c->next;
        if (c->answers_due) {
            c->answers_due = false;
            mock__conn_flush(c);
        }
    }
}

void mock__loop_apply_limits(mock_loop *loop)
{
    uint64_t ignored;
    if (read(loop->wake_fd, &ignored, sizeof ignored) < 0)
        return;
    uint32_t limit = atomic_load(&loop->mock->max_streams);
    if (limit == loop->seen_limit)
        return;
    loop->seen_limit = limit;
    for (mock_conn *c = loop->conns, *next; c; c = next) {
        next = c->next;
        mock__conn_apply_limit(c);
        mock__conn_flush(c);
    }
}

/* epoll_pwait2 waits to the nanosecond: --latency answers on time, where
 * epoll_wait's whole milliseconds made each up to 1 ms late. Kernels before 5.11
 * lack it (ENOSYS): then milliseconds, rounded up so a timer is never early. */
static int wait_events(mock_loop *loop, struct epoll_event *events, int max)
{
    static _Atomic bool no_pwait2;
    int64_t wait = mock__timer_wait_ns(&loop->timers, mock__now_ns());
    if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        struct timespec ts = {(time_t)(wait / 1000000000), (long)(wait % 1000000000)};
        int n = epoll_pwait2(loop->epfd, events, max, wait < 0 ? NULL : &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
    }
    return epoll_wait(loop->epfd, events, max, wait < 0 ? -1 : (int)((wait + 999999) / 1000000));
}

static void *loop_main(void *arg)
{
    mock_loop *loop = arg;
    capns_mock *m = loop->mock;
    struct epoll_event events[64];
    /* As transport_h2.c: a client's reset makes SSL_write's write(2) raise SIGPIPE,
     * which would kill the host process; blocked on this thread it is just EPIPE. */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    while (!atomic_load(&m->stopping)) {
        int n = wait_events(loop, events, 64);
        loop->now_ns = mock__now_ns();
        bool woken = false;
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == &loop->listen_fd)
                mock__conn_accept(loop);
            else if (p == &loop->wake_fd)
                woken = true;
            else
                mock__conn_io(p, events[i].events);
        }
        /* Only a connection's own event may free it inside the batch. apply_limits
         * writes to every connection, and one the client reset is closed and freed
         * there while its event may still sit later in events[]: so, like the
         * timers, it runs once the batch is done. */
        if (woken)
            mock__loop_apply_limits(loop);
        mock__loop_fire_timers(loop);
    }
    while (loop->conns)
        mock__conn_close(loop->conns, false);
    mock_timer t;
    while (mock__timer_pop_due(&loop->timers, INT64_MAX, &t))
        mock__conn_release(t.conn);
    return NULL;
}

static int loop_init(capns_mock *m, mock_loop *loop, int index, char *err, size_t errlen)
{
    loop->mock = m;
    loop->index = index;
    loop->seen_limit = atomic_load(&m->max_streams);
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    uint16_t bound = 0;
    loop->listen_fd = listen_on(m->host, m->port, m->cfg.threads > 1, &bound, err, errlen);
    if (loop->epfd < 0 || loop->wake_fd < 0 || loop->listen_fd < 0) {
        if (loop->listen_fd >= 0)
            fail(err, errlen, "cannot create epoll or eventfd: %s", strerror(errno));
        return -1;
    }
    m->port = bound;            /* the first listener picks the port, the rest share it */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &loop->listen_fd};
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->listen_fd, &ev);
    ev.data.ptr = &loop->wake_fd;
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wake_fd, &ev);
    return 0;
}

static void loop_free(mock_loop *loop)
{
    if (loop->epfd > 0)
        close(loop->epfd);
    if (loop->wake_fd > 0)
        close(loop->wake_fd);
    if (loop->listen_fd > 0)
        close(loop->listen_fd);
    while (loop->free_streams) {
        mock_stream *s = loop->free_streams;
        loop->free_streams = s->next;
        free(s);
    }
    free(loop->timers.items);
}

static void wake(mock_loop *loop)
{
    uint64_t one = 1;
    ssize_t r = write(loop->wake_fd, &one, sizeof one);
    (void)r;                    /* a full counter already means "wake up" */
}

/* ---------------------------------------------------------- the mock */

static char **copy_strings(const char *const *src, size_t n)
{
    char **out = calloc(n ? n : 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        out[i] = strdup(src[i]);
    return out;
}

static void free_strings(char **s, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        free(s[i]);
    free(s);
}

_Static_assert(MOCK_ENV_SANDBOX == CAPNS_MOCK_ENV_SANDBOX && MOCK_ENV_PRODUCTION == CAPNS_MOCK_ENV_PRODUCTION,
              "a key's environment and a certificate's are the same bits");

static int load_keys(capns_mock *m, const capns_mock_config *cfg, char *err, size_t errlen)
{
    m->keys = calloc(cfg->n_auth_keys ? cfg->n_auth_keys : 1, sizeof *m->keys);
    if (!m->keys)
        return -1;
    for (size_t i = 0; i < cfg->n_auth_keys; i++) {
        mock_key *k = &m->keys[i];
        const char *team = cfg->auth_keys[i].team_id;
        snprintf(k->kid, sizeof k->kid, "%s", cfg->auth_keys[i].key_id);
        if (!(k->pub = load_provider_key(cfg->auth_keys[i].path, err, errlen)))
            return -1;
        m->n_keys++;
        /* An APNs key belongs to one team: a token it signs for another is refused. */
        k->team = -1;
        for (size_t t = 0; team && t < m->n_teams && k->team < 0; t++)
            if (strcmp(m->teams[t], team) == 0)
                k->team = (int)t;
        if (!team && m->n_teams == 1)
            k->team = 0;
        if (team && k->team < 0) {
            fail(err, errlen, "provider key %s: team %s is not one of the configured teams", k->kid, team);
            return -1;
        }
        if (!team && m->n_teams > 1) {
            fail(err, errlen, "provider key %s: which team does it sign for? %zu teams are configured",
                 k->kid, m->n_teams);
            return -1;
        }
        /* Keys made since February 2025 may serve one environment, or only some topics. */
        k->environment = cfg->auth_keys[i].environment;
        if (k->environment != 0 && k->environment != MOCK_ENV_SANDBOX && k->environment != MOCK_ENV_PRODUCTION) {
            fail(err, errlen, "provider key %s: environment %d is neither sandbox nor production", k->kid,
                 k->environment);
            return -1;
        }
        size_t n_topics = cfg->auth_keys[i].n_topics;
        for (size_t t = 0; t < n_topics; t++)
            if (!cfg->auth_keys[i].topics || !cfg->auth_keys[i].topics[t] || !cfg->auth_keys[i].topics[t][0]) {
                fail(err, errlen, "provider key %s: an empty topic", k->kid);
                return -1;
            }
        if (n_topics) {
            if (!(k->topics = copy_strings(cfg->auth_keys[i].topics, n_topics)))
                return -1;
            k->n_topics = n_topics;
        }
    }
    return 0;
}

static void mock_free(capns_mock *m)
{
    for (int i = 0; i < m->n_loops; i++)
        loop_free(&m->loops[i]);
    free(m->loops);
    for (size_t i = 0; i < m->n_keys; i++) {
        EVP_PKEY_free(m->keys[i].pub);
        free_strings(m->keys[i].topics, m->keys[i].n_topics);
    }
    free(m->keys);
    free_strings(m->teams, m->n_teams);
    free_strings(m->topics, m->n_topics);
    if (m->tokens.slots)
        mock__tokens_free(&m->tokens);
    for (size_t i = 0; i < m->records.count; i++)
        mock__record_free(m->records.items[i]);
    free(m->records.items);
    free(m->records.reset_ids);
    mock__jwt_cache_free(&m->jwts);
    mock__channels_free(&m->channels);
    if (m->callbacks)
        nghttp2_session_callbacks_del(m->callbacks);
    if (m->h2_options)
        nghttp2_option_del(m->h2_options);
    SSL_CTX_free(m->tls);
    free(m);
}

capns_mock *capns_mock_create(const capns_mock_config *cfg, char *err, size_t errlen)
{
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    if (!cfg->allow_non_loopback && !is_loopback(host)) {
        fail(err, errlen, "refusing to bind %s: not a loopback address (allow_non_loopback is off)", host);
        return NULL;
    }
    if (!cfg->cert_file || !cfg->key_file) {
        fail(err, errlen, "a TLS certificate and its private key are required");
        return NULL;
    }
    capns_mock *m = calloc(1, sizeof *m);
    if (!m) {
        fail(err, errlen, "out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    snprintf(m->host, sizeof m->host, "%s", host);
    m->port = cfg->port;
    m->cfg.host = m->host;
    m->cfg.cert_file = m->cfg.key_file = NULL;      /* used here only */
    m->cfg.client_ca_file = NULL;
    m->cfg.auth_keys = NULL;
    if (!m->cfg.max_streams)
        m->cfg.max_streams = 1000;
    if (!m->cfg.initial_streams)
        m->cfg.initial_streams = 1;
    if (!m->cfg.token_update_interval_s)
        m->cfg.token_update_interval_s = 1200;
    if (m->cfg.threads < 1)
        m->cfg.threads = 1;
    atomic_init(&m->max_streams, m->cfg.max_streams);
    pthread_mutex_init(&m->records.lock, NULL);
    pthread_mutex_init(&m->jwts.lock, NULL);
    mock__channels_init(&m->channels);
    m->records.limit = cfg->record_cap;
    m->teams = copy_strings(cfg->teams, cfg->n_teams);
    m->topics = copy_strings(cfg->topics, cfg->n_topics);
    m->n_teams = cfg->n_teams;
    m->n_topics = cfg->n_topics;
    m->cfg.teams = (const char *const *)m->teams;
    m->cfg.topics = (const char *const *)m->topics;

    if (!(m->tls = make_tls(cfg->cert_file, cfg->key_file, err, errlen)) ||
        (cfg->client_ca_file && mock__client_ca_setup(m->tls, cfg->client_ca_file, err, errlen) != 0) ||
        load_keys(m, cfg, err, errlen) != 0 ||
        mock__tokens_init(&m->tokens, cfg->attempts_cap ? cfg->attempts_cap : (1u << 20),
                          !cfg->count_known_only) != 0 ||
        nghttp2_session_callbacks_new(&m->callbacks) != 0 || nghttp2_option_new(&m->h2_options) != 0) {
        if (err && !err[0])
            fail(err, errlen, "out of memory");
        mock_free(m);
        return NULL;
    }
    mock__judge_callbacks(m->callbacks);
    nghttp2_option_set_no_closed_streams(m->h2_options, 1);
    /* libcurl (7.88) ends streams whose answer came before its upload finished with
     * RST_STREAM; nghttp2's rapid-reset guard (1,000, then 33 a second) would then
     * GOAWAY a well-behaved curl client mid-batch, which is a mock artefact: allow
     * a million. */
    nghttp2_option_set_stream_reset_rate_limit(m->h2_options, 1u << 20, 1u << 20);
    if (m->cfg.no_ping_ack)
        nghttp2_option_set_no_auto_ping_ack(m->h2_options, 1);

    m->loops = calloc((size_t)m->cfg.threads, sizeof *m->loops);
    if (!m->loops) {
        fail(err, errlen, "out of memory");
        mock_free(m);
        return NULL;
    }
    for (int i = 0; i < m->cfg.threads; i++) {
        m->n_loops++;
        if (loop_init(m, &m->loops[i], i, err, errlen) != 0) {
            mock_free(m);
            return NULL;
        }
    }
    return m;
}

uint16_t capns_mock_port(const capns_mock *m)
{
    return m->port;
}

int capns_mock_add_unregistered(capns_mock *m, const char *token, int64_t timestamp_ms)
{
    mock_token_entry *e = m->started ? NULL : mock__tokens_setup(&m->tokens, token);
    if (!e)
        return -1;
    mock__entry_set_unregistered(e, timestamp_ms);
    return 0;
}

static mock_answer to_answer(const capns_mock_answer *a)
{
    return (mock_answer){a->status, mock__reason_index(a->reason), a->timestamp_ms};
}

int capns_mock_script(capns_mock *m, const char *token, const capns_mock_answer *answers, size_t n,
                      const capns_mock_answer *forced)
{
    mock_token_entry *e = m->started ? NULL : mock__tokens_setup(&m->tokens, token);
    mock_answer *list = calloc(n ? n : 1, sizeof *list);
    if (!e || !list) {
        free(list);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (answers[i].status && (answers[i].status < 200 || answers[i].status > 599)) {
            free(list);
            return -1;
        }
        list[i] = to_answer(&answers[i]);
    }
    mock_answer f = forced ? to_answer(forced) : (mock_answer){0, R_NONE, -1};
    int r = mock__entry_set_script(e, list, n, forced ? &f : NULL);
    free(list);
    return r;
}

int capns_mock_start(capns_mock *m, char *err, size_t errlen)
{
    if (m->started)
        return 0;
    for (int i = 0; i < m->n_loops; i++) {
        if (pthread_create(&m->loops[i].thread, NULL, loop_main, &m->loops[i]) != 0) {
            fail(err, errlen, "cannot start loop thread %d: %s", i, strerror(errno));
            return -1;
        }
        m->loops[i].started = true;
    }
    m->started = true;
    return 0;
}

void capns_mock_set_max_streams(capns_mock *m, uint32_t max_streams)
{
    atomic_store(&m->max_streams, max_streams ? max_streams : 1);
    for (int i = 0; i < m->n_loops; i++)
        wake(&m->loops[i]);
}

uint64_t capns_mock_attempts(capns_mock *m, const char *token)
{
    return mock__tokens_attempts(&m->tokens, token);
}

void capns_mock_destroy(capns_mock *m)
{
    if (!m)
        return;
    atomic_store(&m->stopping, true);
    for (int i = 0; i < m->n_loops; i++)
        if (m->loops[i].started)
            wake(&m->loops[i]);
    for (int i = 0; i < m->n_loops; i++)
        if (m->loops[i].started)
            pthread_join(m->loops[i].thread, NULL);
    mock_free(m);
}
