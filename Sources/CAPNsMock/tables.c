/*
 * tables.c - what the mock remembers across connections: per-token entries
 * (attempt counts, scripted answers, unregistered timestamps) and the
 * recorded requests.
 *
 * The token table is open addressing under one mutex: one short critical
 * section per request. Scripts and unregistered marks are set before start
 * and read-only after, so only the attempt count changes while serving. Past
 * `limit` distinct tokens, new tokens are no longer counted (memory stays
 * bounded under a benchmark that sends millions of distinct tokens).
 */
#include "mock_internal.h"

#include <stdlib.h>
#include <string.h>

struct mock_token_entry {
    uint64_t attempts;
    int64_t unregistered_ts;    /* -1: not unregistered */
    mock_answer *script;        /* answers for attempts 1..n_script */
    size_t n_script;
    bool has_forced;
    mock_answer forced;         /* every attempt after the script */
    size_t len;
    char token[];
};

static uint64_t hash_token(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;       /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static mock_token_entry **slot_for(mock_token_table *t, const char *token, size_t len)
{
    size_t mask = t->cap - 1;
    for (size_t i = hash_token(token, len) & mask;; i = (i + 1) & mask) {
        mock_token_entry *e = t->slots[i];
        if (!e || (e->len == len && memcmp(e->token, token, len) == 0))
            return &t->slots[i];
    }
}

static bool grow(mock_token_table *t)
{
    size_t old_cap = t->cap;
    mock_token_entry **old = t->slots;
    mock_token_entry **slots = calloc(old_cap * 2, sizeof *slots);
    if (!slots)
        return false;
    t->slots = slots;
    t->cap = old_cap * 2;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            *slot_for(t, old[i]->token, old[i]->len) = old[i];
    free(old);
    return true;
}

/* Under the lock (or before start): the entry, created if room allows. */
static mock_token_entry *lookup(mock_token_table *t, const char *token, size_t len, bool create)
{
    mock_token_entry **slot = slot_for(t, token, len);
    if (*slot || !create || t->used >= t->limit)
        return *slot;
    if ((t->used + 1) * 2 > t->cap) {
        if (!grow(t))
            return NULL;
        slot = slot_for(t, token, len);
    }
    mock_token_entry *e = calloc(1, sizeof *e + len + 1);
    if (!e)
        return NULL;
    e->unregistered_ts = -1;
    e->len = len;
    memcpy(e->token, token, len);
    *slot = e;
    t->used++;
    return e;
}

int mock__tokens_init(mock_token_table *t, size_t limit)
{
    pthread_mutex_init(&t->lock, NULL);
    t->cap = 1024;
    t->used = 0;
    t->limit = limit;
    t->slots = calloc(t->cap, sizeof *t->slots);
    return t->slots ? 0 : -1;
}

void mock__tokens_free(mock_token_table *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i])
            free(t->slots[i]->script);
        free(t->slots[i]);
    }
    free(t->slots);
    t->slots = NULL;
    pthread_mutex_destroy(&t->lock);
}

mock_token_entry *mock__tokens_setup(mock_token_table *t, const char *token)
{
    return lookup(t, token, strlen(token), true);
}

void mock__entry_set_unregistered(mock_token_entry *e, int64_t ts)
{
    e->unregistered_ts = ts;
}

int mock__entry_set_script(mock_token_entry *e, const mock_answer *a, size_t n, const mock_answer *forced)
{
    mock_answer *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (n && !copy)
        return -1;
    if (n)
        memcpy(copy, a, n * sizeof *copy);
    free(e->script);
    e->script = copy;
    e->n_script = n;
    e->has_forced = forced != NULL;
    if (forced)
        e->forced = *forced;
    return 0;
}

void mock__tokens_attempt(mock_token_table *t, const char *token, size_t len,
                          mock_answer *scripted, int64_t *unregistered_ts)
{
    scripted->status = 0;
    *unregistered_ts = -1;
    pthread_mutex_lock(&t->lock);
    mock_token_entry *e = lookup(t, token, len, true);
    if (e) {
        uint64_t n = ++e->attempts;
        if (n <= e->n_script)
            *scripted = e->script[n - 1];
        else if (e->has_forced)
            *scripted = e->forced;
        *unregistered_ts = e->unregistered_ts;
    }
    pthread_mutex_unlock(&t->lock);
}

uint64_t mock__tokens_attempts(mock_token_table *t, const char *token)
{
    pthread_mutex_lock(&t->lock);
    mock_token_entry *e = lookup(t, token, strlen(token), false);
    uint64_t n = e ? e->attempts : 0;
    pthread_mutex_unlock(&t->lock);
    return n;
}

/* ---------------------------------------------------------- recording */

void mock__record_free(capns_mock_record *rec)
{
    /* One allocation holds the record, its header array and every string. */
    free(rec);
}

void mock__records_add(mock_records *r, capns_mock_record *rec)
{
    pthread_mutex_lock(&r->lock);
    if (r->count < r->limit && r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        capns_mock_record **items = realloc(r->items, cap * sizeof *items);
        if (items) {
            r->items = items;
            r->cap = cap;
        }
    }
    if (r->count < r->limit && r->count < r->cap) {
        r->items[r->count++] = rec;
        rec = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    mock__record_free(rec);
}

void mock__records_reset(mock_records *r, uint64_t connection_id)
{
    pthread_mutex_lock(&r->lock);
    if (r->n_reset == r->cap_reset) {
        size_t cap = r->cap_reset ? r->cap_reset * 2 : 16;
        uint64_t *ids = realloc(r->reset_ids, cap * sizeof *ids);
        if (ids) {
            r->reset_ids = ids;
            r->cap_reset = cap;
        }
    }
    if (r->n_reset < r->cap_reset)
        r->reset_ids[r->n_reset++] = connection_id;
    pthread_mutex_unlock(&r->lock);
}

size_t capns_mock_reset_connections(capns_mock *m, uint64_t *ids, size_t max)
{
    pthread_mutex_lock(&m->records.lock);
    size_t n = m->records.n_reset;
    for (size_t i = 0; i < n && i < max; i++)
        ids[i] = m->records.reset_ids[i];
    pthread_mutex_unlock(&m->records.lock);
    return n;
}

size_t capns_mock_record_count(capns_mock *m)
{
    pthread_mutex_lock(&m->records.lock);
    size_t n = m->records.count;
    pthread_mutex_unlock(&m->records.lock);
    return n;
}

const capns_mock_record *capns_mock_record_get(capns_mock *m, size_t i)
{
    pthread_mutex_lock(&m->records.lock);
    const capns_mock_record *rec = i < m->records.count ? m->records.items[i] : NULL;
    pthread_mutex_unlock(&m->records.lock);
    return rec;
}
