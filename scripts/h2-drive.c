/*
 * h2-drive.c - a quick load driver for the CAPNs sender (not the real apns-bench):
 * keeps the sender's queue full with N requests of one payload, checks every tag
 * completes exactly once, prints outcomes, stats and the rate.
 *
 * Build (from the repo root):
 *   cc -O2 -D_GNU_SOURCE -ISources/CAPNs/include -ISources/CAPNs scripts/h2-drive.c \
 *      Sources/CAPNs/*.c \
 *      -lnghttp2 -lssl -lcrypto -lpthread -o /tmp/h2-drive
 * Run:
 *   /tmp/h2-drive HOST PORT CA.pem REQUESTS [MAX_OUTSTANDING] [CONNECTIONS] [h2|curl]
 * Environment (all optional): TOPIC (default com.example.app), PAYLOAD (a file; default
 * a 25-byte alert), KEY + KEY_ID + TEAM_ID (sign an ES256 provider token; without them
 * the authorization is "bearer test"), TIMEOUT_MS (request timeout, default 30000).
 */
#include "capns.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *env_or(const char *name, char *fallback)
{
    char *v = getenv(name);
    return v && *v ? v : fallback;
}

/* The whole file, or NULL. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 16);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    while (*len && (buf[*len - 1] == '\n' || buf[*len - 1] == '\r'))
        (*len)--;
    return buf;
}

/* "bearer"-less provider token from KEY/KEY_ID/TEAM_ID, or a placeholder. */
static void provider_token(char *out, size_t outlen)
{
    char err[CAPNS_ERR_MAX];
    const char *path = getenv("KEY");
    snprintf(out, outlen, "test");
    if (!path)
        return;
    capns_key *key = capns_key_load_file(path, err, sizeof err);
    if (!key || capns_jwt_sign(key, env_or("KEY_ID", ""), env_or("TEAM_ID", ""), time(NULL), out,
                               outlen, err, sizeof err) < 0) {
        fprintf(stderr, "provider token: %s\n", err);
        exit(2);
    }
    capns_key_free(key);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static size_t done_count, outcomes[5], statuses[600], duplicates;
static unsigned char *seen;
static char first_error[192];

static void on_complete(void *ctx, const capns_completion *batch, size_t n)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++) {
        const capns_completion *c = &batch[i];
        if (seen[c->tag]++)
            duplicates++;
        outcomes[c->outcome]++;
        if (c->status > 0 && c->status < 600)
            statuses[c->status]++;
        if (c->outcome != CAPNS_ANSWERED && !first_error[0])
            snprintf(first_error, sizeof first_error, "%s", c->error);
    }
    done_count += n;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s HOST PORT CA REQUESTS [MAX_OUTSTANDING] [CONNECTIONS] [h2|curl]\n",
                argv[0]);
        return 2;
    }
    size_t total = strtoull(argv[4], NULL, 10);
    int window = argc > 5 ? atoi(argv[5]) : 4000;
    seen = calloc(total, 1);
    char *payload = "{\"aps\":{\"alert\":\"hello\"}}";
    size_t payload_len = strlen(payload);
    if (getenv("PAYLOAD") && !(payload = read_file(getenv("PAYLOAD"), &payload_len))) {
        fprintf(stderr, "cannot read %s\n", getenv("PAYLOAD"));
        return 2;
    }
    capns_message_spec spec = {.topic = env_or("TOPIC", "com.example.app"), .push_type = "alert",
                               .priority = 10, .expiration = -1, .payload = (const uint8_t *)payload,
                               .payload_len = payload_len};
    capns_message *m = capns_message_create(&spec);
    capns_sender_config cfg = {
        .transport = argc > 7 && strcmp(argv[7], "curl") == 0 ? CAPNS_TRANSPORT_CURL : CAPNS_TRANSPORT_NGHTTP2,
        .host = argv[1], .port = (uint16_t)atoi(argv[2]), .ca_file = argv[3],
        .connections = argc > 6 ? atoi(argv[6]) : 1, .max_outstanding = window,
        .connect_timeout_ms = 5000,
        .request_timeout_ms = getenv("TIMEOUT_MS") ? atoi(getenv("TIMEOUT_MS")) : 30000, .ping_interval_ms = 0,
        .on_complete = on_complete,
    };
    char err[CAPNS_ERR_MAX];
    capns_sender *s = capns_sender_create(&cfg, err, sizeof err);
    if (!s) {
        fprintf(stderr, "create: %s\n", err);
        return 1;
    }
    char jwt[CAPNS_JWT_MAX];
    provider_token(jwt, sizeof jwt);
    capns_sender_set_authorization(s, jwt);

    enum { CHUNK = 512 };
    static char tokens[CHUNK][65];
    capns_request reqs[CHUNK];
    size_t next = 0;
    double t0 = now_s();
    while (next < total) {
        size_t n = total - next < CHUNK ? total - next : CHUNK;
        for (size_t i = 0; i < n; i++) {
            /* From 1: APNs never issues the all-zero token, and the mock refuses it. */
            snprintf(tokens[i], sizeof tokens[i], "%064zx", next + i + 1);
            reqs[i] = (capns_request){.tag = next + i, .message = m, .token = tokens[i],
                                      .apns_id = "6d4bc9c8-4b6e-4c43-9a8e-2f3a0c9b1d7e"};
        }
        size_t took = capns_sender_submit(s, reqs, n);
        next += took;
        if (took < n) {     /* full: wait for completions to make room */
            pthread_mutex_lock(&lock);
            size_t before = done_count;
            while (done_count == before && done_count < next)
                pthread_cond_wait(&cond, &lock);
            pthread_mutex_unlock(&lock);
        }
    }
    pthread_mutex_lock(&lock);
    while (done_count < total)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    double dt = now_s() - t0;

    capns_sender_stats st;
    capns_sender_get_stats(s, &st);
    capns_sender_destroy(s);
    capns_message_release(m);
    if (getenv("PAYLOAD"))
        free(payload);
    size_t missing = 0;
    for (size_t i = 0; i < total; i++)
        missing += !seen[i];
    printf("requests %zu in %.3f s = %.0f req/s; answered %zu not_processed %zu connect_failed %zu "
           "timed_out %zu cancelled %zu; duplicates %zu missing %zu\n",
           total, dt, total / dt, outcomes[0], outcomes[1], outcomes[2], outcomes[3], outcomes[4],
           duplicates, missing);
    for (int i = 0; i < 600; i++)
        if (statuses[i])
            printf("  status %d: %zu\n", i, statuses[i]);
    printf("stats: opened %llu lost %llu goaways %llu started %llu sent %llu B received %llu B "
           "server_max_streams %u peak_streams %u\n",
           (unsigned long long)st.connections_opened, (unsigned long long)st.connections_lost,
           (unsigned long long)st.goaways_received, (unsigned long long)st.requests_started,
           (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_received,
           st.server_max_streams, st.peak_streams);
    if (first_error[0])
        printf("first error: %s\n", first_error);
    return duplicates || missing ? 1 : 0;
}
