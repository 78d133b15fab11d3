/*
 * client_cert.c - certificate-based trust in the mock (APNS-PROTOCOL.md,
 * "Certificate-based trust"): the TLS client certificate identifies the app.
 *
 * With client_ca_file set the mock asks every client for a certificate during
 * the handshake, as APNs does, but never fails the handshake over it: like
 * APNs, it answers at the HTTP layer, per request:
 *   403 BadCertificate             the certificate does not chain to the CA, is
 *                                  out of its dates, or carries neither Apple
 *                                  environment extension;
 *   403 BadCertificateEnvironment  a development (sandbox) certificate on the
 *                                  production mock, or a production-only one on
 *                                  the sandbox mock;
 *   400 TopicDisallowed            apns-topic is not one the certificate covers.
 * Covered topics: the subject UID (the bundle id), UID.voip, UID.complication,
 * and the strings of Apple's topic extension 1.2.840.113635.100.6.3.6. Without
 * apns-topic the UID is the topic, unless the extension lists several.
 * A request with an authorization header is judged by its provider token and the
 * certificate is ignored, as APNs does. The certificate is read once per
 * connection, when the handshake completes.
 *
 * This is the mock's own reading of the certificate, independent of CAPNs'.
 */
#include "mock_internal.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OID_DEVELOPMENT "1.2.840.113635.100.6.3.1"
#define OID_PRODUCTION "1.2.840.113635.100.6.3.2"
#define OID_TOPICS "1.2.840.113635.100.6.3.6"

/* Verification failures are kept (SSL_get_verify_result) and answered per request. */
static int keep_going(int ok, X509_STORE_CTX *store)
{
    return 1;
}

int mock__client_ca_setup(SSL_CTX *ctx, const char *ca_file, char *err, size_t errlen)
{
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_file);
    if (!names || SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        snprintf(err, errlen, "cannot load the client CA file %s", ca_file);
        ERR_clear_error();
        return -1;
    }
    SSL_CTX_set_client_CA_list(ctx, names);     /* takes names */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, keep_going);
    return 0;
}

static bool has_extension(X509 *cert, const char *oid)
{
    ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);
    bool found = obj && X509_get_ext_by_OBJ(cert, obj, -1) >= 0;
    ASN1_OBJECT_free(obj);
    return found;
}

/* Appends "topic\0" to the list. */
static void add_topic(mock_client_cert *cc, const char *topic, size_t len)
{
    if (len == 0 || len >= MOCK_TOPIC_MAX)
        return;
    char *more = realloc(cc->topics, cc->topics_len + len + 1);
    if (!more)
        return;         /* a topic left out is answered TopicDisallowed: visible, not silent */
    cc->topics = more;
    memcpy(cc->topics + cc->topics_len, topic, len);
    cc->topics[cc->topics_len + len] = '\0';
    cc->topics_len += len + 1;
}

/* The extension: a SEQUENCE whose string members are topics, each followed by a
 * SEQUENCE that describes it (skipped). */
static void read_topic_extension(mock_client_cert *cc, X509 *cert)
{
    ASN1_OBJECT *obj = OBJ_txt2obj(OID_TOPICS, 1);
    int idx = obj ? X509_get_ext_by_OBJ(cert, obj, -1) : -1;
    ASN1_OBJECT_free(obj);
    if (idx < 0)
        return;
    cc->multi_topic = true;
    ASN1_OCTET_STRING *data = X509_EXTENSION_get_data(X509_get_ext(cert, idx));
    const unsigned char *p = ASN1_STRING_get0_data(data);
    ASN1_SEQUENCE_ANY *seq = d2i_ASN1_SEQUENCE_ANY(NULL, &p, ASN1_STRING_length(data));
    for (int i = 0; seq && i < sk_ASN1_TYPE_num(seq); i++) {
        ASN1_TYPE *member = sk_ASN1_TYPE_value(seq, i);
        int type = ASN1_TYPE_get(member);
        if (type == V_ASN1_UTF8STRING || type == V_ASN1_IA5STRING || type == V_ASN1_PRINTABLESTRING)
            add_topic(cc, (const char *)ASN1_STRING_get0_data(member->value.asn1_string),
                      (size_t)ASN1_STRING_length(member->value.asn1_string));
    }
    sk_ASN1_TYPE_pop_free(seq, ASN1_TYPE_free);
}

void mock__client_cert_read(mock_conn *c)
{
    mock_client_cert *cc = &c->cert;
    X509 *cert = c->ssl ? SSL_get1_peer_certificate(c->ssl) : NULL;
    if (!cert)
        return;
    cc->present = true;
    cc->trusted = SSL_get_verify_result(c->ssl) == X509_V_OK;
    cc->environments = (has_extension(cert, OID_DEVELOPMENT) ? MOCK_ENV_SANDBOX : 0) |
                       (has_extension(cert, OID_PRODUCTION) ? MOCK_ENV_PRODUCTION : 0);
    X509_NAME *subject = X509_get_subject_name(cert);
    int at = X509_NAME_get_index_by_NID(subject, NID_userId, -1);
    if (at >= 0) {
        ASN1_STRING *v = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
        int n = ASN1_STRING_length(v);
        if (n > 0 && n < MOCK_TOPIC_MAX - 16) {
            memcpy(cc->uid, ASN1_STRING_get0_data(v), (size_t)n);
            cc->uid[n] = '\0';
            char t[MOCK_TOPIC_MAX];
            add_topic(cc, cc->uid, (size_t)n);
            add_topic(cc, t, (size_t)snprintf(t, sizeof t, "%s.voip", cc->uid));
            add_topic(cc, t, (size_t)snprintf(t, sizeof t, "%s.complication", cc->uid));
        }
    }
    read_topic_extension(cc, cert);
    X509_free(cert);
    ERR_clear_error();
}

void mock__client_cert_free(mock_client_cert *cc)
{
    free(cc->topics);
    cc->topics = NULL;
    cc->topics_len = 0;
}

static bool covers(const mock_client_cert *cc, const char *topic, size_t len)
{
    for (size_t off = 0; off < cc->topics_len;) {
        size_t n = strlen(cc->topics + off);
        if (n == len && memcmp(cc->topics + off, topic, len) == 0)
            return true;
        off += n + 1;
    }
    return false;
}

mock_answer mock__client_cert_judge(mock_conn *c, mock_stream *s)
{
    const mock_client_cert *cc = &c->cert;
    int want = c->loop->mock->cfg.sandbox ? MOCK_ENV_SANDBOX : MOCK_ENV_PRODUCTION;
    if (!cc->trusted || !cc->environments)
        return (mock_answer){403, R_BAD_CERTIFICATE, -1};
    if (!(cc->environments & want))
        return (mock_answer){403, R_BAD_CERTIFICATE_ENVIRONMENT, -1};
    if (!(s->seen & H_TOPIC)) {
        /* APNs' default topic: the certificate's subject, when it names one app. */
        if (cc->multi_topic || !cc->uid[0])
            return (mock_answer){0, R_NONE, -1};      /* MissingTopic follows */
        s->topic.len = strlen(cc->uid);
        memcpy(s->topic.v, cc->uid, s->topic.len + 1);
        s->seen |= H_TOPIC;
        return (mock_answer){0, R_NONE, -1};
    }
    if (s->topic.len >= MOCK_TOPIC_MAX || !covers(cc, s->topic.v, s->topic.len))
        return (mock_answer){400, R_TOPIC_DISALLOWED, -1};
    return (mock_answer){0, R_NONE, -1};
}
