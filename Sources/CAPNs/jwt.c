/*
 * jwt.c - APNs provider tokens: load the .p8 key, sign ES256 JWTs.
 *
 * A token is base64url(header) "." base64url(claims) "." base64url(r||s).
 * OpenSSL signs ECDSA as DER SEQUENCE{INTEGER r, INTEGER s}; JWS (RFC 7518
 * 3.4) wants the two integers as fixed 32-byte big-endian values instead.
 *
 * Key bytes never reach an error message: errors name the file and the kind
 * of problem only, and buffers that held key material are cleansed.
 */
#include "capns.h"

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct capns_key {
    EVP_PKEY *pkey;             /* EC on P-256, checked at load */
};

/* A .p8 is a few hundred bytes; anything bigger is not an APNs key. */
#define KEY_FILE_MAX 16384

/* ------------------------------------------------------------- loading */

/* Refuses everything that is not an EC key on P-256, naming what it is. */
static int check_p256(EVP_PKEY *pkey, char *err, size_t errlen)
{
    if (!EVP_PKEY_is_a(pkey, "EC")) {
        snprintf(err, errlen, "not an EC key (%s); APNs keys are EC P-256",
                 EVP_PKEY_is_a(pkey, "RSA") ? "RSA" : EVP_PKEY_get0_type_name(pkey));
        return -1;
    }
    char group[64] = "";
    if (!EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, NULL))
        snprintf(group, sizeof group, "unknown");
    if (strcmp(group, "prime256v1") != 0 && strcmp(group, "P-256") != 0) {
        snprintf(err, errlen, "EC key on curve %s; APNs keys are on P-256 (prime256v1)", group);
        return -1;
    }
    return 0;
}

/* Decodes the DER inside a "PRIVATE KEY" block (unencrypted PKCS#8). */
static EVP_PKEY *pkcs8_to_pkey(const unsigned char *der, long len, char *err, size_t errlen)
{
    const unsigned char *p = der;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO(NULL, &p, len);
    EVP_PKEY *pkey = p8 ? EVP_PKCS82PKEY(p8) : NULL;
    PKCS8_PRIV_KEY_INFO_free(p8);
    if (!pkey)
        snprintf(err, errlen, "PRIVATE KEY block is not a valid PKCS#8 private key");
    return pkey;
}

/* Explains a PEM block of another kind than "PRIVATE KEY". */
static void explain_label(const char *name, char *err, size_t errlen)
{
    if (strcmp(name, "RSA PRIVATE KEY") == 0)
        snprintf(err, errlen, "RSA private key; APNs keys are EC P-256");
    else if (strcmp(name, "EC PRIVATE KEY") == 0)
        snprintf(err, errlen, "SEC1 \"EC PRIVATE KEY\", not PKCS#8; convert it with "
                              "openssl pkcs8 -topk8 -nocrypt");
    else if (strcmp(name, "ENCRYPTED PRIVATE KEY") == 0)
        snprintf(err, errlen, "encrypted private key; APNs .p8 keys are not encrypted");
    else
        snprintf(err, errlen, "not a private key (PEM block \"%.40s\")", name);
}

capns_key *capns_key_load_pem(const char *pem, size_t len, char *err, size_t errlen)
{
    char *name = NULL, *header = NULL;
    unsigned char *der = NULL;
    long der_len = 0;
    EVP_PKEY *pkey = NULL;

    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (!bio) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!PEM_read_bio(bio, &name, &header, &der, &der_len)) {
        snprintf(err, errlen, "not PEM (no -----BEGIN PRIVATE KEY----- block)");
    } else if (strcmp(name, "PRIVATE KEY") != 0) {
        explain_label(name, err, errlen);
    } else if ((pkey = pkcs8_to_pkey(der, der_len, err, errlen)) && check_p256(pkey, err, errlen) < 0) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
    }
    BIO_free(bio);
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_clear_free(der, (size_t)der_len);
    /* Leave no OpenSSL errors behind on this thread for someone else to misreport. */
    ERR_clear_error();
    if (!pkey)
        return NULL;

    capns_key *key = malloc(sizeof *key);
    if (!key) {
        EVP_PKEY_free(pkey);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    key->pkey = pkey;
    return key;
}

