/*
 * mock_fixture.c - see mock_fixture.h.
 */
#include "mock_fixture.h"
#include "capns.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void need(bool ok, const char *what, const char *err)
{
    if (ok)
        return;
    fprintf(stderr, "fuzz fixture: %s: %s (set FUZZ_PKI to a scripts/gen-pki.sh directory)\n", what, err);
    exit(2);
}

static const char *pki_path(const char *name)
{
    static char paths[4][512];
    static int next;
    const char *dir = getenv("FUZZ_PKI");
    need(dir != NULL, "FUZZ_PKI", "not set");
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

capns_mock *fixture_mock(void)
{
    static capns_mock *m;
    if (m)
        return m;
    char err[CAPNS_MOCK_ERR_MAX] = "";
    capns_mock_auth_key key = {FIXTURE_KEY_ID, pki_path("AuthKey_" FIXTURE_KEY_ID ".p8")};
    const char *teams[] = {FIXTURE_TEAM_ID};
    const char *topics[] = {FIXTURE_TOPIC};
    capns_mock_config cfg = {
        .cert_file = pki_path("server.crt"),
        .key_file = pki_path("server.key"),
        .auth_keys = &key, .n_auth_keys = 1,
        .teams = teams, .n_teams = 1,
        .topics = topics, .n_topics = 1,
        .record_cap = 64,       /* recording on: its copy code is fuzzed too */
        .sandbox = 1,
        .seed = 1,
    };
    m = capns_mock_create(&cfg, err, sizeof err);
    need(m != NULL, "capns_mock_create", err);
    /* Scripted and unregistered tokens: the table paths of the verdict. */
    capns_mock_add_unregistered(m, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1700000000000);
    return m;
}

capns_mock *fixture_mock_with(void (*tweak)(capns_mock_config *cfg, void *arg), void *arg)
{
    char err[CAPNS_MOCK_ERR_MAX] = "";
    capns_mock_auth_key keys[] = {
        {FIXTURE_KEY_ID, pki_path("AuthKey_" FIXTURE_KEY_ID ".p8"), FIXTURE_TEAM_ID},
        {FIXTURE_KEY2_ID, pki_path("AuthKey_" FIXTURE_KEY2_ID ".p8"), FIXTURE_TEAM2_ID},
    };
    const char *teams[] = {FIXTURE_TEAM_ID, FIXTURE_TEAM2_ID};
    const char *topics[] = {FIXTURE_TOPIC};
    capns_mock_config cfg = {
        .cert_file = pki_path("server.crt"),
        .key_file = pki_path("server.key"),
        .auth_keys = keys, .n_auth_keys = 2,
        .teams = teams, .n_teams = 2,
        .topics = topics, .n_topics = 1,
        .record_cap = 16,
        .max_streams = 8,
        .seed = 1,
    };
    tweak(&cfg, arg);
    capns_mock *m = capns_mock_create(&cfg, err, sizeof err);
    need(m != NULL, "capns_mock_create", err);
    return m;
}

void fixture_jwt_for(const char *key_id, const char *team_id, int64_t age_s, char *out)
{
    char err[CAPNS_ERR_MAX] = "", name[64];
    snprintf(name, sizeof name, "AuthKey_%s.p8", key_id);
    capns_key *key = capns_key_load_file(pki_path(name), err, sizeof err);
    need(key != NULL, "provider key", err);
    int n = capns_jwt_sign(key, key_id, team_id, (int64_t)time(NULL) - age_s, out, CAPNS_JWT_MAX, err,
                           sizeof err);
    capns_key_free(key);
    need(n > 0, "signing", err);
}

const char *fixture_jwt(void)
{
    static char jwt[CAPNS_JWT_MAX];
    if (jwt[0])
        return jwt;
    char err[CAPNS_ERR_MAX] = "";
    capns_key *key = capns_key_load_file(pki_path("AuthKey_" FIXTURE_KEY_ID ".p8"), err, sizeof err);
    need(key != NULL, "provider key", err);
    int n = capns_jwt_sign(key, FIXTURE_KEY_ID, FIXTURE_TEAM_ID, (int64_t)time(NULL), jwt, sizeof jwt, err,
                           sizeof err);
    capns_key_free(key);
    need(n > 0, "signing", err);
    return jwt;
}

ssize_t fixture_read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                          nghttp2_data_source *src, void *ud)
{
    fixture_text_request *r = src->ptr;
    size_t n = r->body_len - r->body_off < len ? r->body_len - r->body_off : len;
    memcpy(buf, r->body + r->body_off, n);
    r->body_off += n;
    if (r->body_off == r->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

bool fixture_next_line(const uint8_t **p, const uint8_t *end, const uint8_t **line, size_t *len)
{
    if (*p >= end)
        return false;
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    *line = *p;
    *len = (size_t)((nl ? nl : end) - *p);
    *p = nl ? nl + 1 : end;
    return true;
}

nghttp2_nv *fixture_add_header(fixture_text_request *r, const uint8_t *line, size_t len)
{
    const uint8_t *sep = len > 1 ? memmem(line + 1, len - 1, ": ", 2) : NULL;
    if (!sep || r->n == FIXTURE_MAX_HEADERS)
        return NULL;
    nghttp2_nv *nv = &r->nv[r->n++];
    nv->name = (uint8_t *)line;
    nv->namelen = (size_t)(sep - line);
    nv->value = (uint8_t *)sep + 2;
    nv->valuelen = len - nv->namelen - 2;
    nv->flags = NGHTTP2_NV_FLAG_NONE;
    return nv;
}
