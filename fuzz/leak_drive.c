/*
 * leak_drive.c - the C sender against the C mock, both in this process, for
 * LeakSanitizer (scripts/sanitize.sh builds it with -fsanitize=address,undefined):
 * REQUESTS requests through one transport, with the mock answering a mix of
 * 200, 400 BadDeviceToken, 410 Unregistered, random 429/500 and a GOAWAY every
 * 5000 requests per connection, so error bodies, reconnects and not-processed
 * requests are all on the path. Then both are destroyed, and a second sender is
 * destroyed from a task posted to its own thread; LSan reports at exit whatever was
 * not freed.
 *
 *   leak_drive PKI_DIR REQUESTS h2|curl     (PKI_DIR from scripts/gen-pki.sh)
 *
 * Exit 0 when every tag completed exactly once (ASan adds its own failure).
 */
#include "capns.h"
#include "capns_mock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY_ID "DEMOKEY001"
#define TEAM_ID "DEMOTEAM01"
#define TOPIC "com.mendmyi.repairminder"
#define UNREGISTERED "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static size_t done_count, outcomes[5], statuses[600], duplicates;
static unsigned char *seen;

static void on_complete(void *ctx, const capns_completion *batch, size_t n)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++) {
        if (seen[batch[i].tag]++)
            duplicates++;
        outcomes[batch[i].outcome]++;
        if (batch[i].status > 0 && batch[i].status < 600)
            statuses[batch[i].status]++;
    }
    done_count += n;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

static void die(const char *what, const char *err)
{
    fprintf(stderr, "leak_drive: %s: %s\n", what, err);
    exit(2);
}

static capns_mock *start_mock(const char *pki)
{
    char cert[512], key[512], p8[512], err[CAPNS_MOCK_ERR_MAX] = "";
    snprintf(cert, sizeof cert, "%s/server.crt", pki);
    snprintf(key, sizeof key, "%s/server.key", pki);
    snprintf(p8, sizeof p8, "%s/AuthKey_" KEY_ID ".p8", pki);
    capns_mock_auth_key auth = {KEY_ID, p8};
    const char *teams[] = {TEAM_ID}, *topics[] = {TOPIC};
    capns_mock_config cfg = {
        .cert_file = cert, .key_file = key, .auth_keys = &auth, .n_auth_keys = 1,
        .teams = teams, .n_teams = 1, .topics = topics, .n_topics = 1,
        .rate_429 = 0.01, .rate_500 = 0.01, .goaway_after = 5000, .record_cap = 100, .seed = 7,
    };
    capns_mock *m = capns_mock_create(&cfg, err, sizeof err);
    if (!m)
        die("mock", err);
    capns_mock_add_unregistered(m, UNREGISTERED, 1700000000000);
    if (capns_mock_start(m, err, sizeof err) != 0)
        die("mock start", err);
    return m;
}

static void sign(const char *pki, char *jwt)
{
    char path[512], err[CAPNS_ERR_MAX];
    snprintf(path, sizeof path, "%s/AuthKey_" KEY_ID ".p8", pki);
    capns_key *key = capns_key_load_file(path, err, sizeof err);
    if (!key || capns_jwt_sign(key, KEY_ID, TEAM_ID, time(NULL), jwt, CAPNS_JWT_MAX, err, sizeof err) < 0)
        die("provider token", err);
    capns_key_free(key);
}

/* Every 10th token is malformed for the mock (odd length), every 10th+1 unregistered. */
static void token_for(size_t i, char out[CAPNS_TOKEN_MAX + 1])
{
    if (i % 10 == 0)
        snprintf(out, CAPNS_TOKEN_MAX + 1, "%065zx", i);
    else if (i % 10 == 1)
        snprintf(out, CAPNS_TOKEN_MAX + 1, "%s", UNREGISTERED);
    else
        snprintf(out, CAPNS_TOKEN_MAX + 1, "%064zx", i);
}

