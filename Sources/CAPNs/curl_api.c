/* libcurl opened on first use: see curl_api.h. */
#include "curl_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct capns_curl_api capns__curl;

/* The one outcome for the process, written once under pthread_once. */
static bool loaded;
static char load_error[256];

/* Debian's libcurl4, the OpenSSL build (libcurl4-openssl-dev's headers): the probe
 * reads OpenSSL's objects through it, and it shares this process's libssl. */
static const char LIBRARY[] = "libcurl.so.4";

static void load(void)
{
    /* RTLD_LOCAL: its symbols serve this table only, never another library's lookups. */
    void *lib = dlopen(LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof load_error, "libcurl is needed here and cannot be loaded (%s): %s",
                 LIBRARY, dlerror());
        return;
    }
    struct { const char *name; void **slot; } names[] = {
#define CAPNS_CURL_SLOT(field, symbol) {symbol, (void **)&capns__curl.field}
        CAPNS_CURL_SLOT(version_info, "curl_version_info"),
        CAPNS_CURL_SLOT(easy_init, "curl_easy_init"),
        CAPNS_CURL_SLOT(easy_setopt, "curl_easy_setopt"),
        CAPNS_CURL_SLOT(easy_getinfo, "curl_easy_getinfo"),
        CAPNS_CURL_SLOT(easy_perform, "curl_easy_perform"),
        CAPNS_CURL_SLOT(easy_cleanup, "curl_easy_cleanup"),
        CAPNS_CURL_SLOT(easy_strerror, "curl_easy_strerror"),
        CAPNS_CURL_SLOT(slist_append, "curl_slist_append"),
        CAPNS_CURL_SLOT(slist_free_all, "curl_slist_free_all"),
        CAPNS_CURL_SLOT(multi_init, "curl_multi_init"),
        CAPNS_CURL_SLOT(multi_setopt, "curl_multi_setopt"),
        CAPNS_CURL_SLOT(multi_add_handle, "curl_multi_add_handle"),
        CAPNS_CURL_SLOT(multi_remove_handle, "curl_multi_remove_handle"),
        CAPNS_CURL_SLOT(multi_perform, "curl_multi_perform"),
        CAPNS_CURL_SLOT(multi_poll, "curl_multi_poll"),
        CAPNS_CURL_SLOT(multi_wakeup, "curl_multi_wakeup"),
        CAPNS_CURL_SLOT(multi_info_read, "curl_multi_info_read"),
        CAPNS_CURL_SLOT(multi_cleanup, "curl_multi_cleanup"),
        CAPNS_CURL_SLOT(multi_strerror, "curl_multi_strerror"),
#undef CAPNS_CURL_SLOT
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(*names[i].slot = dlsym(lib, names[i].name))) {
            /* curl_multi_wakeup and _poll came in 7.68: an older libcurl stops here. */
            snprintf(load_error, sizeof load_error, "this libcurl (%s) has no %s: 7.68 or later is needed",
                     LIBRARY, names[i].name);
            dlclose(lib);
            memset(&capns__curl, 0, sizeof capns__curl);
            return;
        }
    }
    /* Once per process, before any other curl call; the library stays open for the
     * process's life (handles may outlive any one user). */
    CURLcode (*global_init)(long) = (CURLcode (*)(long))dlsym(lib, "curl_global_init");
    if (!global_init || global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "libcurl (%s) failed to initialise", LIBRARY);
        return;
    }
    loaded = true;
}

bool capns__curl_load(char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
    if (!loaded && err && errlen)
        snprintf(err, errlen, "%s", load_error);
    return loaded;
}
