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
 *
 * A load test brings a new token with almost every request, so a miss is the
 * common case and must stay cheap: each slot keeps its entry's hash, so a probe
 * reads another token's entry only when the hashes match, and growing never
 * reads an entry at all; entries are cut from blocks, not allocated one by one.
 */
#include "mock_internal.h"

#include <stdalign.h>
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

/* Entries are never freed one by one: a block is used up front to back, and
 * every block goes with the table. */
struct mock_token_block {
    struct mock_token_block *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char bytes[];
};

enum { TOKEN_BLOCK_BYTES = 64 * 1024 };

/* A word at a time (tokens are 64 to 200 characters); the mixing of each word
 * spreads hex digits, which differ only in their low bits, over the index. */
static uint64_t hash_token(const char *s, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, len - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static mock_token_slot *slot_for(mock_token_table *t, uint64_t hash, const char *token, size_t len)
{
    size_t mask = t->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        mock_token_slot *slot = &t->slots[i];
        if (!slot->entry || (slot->hash == hash && slot->entry->len == len &&
                             memcmp(slot->entry->token, token, len) == 0))
            return slot;
    }
}

static bool grow(mock_token_table *t)
{
    size_t old_cap = t->cap;
    mock_token_slot *old = t->slots;
    mock_token_slot *slots = calloc(old_cap * 2, sizeof *slots);
    if (!slots)
        return false;
    t->slots = slots;
    t->cap = old_cap * 2;
    size_t mask = t->cap - 1;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].entry)
            continue;
        size_t j = old[i].hash & mask;
        while (slots[j].entry)
            j = (j + 1) & mask;
        slots[j] = old[i];
    }
    free(old);
    return true;
}

/* Zeroed room for one entry, from the current block or a new one. */
static mock_token_entry *new_entry(mock_token_table *t, size_t len)
{
    size_t align = alignof(mock_token_entry);
    size_t size = (sizeof(mock_token_entry) + len + 1 + align - 1) & ~(align - 1);
    mock_token_block *b = t->blocks;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > TOKEN_BLOCK_BYTES ? size : TOKEN_BLOCK_BYTES;
        b = calloc(1, sizeof *b + cap);
        if (!b)
            return NULL;
        b->cap = cap;
        b->next = t->blocks;
        t->blocks = b;
    }
    mock_token_entry *e = (mock_token_entry *)(b->bytes + b->used);
    b->used += size;
    return e;
}

/* Under the lock (or before start): the entry, created if room allows. */
static mock_token_entry *lookup(mock_token_table *t, const char *token, size_t len, bool create)
{
    uint64_t hash = hash_token(token, len);
    mock_token_slot *slot = slot_for(t, hash, token, len);
    if (slot->entry || !create || t->used >= t->limit)
        return slot->entry;
    if ((t->used + 1) * 2 > t->cap) {
        if (!grow(t))
            return NULL;
        slot = slot_for(t, hash, token, len);
    }
    mock_token_entry *e = new_entry(t, len);
    if (!e)
        return NULL;
    e->unregistered_ts = -1;
    e->len = len;
    memcpy(e->token, token, len);
    slot->hash = hash;
    slot->entry = e;
    t->used++;
    return e;
}

int mock__tokens_init(mock_token_table *t, size_t limit, bool count_unknown)
{
    pthread_mutex_init(&t->lock, NULL);
    t->cap = 1024;
    t->used = 0;
    t->limit = limit;
    t->count_unknown = count_unknown;
    t->blocks = NULL;
    t->slots = calloc(t->cap, sizeof *t->slots);
    return t->slots ? 0 : -1;
}

void mock__tokens_free(mock_token_table *t)
{
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].entry)
            free(t->slots[i].entry->script);
    free(t->slots);
    t->slots = NULL;
    while (t->blocks) {
        mock_token_block *next = t->blocks->next;
        free(t->blocks);
        t->blocks = next;
    }
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
    mock_token_entry *e = lookup(t, token, len, t->count_unknown);
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
