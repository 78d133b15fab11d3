/*
 * identity.c - the TLS client certificate of certificate-based trust: loading a
 * PKCS#12 or PEM file once, checking it, and putting it on an SSL_CTX.
 *
 * Everything that can be wrong with the file is found here, at load, so that a
 * sender never starts with a certificate the server will refuse for a reason we
 * could have told: unreadable, bad password, expired or not yet valid, a key
 * that is not the certificate's. Error lines name the file, never the password.
 *
 * Invariant: a loaded identity holds a certificate, the private key that
 * matches it and its chain (possibly empty); it never changes after load, so
 * senders on several threads share it by reference count.
 */
#include "identity_internal.h"

#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/x509v3.h>

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FILE_MAX (1 << 20)      /* a certificate file is a few kB; refuse anything huge */
#define OID_DEVELOPMENT "1.2.840.113635.100.6.3.1"
#define OID_PRODUCTION "1.2.840.113635.100.6.3.2"
#define OID_TOPICS "1.2.840.113635.100.6.3.6"

struct capns_identity {
    atomic_int refs;
    X509 *cert;
    EVP_PKEY *key;
    STACK_OF(X509) *chain;
    char uid[256];
    char **topics;
    size_t n_topics;
    int environments;
    int64_t not_after;
};

/* ------------------------------------------------------------ helpers */

static capns_identity *fail(int code, int *why, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static capns_identity *fail(int code, int *why, char *err, size_t errlen, const char *fmt, ...)
{
    if (why)
        *why = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    ERR_clear_error();
    return NULL;
}

static bool read_all(const char *path, unsigned char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t cap = 8192, n = 0;
    unsigned char *p = malloc(cap);
    while (p) {
        n += fread(p + n, 1, cap - n, f);
        if (n < cap || cap >= FILE_MAX)
            break;
        unsigned char *q = realloc(p, cap * 2);
        if (!q) {
            free(p);
            p = NULL;
            break;
        }
        p = q;
        cap *= 2;
    }
    bool ok = p && !ferror(f) && n < cap;
    int saved = errno;
    fclose(f);
    if (!ok) {
        free(p);
        errno = p && n >= cap ? EFBIG : saved;
        return false;
    }
    *buf = p;
    *len = n;
    return true;
}

/* "2025-01-31 12:00:00 UTC" */
static void format_time(const ASN1_TIME *t, char *out, size_t outlen)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1 || !strftime(out, outlen, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(out, outlen, "an unreadable date");
}

static int64_t unix_time(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

static bool has_extension(X509 *cert, const char *oid)
{
    ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);
    bool found = obj && X509_get_ext_by_OBJ(cert, obj, -1) >= 0;
    ASN1_OBJECT_free(obj);
    return found;
}

static bool add_topic(capns_identity *id, const char *topic, size_t len)
{
    if (len == 0)
        return true;
    for (size_t i = 0; i < id->n_topics; i++)
        if (strlen(id->topics[i]) == len && memcmp(id->topics[i], topic, len) == 0)
            return true;
    char **more = realloc(id->topics, (id->n_topics + 1) * sizeof *more);
    if (!more)
        return false;
    id->topics = more;
    if (!(id->topics[id->n_topics] = strndup(topic, len)))
        return false;
    id->n_topics++;
    return true;
}

/* The UID and the topics it implies, then the topic extension: a SEQUENCE whose
 * string members are topics (each followed by a SEQUENCE describing it, skipped). */
static bool read_topics(capns_identity *id)
{
    X509_NAME *subject = X509_get_subject_name(id->cert);
    int at = X509_NAME_get_index_by_NID(subject, NID_userId, -1);
    if (at >= 0) {
        ASN1_STRING *v = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
        int n = ASN1_STRING_length(v);
        if (n > 0 && (size_t)n < sizeof id->uid) {
            memcpy(id->uid, ASN1_STRING_get0_data(v), (size_t)n);
            id->uid[n] = '\0';
        }
    }
    if (id->uid[0]) {
        char t[sizeof id->uid + 16];
        if (!add_topic(id, id->uid, strlen(id->uid)) ||
            !add_topic(id, t, (size_t)snprintf(t, sizeof t, "%s.voip", id->uid)) ||
            !add_topic(id, t, (size_t)snprintf(t, sizeof t, "%s.complication", id->uid)))
            return false;
    }
    ASN1_OBJECT *obj = OBJ_txt2obj(OID_TOPICS, 1);
    int idx = obj ? X509_get_ext_by_OBJ(id->cert, obj, -1) : -1;
    ASN1_OBJECT_free(obj);
    if (idx < 0)
        return true;
    ASN1_OCTET_STRING *data = X509_EXTENSION_get_data(X509_get_ext(id->cert, idx));
    const unsigned char *p = ASN1_STRING_get0_data(data);
    ASN1_SEQUENCE_ANY *seq = d2i_ASN1_SEQUENCE_ANY(NULL, &p, ASN1_STRING_length(data));
    bool ok = true;
    for (int i = 0; seq && ok && i < sk_ASN1_TYPE_num(seq); i++) {
        ASN1_TYPE *member = sk_ASN1_TYPE_value(seq, i);
        int type = ASN1_TYPE_get(member);
        if (type == V_ASN1_UTF8STRING || type == V_ASN1_IA5STRING || type == V_ASN1_PRINTABLESTRING) {
            ASN1_STRING *s = member->value.asn1_string;
            ok = add_topic(id, (const char *)ASN1_STRING_get0_data(s), (size_t)ASN1_STRING_length(s));
        }
    }
    sk_ASN1_TYPE_pop_free(seq, ASN1_TYPE_free);
    return ok;
}

/* ------------------------------------------------------------ PKCS#12 */

/* OpenSSL 3 keeps RC2 and single DES, which older Keychain exports use, in the
 * legacy provider: loaded once, only when a file needs it. */
static void load_legacy_provider(void)
{
    OSSL_PROVIDER_try_load(NULL, "legacy", 1);
}

static capns_identity *load_pkcs12(capns_identity *id, const unsigned char *buf, size_t len,
                                   const char *path, const char *password, int *why, char *err,
                                   size_t errlen)
{
    const unsigned char *p = buf;
    PKCS12 *p12 = d2i_PKCS12(NULL, &p, (long)len);
    if (!p12)
        return fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen,
                    "%s is neither a PKCS#12 (.p12) nor a PEM file with a certificate and its key", path);
    /* No password given: an export with an empty one is the usual case. */
    const char *pass = password ? password : "";
    if (PKCS12_mac_present(p12) && PKCS12_verify_mac(p12, pass, -1) != 1) {
        if (!password && PKCS12_verify_mac(p12, NULL, 0) == 1) {
            pass = NULL;
        } else {
            PKCS12_free(p12);
            return fail(CAPNS_IDENTITY_BAD_PASSWORD, why, err, errlen,
                        password ? "%s: wrong password (the PKCS#12 integrity check failed)"
                                 : "%s is password-protected: give its password (--certificate-password-file)",
                        path);
        }
    }
    int ok = PKCS12_parse(p12, pass, &id->key, &id->cert, &id->chain);
    if (ok != 1) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, load_legacy_provider);
        ERR_clear_error();
        ok = PKCS12_parse(p12, pass, &id->key, &id->cert, &id->chain);
    }
    PKCS12_free(p12);
    if (ok != 1) {
        char why_ssl[120] = "";
        ERR_error_string_n(ERR_peek_last_error(), why_ssl, sizeof why_ssl);
        return fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen, "%s: cannot read the PKCS#12 contents (%s)",
                    path, why_ssl);
    }
    if (!id->cert || !id->key)
        return fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen, "%s holds no %s", path,
                    !id->cert ? "certificate" : "private key");
    return id;
}