capns_key *capns_key_load_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read key file %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(KEY_FILE_MAX);
    size_t n = buf ? fread(buf, 1, KEY_FILE_MAX, f) : 0;
    int failed = buf ? ferror(f) : 1, too_big = n == KEY_FILE_MAX;
    int saved = errno;
    fclose(f);

    capns_key *key = NULL;
    char why[CAPNS_ERR_MAX] = "";
    if (failed)
        snprintf(why, sizeof why, "%s", buf ? strerror(saved) : "out of memory");
    else if (too_big)
        snprintf(why, sizeof why, "larger than %d bytes, not an APNs .p8 key", KEY_FILE_MAX);
    else
        key = capns_key_load_pem(buf, n, why, sizeof why);
    if (!key)
        snprintf(err, errlen, "key file %s: %s", path, why);
    if (buf)
        OPENSSL_clear_free(buf, KEY_FILE_MAX);
    return key;
}

void capns_key_free(capns_key *key)
{
    if (!key)
        return;
    EVP_PKEY_free(key->pkey);
    free(key);
}

/* ------------------------------------------------------------- signing */

/* base64url without padding (RFC 7515 2). Returns the length written; out
 * must hold 4 * ceil(len / 3) + 1 bytes. */
static size_t b64url(const unsigned char *in, size_t len, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0, i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = abc[v >> 6 & 63];
        out[o++] = abc[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        if (i + 1 < len)
            out[o++] = abc[v >> 6 & 63];
    }
    out[o] = '\0';
    return o;
}

/* Ids go into JSON strings unescaped, so only plain printable characters pass. */
static int plain_id(const char *s)
{
    if (!s || !*s || strlen(s) > 64)
        return 0;
    for (; *s; s++)
        if (*s < 0x21 || *s > 0x7e || *s == '"' || *s == '\\')
            return 0;
    return 1;
}

/* ECDSA-SHA256 over input, as raw r||s (each left-padded to 32 bytes). */
static int sign_raw(EVP_PKEY *pkey, const char *input, size_t len, unsigned char rs[64])
{
    unsigned char der[80];      /* P-256 DER signatures are at most 72 bytes */
    size_t der_len = sizeof der;
    int ok = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) == 1 &&
        EVP_DigestSign(md, der, &der_len, (const unsigned char *)input, len) == 1) {
        const unsigned char *p = der;
        ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
        if (sig) {
            const BIGNUM *r, *s;
            ECDSA_SIG_get0(sig, &r, &s);
            ok = BN_bn2binpad(r, rs, 32) == 32 && BN_bn2binpad(s, rs + 32, 32) == 32;
            ECDSA_SIG_free(sig);
        }
    }
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok ? 0 : -1;
}

int capns_jwt_sign(const capns_key *key, const char *key_id, const char *team_id,
                   int64_t iat, char *out, size_t outlen, char *err, size_t errlen)
{
    char header[128], claims[128];
    if (!key || !plain_id(key_id) || !plain_id(team_id) || iat < 0) {
        snprintf(err, errlen, "key id and team id must be printable ASCII without quotes, iat >= 0");
        return -1;
    }
    int hl = snprintf(header, sizeof header, "{\"alg\":\"ES256\",\"kid\":\"%s\"}", key_id);
    int cl = snprintf(claims, sizeof claims, "{\"iss\":\"%s\",\"iat\":%lld}", team_id, (long long)iat);

    /* Worst case: both parts at their 4/3 expansion, two dots, 86 signature chars, NUL. */
    size_t need = (size_t)(hl + 2) / 3 * 4 + (size_t)(cl + 2) / 3 * 4 + 2 + 86 + 1;
    if (outlen < need) {
        snprintf(err, errlen, "token buffer too small (%zu < %zu)", outlen, need);
        return -1;
    }
    size_t n = b64url((const unsigned char *)header, (size_t)hl, out);
    out[n++] = '.';
    n += b64url((const unsigned char *)claims, (size_t)cl, out + n);

    unsigned char rs[64];
    if (sign_raw(key->pkey, out, n, rs) < 0) {
        snprintf(err, errlen, "ES256 signing failed");
        return -1;
    }
    out[n++] = '.';
    n += b64url(rs, sizeof rs, out + n);
    return (int)n;
}
