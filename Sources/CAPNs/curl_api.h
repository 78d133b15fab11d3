/* libcurl, opened the first time something needs it.
 *
 * Three parts of the shim use libcurl: the curl transport (--transport curl), the
 * broadcast-channel manager and the doctor's probe. Everything else, every send on
 * the default transport included, is nghttp2 over OpenSSL. Linked, libcurl and the
 * thirty-odd libraries it brings (Kerberos, LDAP, GnuTLS, SSH, RTMP) are loaded and
 * relocated at every process start, and a one-notification apns-send on the
 * default transport would pay for them for nothing. So libcurl is opened with
 * dlopen on first use, and every curl function this code calls is a pointer in one
 * table.
 *
 * The call sites keep curl's own names: each name below is defined as its pointer.
 * Invariant: no curl_* call runs before capns__curl_load() has returned true in this
 * process; each entry point (the curl transport's create, capns_manager_request,
 * capns_probe) calls it first. Nothing links libcurl, so a call that bypassed the
 * table would be an undefined symbol at link time, not a crash.
 */
#ifndef CAPNS_CURL_API_H
#define CAPNS_CURL_API_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

struct capns_curl_api {
    curl_version_info_data *(*version_info)(CURLversion);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_perform)(CURL *);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd[], unsigned int, int, int *);
    CURLMcode (*multi_wakeup)(CURLM *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_cleanup)(CURLM *);
    const char *(*multi_strerror)(CURLMcode);
};

/* Filled once by capns__curl_load, read-only after. */
extern struct capns_curl_api capns__curl;

/* Opens libcurl and runs curl_global_init, once per process (thread-safe). False,
 * with err saying what is missing, when libcurl or one of its functions is not
 * there; the answer does not change for the life of the process. */
bool capns__curl_load(char *err, size_t errlen);

/* curl.h defines these four as checking macros around the functions; here the
 * names are the table's. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#undef curl_share_setopt

#define curl_version_info      capns__curl.version_info
#define curl_easy_init         capns__curl.easy_init
#define curl_easy_setopt       capns__curl.easy_setopt
#define curl_easy_getinfo      capns__curl.easy_getinfo
#define curl_easy_perform      capns__curl.easy_perform
#define curl_easy_cleanup      capns__curl.easy_cleanup
#define curl_easy_strerror     capns__curl.easy_strerror
#define curl_slist_append      capns__curl.slist_append
#define curl_slist_free_all    capns__curl.slist_free_all
#define curl_multi_init        capns__curl.multi_init
#define curl_multi_setopt      capns__curl.multi_setopt
#define curl_multi_add_handle  capns__curl.multi_add_handle
#define curl_multi_remove_handle capns__curl.multi_remove_handle
#define curl_multi_perform     capns__curl.multi_perform
#define curl_multi_poll        capns__curl.multi_poll
#define curl_multi_wakeup      capns__curl.multi_wakeup
#define curl_multi_info_read   capns__curl.multi_info_read
#define curl_multi_cleanup     capns__curl.multi_cleanup
#define curl_multi_strerror    capns__curl.multi_strerror

#endif