/* ---------------------------------------------------------------- PEM */

typedef struct {
    const char *password;
} pem_pass;

static int pem_password(char *buf, int size, int rwflag, void *u)
{
    const pem_pass *pp = u;
    if (!pp->password)
        return -1;      /* no password: fail instead of prompting on a terminal */
    size_t n = strlen(pp->password);
    if (n > (size_t)size)
        return -1;
    memcpy(buf, pp->password, n);
    return (int)n;
}

/* Every certificate in the file, and its one private key; the leaf is the
 * certificate the key belongs to, the others are its chain. */
static capns_identity *load_pem(capns_identity *id, const unsigned char *buf, size_t len,
                                const char *path, const char *password, int *why, char *err,
                                size_t errlen)
{
    STACK_OF(X509) *certs = sk_X509_new_null();
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    if (!certs || !bio) {
        sk_X509_free(certs);
        BIO_free(bio);
        return fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen, "out of memory");
    }
    X509 *x;
    while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
        sk_X509_push(certs, x);
    ERR_clear_error();
    BIO_free(bio);

    bool encrypted = memmem(buf, len, "ENCRYPTED PRIVATE KEY", 21) || memmem(buf, len, "Proc-Type: 4,ENCRYPTED", 22);
    bool has_key = memmem(buf, len, "PRIVATE KEY-----", 16) != NULL;
    pem_pass pp = {password};
    bio = BIO_new_mem_buf(buf, (int)len);
    id->key = bio ? PEM_read_bio_PrivateKey(bio, NULL, pem_password, &pp) : NULL;
    BIO_free(bio);

    capns_identity *result = id;
    if (sk_X509_num(certs) == 0) {
        result = fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen,
                      "%s is neither a PKCS#12 (.p12) nor a PEM file with a certificate and its key", path);
    } else if (!id->key && encrypted) {
        result = fail(CAPNS_IDENTITY_BAD_PASSWORD, why, err, errlen,
                      password ? "%s: wrong password (the private key cannot be decrypted)"
                               : "%s: the private key is encrypted: give its password (--certificate-password-file)",
                      path);
    } else if (!id->key) {
        result = fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen,
                      has_key ? "%s: the private key cannot be read"
                              : "%s holds no private key (a PEM needs the certificate and its key in one file)",
                      path);
    } else {
        for (int i = 0; i < sk_X509_num(certs) && !id->cert; i++) {
            if (X509_check_private_key(sk_X509_value(certs, i), id->key) == 1)
                id->cert = sk_X509_delete(certs, i);
        }
        ERR_clear_error();
        if (!id->cert)
            result = fail(CAPNS_IDENTITY_KEY_MISMATCH, why, err, errlen,
                          "%s: the private key does not match the certificate", path);
    }
    id->chain = certs;      /* the rest; freed with the identity */
    return result;
}

