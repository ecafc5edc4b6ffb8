/* text_join.c: the UDH concatenation IEs, and the table that joins SMS parts back into messages. */
#include "text_join.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Buckets: a power of two at least max_pending, up to this many. */
#define JOIN_BUCKETS_MAX	(1u << 16)

/* Someone with messages waiting: what the per-owner caps count. */
struct join_owner {
	struct join_owner *hnext;
	uint32_t hash;
	unsigned pending;
	size_t	bytes;
	char	name[];
};

struct join_slot {
	uint8_t	*data;		/* NULL until the part arrives */
	size_t	len;
	uint64_t id;
};

/* A message waiting for parts. */
struct join_entry {
	struct join_entry *hnext;		/* hash chain */
	struct join_entry *older, *newer;	/* age list */
	struct join_owner *owner;
	char	*sender;
	char	*recipient;
	uint32_t hash;
	uint16_t ref;
	uint8_t	total;
	uint8_t	received;
	uint8_t	data_coding;
	bool	ref16;
	uint64_t born;
	uint64_t deadline;		/* born + its timeout, saturated */
	size_t	bytes;
	struct join_slot slot[];		/* total of them */
};

struct text_join {
	struct text_join_limits lim;
	struct join_entry **buckets;
	struct join_owner **owners;
	uint32_t mask;
	struct join_entry *oldest, *newest;
	unsigned pending;
	size_t	bytes;
};

int
text_udh_concat(const uint8_t *sm, size_t n, struct text_concat *c,
    size_t *udh_len)
{
	size_t hl, i, iel;
	int found = 0;

	if (n < 1 || (hl = (size_t)sm[0] + 1) > n)
		goto bad;
	*udh_len = hl;
	for (i = 1; i < hl; i += 2 + iel) {
		if (hl - i < 2 || (iel = sm[i + 1]) > hl - i - 2)
			goto bad;
		if (sm[i] == 0x00 && iel == 3) {
			*c = (struct text_concat){ .ref = sm[i + 2],
			    .total = sm[i + 3], .seq = sm[i + 4] };
		} else if (sm[i] == 0x08 && iel == 4) {
			*c = (struct text_concat){ .ref16 = true,
			    .ref = (uint16_t)(sm[i + 2] << 8 | sm[i + 3]),
			    .total = sm[i + 4], .seq = sm[i + 5] };
		} else if (sm[i] == 0x00 || sm[i] == 0x08) {
			goto bad;
		} else
			continue;
		found = 1;
	}
	if (found && (c->total == 0 || c->seq == 0 || c->seq > c->total))
		goto bad;
	return found;
bad:
	errno = EILSEQ;
	return -1;
}

/* FNV-1a over s and its NUL, on from h. */
static uint32_t
hash_str(uint32_t h, const char *s)
{
	do {
		h ^= (uint8_t)*s;
		h *= 16777619u;
	} while (*s++ != '\0');
	return h;
}

static uint32_t
hash_key(const struct text_join_part *p)
{
	uint32_t h = 2166136261u;

	h = hash_str(hash_str(hash_str(h, p->owner), p->sender),
	    p->recipient);
	h = (h ^ p->concat.ref) * 16777619u;
	return (h ^ p->concat.total) * 16777619u;
}

struct text_join *
text_join_new(const struct text_join_limits *lim)
{
	struct text_join *j = xcalloc(1, sizeof(*j));
	uint32_t n = 16;

	assert(lim->max_pending > 0 && lim->max_bytes > 0 &&
	    lim->max_pending_owner > 0 && lim->max_bytes_owner > 0);
	j->lim = *lim;
	while (n < lim->max_pending && n < JOIN_BUCKETS_MAX)
		n <<= 1;
	j->mask = n - 1;
	j->buckets = xcalloc(n, sizeof(*j->buckets));
	j->owners = xcalloc(n, sizeof(*j->owners));
	return j;
}

static struct join_owner *
owner_find(const struct text_join *j, const char *name)
{
	uint32_t h = hash_str(2166136261u, name);
	struct join_owner *o = j->owners[h & j->mask];

	while (o != NULL && (o->hash != h || strcmp(o->name, name) != 0))
		o = o->hnext;
	return o;
}

static struct join_owner *
owner_get(struct text_join *j, const char *name)
{
	struct join_owner *o = owner_find(j, name);
	size_t len = strlen(name) + 1;

	if (o != NULL)
		return o;
	o = xcalloc(1, sizeof(*o) + len);
	memcpy(o->name, name, len);
	o->hash = hash_str(2166136261u, name);
	o->hnext = j->owners[o->hash & j->mask];
	j->owners[o->hash & j->mask] = o;
	return o;
}

