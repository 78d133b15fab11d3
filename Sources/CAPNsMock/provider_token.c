/*
 * provider_token.c - checks a provider JWT as APNs does, once per distinct
 * token text: ES256 over "header.claims" with the key named by "kid",
 * "iss" that key's own team (an APNs key belongs to one team). The verdict
 * names the key, whose environment and topics judge.c checks per request. The verdict is cached by the token's text, so a
 * sender reusing one token for a million requests costs one verification.
 *
 * The "iat" age is not part of the cached verdict: a token valid now expires
 * an hour after its iat, so the caller checks the age at every use.
 */
#include "mock_internal.h"

#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define JWT_CACHE_MAX (1u << 16)    /* past this, verdicts are not kept */

struct mock_jwt_entry {
    size_t len;
    mock_jwt_result result;
    char text[];
};

/* ---------------------------------------------------------- base64url */

static int b64url_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '-') return 62;
    if (ch == '_') return 63;
    return -1;
}

/* Unpadded base64url, as JWTs use it; returns the decoded length or -1. */
static long b64url_decode(const char *in, size_t len, uint8_t *out, size_t outlen)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    if (len % 4 == 1)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value((unsigned char)in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == outlen)
                return -1;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (long)n;
}

/* ------------------------------------------------------- verification */

/* Raw r||s (what JWS carries) to the DER ECDSA-Sig-Value OpenSSL verifies. */
static int raw_sig_to_der(const uint8_t raw[64], uint8_t *der, size_t derlen)
{
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, 32, NULL), *s = BN_bin2bn(raw + 32, 32, NULL);
    int n = -1;
    if (sig && r && s && ECDSA_SIG_set0(sig, r, s)) {
        r = s = NULL;           /* owned by sig now */
        if ((size_t)i2d_ECDSA_SIG(sig, NULL) <= derlen) {
            uint8_t *p = der;
            n = i2d_ECDSA_SIG(sig, &p);
        }
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return n;
}

static bool es256_verify(EVP_PKEY *key, const char *signed_part, size_t len, const uint8_t raw[64])
{
    uint8_t der[80];
    int derlen = raw_sig_to_der(raw, der, sizeof der);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = derlen > 0 && md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
              EVP_DigestVerify(md, der, (size_t)derlen, (const uint8_t *)signed_part, len) == 1;
    EVP_MD_CTX_free(md);
    return ok;
}

static void verify(capns_mock *m, const char *jwt, size_t len, mock_jwt_result *out)
{
    out->reason = R_INVALID_PROVIDER_TOKEN;
    out->team = -1;
    out->key = -1;
    out->iat = 0;
    const char *dot1 = memchr(jwt, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - jwt)) : NULL;
    if (!dot2)
        return;
    const char *sig64 = dot2 + 1;
    size_t siglen = len - (size_t)(sig64 - jwt);

    char header[512], claims[512];
    uint8_t sig[66];
    long hl = b64url_decode(jwt, (size_t)(dot1 - jwt), (uint8_t *)header, sizeof header);
    long cl = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), (uint8_t *)claims, sizeof claims);
    long sl = b64url_decode(sig64, siglen, sig, sizeof sig);
    char alg[16], kid[64], iss[64];
    if (hl < 0 || cl < 0 || sl != 64 ||
        !mock__json_get_string(header, (size_t)hl, "alg", alg, sizeof alg) || strcmp(alg, "ES256") != 0 ||
        !mock__json_get_string(header, (size_t)hl, "kid", kid, sizeof kid) ||
        !mock__json_get_string(claims, (size_t)cl, "iss", iss, sizeof iss) ||
        !mock__json_get_int(claims, (size_t)cl, "iat", &out->iat))
        return;

    const mock_key *key = NULL;
    for (size_t i = 0; i < m->n_keys && !key; i++)
        if (strcmp(m->keys[i].kid, kid) == 0) {
            key = &m->keys[i];
            out->key = (int)i;
        }
    for (size_t i = 0; i < m->n_teams && out->team < 0; i++)
        if (strcmp(m->teams[i], iss) == 0)
            out->team = (int)i;
    /* A configured key signing for another configured team is as bad as an unknown one. */
    if (!key || out->team < 0 || key->team != out->team)
        return;
    MOCK_ADD(m, jwt_verifications, 1);
    if (es256_verify(key->pub, jwt, (size_t)(dot2 - jwt), sig))
        out->reason = R_NONE;
}

/* -------------------------------------------------------------- cache */

static uint64_t hash_text(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;       /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static mock_jwt_entry **slot_for(mock_jwt_cache *c, const char *jwt, size_t len)
{
    size_t mask = c->cap - 1;
    for (size_t i = hash_text(jwt, len) & mask;; i = (i + 1) & mask) {
        mock_jwt_entry *e = c->slots[i];
        if (!e || (e->len == len && memcmp(e->text, jwt, len) == 0))
            return &c->slots[i];
    }
}

static bool grow(mock_jwt_cache *c)
{
    size_t old_cap = c->cap;
    mock_jwt_entry **old = c->slots;
    size_t cap = old_cap ? old_cap * 2 : 64;
    mock_jwt_entry **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    c->slots = slots;
    c->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            *slot_for(c, old[i]->text, old[i]->len) = old[i];
    free(old);
    return true;
}

void mock__jwt_check(capns_mock *m, const char *jwt, size_t len, mock_jwt_result *out)
{
    mock_jwt_cache *c = &m->jwts;
    pthread_mutex_lock(&c->lock);
    if (c->cap && *slot_for(c, jwt, len)) {
        *out = (*slot_for(c, jwt, len))->result;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    pthread_mutex_unlock(&c->lock);

    /* Outside the lock: two threads meeting a new token may both verify it. */
    verify(m, jwt, len, out);
    out->first = false;

    pthread_mutex_lock(&c->lock);
    if (c->cap && *slot_for(c, jwt, len)) {
        *out = (*slot_for(c, jwt, len))->result;    /* the other thread's verdict stands */
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (out->reason == R_NONE && !m->first_token_marked)
        out->first = m->first_token_marked = true;
    if ((c->used + 1) * 2 > c->cap && c->used < JWT_CACHE_MAX)
        grow(c);
    if (c->used < JWT_CACHE_MAX && c->cap) {
        mock_jwt_entry **slot = slot_for(c, jwt, len);
        mock_jwt_entry *e = *slot ? NULL : malloc(sizeof *e + len + 1);
        if (e) {
            e->len = len;
            e->result = *out;
            memcpy(e->text, jwt, len);
            e->text[len] = '\0';
            *slot = e;
            c->used++;
            MOCK_ADD(m, jwt_distinct, 1);
        }
    }
    pthread_mutex_unlock(&c->lock);
}

void mock__jwt_cache_free(mock_jwt_cache *c)
{
    for (size_t i = 0; i < c->cap; i++)
        free(c->slots[i]);
    free(c->slots);
    c->slots = NULL;
    c->cap = c->used = 0;
}