/* ------------------------------------------------------------- public */

static void identity_free(capns_identity *id)
{
    X509_free(id->cert);
    EVP_PKEY_free(id->key);
    sk_X509_pop_free(id->chain, X509_free);
    for (size_t i = 0; i < id->n_topics; i++)
        free(id->topics[i]);
    free(id->topics);
    free(id);
}

capns_identity *capns_identity_load_file(const char *path, const char *password, int *why,
                                         char *err, size_t errlen)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    if (!path || !read_all(path, &buf, &len))
        return fail(CAPNS_IDENTITY_UNREADABLE, why, err, errlen, "cannot read certificate file %s: %s",
                    path ? path : "(none)", strerror(errno));
    capns_identity *id = calloc(1, sizeof *id);
    if (!id) {
        free(buf);
        return fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen, "out of memory");
    }
    atomic_init(&id->refs, 1);
    bool pem = memmem(buf, len, "-----BEGIN ", 11) != NULL;
    capns_identity *ok = pem ? load_pem(id, buf, len, path, password, why, err, errlen)
                             : load_pkcs12(id, buf, len, path, password, why, err, errlen);
    OPENSSL_cleanse(buf, len);      /* it held the private key */
    free(buf);
    if (!ok) {
        identity_free(id);
        return NULL;
    }
    if (!pem && X509_check_private_key(id->cert, id->key) != 1) {
        identity_free(id);
        return fail(CAPNS_IDENTITY_KEY_MISMATCH, why, err, errlen,
                    "%s: the private key does not match the certificate", path);
    }
    char when[40];
    if (X509_cmp_current_time(X509_get0_notAfter(id->cert)) <= 0) {
        format_time(X509_get0_notAfter(id->cert), when, sizeof when);
        identity_free(id);
        return fail(CAPNS_IDENTITY_EXPIRED, why, err, errlen, "certificate %s expired on %s", path, when);
    }
    if (X509_cmp_current_time(X509_get0_notBefore(id->cert)) >= 0) {
        format_time(X509_get0_notBefore(id->cert), when, sizeof when);
        identity_free(id);
        return fail(CAPNS_IDENTITY_NOT_YET_VALID, why, err, errlen, "certificate %s is not valid before %s",
                    path, when);
    }
    id->not_after = unix_time(X509_get0_notAfter(id->cert));
    id->environments = (has_extension(id->cert, OID_DEVELOPMENT) ? CAPNS_IDENTITY_SANDBOX : 0) |
                       (has_extension(id->cert, OID_PRODUCTION) ? CAPNS_IDENTITY_PRODUCTION : 0);
    if (!read_topics(id)) {
        identity_free(id);
        return fail(CAPNS_IDENTITY_MALFORMED, why, err, errlen, "out of memory");
    }
    ERR_clear_error();
    return id;
}

void capns_identity_retain(capns_identity *id)
{
    atomic_fetch_add_explicit(&id->refs, 1, memory_order_relaxed);
}

void capns_identity_release(capns_identity *id)
{
    if (id && atomic_fetch_sub_explicit(&id->refs, 1, memory_order_acq_rel) == 1)
        identity_free(id);
}

const char *capns_identity_uid(const capns_identity *id) { return id->uid; }
size_t capns_identity_topic_count(const capns_identity *id) { return id->n_topics; }
const char *capns_identity_topic(const capns_identity *id, size_t i) { return i < id->n_topics ? id->topics[i] : ""; }
int capns_identity_environments(const capns_identity *id) { return id->environments; }
int64_t capns_identity_not_after(const capns_identity *id) { return id->not_after; }

int capns__identity_apply(const capns_identity *id, SSL_CTX *ctx, char *err, size_t errlen)
{
    bool ok = SSL_CTX_use_certificate(ctx, id->cert) == 1 && SSL_CTX_use_PrivateKey(ctx, id->key) == 1;
    for (int i = 0; ok && i < sk_X509_num(id->chain); i++)
        ok = SSL_CTX_add1_chain_cert(ctx, sk_X509_value(id->chain, i)) == 1;
    ok = ok && SSL_CTX_check_private_key(ctx) == 1;
    if (!ok) {
        char buf[120] = "";
        ERR_error_string_n(ERR_peek_last_error(), buf, sizeof buf);
        snprintf(err, errlen, "TLS: cannot use the client certificate (%s)", buf);
        ERR_clear_error();
        return -1;
    }
    return 0;
}
