/*
 * fuzz_mock_jwt.c - the mock's provider token check, mock__jwt_check
 * (Sources/CAPNsMock/provider_token.c: base64url, the header and claims
 * readers, the ES256 verification and the verdict cache), on arbitrary text
 * as it comes after "bearer ".
 *
 * Checked: no crash or overread; a verdict is one of the documented ones;
 * the same text twice gets the same verdict (the second comes from the cache).
 * The input is also tried with the fixture's valid JWT spliced in front, so
 * the signature-valid paths are reached too.
 */
#include "mock_fixture.h"

#include <stdlib.h>
#include <string.h>

static void check(capns_mock *m, const char *jwt, size_t len)
{
    mock_jwt_result a, b;
    mock__jwt_check(m, jwt, len, &a);
    mock__jwt_check(m, jwt, len, &b);
    if (a.reason != R_NONE && a.reason != R_INVALID_PROVIDER_TOKEN)
        abort();
    if (a.reason == R_NONE && (a.team < 0 || (size_t)a.team >= m->n_teams))
        abort();
    if (a.reason != b.reason || a.team != b.team || (a.reason == R_NONE && a.iat != b.iat))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    capns_mock *m = fixture_mock();
    if (size > MOCK_AUTH_MAX)
        return 0;               /* judge.c never passes more */
    char *jwt = malloc(size ? size : 1);
    if (!jwt)
        return 0;
    memcpy(jwt, data, size);
    check(m, jwt, size);
    free(jwt);

    /* The valid token with the input appended: only exactly the token verifies. */
    const char *good = fixture_jwt();
    size_t glen = strlen(good);
    char *spliced = malloc(glen + size + 1);
    if (!spliced)
        return 0;
    memcpy(spliced, good, glen);
    memcpy(spliced + glen, data, size);
    check(m, spliced, glen + size);
    free(spliced);
    return 0;
}
