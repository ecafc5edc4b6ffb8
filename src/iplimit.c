/* iplimit.c: a hash of client addresses with live counts and token buckets. */
#include "iplimit.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define IPLIMIT_BUCKETS	4096	/* a power of two */

struct iplimit {
	struct iplimit_entry *buckets[IPLIMIT_BUCKETS];
	unsigned count;
};

struct iplimit *
iplimit_new(void)
{
	return xcalloc(1, sizeof(struct iplimit));
}

void
iplimit_free(struct iplimit *t)
{
	if (t == NULL)
		return;
	for (unsigned i = 0; i < IPLIMIT_BUCKETS; i++) {
		struct iplimit_entry *e, *next;

		for (e = t->buckets[i]; e != NULL; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(t);
}

/* The address as 16 bytes; false for other families. */
static bool
ip_key(const struct sockaddr *sa, uint8_t key[16])
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		memset(key, 0, 10);
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &s4->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return true;
	}
	return false;
}

static unsigned
ip_hash(const uint8_t key[16])
{
	uint32_t h = FNV1A_START;

	for (int i = 0; i < 16; i++)
		h = fnv1a_step(h, key[i]);
	return h & (IPLIMIT_BUCKETS - 1);
}

static struct iplimit_entry *
iplimit_get(struct iplimit *t, const uint8_t key[16], unsigned rate,
    uint64_t now_ms)
{
	unsigned h = ip_hash(key);
	struct iplimit_entry *e;

	for (e = t->buckets[h]; e != NULL; e = e->next)
		if (memcmp(e->addr, key, 16) == 0)
			return e;
	e = xcalloc(1, sizeof(*e));
	memcpy(e->addr, key, 16);
	e->tokens = rate;
	e->last_ms = now_ms;
	e->next = t->buckets[h];
	t->buckets[h] = e;
	t->count++;
	return e;
}

enum iplimit_verdict
iplimit_admit(struct iplimit *t, const struct sockaddr *sa, unsigned max_conns,
    unsigned rate, uint64_t now_ms, struct iplimit_entry **entry)
{
	struct iplimit_entry *e;
	uint8_t key[16];

	*entry = NULL;
	if ((max_conns == 0 && rate == 0) || !ip_key(sa, key))
		return IPLIMIT_OK;
	e = iplimit_get(t, key, rate, now_ms);
	if (rate > 0) {
		e->tokens += (double)(now_ms - e->last_ms) * rate / 1000.0;
		if (e->tokens > rate)
			e->tokens = rate;
		e->last_ms = now_ms;
		if (e->tokens < 1)
			return IPLIMIT_TOO_FAST;
	}
	if (max_conns > 0 && atomic_load(&e->conns) >= max_conns)
		return IPLIMIT_TOO_MANY;
	if (rate > 0)
		e->tokens -= 1;
	atomic_fetch_add(&e->conns, 1);
	*entry = e;
	return IPLIMIT_OK;
}

void
iplimit_release(struct iplimit_entry *e)
{
	if (e != NULL)
		atomic_fetch_sub(&e->conns, 1);
}

void
iplimit_gc(struct iplimit *t, unsigned rate, uint64_t now_ms)
{
	for (unsigned i = 0; i < IPLIMIT_BUCKETS && t->count > 0; i++) {
		struct iplimit_entry **pe = &t->buckets[i], *e;

		while ((e = *pe) != NULL) {
			/*
			 * Only this thread adds to conns, so an entry seen with
			 * none can go: nothing holds it any more.
			 */
			bool full = rate == 0 || e->tokens +
			    (double)(now_ms - e->last_ms) * rate / 1000.0 >= rate;

			if (atomic_load(&e->conns) == 0 && full) {
				*pe = e->next;
				free(e);
				t->count--;
			} else {
				pe = &e->next;
			}
		}
	}
}

unsigned
iplimit_count(const struct iplimit *t)
{
	return t->count;
}