/* Drops o once nothing of its waits any more. */
static void
owner_put(struct text_join *j, struct join_owner *o)
{
	struct join_owner **pp = &j->owners[o->hash & j->mask];

	if (o->pending > 0)
		return;
	while (*pp != o)
		pp = &(*pp)->hnext;
	*pp = o->hnext;
	free(o);
}

static struct join_entry *
entry_find(const struct text_join *j, const struct text_join_part *p,
    uint32_t h)
{
	struct join_entry *e = j->buckets[h & j->mask];

	for (; e != NULL; e = e->hnext)
		if (e->hash == h && e->ref == p->concat.ref &&
		    e->total == p->concat.total &&
		    strcmp(e->owner->name, p->owner) == 0 &&
		    strcmp(e->sender, p->sender) == 0 &&
		    strcmp(e->recipient, p->recipient) == 0)
			return e;
	return NULL;
}

static struct join_entry *
entry_new(struct text_join *j, const struct text_join_part *p, uint32_t h,
    uint64_t now_ms)
{
	uint64_t timeout = p->timeout_ms != 0 ? p->timeout_ms :
	    j->lim.timeout_ms;
	struct join_entry *e = xcalloc(1, sizeof(*e) +
	    p->concat.total * sizeof(e->slot[0]));

	e->owner = owner_get(j, p->owner);
	e->sender = xstrdup(p->sender);
	e->recipient = xstrdup(p->recipient);
	e->hash = h;
	e->ref = p->concat.ref;
	e->ref16 = p->concat.ref16;
	e->total = p->concat.total;
	e->data_coding = p->data_coding;
	e->born = now_ms;
	e->deadline = UINT64_MAX - now_ms < timeout ? UINT64_MAX :
	    now_ms + timeout;
	e->hnext = j->buckets[h & j->mask];
	j->buckets[h & j->mask] = e;
	e->older = j->newest;
	if (j->newest != NULL)
		j->newest->newer = e;
	else
		j->oldest = e;
	j->newest = e;
	e->owner->pending++;
	j->pending++;
	return e;
}

/* Takes e out of the table and its counts; the caller frees it. */
static void
entry_unlink(struct text_join *j, struct join_entry *e)
{
	struct join_entry **pp = &j->buckets[e->hash & j->mask];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->older != NULL)
		e->older->newer = e->newer;
	else
		j->oldest = e->newer;
	if (e->newer != NULL)
		e->newer->older = e->older;
	else
		j->newest = e->older;
	j->pending--;
	j->bytes -= e->bytes;
	e->owner->pending--;
	e->owner->bytes -= e->bytes;
}

/* Unlinks e and turns it into a message for the caller, freeing e. */
static struct text_join_msg *
entry_to_msg(struct text_join *j, struct join_entry *e)
{
	struct text_join_msg *m = xcalloc(1, sizeof(*m));
	size_t o = 0;

	entry_unlink(j, e);
	m->owner = xstrdup(e->owner->name);
	m->sender = e->sender;
	m->recipient = e->recipient;
	m->concat = (struct text_concat){ .ref = e->ref, .total = e->total,
	    .ref16 = e->ref16 };
	m->data_coding = e->data_coding;
	m->received = e->received;
	m->ids = xcalloc(e->total, sizeof(*m->ids));
	m->data = xmalloc(e->bytes > 0 ? e->bytes : 1);
	for (unsigned i = 0; i < e->total; i++) {
		if (e->slot[i].data == NULL)
			continue;
		m->ids[i] = e->slot[i].id;
		memcpy(m->data + o, e->slot[i].data, e->slot[i].len);
		o += e->slot[i].len;
		free(e->slot[i].data);
	}
	m->len = o;
	owner_put(j, e->owner);
	free(e);
	return m;
}

/*
 * Whether len more octets for owner o (NULL: none yet) break a cap: the
 * table's, or the owner's as p gives it (which a reload may have put
 * below what the owner holds already).
 */
static bool
over_bytes(const struct text_join *j, const struct join_owner *o,
    const struct text_join_part *p)
{
	size_t ob = o != NULL ? o->bytes : 0;
	size_t cap = p->max_bytes_owner != 0 ? p->max_bytes_owner :
	    j->lim.max_bytes_owner;

	return p->len > j->lim.max_bytes - j->bytes || ob > cap ||
	    p->len > cap - ob;
}

