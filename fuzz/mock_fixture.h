/*
 * mock_fixture.h - a real capns_mock for the harnesses that need one, made
 * from the throw-away PKI scripts/gen-pki.sh writes (directory in $FUZZ_PKI;
 * scripts/fuzz.sh sets it). The mock is created, never started: its listener
 * is bound on 127.0.0.1 but no loop thread runs, so the harness drives the
 * judging code directly on its own thread.
 */
#ifndef FUZZ_MOCK_FIXTURE_H
#define FUZZ_MOCK_FIXTURE_H

#include "mock_internal.h"

/* The ids in $FUZZ_PKI/ids.env, as gen-pki.sh writes them. */
#define FIXTURE_KEY_ID "DEMOKEY001"
#define FIXTURE_TEAM_ID "DEMOTEAM01"
#define FIXTURE_TOPIC "com.mendmyi.repairminder"

/* The mock, made on first use; exits with a message when $FUZZ_PKI is unusable. */
capns_mock *fixture_mock(void);

/* A JWT the mock accepts (signed now with the fixture's provider key). */
const char *fixture_jwt(void);

/* A second team, with the second provider key (gen-pki.sh's OTHER_KEY_ID) bound to it. */
#define FIXTURE_TEAM2_ID "DEMOTEAM02"
#define FIXTURE_KEY2_ID "OTHERKEY02"

/* A new mock with both teams and keys, changed by tweak (faults); never started. */
capns_mock *fixture_mock_with(void (*tweak)(capns_mock_config *cfg, void *arg), void *arg);

/* A token signed with key key_id for team team_id, iat now - age_s; written into out
 * (CAPNS_JWT_MAX). */
void fixture_jwt_for(const char *key_id, const char *team_id, int64_t age_s, char *out);

/* A request the mock harnesses build from text ("name: value" lines, a blank line,
 * the body), sent through a client nghttp2 session. */
#define FIXTURE_MAX_HEADERS 24
typedef struct {
    nghttp2_nv nv[FIXTURE_MAX_HEADERS];
    size_t n;
    const uint8_t *body;
    size_t body_len, body_off;
} fixture_text_request;

/* nghttp2's data source callback over a fixture_text_request's body. */
ssize_t fixture_read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                          nghttp2_data_source *src, void *ud);

/* Adds a "name: value" line to r as a header (pointing into the line); returns it,
 * or NULL for a line without ": " or when r is full. */
nghttp2_nv *fixture_add_header(fixture_text_request *r, const uint8_t *line, size_t len);

/* Next line of [*p, end) without its '\n'; false at the end. */
bool fixture_next_line(const uint8_t **p, const uint8_t *end, const uint8_t **line, size_t *len);

#endif
