/*
 * fuzz_proxy_answer.c - the sender's CONNECT tunnel (Sources/CAPNs/proxy_tunnel.c)
 * reading a proxy's answer: arbitrary bytes, written into a socketpair in chunks
 * (the first input byte picks the chunk size), with proxy_tunnel_step called after
 * each chunk as the epoll loop would, then once more after the proxy hangs up.
 *
 * Checked, for every input:
 *  - nothing after the answer's header block is taken: on success the bytes still
 *    in the socket are exactly the input after the first blank line (CRLF CRLF or
 *    bare LFs), byte for byte: the TLS session's bytes are never lost;
 *  - a 2xx status line is the only way to succeed; every failure has one line;
 *  - the Basic credentials never appear in an error line (unless the proxy's own
 *    answer carried them: its reason phrase is quoted);
 *  - no read past a buffer (ASan), no undefined behaviour (UBSan).
 */
#include "proxy_tunnel.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Where the header block of a[0..len) ends (just past its blank line), 0 if it does
 * not: written independently of the tunnel's own scan. */
static size_t blank_line_end(const uint8_t *a, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (a[i] != '\n')
            continue;
        if (i + 1 < len && a[i + 1] == '\n')
            return i + 2;
        if (i + 2 < len && a[i + 1] == '\r' && a[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

static int status_is_2xx(const uint8_t *a, size_t len)
{
    return len >= 13 && memcmp(a, "HTTP/1.", 7) == 0 && a[8] == ' ' && a[9] == '2' &&
           a[10] >= '0' && a[10] <= '9' && a[11] >= '0' && a[11] <= '9' &&
           (a[12] == ' ' || a[12] == '\r' || a[12] == '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] + 1;
    const uint8_t *answer = data + 1;
    size_t len = size - 1;

    capns_sender_config cfg = {0};
    cfg.host = "api.push.apple.com";
    cfg.port = 443;
    cfg.proxy_host = "127.0.0.1";
    cfg.proxy_port = 3128;
    cfg.proxy_username = "bob";
    cfg.proxy_password = "hunter2";
    char err[256];
    proxy_spec *spec = proxy_spec_new(&cfg, err, sizeof err);
    proxy_tunnel *pt = spec ? proxy_tunnel_new(spec) : NULL;
    int sv[2];
    if (!pt || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        abort();
    fcntl(sv[0], F_SETFL, O_NONBLOCK);

    err[0] = '\0';
    int rv = proxy_tunnel_step(pt, sv[0], err, sizeof err);    /* writes CONNECT */
    size_t written = 0;
    while (rv == 0 && written < len) {
        size_t n = len - written < chunk ? len - written : chunk;
        if (write(sv[1], answer + written, n) != (ssize_t)n)
            abort();
        written += n;
        rv = proxy_tunnel_step(pt, sv[0], err, sizeof err);
    }
    if (rv == 0) {
        shutdown(sv[1], SHUT_WR);                               /* the proxy hangs up */
        rv = proxy_tunnel_step(pt, sv[0], err, sizeof err);
    }
    if (rv == 0)
        abort();                                                /* all bytes seen, EOF: decided */

    uint8_t *left = malloc(len + 1);
    size_t nleft = 0;
    ssize_t r;
    while ((r = read(sv[0], left + nleft, len + 1 - nleft)) > 0)
        nleft += (size_t)r;

    size_t end = blank_line_end(answer, len);
    if (rv == 1) {
        if (!end || !status_is_2xx(answer, end) || end > written)
            abort();                                            /* success needs a whole 2xx block */
        if (nleft != written - end || memcmp(left, answer + end, nleft) != 0)
            abort();                                            /* the tunnel's bytes, all of them */
    } else {
        if (!err[0] || strchr(err, '\n'))
            abort();                                            /* one line */
        if (end && end <= PROXY_ANSWER_MAX && status_is_2xx(answer, end))
            abort();                                            /* a 2xx block is never refused */
    }
    /* No credentials in errors (unless the proxy itself echoed them in its answer). */
    if (!memmem(answer, len, "hunter2", 7) && !memmem(answer, len, "Ym9iOmh1bnRlcjI", 15) &&
        (strstr(err, "hunter2") || strstr(err, "Ym9iOmh1bnRlcjI")))
        abort();

    free(left);
    close(sv[0]);
    close(sv[1]);
    proxy_tunnel_free(pt);
    proxy_spec_free(spec);
    return 0;
}