static void send_all(capns_sender *s, capns_message *msg, size_t total)
{
    enum { CHUNK = 256 };
    static char tokens[CHUNK][CAPNS_TOKEN_MAX + 1];
    capns_request reqs[CHUNK];
    size_t next = 0;
    while (next < total) {
        size_t n = total - next < CHUNK ? total - next : CHUNK;
        for (size_t i = 0; i < n; i++) {
            token_for(next + i, tokens[i]);
            reqs[i] = (capns_request){.tag = next + i, .message = msg, .token = tokens[i],
                                      .apns_id = "6d4bc9c8-4b6e-4c43-9a8e-2f3a0c9b1d7e"};
        }
        size_t took = capns_sender_submit(s, reqs, n);
        next += took;
        pthread_mutex_lock(&lock);
        while (took < n && done_count + 1000 > next && done_count < next)
            pthread_cond_wait(&cond, &lock);    /* full: wait for room */
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    while (done_count < total)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

/* A sender destroyed from a task posted to it (capns_sender_post): its thread cannot
 * be joined, so it frees the sender itself when it ends. Requests are in flight to
 * the mock meanwhile; their completions are not delivered after the destroy. ASan
 * sees the free on that thread; LSan sees what it left. */
static capns_sender *self_destroyed;
static int posted_after = -2, last_ran;

static void last_task(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&lock);
    last_ran = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

static void destroying_task(void *ctx)
{
    (void)ctx;
    capns_sender_destroy(self_destroyed);
    /* The thread still runs this task, so it takes one more; it runs before the end. */
    posted_after = capns_sender_post(self_destroyed, last_task, NULL);
}

static void destroy_from_its_own_thread(capns_sender_config cfg, const char *jwt, capns_message *msg,
                                        size_t requests)
{
    char err[CAPNS_ERR_MAX], token[CAPNS_TOKEN_MAX + 1];
    self_destroyed = capns_sender_create(&cfg, err, sizeof err);
    if (!self_destroyed)
        die("sender", err);
    capns_sender_set_authorization(self_destroyed, jwt);
    for (size_t i = 0; i < requests; i++) {
        token_for(i, token);
        capns_request r = {.tag = i, .message = msg, .token = token,
                           .apns_id = "6d4bc9c8-4b6e-4c43-9a8e-2f3a0c9b1d7e"};
        capns_sender_submit(self_destroyed, &r, 1);
    }
    if (capns_sender_post(self_destroyed, destroying_task, NULL) != 0)
        die("post", "refused while the sender runs");
    pthread_mutex_lock(&lock);
    while (!last_ran)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    if (posted_after != 0)
        die("post", "refused from the task that destroyed its sender");
    /* The thread goes on to free the sender; a moment lets it end before LSan looks. */
    nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s PKI_DIR REQUESTS h2|curl\n", argv[0]);
        return 2;
    }
    size_t total = strtoull(argv[2], NULL, 10);
    seen = calloc(total ? total : 1, 1);
    capns_mock *mock = start_mock(argv[1]);
    char ca[512], jwt[CAPNS_JWT_MAX], err[CAPNS_ERR_MAX];
    snprintf(ca, sizeof ca, "%s/ca.pem", argv[1]);
    sign(argv[1], jwt);

    const char *payload = "{\"aps\":{\"alert\":\"leak check\"}}";
    capns_message_spec spec = {.topic = TOPIC, .push_type = "alert", .priority = 10, .expiration = -1,
                               .payload = (const uint8_t *)payload, .payload_len = strlen(payload)};
    capns_message *msg = capns_message_create(&spec);
    capns_sender_config cfg = {
        .transport = strcmp(argv[3], "curl") == 0 ? CAPNS_TRANSPORT_CURL : CAPNS_TRANSPORT_NGHTTP2,
        .host = "127.0.0.1", .port = capns_mock_port(mock), .ca_file = ca,
        .connections = 2, .max_outstanding = 1000, .connect_timeout_ms = 5000,
        .request_timeout_ms = 30000, .on_complete = on_complete,
    };
    capns_sender *s = capns_sender_create(&cfg, err, sizeof err);
    if (!s)
        die("sender", err);
    capns_sender_set_authorization(s, jwt);
    send_all(s, msg, total);
    capns_sender_stats st;
    capns_sender_get_stats(s, &st);
    capns_sender_destroy(s);
    size_t done_before = done_count;
    memset(seen, 0, total ? total : 1);
    destroy_from_its_own_thread(cfg, jwt, msg, total < 100 ? total : 100);   /* tags within `seen` */
    capns_message_release(msg);
    capns_mock_destroy(mock);

    printf("%s: %zu requests: answered %zu not_processed %zu connect_failed %zu timed_out %zu "
           "cancelled %zu; 200 %zu 400 %zu 410 %zu 429 %zu 500 %zu; connections %llu goaways %llu; "
           "duplicates %zu\n",
           argv[3], total, outcomes[0], outcomes[1], outcomes[2], outcomes[3], outcomes[4], statuses[200],
           statuses[400], statuses[410], statuses[429], statuses[500],
           (unsigned long long)st.connections_opened, (unsigned long long)st.goaways_received, duplicates);
    free(seen);
    return duplicates || done_before != total ? 1 : 0;
}
