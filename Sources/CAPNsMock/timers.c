/*
 * timers.c - a binary min-heap of deadlines, one per loop thread.
 *
 * Delayed answers and idle checks wait here instead of sleeping a thread:
 * epoll_wait's timeout is the time to the earliest deadline. A timer holds a
 * reference on its connection (conn->refs), so a connection closed meanwhile
 * stays allocated until its timers have fired and found it closed.
 */
#include "mock_internal.h"

#include <stdlib.h>

static void swap(mock_timer *a, mock_timer *b)
{
    mock_timer t = *a;
    *a = *b;
    *b = t;
}

int mock__timer_push(mock_timer_heap *h, mock_timer t)
{
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        mock_timer *items = realloc(h->items, cap * sizeof *items);
        if (!items)
            return -1;
        h->items = items;
        h->cap = cap;
    }
    size_t i = h->count++;
    h->items[i] = t;
    while (i > 0 && h->items[(i - 1) / 2].due_ns > h->items[i].due_ns) {
        swap(&h->items[(i - 1) / 2], &h->items[i]);
        i = (i - 1) / 2;
    }
    return 0;
}

bool mock__timer_pop_due(mock_timer_heap *h, int64_t now_ns, mock_timer *out)
{
    if (h->count == 0 || h->items[0].due_ns > now_ns)
        return false;
    *out = h->items[0];
    h->items[0] = h->items[--h->count];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, min = i;
        if (l < h->count && h->items[l].due_ns < h->items[min].due_ns)
            min = l;
        if (r < h->count && h->items[r].due_ns < h->items[min].due_ns)
            min = r;
        if (min == i)
            break;
        swap(&h->items[i], &h->items[min]);
        i = min;
    }
    return true;
}

int64_t mock__timer_wait_ns(const mock_timer_heap *h, int64_t now_ns)
{
    if (h->count == 0)
        return -1;
    int64_t wait = h->items[0].due_ns - now_ns;
    if (wait <= 0)
        return 0;
    return wait > 60000000000LL ? 60000000000LL : wait;
}