/* Whether one more waiting message for p's owner breaks a cap. */
static bool
over_pending(const struct text_join *j, const struct text_join_part *p)
{
	const struct join_owner *o = owner_find(j, p->owner);
	unsigned cap = p->max_pending_owner != 0 ? p->max_pending_owner :
	    j->lim.max_pending_owner;

	return j->pending >= j->lim.max_pending ||
	    (o != NULL && o->pending >= cap);
}

/* A message of one part: nothing to wait for. */
static struct text_join_msg *
single_msg(const struct text_join_part *p)
{
	struct text_join_msg *m = xcalloc(1, sizeof(*m));

	m->owner = xstrdup(p->owner);
	m->sender = xstrdup(p->sender);
	m->recipient = xstrdup(p->recipient);
	m->concat = p->concat;
	m->concat.seq = 0;
	m->data_coding = p->data_coding;
	m->received = 1;
	m->ids = xcalloc(1, sizeof(*m->ids));
	m->ids[0] = p->id;
	m->data = xmalloc(p->len > 0 ? p->len : 1);
	if (p->len > 0)
		memcpy(m->data, p->data, p->len);
	m->len = p->len;
	return m;
}

/* Stores p's octets in e's slot. */
static void
slot_fill(struct text_join *j, struct join_entry *e,
    const struct text_join_part *p)
{
	struct join_slot *s = &e->slot[p->concat.seq - 1];

	s->data = xmalloc(p->len > 0 ? p->len : 1);
	if (p->len > 0)
		memcpy(s->data, p->data, p->len);
	s->len = p->len;
	s->id = p->id;
	e->received++;
	e->bytes += p->len;
	e->owner->bytes += p->len;
	j->bytes += p->len;
}

int
text_join_add(struct text_join *j, const struct text_join_part *p,
    uint64_t now_ms, struct text_join_msg **done)
{
	const struct text_concat *c = &p->concat;
	uint32_t h = hash_key(p);
	struct join_entry *e = entry_find(j, p, h);

	if (c->total == 0 || c->seq == 0 || c->seq > c->total) {
		errno = EINVAL;
		return -1;
	}
	if (c->total == 1) {
		*done = single_msg(p);
		return TEXT_JOIN_DONE;
	}
	if (e != NULL && e->data_coding != p->data_coding) {
		errno = EILSEQ;
		return -1;
	}
	if (e != NULL && e->slot[c->seq - 1].data != NULL)
		return TEXT_JOIN_DUP;
	if ((e == NULL && over_pending(j, p)) ||
	    over_bytes(j, e != NULL ? e->owner : owner_find(j, p->owner),
	    p)) {
		errno = ENOBUFS;
		return -1;
	}
	if (e == NULL)
		e = entry_new(j, p, h, now_ms);
	slot_fill(j, e, p);
	if (e->received < e->total)
		return TEXT_JOIN_PENDING;
	*done = entry_to_msg(j, e);
	return TEXT_JOIN_DONE;
}

bool
text_join_has(const struct text_join *j, const struct text_join_part *p)
{
	return entry_find(j, p, hash_key(p)) != NULL;
}

unsigned
text_join_expire(struct text_join *j, uint64_t now_ms,
    text_join_expired_fn *fn, void *arg)
{
	struct join_entry *e, *next;
	unsigned n = 0;

	/*
	 * Timeouts may differ (per owner, or changed by a reload), so the
	 * oldest is not always the first due: every entry is looked at. The
	 * caller calls this about once a second, and max_pending bounds it.
	 */
	for (e = j->oldest; e != NULL; e = next) {
		next = e->newer;
		if (now_ms >= e->deadline) {
			fn(arg, entry_to_msg(j, e));
			n++;
		}
	}
	return n;
}

uint64_t
text_join_next_expiry(const struct text_join *j)
{
	const struct join_entry *e;
	uint64_t first = UINT64_MAX;

	for (e = j->oldest; e != NULL; e = e->newer)
		if (e->deadline < first)
			first = e->deadline;
	return first;
}

unsigned
text_join_pending(const struct text_join *j)
{
	return j->pending;
}

size_t
text_join_bytes(const struct text_join *j)
{
	return j->bytes;
}

void
text_join_msg_free(struct text_join_msg *m)
{
	if (m == NULL)
		return;
	free(m->owner);
	free(m->sender);
	free(m->recipient);
	free(m->ids);
	free(m->data);
	free(m);
}

void
text_join_free(struct text_join *j)
{
	struct join_entry *e;

	if (j == NULL)
		return;
	while ((e = j->oldest) != NULL)
		text_join_msg_free(entry_to_msg(j, e));
	free(j->buckets);
	free(j->owners);
	free(j);
}
