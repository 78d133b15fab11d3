/*
 * h2_mem.c - the allocator of the transport's nghttp2 sessions: small blocks are
 * kept on free lists by size class and handed out again, on the sender thread only.
 *
 * nghttp2 allocates a handful of small blocks per request (the stream, its
 * outbound items, the copied header list, the received header values) and frees
 * them as the stream closes. With hundreds of streams in flight, malloc's
 * per-thread cache (seven blocks of a size) overflows, and most of those calls
 * went through its bins: the allocator was a visible share of a request's CPU.
 * Here a freed block goes on its class's list and the next block of the class
 * comes off it. What is kept is bounded by what was in use at once (the stream
 * limit), and by H2_MEM_KEEP_MAX; it is freed with the transport.
 *
 * Under AddressSanitizer the sessions use malloc itself, so that a use after free
 * inside nghttp2 is still caught.
 */
#include "h2_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H2_MEM_PLAIN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define H2_MEM_PLAIN 1
#endif

#ifndef H2_MEM_PLAIN

/* Each block starts with its capacity; the caller's bytes follow, aligned as malloc's. */
typedef union {
    size_t cap;
    max_align_t align;
} h2_mem_header;

typedef struct h2_mem_free {
    struct h2_mem_free *next;
} h2_mem_free;

static h2_mem_header *header_of(void *ptr)
{
    return (h2_mem_header *)ptr - 1;
}

static void *pool_malloc(size_t size, void *user)
{
    h2_mem_pool *p = user;
    size_t cls = size ? (size - 1) / H2_MEM_STEP : 0;
    if (cls < H2_MEM_CLASSES && p->free[cls]) {
        h2_mem_free *b = p->free[cls];
        p->free[cls] = b->next;
        p->kept -= (cls + 1) * H2_MEM_STEP;
        return b;
    }
    size_t cap = cls < H2_MEM_CLASSES ? (cls + 1) * H2_MEM_STEP : size;
    if (cap > SIZE_MAX - sizeof(h2_mem_header))
        return NULL;
    h2_mem_header *h = malloc(sizeof *h + cap);
    if (!h)
        return NULL;
    h->cap = cap;
    return h + 1;
}

static void pool_free(void *ptr, void *user)
{
    if (!ptr)
        return;
    h2_mem_pool *p = user;
    h2_mem_header *h = header_of(ptr);
    size_t cls = h->cap / H2_MEM_STEP - 1;
    if (cls < H2_MEM_CLASSES && p->kept + h->cap <= H2_MEM_KEEP_MAX) {
        h2_mem_free *b = ptr;
        b->next = p->free[cls];
        p->free[cls] = b;
        p->kept += h->cap;
        return;
    }
    free(h);
}

static void *pool_calloc(size_t n, size_t size, void *user)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *ptr = pool_malloc(n * size, user);
    if (ptr)
        memset(ptr, 0, n * size);
    return ptr;
}

static void *pool_realloc(void *ptr, size_t size, void *user)
{
    if (!ptr)
        return pool_malloc(size, user);
    if (!size) {
        pool_free(ptr, user);
        return NULL;
    }
    size_t cap = header_of(ptr)->cap;
    if (size <= cap)
        return ptr;
    void *grown = pool_malloc(size, user);
    if (!grown)
        return NULL;
    memcpy(grown, ptr, cap);
    pool_free(ptr, user);
    return grown;
}

#endif

nghttp2_mem *h2_mem_init(h2_mem_pool *p)
{
    memset(p, 0, sizeof *p);
#ifdef H2_MEM_PLAIN
    return NULL;    /* nghttp2's default: malloc itself */
#else
    p->mem = (nghttp2_mem){p, pool_malloc, pool_free, pool_calloc, pool_realloc};
    return &p->mem;
#endif
}

void h2_mem_release(h2_mem_pool *p)
{
#ifndef H2_MEM_PLAIN
    for (size_t cls = 0; cls < H2_MEM_CLASSES; cls++) {
        while (p->free[cls]) {
            h2_mem_free *b = p->free[cls];
            p->free[cls] = b->next;
            free(header_of(b));
        }
    }
#endif
    p->kept = 0;
}
